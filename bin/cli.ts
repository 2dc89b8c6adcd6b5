/**
 * `datastore-indexer`: the command face of the library. It parses flags, calls the library and
 * prints; every decision about indexes, keys and the cache is the library's.
 *
 *   datastore-indexer hydrate --config '{"bucket":"b","prefix":"swamp"}' --cache .swamp/cache
 *   datastore-indexer check   --bucket b --prefix swamp
 *   datastore-indexer repair  --bucket b --prefix swamp --namespace team-b
 *
 * Exit codes: 0 done (check: every index true); 1 error (a prefix that holds nothing included), or files that
 * failed to download or are archived;
 * 2 `check` found drift (an absent or unreadable index is drift), or `repair` left an index as it was
 * (its `_index/_meta.json` does not parse and does not say its layout, or its index is of a version this
 * indexer does not know).
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import {
  ConfigError,
  DEFAULT_HYDRATE_CONCURRENCY,
  checkAccountId,
  checkNamespaceName,
  type DatastoreRoot,
  type PublishEvent,
  S3Store,
  describeScope,
  hasDrift,
  healAndHydrate,
  healRoot,
  namespaceExists,
  refusedKeyReason,
  resolveDatastoreConfig,
  releaseHeldLocks,
  rootOf,
} from '../lambda/lib';
import {
  archivedLines,
  checkJson,
  checkLines,
  debugText,
  errorJson,
  hydrateJson,
  hydrateLine,
  refusedKeysOf,
  repairJson,
  repairLines,
} from './cli/format';
import { Progress } from './cli/progress';
import { version } from '../package.json';

const NAME = 'datastore-indexer';

/** Flags every command takes: where the datastore is, and how to print. */
interface DatastoreFlags {
  readonly config?: string;
  readonly bucket?: string;
  readonly prefix?: string;
  readonly region?: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: true;
  readonly expectedBucketOwner?: string;
  readonly namespace?: string;
  readonly json?: true;
}

interface HydrateFlags extends DatastoreFlags {
  readonly allowEmpty?: true;
  readonly cache: string;
  /** Parallel downloads (and HEADs of the heal); the library's defaults when absent. */
  readonly concurrency?: number;
  readonly lockWait: number;
}

interface RepairFlags extends DatastoreFlags {
  readonly allowEmpty?: true;
  readonly lockWait: number;
}

interface CheckFlags extends DatastoreFlags {
  readonly keys: number;
}

/** A connected datastore: its S3 store and root, with the namespace checked to exist. */
interface Datastore {
  readonly store: S3Store;
  readonly root: DatastoreRoot;
  readonly namespace?: string;
}

const progress = new Progress();

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

function warn(message: string): void {
  progress.note(`${NAME}: ${message}`);
}

/** Warns each line, up to 20; the rest are counted (and listed in full by --json). */
function warnSome(lines: readonly string[], max = 20): void {
  lines.slice(0, max).forEach(warn);
  if (lines.length > max) warn(`… and ${lines.length - max} more like it (--json lists them all)`);
}

function printJson(value: object): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Builds the store from `--config` and the separate flags (flags win), and checks `--namespace` exists. */
async function connect(flags: DatastoreFlags): Promise<Datastore> {
  const config = resolveDatastoreConfig(flags.config, {
    bucket: flags.bucket,
    prefix: flags.prefix,
    region: flags.region,
    endpoint: flags.endpoint,
    forcePathStyle: flags.forcePathStyle,
  });
  const owner = flags.expectedBucketOwner === undefined ? undefined : checkAccountId(flags.expectedBucketOwner, '--expected-bucket-owner');
  const store = S3Store.connect({ ...config, expectedBucketOwner: owner }, config.bucket);
  const root = rootOf(config);
  const namespace = flags.namespace === undefined ? undefined : checkNamespaceName(flags.namespace, '--namespace');
  if (namespace !== undefined && !(await namespaceExists(store, root, namespace))) {
    store.client.destroy();
    throw new ConfigError(
      `No namespace "${namespace}" in ${describeScope({ root })}`,
      `A namespace is a top-level folder holding .namespace.json; leave out --namespace to use the root's own index`,
    );
  }
  return { store, root, namespace };
}

/** Tells the person waiting what the library is waiting on; once per index for lock waits. */
function eventNotes(): (scope: string, event: PublishEvent) => void {
  const waited = new Set<string>();
  let unsupportedSaid = false;
  return (scope, event) => {
    if (event.event === 'lock-wait' && !waited.has(scope)) {
      waited.add(scope);
      warn(`waiting for the datastore lock of ${scope}, held by ${event.holder}`);
    } else if (event.event === 'mirror-failed') {
      warn(`warning: could not refresh the mirror partition file ${event.key} of ${scope}: ${event.error}`);
    } else if (event.event === 'conditional-writes-unsupported' && !unsupportedSaid) {
      unsupportedSaid = true;
      warn('warning: this store does not implement conditional writes; the datastore lock alone protects the index');
    }
  };
}

