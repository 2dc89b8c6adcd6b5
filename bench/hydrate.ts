/**
 * The hydrate rows of the benchmark: `datastore-indexer hydrate` of an unindexed root (heal, then download
 * every file), rclone copy as a user after speed runs it (`--transfers 32` with `--checkers 32`, with
 * `--fast-list`, with both; 128 and 256 transfers and checkers with `--fast-list`; and its default 8
 * checkers, labelled so) and `aws s3 sync` (with
 * `max_concurrent_requests` at 128 through an AWS config file, as its users raise it) of the same root on
 * the S3 model, each into an empty folder, each a child process whose CPU time (user + sys, from the shell's
 * `times`) is counted, each run with the machine's load beside it (bench/load.ts).
 *
 * Alone, for choosing the default concurrency or measuring under a known load:
 *   npx tsx bench/hydrate.ts [--objects 5000] [--latency-ms 30] [--runs 3] [--concurrency 8,16,32,64] [--no-peers]
 *                            [--baseline-cli <another checkout>/dist/cli/cli.js] [--busy-cores N] [--cpu-prof-dir <dir>]
 *                            [--only 'transfers 128,aws'] (peer rows whose name holds one of these)
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type LoadReading, busyCores, describeLoad, loadVerdict, startBusyCores, startLoadProbe, stopBusyCores, worstLoad } from './load';
import { type ChildRun, timed } from './child-cpu';
import { type ModelProcess, startModelProcess } from './model';
import { type Row, median, startedAs, table } from './report';
import { type Target, type Timing, rcloneEnv, unindex } from './rows';

const REPO = join(__dirname, '..');
const CLI = join(REPO, 'dist', 'cli', 'cli.js');

/** Regular files under `dir`, recursively. */
async function countFiles(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).length;
}

/** A child's run as a Timing: files, CPU per file in `detail`, and the load beside it. */
function timing(run: ChildRun, files: number, counts: Record<string, number>, load: LoadReading): Timing {
  const cpuMs = (run.userS + run.sysS) * 1000;
  return {
    seconds: run.seconds,
    objects: files,
    requests: Object.values(counts).reduce((a, b) => a + b, 0),
    detail: { ...counts, userS: run.userS, sysS: run.sysS, cpuMsPerFile: files > 0 ? cpuMs / files : NaN, filesPerS: files / run.seconds },
    load,
  };
}

/**
 * Runs `copy` into an empty folder of an unindexed root, counting the model's requests, the files written and
 * the load. The folder is added to `kept` rather than removed: on ext4 without a journal (this machine's
 * disk) every new file steps past each inode deleted in the last minutes, so removing one row's thousands of
 * files would tax the next row's creates.
 */
async function intoEmptyFolder(
  model: ModelProcess,
  target: Target,
  copy: (dir: string) => Promise<ChildRun>,
  kept: string[],
): Promise<Timing> {
  await unindex(target);
  const dir = await mkdtemp(join(tmpdir(), 'bench-hydrate-'));
  kept.push(dir);
  try {
    await model.reset();
    const modelCpuBefore = await model.cpuMs();
    const probe = startLoadProbe();
    const run = await copy(dir);
    const modelCpu = (await model.cpuMs()) - modelCpuBefore;
    const load = probe.stop((run.userS + run.sysS) * 1000 + modelCpu);
    const counts = (await model.counts()) as Record<string, number>;
    return timing(run, await countFiles(dir), counts, load);
  } finally {
    await unindex(target);
  }
}

/** The environment every child gets: the bench's credentials, no instance metadata lookups. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_EC2_METADATA_DISABLED: 'true' };
  delete env.AWS_PROFILE;
  delete env.AWS_CA_BUNDLE;
  delete env.NODE_OPTIONS;
  return env;
}

/** `datastore-indexer hydrate` (the bundled command, as users run it) of the root into `dir`. */
function hydrateCommand(target: Target, concurrency?: number, cli = CLI, profileDir?: string): (dir: string) => Promise<ChildRun> {
  return (dir) => {
    const args = [
      ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
      cli,
      'hydrate',
      '--bucket',
      target.bucket,
      '--prefix',
      target.prefix,
      '--endpoint',
      target.endpoint,
      '--force-path-style',
    ];
    args.push('--cache', dir, '--json');
    if (concurrency !== undefined) args.push('--concurrency', String(concurrency));
    return timed(process.execPath, args, childEnv());
  };
}

/**
 * rclone copy's flags in each row: what a user after speed sets (the tuned rows: 128 transfers, and as many as
 * hydrate's default downloads, faster still on this machine), and its default checkers.
 */
