/**
 * npm run bench [-- --objects N --latency-ms MS --second-latency-ms MS --parallelism N --runs N --quick --json]
 *
 * In one run, against one bucket seeded on the S3 model (support/s3-model, in its own process, fixed
 * latency per request: 80 ms, about what S3 takes for a full ListObjectsV2 page; the floor and both heals
 * again at a second latency, 30 ms), side by side: the raw floor (the SDK's bare sequential ListObjectsV2 loop),
 * our full heal listing sequentially and in parallel (mode repair on an unindexed root: list, build,
 * publish), the parallel heal of the same root indexed with 1% of its entries drifted (missing and stale;
 * the listing cut by the index it reads, `healIndexedParallelS`), and rclone where installed; a smaller sanity row on moto, where requests cost CPU rather
 * than waiting; and without network, building and serialising a 1,000,000-entry index (time and peak
 * RSS, in a child process) and applying a 1,000-event delta to a 100,000-entry index. Prints a table of
 * medians; with --json, one JSON object as the last line. `BENCH_TRACE=1` prints every request of each
 * heal (depth, operation, sent and answered ms, parameters) to stderr.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { parallelLister } from '../lambda/lib/parallel-list';
import { HINTED_SLOTS } from '../lambda/lib/parallel-slices';
import { type Lister, sequentialLister } from '../lambda/lib/list';
import { DRIFT_SHARE, indexedHealMeasure } from './drift-index';
import { freshnessBench } from './freshness';
import { type LoadReading, describeLoad, loadVerdict, startBusyCores, startLoadProbe, stopBusyCores, worstLoad } from './load';
import { type Heal10M, heal10M } from './heal-10m';
import { type HealMemory, healMemory } from './heal-memory';
import { type HydrateBenchResult, hydrateBench, removeFolders } from './hydrate';
import { startModelProcess } from './model';
import { seededMoto } from './moto';
import { type Row, median, table } from './report';
import { type RcloneMode, type Target, type Timing, heal, rawSequential, rcloneList, rcloneVersion, unindex } from './rows';

const USAGE = `usage: npm run bench -- [--objects N] [--latency-ms MS] [--second-latency-ms MS] [--parallelism N] [--runs N]
                       [--index-entries N] [--heal-entries N] [--moto-objects N] [--no-moto] [--no-rclone]
                       [--hydrate-objects N] [--busy-cores N] [--heal-memory-only]
                       [--heal-10m-entries N] [--heal-10m-remaining-s S] [--heal-10m-memory-mb MB] [--heal-10m-only]
                       [--quick] [--json]`;

interface Options {
  readonly objects: number;
  readonly latencyMs: number;
  /** A second latency the floor and both heals are measured at; 0 skips it. */
  readonly secondLatencyMs: number;
  readonly parallelism: number;
  readonly runs: number;
  readonly indexEntries: number;
  /** Objects of the root a real parallel heal is measured on for its peak RSS; 0 skips it. */
  readonly healEntries: number;
  readonly motoObjects: number;
  /** Objects of the root the hydrate rows download (bench/hydrate.ts); 0 skips them. */
  readonly hydrateObjects: number;
  readonly rclone: boolean;
  /** Processes that keep a core busy each for the whole run: a known load to measure under. */
  readonly busyCores: number;
  /** Only the peak-RSS heals of a `healEntries`-object root, monolith and shard-first. */
  readonly healMemoryOnly: boolean;
  /** Objects of the shard-first root healed on the handler's own path across invocations (bench/heal-10m.ts); 0 skips it. */
  readonly heal10mEntries: number;
  /** The remaining time each of those invocations starts with. */
  readonly heal10mRemainingS: number;
  /** The function's memory each of those invocations has. */
  readonly heal10mMemoryMb: number;
  /** Only that row. */
  readonly heal10mOnly: boolean;
  readonly json: boolean;
  readonly quick: boolean;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      objects: { type: 'string' },
      'latency-ms': { type: 'string' },
      'second-latency-ms': { type: 'string' },
      parallelism: { type: 'string' },
      runs: { type: 'string' },
      'index-entries': { type: 'string' },
      'heal-entries': { type: 'string' },
      'moto-objects': { type: 'string' },
      'hydrate-objects': { type: 'string' },
      'busy-cores': { type: 'string' },
      'no-moto': { type: 'boolean' },
      'no-rclone': { type: 'boolean' },
      'heal-memory-only': { type: 'boolean' },
      'heal-10m-entries': { type: 'string' },
      'heal-10m-remaining-s': { type: 'string' },
      'heal-10m-memory-mb': { type: 'string' },
      'heal-10m-only': { type: 'boolean' },
      quick: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const int = (name: keyof typeof values, fallback: number, min = 1): number => {
    const raw = values[name];
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw new Error(`--${name} must be a whole number of at least ${min}, got ${String(raw)}\n${USAGE}`);
    return n;
  };
  return {
    objects: int('objects', quick ? 20_000 : 100_000),
    latencyMs: int('latency-ms', 80, 0),
    secondLatencyMs: int('second-latency-ms', 30, 0),
    parallelism: int('parallelism', 16),
    runs: int('runs', quick ? 1 : 3),
    indexEntries: int('index-entries', quick ? 200_000 : 1_000_000),
    healEntries: int('heal-entries', quick ? 0 : 1_000_000, 0),
    motoObjects: values['no-moto'] ? 0 : int('moto-objects', quick ? 300 : 2_000, 0),
    hydrateObjects: int('hydrate-objects', quick ? 1_000 : 5_000, 0),
    rclone: !values['no-rclone'],
    busyCores: int('busy-cores', 0, 0),
    healMemoryOnly: values['heal-memory-only'] ?? false,
    heal10mEntries: int('heal-10m-entries', quick ? 0 : 10_000_000, 0),
    heal10mRemainingS: int('heal-10m-remaining-s', 120),
    heal10mMemoryMb: int('heal-10m-memory-mb', 1024, 128),
    heal10mOnly: values['heal-10m-only'] ?? false,
    json: values.json ?? false,
    quick,
  };
}