async function hydrate(flags: HydrateFlags): Promise<number> {
  const started = Date.now();
  const { store, root, namespace } = await connect(flags);
  const cacheDir = resolve(flags.cache);
  try {
    progress.status(`Healing the index of ${describeScope({ root, namespace })}…`);
    const result = await healAndHydrate(store, root, {
      namespace,
      cacheDir,
      concurrency: flags.concurrency,
      heal: {
        concurrency: flags.concurrency,
        publish: { lock: { waitMs: flags.lockWait * 1000 } },
        onEvent: eventNotes(),
        onListed: (objects) => progress.listed(objects),
        refuseEmpty: !flags.allowEmpty,
      },
      onCacheWait: (holder) => warn(`waiting for another hydrate of ${cacheDir} (${holder}) to finish`),
      onHealed: () => progress.status('Comparing the cache with the index…'),
      onProgress: (done, total) => progress.update(done, total),
    });
    progress.stop();
    const { failed } = result.hydrate;
    const refused = refusedKeysOf(result);
    warnSome(
      refused.map(
        (key) => `warning: refused key ${JSON.stringify(key)}: ${refusedKeyReason(key) ?? 'it would be written outside the cache folder'}`,
      ),
    );
    warnSome(failed.map(({ key, error }) => `failed to pull ${JSON.stringify(key)}: ${error}`));
    const archived = archivedLines(result);
    warnSome(archived.keys);
    if (archived.restore) warn(archived.restore);
    if (flags.json) printJson(hydrateJson(result, cacheDir, Date.now() - started));
    else say(hydrateLine(result));
    // An archived file is as absent from the cache as a failed one: a rerun pulls it once it is restored.
    return failed.length > 0 || result.hydrate.archived.length > 0 ? 1 : 0;
  } finally {
    store.client.destroy();
  }
}

async function check(flags: CheckFlags): Promise<number> {
  const started = Date.now();
  const { store, root, namespace } = await connect(flags);
  try {
    progress.status(`Checking the index of ${describeScope({ root, namespace })}…`);
    const report = await healRoot(store, root, {
      mode: 'check',
      namespace,
      keys: flags.keys,
      onListed: (objects) => progress.listed(objects),
    });
    progress.stop();
    if (flags.json) printJson(checkJson(report, flags.keys, Date.now() - started));
    else checkLines(report, flags.keys).forEach(say);
    // A prefix that holds nothing is most likely mistyped: an error, as `repair` and `hydrate` make it.
    if (report.empty) return 1;
    return report.scopes.some(hasDrift) ? 2 : 0;
  } finally {
    store.client.destroy();
  }
}

async function repair(flags: RepairFlags): Promise<number> {
  const started = Date.now();
  const { store, root, namespace } = await connect(flags);
  try {
    progress.status(`Healing the index of ${describeScope({ root, namespace })}…`);
    const report = await healRoot(store, root, {
      mode: 'repair',
      namespace,
      publish: { lock: { waitMs: flags.lockWait * 1000 } },
      onEvent: eventNotes(),
      refuseEmpty: !flags.allowEmpty,
      keys: 0,
      onListed: (objects) => progress.listed(objects),
    });
    progress.stop();
    if (flags.json) printJson(repairJson(report, Date.now() - started));
    else repairLines(report).forEach(say);
    // An index left as it is (its manifest does not say its layout) is not healed: say so in the exit code.
    return report.scopes.some((s) => s.held) ? 2 : 0;
  } finally {
    store.client.destroy();
  }
}

/** A flag parser for a whole number in [min, max]. */
function wholeNumber(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < min || n > max) throw new InvalidArgumentError(`Expected a whole number from ${min} to ${max}.`);
    return n;
  };
}

function seconds(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 3600) throw new InvalidArgumentError('Expected seconds from 0 to 3600.');
  return n;
}

function folder(value: string): string {
  // An empty value would be the current folder: an unset shell variable must not hydrate into wherever one stands.
  if (value.trim() === '') throw new InvalidArgumentError('It is empty; give the path of the cache folder.');
  let info: ReturnType<typeof statSync>;
  try {
    info = statSync(value, { throwIfNoEntry: false });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new InvalidArgumentError(code === 'ENOTDIR' ? 'A part of this path is a file, not a folder.' : `It cannot be used (${code}).`);
  }
  if (info && !info.isDirectory()) throw new InvalidArgumentError('It exists and is not a folder.');
  return value;
}

