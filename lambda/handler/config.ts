/** The handler's configuration, read from the environment once per cold start. */
import { INDEXER_ENV, TUNING_ENV } from '../env';
import { ConfigError } from '../lib/errors';
import type { DatastoreRoot } from '../lib/scope';
import { type MemoryBudget, memoryBudget } from '../lib/memory';
import { type S3Settings, checkAccountId, normalizePrefix } from '../lib/config';
import { segmentProblem } from '../lib/names';

/** Everything the handler takes from its environment. */
export interface HandlerConfig {
  /** `DATASTORE_BUCKET`: the shared bucket. */
  readonly bucket: string;
  /** `DATASTORE_PREFIXES`: the datastore roots, comma-separated; none means the bucket root. */
  readonly roots: readonly DatastoreRoot[];
  /**
   * `DATASTORE_NAMESPACES`: the namespaces whose index the role may write, per root prefix (`<prefix>/<ns>`
   * entries, comma-separated, as the construct's `namespaces` prop). Unset: every namespace is written.
   */
  readonly namespaces?: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * `AWS_ENDPOINT_URL_S3` and `DATASTORE_FORCE_PATH_STYLE=true`, for S3-compatible stores and tests;
   * `DATASTORE_BUCKET_OWNER`, the account every request expects to own the bucket.
   */
  readonly s3: S3Settings;
  /** `DATASTORE_QUEUE_URL`: where delayed re-checks and repair continuations are sent; without it neither is. */
  readonly queueUrl?: string;
  /** `DATASTORE_RECHECK_DELAY_SECONDS`: how long after a delta its keys are checked again. @default 30 */
  readonly recheckDelaySeconds: number;
  /**
   * `DATASTORE_FINISH_DELAY_SECONDS`: how long after a publish begins its queued finish arrives. Past the
   * indexer's lock ttl, so a killed run's lock is stale by then and the finish need not wait. @default 15
   */
  readonly finishDelaySeconds: number;
  /** `DATASTORE_LOCK_WAIT_SECONDS`: how long to wait for a client's lock before the batch items go back. @default 10 */
  readonly lockWaitMs: number;
  /** `DATASTORE_REPAIR_RESERVE_SECONDS`: a full repair stops listing when fewer seconds than this remain. @default 60 */
  readonly repairReserveMs: number;
  /** `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (set by the runtime): what a full heal may hold before it stops with `IndexTooLargeError`. */
  readonly memory: MemoryBudget;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Characters a prefix may not hold: a comma would split the list, wildcards mean nothing to S3. */
const FORBIDDEN = /[*?\u0000-\u001f\u007f]/;

function wholeNumber(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  return n;
}

/** Parses `DATASTORE_PREFIXES` into roots: trimmed, slashes stripped, none repeated or nested. */
export function parseRoots(bucket: string, raw: string | undefined): DatastoreRoot[] {
  if (raw === undefined || raw.trim() === '') return [{ bucket, prefix: '' }];
  const prefixes = raw.split(',').map((p) => p.trim());
  prefixes.forEach((p, i) => {
    if (p === '')
      throw new ConfigError(
        `DATASTORE_PREFIXES entry ${i + 1} is empty in "${raw}"`,
        'Leave DATASTORE_PREFIXES empty for the bucket root, or list prefixes like "swamp,infra"',
      );
    if (FORBIDDEN.test(p)) throw new ConfigError(`DATASTORE_PREFIXES entry "${p}" holds a wildcard or control character`);
  });
  const normalized = prefixes.map(normalizePrefix);
  normalized.forEach((p, i) => {
    if (segmentProblem(p)) throw new ConfigError(`DATASTORE_PREFIXES entry "${prefixes[i]}" is not a key prefix`);
    for (const other of normalized) {
      if (other !== p && other.startsWith(`${p}/`))
        throw new ConfigError(`DATASTORE_PREFIXES "${other}" lies inside "${p}"`, 'Datastore roots must not nest');
    }
    if (normalized.indexOf(p) !== i) throw new ConfigError(`DATASTORE_PREFIXES lists "${p}" twice`);
  });
  return normalized.map((prefix) => ({ bucket, prefix }));
}

/** Parses `DATASTORE_NAMESPACES` (`<prefix>/<ns>` or `<ns>` at the bucket root) into namespaces per root prefix. */
export function parseNamespaces(roots: readonly DatastoreRoot[], raw: string | undefined): Map<string, Set<string>> | undefined {
  if (raw === undefined) return undefined;
  const listed = new Map(roots.map((r) => [r.prefix, new Set<string>()]));
  for (const entry of raw.split(',').map((e) => e.trim())) {
    if (entry === '') continue;
    const root = roots.find((r) => (r.prefix === '' ? !entry.includes('/') : entry.startsWith(`${r.prefix}/`)));
    const ns = root ? entry.slice(root.prefix === '' ? 0 : root.prefix.length + 1) : '';
    if (!root || ns === '' || ns.includes('/') || FORBIDDEN.test(ns))
      throw new ConfigError(
        `DATASTORE_NAMESPACES entry "${entry}" is not "<prefix>/<namespace>" of a configured root`,
        'Set the construct\'s `namespaces` prop, e.g. ["swamp/team-a"]',
      );
    listed.get(root.prefix)!.add(ns);
  }
  return listed;
}

/** True when the handler may write the index of namespace `ns` of the root (listed, or no list configured). */
export function isNamespaceListed(config: HandlerConfig, root: DatastoreRoot, ns: string): boolean {
  return config.namespaces?.get(root.prefix)?.has(ns) ?? config.namespaces === undefined;
}

/**
 * Reads and checks the handler's environment; throws `ConfigError` naming the variable at fault.
 *
 * @example
 * parseConfig({ DATASTORE_BUCKET: 'shared', DATASTORE_PREFIXES: 'swamp,infra' }).roots
 * // [{ bucket: 'shared', prefix: 'swamp' }, { bucket: 'shared', prefix: 'infra' }]
 */
export function parseConfig(env: Env): HandlerConfig {
  const bucket = env[INDEXER_ENV.bucket]?.trim();
  if (!bucket) throw new ConfigError('DATASTORE_BUCKET is not set', 'Set it to the name of the shared datastore bucket');
  if (/[\s/]/.test(bucket))
    throw new ConfigError(`DATASTORE_BUCKET "${bucket}" is not a bucket name`, 'Give the name alone, without s3:// or a prefix');
  const endpoint = env[TUNING_ENV.endpoint]?.trim() || undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(endpoint)) {
    throw new ConfigError(`AWS_ENDPOINT_URL_S3 must be an http(s) URL, got "${endpoint}"`);
  }
  const pathStyle = env[TUNING_ENV.forcePathStyle]?.trim().toLowerCase();
  if (pathStyle !== undefined && pathStyle !== '' && pathStyle !== 'true' && pathStyle !== 'false') {
    throw new ConfigError(`DATASTORE_FORCE_PATH_STYLE must be "true" or "false", got "${env[TUNING_ENV.forcePathStyle]}"`);
  }
  const queueUrl = env[INDEXER_ENV.queueUrl]?.trim() || undefined;
  if (queueUrl !== undefined && !/^https?:\/\/[^\s]+$/.test(queueUrl))
    throw new ConfigError(`DATASTORE_QUEUE_URL must be a queue URL, got "${queueUrl}"`);
  const roots = parseRoots(bucket, env[INDEXER_ENV.prefixes]);
  const owner = env[INDEXER_ENV.bucketOwner]?.trim() || undefined;
  return {
    bucket,
    roots,
    namespaces: parseNamespaces(roots, env[INDEXER_ENV.namespaces]),
    s3: {
      region: env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined,
      endpoint,
      forcePathStyle: pathStyle === 'true' ? true : undefined,
      expectedBucketOwner: owner === undefined ? undefined : checkAccountId(owner, INDEXER_ENV.bucketOwner),
    },
    queueUrl,
    recheckDelaySeconds: wholeNumber(env, TUNING_ENV.recheckDelaySeconds, 30, 0, 900),
    finishDelaySeconds: wholeNumber(env, TUNING_ENV.finishDelaySeconds, 15, 0, 900),
    lockWaitMs: wholeNumber(env, TUNING_ENV.lockWaitSeconds, 10, 0, 600) * 1000,
    repairReserveMs: wholeNumber(env, TUNING_ENV.repairReserveSeconds, 60, 0, 900) * 1000,
    memory: memoryBudget(undefined, env),
  };
}