const log = (text: string): void => void process.stderr.write(`${text}\n`);

/** Runs `bench/<script>` in a fresh process and returns its last line, JSON; bundled beside this file when this file is a bundle (`scripts/bench.mjs`). */
function child(script: string, args: string[]): Record<string, number> {
  const bundled = join(dirname(__filename), script.replace(/\.ts$/, '.cjs'));
  const command = __filename.endsWith('.cjs') ? [bundled] : ['--import', 'tsx', join(__dirname, script)];
  const run = spawnSync(process.execPath, [...command, ...args], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (run.status !== 0) throw new Error(`${script} ${args.join(' ')} failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as Record<string, number>;
}

const offline = (args: string[]): Record<string, number> => child('offline-child.ts', args);

/** Every load reading of this run's rows, for the verdict at the end. */
const readings: LoadReading[] = [];

/**
 * Medians of each measure over `runs` rounds, the measures taking turns within a round, each with the load
 * beside it; `modelCpuMs` reads the CPU of the endpoint's process, so only other processes count as load.
 */
async function rounds(
  runs: number,
  measures: Record<string, () => Promise<Timing>>,
  modelCpuMs: () => Promise<number> = async () => 0,
): Promise<Record<string, Timing[]>> {
  const out: Record<string, Timing[]> = Object.fromEntries(Object.keys(measures).map((k) => [k, []]));
  for (let r = 0; r < runs; r++) {
    for (const [name, measure] of Object.entries(measures)) {
      const modelBefore = await modelCpuMs();
      const probe = startLoadProbe();
      const measured = await measure();
      const load = measured.load ?? probe.stop((measured.detail?.childCpuMs ?? 0) + (await modelCpuMs()) - modelBefore);
      readings.push(load);
      const timing = { ...measured, load };
      out[name].push(timing);
      log(
        `  run ${r + 1}/${runs} ${name}: ${timing.seconds.toFixed(3)} s, ${timing.objects} objects, ${timing.requests || '?'} requests, ${describeLoad(load)}`,
      );
    }
  }
  return out;
}

/** The rows measured on every endpoint: the floor and both heals. */
function coreMeasures(target: Target, parallelism: number): Record<string, () => Promise<Timing>> {
  return {
    raw: () => rawSequential(target),
    healSequential: () => heal(target, sequentialLister),
    // As healRoot's default lister lists: without ETags.
    healParallel: () => heal(target, parallelLister({ concurrency: parallelism, etags: false })),
  };
}

const med = (timings: readonly Timing[] | undefined, pick: (t: Timing) => number = (t) => t.seconds): number | undefined =>
  timings?.length ? median(timings.map(pick)) : undefined;

async function main(): Promise<void> {
  const o = options();
  process.env.AWS_ACCESS_KEY_ID ??= 'bench';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'bench';
  process.env.AWS_REGION ??= 'us-east-1';
  delete process.env.AWS_PROFILE;
  const loadBefore = loadavg()[0];
  if (o.healMemoryOnly) return healMemoryOnly(o, loadBefore);
  if (o.heal10mOnly) return heal10MOnly(o, loadBefore);
  startBusyCores(o.busyCores);
  // Kept until both latencies' hydrate rows are measured: removing thousands of files taxes the next creates.
  const hydrateFolders: string[] = [];
  try {
    await measureAll(o, loadBefore, hydrateFolders);
  } finally {
    stopBusyCores();
    await removeFolders(hydrateFolders);
  }
}

async function measureAll(o: Options, loadBefore: number, hydrateFolders: string[]): Promise<void> {
  log(`offline: building and serialising a ${o.indexEntries}-entry index (child process)`);
  const index = offline(['index', String(o.indexEntries)]);
  log(`offline: applying a 1000-event delta to a 100000-entry index`);
  const delta = offline(['delta', '100000', '1000']);

  log(`s3-model: ${o.objects} objects, ${o.latencyMs} ms per request`);
  const model = await startModelProcess(o.latencyMs);
  const target: Target = { endpoint: model.endpoint, bucket: 'bench', prefix: 'root' };
  const rclone = o.rclone ? rcloneVersion() : undefined;
  let timings: Record<string, Timing[]>;
  let fullHeal: Record<string, number> | undefined;
  let memory: HealMemory | undefined;
  let hydrate: HydrateBenchResult | undefined;
  const rcloneModes: Record<string, RcloneMode> = { 'rclone --fast-list': { fastList: true }, 'rclone --checkers 32': { checkers: 32 } };
  try {
    await model.seed(target.bucket, { count: o.objects, prefix: target.prefix, layout: 'swamp' });
    const measures = coreMeasures(target, o.parallelism);
    if (rclone) {
      for (const [name, mode] of Object.entries(rcloneModes)) {
        measures[name] = async () => {
          await model.reset();
          const timing = await rcloneList(target, mode);
          const counts = await model.counts();
          return { ...timing, requests: Object.values(counts).reduce((a, b) => a + b, 0) };
        };
      }
    }
    timings = await rounds(o.runs, measures, () => model.cpuMs());
    log(`s3-model: heal of the root indexed, ${DRIFT_SHARE * 100}% of its entries drifted (missing and stale) before each run`);
    const indexedLister = (): Lister => parallelLister({ concurrency: o.parallelism, etags: false });
    Object.assign(timings, await rounds(o.runs, { healIndexed: indexedHealMeasure(target, indexedLister) }, () => model.cpuMs()));
    await unindex(target);
    if (o.hydrateObjects > 0) {
      log(`s3-model: hydrate, rclone copy and aws s3 sync of ${o.hydrateObjects} objects`);
      hydrate = await hydrateBench(
        model,
        { objects: o.hydrateObjects, runs: o.runs, concurrencies: [undefined], peers: true },
        hydrateFolders,
      );
    }
    if (o.healEntries > 0) {
      memory = await healMemory(model, { entries: o.healEntries, prefix: target.prefix, parallelism: o.parallelism, log });
      fullHeal = memory.monolith;
    }
  } finally {
    await model.stop();
  }

  let second: Record<string, Timing[]> | undefined;
  let hydrateSecond: HydrateBenchResult | undefined;
  if (o.secondLatencyMs > 0) {
    log(`s3-model: ${o.objects} objects, ${o.secondLatencyMs} ms per request`);
    const model2 = await startModelProcess(o.secondLatencyMs);
    try {
      await model2.seed(target.bucket, { count: o.objects, prefix: target.prefix, layout: 'swamp' });
      second = await rounds(o.runs, coreMeasures({ ...target, endpoint: model2.endpoint }, o.parallelism), () => model2.cpuMs());
      if (o.hydrateObjects > 0) {
        log(`s3-model: hydrate, rclone copy and aws s3 sync of ${o.hydrateObjects} objects at ${o.secondLatencyMs} ms`);
        hydrateSecond = await hydrateBench(
          model2,
          { objects: o.hydrateObjects, runs: o.runs, concurrencies: [undefined], peers: true },
          hydrateFolders,
        );
      }
    } finally {
      await model2.stop();
    }
  }

  const large = o.heal10mEntries > 0 ? await heal10MRow(o) : undefined;

  let moto: Record<string, Timing[]> | undefined;
  if (o.motoObjects > 0) {
    log(`moto: seeding ${o.motoObjects} objects`);
    const seeded = await seededMoto(o.motoObjects);
    try {
      moto = await rounds(Math.min(o.runs, 3), coreMeasures(seeded.target, o.parallelism), seeded.cpuMs);
    } finally {
      await seeded.stop();
    }
  }
  log(`event path: freshness and cost of upload bursts (${o.latencyMs} ms per request)`);
  const fresh = await freshnessBench({ latencyMs: o.latencyMs, quick: o.quick, log });

  const raw = med(timings.raw)!;
  const healSequential = med(timings.healSequential)!;
  const healParallel = med(timings.healParallel)!;
  const healIndexed = med(timings.healIndexed)!;
  const rcloneTimes = Object.keys(rcloneModes)
    .map((name) => [name, med(timings[name])] as const)
    .filter((e): e is readonly [string, number] => e[1] !== undefined);
  const fastestRclone = rcloneTimes.sort((a, b) => a[1] - b[1])[0];
  const pages = Math.ceil(o.objects / 1000);
  const detail = (name: string, field: string, from = timings): number => med(from[name], (t) => t.detail?.[field] ?? NaN)!;
  /** How a heal's time divides: listing and publish, each with its requests one after another (latencies deep). */
  const split = (name: string, from = timings): string =>
    `listing ${detail(name, 'listingS', from).toFixed(3)} s, ${detail(name, 'listingDepth', from)} deep (${detail(name, 'lists', from)} ListObjectsV2); ` +
    `publish ${detail(name, 'publishS', from).toFixed(3)} s, ${detail(name, 'publishDepth', from)} deep`;

  const rows: Row[] = [
    {
      name: `raw floor: SDK ListObjectsV2 loop`,
      seconds: raw,
      floor: raw,
      requests: med(timings.raw, (t) => t.requests),
      note: `${pages} pages x ${o.latencyMs} ms = ${((pages * o.latencyMs) / 1000).toFixed(2)} s of latency alone`,
    },
    {
      name: 'heal, sequential lister',
      seconds: healSequential,
      floor: raw,
      requests: med(timings.healSequential, (t) => t.requests),
      note: `${split('healSequential')}; ${detail('healSequential', 'entries')} entries`,
    },
    {
      name: `heal, parallel lister (${o.parallelism})`,
      seconds: healParallel,
      floor: raw,
      requests: med(timings.healParallel, (t) => t.requests),
      note: split('healParallel'),
    },
    {
      name: `heal of it indexed, ${DRIFT_SHARE * 100}% drifted (${o.parallelism}, ${HINTED_SLOTS * o.parallelism} once hinted)`,
      seconds: healIndexed,
      floor: raw,
      requests: med(timings.healIndexed, (t) => t.requests),
      note: `${split('healIndexed')}; ${detail('healIndexed', 'missing')} missing and ${detail('healIndexed', 'stale')} stale entries healed`,
    },
  ];
  if (rclone) {
    for (const [name] of Object.entries(rcloneModes)) {
      rows.push({
        name,
        seconds: med(timings[name]),
        floor: raw,
        requests: med(timings[name], (t) => t.requests),
        note: `${med(timings[name], (t) => t.objects)} files`,
      });
    }
  } else if (o.rclone) rows.push({ name: 'rclone', note: 'not installed' });
  if (second) {
    const raw2 = med(second.raw)!;
    rows.push(
      { name: `at ${o.secondLatencyMs} ms per request`, note: `the same ${o.objects} objects` },
      { name: '  raw floor', seconds: raw2, floor: raw2, requests: med(second.raw, (t) => t.requests) },
      {
        name: '  heal, sequential',
        seconds: med(second.healSequential),
        floor: raw2,
        requests: med(second.healSequential, (t) => t.requests),
        note: split('healSequential', second),
      },
      {
        name: `  heal, parallel (${o.parallelism})`,
        seconds: med(second.healParallel),
        floor: raw2,
        requests: med(second.healParallel, (t) => t.requests),
        note: split('healParallel', second),
      },
    );
  }
  if (moto) {
    const motoRaw = med(moto.raw)!;
    rows.push(
      { name: `moto, ${o.motoObjects} objects (CPU-bound)`, note: 'sanity check: moto answers slowly, no added latency' },
      { name: '  raw floor', seconds: motoRaw, floor: motoRaw, requests: med(moto.raw, (t) => t.requests) },
      {
        name: '  heal, sequential',
        seconds: med(moto.healSequential),
        floor: motoRaw,
        requests: med(moto.healSequential, (t) => t.requests),
      },
      {
        name: `  heal, parallel (${o.parallelism})`,
        seconds: med(moto.healParallel),
        floor: motoRaw,
        requests: med(moto.healParallel, (t) => t.requests),
      },
    );
  }

  // On latency alone (CPU free), a run takes its depth times the latency: the floor is as deep as it has pages.
  const depthOf = (name: string, from = timings): number => detail(name, 'listingDepth', from) + detail(name, 'publishDepth', from);
  const rawDepth = med(timings.raw, (t) => t.requests)!;
  const out: string[] = [];
  out.push(
    `S3 model: ${o.objects} objects (swamp layout), ${o.latencyMs} ms per request, medians of ${o.runs} run(s); ` +
      `${cpus().length} CPUs, load ${loadBefore.toFixed(1)} -> ${loadavg()[0].toFixed(1)}; node ${process.version}` +
      (rclone ? `; ${rclone}` : ''),
    '',
    table(rows),
    '',
    `requests one after another (latencies deep) at ${o.latencyMs} ms: floor ${rawDepth} (${((rawDepth * o.latencyMs) / 1000).toFixed(2)} s), ` +
      `heal sequential ${depthOf('healSequential')}, heal parallel ${depthOf('healParallel')} ` +
      `(${((depthOf('healParallel') * o.latencyMs) / 1000).toFixed(2)} s: ${(rawDepth / depthOf('healParallel')).toFixed(2)}x the floor on latency alone), ` +
      `heal indexed ${depthOf('healIndexed')} (${(rawDepth / depthOf('healIndexed')).toFixed(2)}x)`,
    `index of ${index.entries} entries from a synthetic listing (child process): list ${(index.listMs / 1000).toFixed(2)} s, ` +
      `build ${(index.buildMs / 1000).toFixed(2)} s, serialise ${(index.serializeMs / 1000).toFixed(2)} s (${(index.indexBytes / 1048576).toFixed(0)} MiB JSON); ` +
      `peak RSS ${index.peakRssMb.toFixed(0)} MiB (${index.baselineRssMb.toFixed(0)} MiB before), ${index.bytesPerEntry.toFixed(0)} bytes per entry`,
    `delta of ${delta.events} events on ${delta.entries} entries (latestChanges + applyChanges): median ${delta.medianMs.toFixed(1)} ms`,
  );
  if (memory) out.push(...memory.lines);
  out.push('', fresh.table);
  if (hydrate) out.push('', hydrate.header, '', hydrate.table);
  if (hydrateSecond) out.push('', hydrateSecond.header, '', hydrateSecond.table);
  out.push('', `heal rows: ${loadVerdict(readings)}`);
  process.stdout.write(`${out.join('\n')}\n`);
  if (o.json) {
    const result = {
      objects: o.objects,
      latencyMs: o.latencyMs,
      parallelism: o.parallelism,
      runs: o.runs,
      rawSequentialS: raw,
      healSequentialS: healSequential,
      healParallelS: healParallel,
      rcloneS: fastestRclone ? fastestRclone[1] : null,
      rcloneMode: fastestRclone ? fastestRclone[0] : null,
      rclone: Object.fromEntries(rcloneTimes),
      parallelSpeedup: raw / healParallel,
      sequentialOverFloor: healSequential / raw,
      listCpuMsPerPage: detail('healParallel', 'listCpuMsPerPage'),
      rawListCpuMsPerPage: detail('raw', 'listCpuMsPerPage'),
      listingS: detail('healParallel', 'listingS'),
      listingDepth: detail('healParallel', 'listingDepth'),
      publishS: detail('healParallel', 'publishS'),
      publishDepth: detail('healParallel', 'publishDepth'),
      parallelDepth: depthOf('healParallel'),
      latencyBoundSpeedup: rawDepth / depthOf('healParallel'),
      healIndexedParallelS: healIndexed,
      indexedSpeedup: raw / healIndexed,
      indexedRequests: med(timings.healIndexed, (t) => t.requests),
      indexedListingDepth: detail('healIndexed', 'listingDepth'),
      indexedDepth: depthOf('healIndexed'),
      indexedLatencyBoundSpeedup: rawDepth / depthOf('healIndexed'),
      second: second
        ? {
            latencyMs: o.secondLatencyMs,
            rawSequentialS: med(second.raw),
            healSequentialS: med(second.healSequential),
            healParallelS: med(second.healParallel),
            parallelSpeedup: med(second.raw)! / med(second.healParallel)!,
            sequentialOverFloor: med(second.healSequential)! / med(second.raw)!,
            listingDepth: detail('healParallel', 'listingDepth', second),
            publishS: detail('healParallel', 'publishS', second),
          }
        : null,
      indexEntries: index.entries,
      bytesPerEntry1M: index.bytesPerEntry,
      peakRssMb1M: index.peakRssMb,
      indexBuildS: index.totalMs / 1000,
      delta1kOn100kMs: delta.medianMs,
      healEntries: fullHeal ? o.healEntries : null,
      healPeakRssMb: fullHeal ? fullHeal.peakRssMb : null,
      healSeconds: fullHeal ? fullHeal.seconds : null,
      ...(memory?.json ?? { healPeakRssMb1MMonolith: null, healPeakRssMb1MShardFirst: null }),
      heal10MShardFirst: large ?? null,
      moto: moto
        ? {
            objects: o.motoObjects,
            rawSequentialS: med(moto.raw),
            healSequentialS: med(moto.healSequential),
            healParallelS: med(moto.healParallel),
          }
        : null,
      ...fresh.json,
      ...(hydrate?.json ?? { hydrateS: null, hydrateCpuMsPerFile: null, rcloneCopyS: null, awsS3SyncS: null }),
      hydrateLatencyMs: hydrate ? o.latencyMs : null,
      // The same keys at the second latency.
      hydrateAtSecondLatency: hydrateSecond ? { latencyMs: o.secondLatencyMs, ...hydrateSecond.json } : null,
      cpus: cpus().length,
      loadAverage: [loadBefore, loadavg()[0]],
      loadAvg: loadavg()[0],
      busyCores: o.busyCores,
      otherCoresWorst: readings.length ? worstLoad(readings).otherCores : null,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}

/** The ten-million-object shard-first heal on the handler's path, on a model of its own (with the heap so many keys need). */
async function heal10MRow(o: Options): Promise<Heal10M> {
  log(
    `s3-model: an unindexed shard-first root of ${o.heal10mEntries} objects healed by the bundled handler, ${o.heal10mRemainingS} s per invocation`,
  );
  const model = await startModelProcess(o.latencyMs, { heapMb: 16_384 });
  try {
    const row = await heal10M(model, {
      entries: o.heal10mEntries,
      remainingMs: o.heal10mRemainingS * 1000,
      memoryMb: o.heal10mMemoryMb,
      log,
    });
    log(
      `heal of an unindexed ${row.objects}-object shard-first root by the handler: ${row.invocations} invocations, ` +
        `${row.seconds.toFixed(0)} s, peak RSS ${row.peakRssMb.toFixed(0)} MiB (largest of one invocation), ${row.requests} requests, ` +
        `partition files ${row.partitionsEqualListing === 1 ? 'equal to' : 'NOT equal to'} the listing`,
    );
    return row;
  } finally {
    await model.stop();
  }
}

/** `--heal-10m-only`: that row alone, as JSON with `--json`. */
async function heal10MOnly(o: Options, loadBefore: number): Promise<void> {
  const row = await heal10MRow(o);
  const header = `S3 model, ${o.latencyMs} ms per request; ${cpus().length} CPUs, load ${loadBefore.toFixed(1)} -> ${loadavg()[0].toFixed(1)}; node ${process.version}`;
  process.stdout.write(`${header}\n`);
  if (o.json)
    process.stdout.write(`${JSON.stringify({ heal10MShardFirst: row, cpus: cpus().length, loadAverage: [loadBefore, loadavg()[0]] })}\n`);
}

/** `--heal-memory-only`: the peak-RSS heals alone, monolith and shard-first, on the model at `--latency-ms`. */
async function healMemoryOnly(o: Options, loadBefore: number): Promise<void> {
  const model = await startModelProcess(o.latencyMs);
  let memory: HealMemory;
  try {
    memory = await healMemory(model, { entries: o.healEntries || 1_000_000, prefix: 'root', parallelism: o.parallelism, log });
  } finally {
    await model.stop();
  }
  const header = `S3 model, ${o.latencyMs} ms per request; ${cpus().length} CPUs, load ${loadBefore.toFixed(1)} -> ${loadavg()[0].toFixed(1)}; node ${process.version}`;
  process.stdout.write(`${[header, ...memory.lines].join('\n')}\n`);
  if (o.json) process.stdout.write(`${JSON.stringify({ ...memory.json, cpus: cpus().length, loadAverage: [loadBefore, loadavg()[0]] })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