/** Adds the flags that say where the datastore is. */
function withDatastoreFlags(command: Command): Command {
  return command
    .option('--config <json>', "swamp's --config for @swamp/s3-datastore: JSON with bucket, prefix, region, endpoint, forcePathStyle")
    .option('--bucket <name>', 'the bucket (overrides "bucket" in --config)')
    .option('--prefix <prefix>', 'the datastore key prefix (overrides "prefix")')
    .option('--region <region>', 'the bucket region (overrides "region"; default AWS_REGION, else us-east-1)')
    .option('--endpoint <url>', 'an S3-compatible endpoint such as MinIO or R2 (overrides "endpoint")')
    .option('--force-path-style', 'put the bucket in the URL path, as MinIO needs (overrides "forcePathStyle")')
    .option('--expected-bucket-owner <account>', 'refuse the bucket unless this AWS account owns it (S3 answers 403)')
    .option('--namespace <ns>', "only this namespace's index (a top-level folder holding .namespace.json)")
    .option('--json', 'print one JSON report on stdout instead of text');
}

const LOCK_WAIT = ['--lock-wait <seconds>', 'how long to wait for a busy datastore lock, as swamp clients do', seconds, 60] as const;
const ALLOW_EMPTY = [
  '--allow-empty',
  'create an empty index on a prefix that holds no object at all (else that is an error: a mistyped prefix)',
] as const;

/**
 * Runs a command's action: its exit code, or for any error one line on stderr (with `--json`, also a JSON
 * error object on stdout) and exit 1. DATASTORE_INDEXER_DEBUG=1 adds the stack and every cause.
 */
function action<F extends DatastoreFlags>(run: (flags: F) => Promise<number>): (flags: F) => Promise<void> {
  return async (flags) => {
    try {
      process.exitCode = await run(flags);
    } catch (err) {
      progress.stop();
      const message = err instanceof Error ? err.message : String(err);
      process.stderr.write(`${NAME}: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
      if (process.env.DATASTORE_INDEXER_DEBUG) process.stderr.write(`${debugText(err)}\n`);
      if (flags.json) printJson(errorJson(err));
      process.exitCode = 1;
    }
  };
}

/** The command line program. */
function program(): Command {
  const cli = new Command(NAME)
    .description('Keeps the index of a swamp S3 datastore (.datastore-index.json) true, whoever wrote the bucket.')
    .version(version)
    .configureOutput({ outputError: (text, write) => write(`${NAME}: ${text.replace(/^error: /, '').replace(/\n(?=.)/g, ' ')}`) })
    .addHelpText(
      'after',
      '\nExit codes: 0 done (check: every index true), 1 error or failed downloads, 2 check found drift or repair left an index as it was.\n' +
        'Credentials come from the standard AWS chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, …).',
    );

  withDatastoreFlags(
    cli
      .command('hydrate')
      .description(
        'Heal the index if it is absent, unreadable or drifted, then download every indexed object the cache lacks or holds at another size.',
      ),
  )
    .requiredOption('--cache <dir>', 'the local cache folder to fill', folder)
    .option('--concurrency <n>', `parallel downloads (default: ${DEFAULT_HYDRATE_CONCURRENCY})`, wholeNumber(1, 256))
    .option(...LOCK_WAIT)
    .option(...ALLOW_EMPTY)
    .addHelpText(
      'after',
      '\nAn interrupted hydrate resumes where it stopped. Keys that would land outside the cache folder are refused\n' +
        'with a warning and the rest is downloaded (exit 0); files that fail to download make the exit code 1.\n' +
        'With --namespace the files land in <cache>/<namespace>/ (as current swamp clients keep them) and the\n' +
        "namespace's index copy in <cache>/.datastore-index.json.",
    )
    .action(action(hydrate));

  withDatastoreFlags(
    cli
      .command('check')
      .description('Report drift between the index and the objects (missing, stale and resized entries); publish nothing.'),
  )
    .option('--keys <n>', 'keys to list of each kind', wholeNumber(0, 1_000_000), 10)
    .addHelpText(
      'after',
      '\nExit codes: 0 every index true, 2 drift found (an absent or unreadable index is drift), 1 error (a prefix that holds nothing included).',
    )
    .action(action(check));

  withDatastoreFlags(cli.command('repair').description('Heal and publish the index (and each namespace index); download nothing.'))
    .option(...LOCK_WAIT)
    .option(...ALLOW_EMPTY)
    .action(action(repair));

  return cli;
}

/** Runs the command line; the exit code is set, and the process ends once output is flushed. */
async function main(argv: readonly string[]): Promise<void> {
  // The SDK's supported switch for its "upgrade Node" notice, which is noise for a command's user.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // A lock left behind would block every client for its ttl: release ours first, then exit.
  const interrupted = (signal: NodeJS.Signals, code: number) => () => {
    progress.stop();
    process.stderr.write(`${NAME}: interrupted (${signal}); releasing the datastore lock\n`);
    void releaseHeldLocks().finally(() => {
      process.stderr.write(`${NAME}: run the same command again to resume\n`);
      process.exit(code);
    });
  };
  process.once('SIGINT', interrupted('SIGINT', 130));
  process.once('SIGTERM', interrupted('SIGTERM', 143));
  await program().parseAsync([...argv]);
}

void main(process.argv);