export const RCLONE_COPY_ROWS = {
  'rclone copy --transfers 32 --checkers 32': ['--transfers', '32', '--checkers', '32'],
  'rclone copy --transfers 32 --fast-list': ['--transfers', '32', '--fast-list'],
  'rclone copy --transfers 32 --checkers 32 --fast-list': ['--transfers', '32', '--checkers', '32', '--fast-list'],
  'rclone copy --transfers 128 --checkers 128 --fast-list': ['--transfers', '128', '--checkers', '128', '--fast-list'],
  'rclone copy --transfers 256 --checkers 256 --fast-list': ['--transfers', '256', '--checkers', '256', '--fast-list'],
  'rclone copy --transfers 32 (default 8 checkers, untuned)': ['--transfers', '32'],
} as const satisfies Record<string, readonly string[]>;

/** The rows a user tuned for speed: the fastest of these is what hydrate is held against. */
const TUNED_RCLONE = Object.keys(RCLONE_COPY_ROWS).filter((name) => !name.includes('untuned'));

/**
 * `rclone copy` of the root into `dir` with `flags`, through a remote configured from the environment;
 * `--fast-list` lists the root in one recursive walk rather than a listing per folder, `--checkers` lists
 * and compares that many folders at once.
 */
function rcloneCopy(target: Target, flags: readonly string[]): (dir: string) => Promise<ChildRun> {
  const env = rcloneEnv(target, childEnv());
  return (dir) => timed('rclone', ['copy', ...flags, `bench:${target.bucket}/${target.prefix}`, dir], env);
}

/** What the `aws s3 sync` row is named, and the request slots its AWS config file gives it. */
export const AWS_SYNC_ROW = 'aws s3 sync (max_concurrent_requests 128)';
const AWS_MAX_CONCURRENT_REQUESTS = 128;

/**
 * Writes the AWS config file of a user after speed (`s3` section, `max_concurrent_requests` raised from its
 * default 10) into `dir`, and returns its path, for `AWS_CONFIG_FILE`.
 */
async function fastAwsConfig(dir: string): Promise<string> {
  const file = join(dir, 'config');
  await writeFile(file, `[default]\ns3 =\n  max_concurrent_requests = ${AWS_MAX_CONCURRENT_REQUESTS}\n`);
  return file;
}

/** `aws s3 sync` of the root into `dir`, with the AWS config file `configFile`. */
function awsSync(target: Target, configFile: string): (dir: string) => Promise<ChildRun> {
  const env = { ...childEnv(), AWS_CONFIG_FILE: configFile };
  return (dir) =>
    timed(
      'aws',
      [
        's3',
        'sync',
        `s3://${target.bucket}/${target.prefix}`,
        dir,
        '--endpoint-url',
        target.endpoint,
        '--only-show-errors',
        '--no-progress',
      ],
      env,
    );
}

/** The first line of `<tool> --version`, or undefined when the tool is not on the PATH. */
export function toolVersion(tool: 'rclone' | 'aws'): string | undefined {
  const probe = spawnSync(tool, tool === 'rclone' ? ['version'] : ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? `${probe.stdout}${probe.stderr}`.split('\n')[0].trim() : undefined;
}

/** What to measure. */
export interface HydrateBenchOptions {
  readonly objects: number;
  /** Concurrencies of our hydrate to measure; `undefined` is the command's default. */
  readonly concurrencies: readonly (number | undefined)[];
  /** Measure rclone copy and aws s3 sync too, where installed. */
  readonly peers: boolean;
  /** Another build of the command (its `dist/cli/cli.js`) to measure at the default concurrency, e.g. main's. */
  readonly baselineCli?: string;
  /** A folder where each run of our hydrate writes a V8 CPU profile (`node --cpu-prof`). */
  readonly profileDir?: string;
  /** Measure only the rows whose name holds one of these. @default every row */
  readonly only?: readonly string[];
}

/** The bucket and root the hydrate rows use (5,000 objects under `team` by default). */
export const HYDRATE_TARGET = { bucket: 'bench-hydrate', prefix: 'team' } as const;

const oursName = (c: number | undefined): string => (c === undefined ? 'hydrate' : `hydrate --concurrency ${c}`);

/**
 * Seeds the hydrate bucket on the model and returns the measures (our hydrate at each concurrency, and the
 * peers that are installed), plus a note for each peer that is not. Each measure leaves its folder in `kept`.
 */
export async function hydrateMeasures(
  model: ModelProcess,
  o: HydrateBenchOptions,
  kept: string[],
): Promise<{ measures: Record<string, () => Promise<Timing>>; missing: string[]; versions: string[] }> {
  // Bundled now, so the command measured is the source's.
  const built = spawnSync(process.execPath, [join(REPO, 'scripts', 'bundle.mjs')], { cwd: REPO, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(CLI)) throw new Error(`npm run bundle failed: ${built.stderr}`);
  const target: Target = { endpoint: model.endpoint, ...HYDRATE_TARGET };
  await model.seed(target.bucket, { count: o.objects, prefix: target.prefix, layout: 'swamp' });
  const measures: Record<string, () => Promise<Timing>> = {};
  for (const c of o.concurrencies)
    measures[oursName(c)] = () => intoEmptyFolder(model, target, hydrateCommand(target, c, CLI, o.profileDir), kept);
  if (o.baselineCli)
    measures['hydrate (baseline build)'] = () => intoEmptyFolder(model, target, hydrateCommand(target, undefined, o.baselineCli), kept);
  const missing: string[] = [];
  const versions: string[] = [];
  const wanted = (name: string): boolean => !o.only || o.only.some((part) => name.includes(part));
  if (o.peers) {
    const rclone = toolVersion('rclone');
    const aws = toolVersion('aws');
    if (rclone) {
      versions.push(rclone);
      for (const [name, flags] of Object.entries(RCLONE_COPY_ROWS))
        if (wanted(name)) measures[name] = () => intoEmptyFolder(model, target, rcloneCopy(target, flags), kept);
    } else missing.push('rclone copy: skipped, rclone is not installed (apt-get install -y rclone)');
    if (aws && wanted(AWS_SYNC_ROW)) {
      versions.push(aws.split(' ')[0]);
      const configDir = await mkdtemp(join(tmpdir(), 'bench-aws-config-'));
      kept.push(configDir);
      const sync = awsSync(target, await fastAwsConfig(configDir));
      measures[AWS_SYNC_ROW] = () => intoEmptyFolder(model, target, sync, kept);
    } else if (!aws) missing.push('aws s3 sync: skipped, the AWS CLI is not installed (apt-get install -y awscli)');
  }
  return { measures, missing, versions };
}

const med = (timings: readonly Timing[] | undefined, pick: (t: Timing) => number = (t) => t.seconds): number | undefined =>
  timings?.length ? median(timings.map(pick)) : undefined;

/** The fastest tuned rclone row measured (by median seconds), if any. */
export function fastestTunedRclone(timings: Record<string, Timing[]>): string | undefined {
  const measured = TUNED_RCLONE.filter((name) => timings[name]?.length);
  return measured.sort((a, b) => med(timings[a])! - med(timings[b])!)[0];
}

/** Table rows for the hydrate measures: seconds (speedup against the fastest tuned rclone), files/s, CPU per file, load. */
export function hydrateRows(timings: Record<string, Timing[]>, names: readonly string[], missing: readonly string[]): Row[] {
  const rival = fastestTunedRclone(timings);
  const floor = rival ? med(timings[rival]) : undefined;
  const rows: Row[] = names.map((name) => {
    const t = timings[name];
    const cpu = `${med(t, (x) => x.detail!.userS)!.toFixed(2)} + ${med(t, (x) => x.detail!.sysS)!.toFixed(2)} s CPU`;
    const loads = t.map((x) => x.load).filter((l): l is LoadReading => l !== undefined);
    return {
      name: name === rival ? `${name} (fastest rclone)` : name,
      seconds: med(t),
      floor,
      requests: med(t, (x) => x.requests),
      note:
        `${med(t, (x) => x.objects)} files, ${med(t, (x) => x.detail!.filesPerS)!.toFixed(0)} files/s, ${cpu}, ` +
        `${med(t, (x) => x.detail!.cpuMsPerFile)!.toFixed(2)} ms CPU per file` +
        (loads.length ? `; ${describeLoad(worstLoad(loads))}` : ''),
    };
  });
  return [...rows, ...missing.map((note) => ({ name: note.split(':')[0], note: note.slice(note.indexOf(':') + 2) }))];
}

/** The hydrate figures of `--json`: `rcloneCopyS` and `rcloneCopyRequests` are the fastest tuned rclone row's. */
export function hydrateJson(timings: Record<string, Timing[]>, objects: number): Record<string, number | string | null> {
  const s = (name: string | undefined): number | null => (name ? (med(timings[name]) ?? null) : null);
  const rival = fastestTunedRclone(timings);
  const loads = Object.values(timings)
    .flat()
    .map((t) => t.load)
    .filter((l): l is LoadReading => l !== undefined);
  return {
    hydrateObjects: objects,
    hydrateS: s('hydrate'),
    hydrateCpuMsPerFile: med(timings.hydrate, (t) => t.detail!.cpuMsPerFile) ?? null,
    hydrateRequests: med(timings.hydrate, (t) => t.requests) ?? null,
    rcloneCopyS: s(rival),
    rcloneCopyRow: rival ?? null,
    rcloneCopyRequests: rival ? (med(timings[rival], (t) => t.requests) ?? null) : null,
    rcloneCopyCpuMsPerFile: rival ? (med(timings[rival], (t) => t.detail!.cpuMsPerFile) ?? null) : null,
    rcloneCopyUntunedS: s('rclone copy --transfers 32 (default 8 checkers, untuned)'),
    awsS3SyncS: s(AWS_SYNC_ROW),
    awsS3SyncRequests: med(timings[AWS_SYNC_ROW], (t) => t.requests) ?? null,
    hydrateBusyCores: busyCores(),
    hydrateOtherCoresWorst: loads.length ? worstLoad(loads).otherCores : null,
  };
}

/** What `hydrateBench` measured: the table's header line, its rows, and the figures for `--json`. */
export interface HydrateBenchResult {
  readonly header: string;
  readonly table: string;
  readonly json: Record<string, number | string | null>;
}

/** Removes the folders hydrate rows wrote. */
export async function removeFolders(folders: readonly string[]): Promise<void> {
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
}

/**
 * Seeds the hydrate bucket, measures every row `runs` times (rows taking turns within a round), and reports
 * medians. The rows' folders are added to `kept`, for the caller to remove (`removeFolders`) once it has
 * measured all it will (see `intoEmptyFolder`).
 */
export async function hydrateBench(
  model: ModelProcess,
  o: HydrateBenchOptions & { readonly runs: number },
  kept: string[],
): Promise<HydrateBenchResult> {
  const loadBefore = loadavg()[0];
  const { measures, missing, versions } = await hydrateMeasures(model, o, kept);
  const timings: Record<string, Timing[]> = Object.fromEntries(Object.keys(measures).map((k) => [k, []]));
  for (let r = 0; r < o.runs; r++) {
    for (const [name, measure] of Object.entries(measures)) {
      const t = await measure();
      timings[name].push(t);
      const d = t.detail!;
      process.stderr.write(
        `  run ${r + 1}/${o.runs} ${name}: ${t.seconds.toFixed(3)} s, ${t.objects} files, ${d.userS.toFixed(2)} + ${d.sysS.toFixed(2)} s CPU, ` +
          `${t.requests} requests (${d.GetObject ?? 0} GET, ${d.HeadObject ?? 0} HEAD, ${d.ListObjectsV2 ?? 0} LIST), ${describeLoad(t.load!)}\n`,
      );
    }
  }
  const readings = Object.values(timings)
    .flat()
    .map((t) => t.load!);
  return {
    header:
      `hydrate into an empty folder: ${o.objects} objects under ${HYDRATE_TARGET.prefix}/ (index absent), ${model.latencyMs} ms per request, ` +
      `medians of ${o.runs} run(s), CPU = user + sys of the child; load ${loadBefore.toFixed(1)} -> ${loadavg()[0].toFixed(1)}` +
      (versions.length ? `; ${versions.join('; ')}` : ''),
    table: `${table(hydrateRows(timings, Object.keys(measures), missing))}\n${loadVerdict(readings)}`,
    json: hydrateJson(timings, o.objects),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      objects: { type: 'string', default: '5000' },
      'latency-ms': { type: 'string', default: '30' },
      runs: { type: 'string', default: '3' },
      concurrency: { type: 'string' },
      'no-peers': { type: 'boolean' },
      'baseline-cli': { type: 'string' },
      'busy-cores': { type: 'string', default: '0' },
      'cpu-prof-dir': { type: 'string' },
      only: { type: 'string' },
    },
  });
  process.env.AWS_ACCESS_KEY_ID ??= 'bench';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'bench';
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const model = await startModelProcess(Number(values['latency-ms']));
  startBusyCores(Number(values['busy-cores']));
  const folders: string[] = [];
  try {
    const result = await hydrateBench(
      model,
      {
        objects: Number(values.objects),
        runs: Number(values.runs),
        concurrencies: values.concurrency ? values.concurrency.split(',').map(Number) : [undefined],
        peers: !values['no-peers'],
        baselineCli: values['baseline-cli'],
        profileDir: values['cpu-prof-dir'],
        only: values.only?.split(','),
      },
      folders,
    );
    process.stdout.write(
      `${result.header}; ${cpus().length} CPUs; node ${process.version}\n\n${result.table}\n${JSON.stringify(result.json)}\n`,
    );
  } finally {
    stopBusyCores();
    await model.stop();
    await removeFolders(folders);
  }
}

if (startedAs('hydrate')) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
