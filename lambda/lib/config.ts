/** swamp's datastore config (`{bucket, prefix, region, endpoint, forcePathStyle}`), parsed and checked. */
import { ConfigError } from './errors';
import { segmentProblem } from './names';
import type { DatastoreRoot } from './scope';

/** The S3 settings a swamp client takes; credentials come from the standard AWS chain. */
export interface S3Settings {
  readonly region?: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  /**
   * The account (12 digits) that must own the bucket, sent on every request as S3's expected bucket owner, so a
   * bucket of the same name in another account is refused (403) rather than read or written. Not a key of
   * swamp's config: the Lambda takes it from `DATASTORE_BUCKET_OWNER`, the command from `--expected-bucket-owner`.
   */
  readonly expectedBucketOwner?: string;
}

/** Checks an expected bucket owner (`what` names where it came from): an AWS account id, 12 digits. */
export function checkAccountId(value: string, what: string): string {
  if (!/^\d{12}$/.test(value)) {
    throw new ConfigError(
      `${what} must be an AWS account id (12 digits), got ${JSON.stringify(value)}`,
      "Give the bucket owner's account id",
    );
  }
  return value;
}

/** swamp's `--config` for `@swamp/s3-datastore`, exactly its keys. */
export interface DatastoreConfig extends S3Settings {
  readonly bucket: string;
  readonly prefix?: string;
}

const CONFIG_KEYS = new Set(['bucket', 'prefix', 'region', 'endpoint', 'forcePathStyle']);

/** Strips slashes at both ends so `a/b/`, `/a/b` and `a/b` name the same root. */
export function normalizePrefix(prefix: string | undefined): string {
  return (prefix ?? '').replace(/^\/+|\/+$/g, '');
}

/** Validates a datastore config (parsed JSON or assembled flags) and names the bad key. */
export function parseDatastoreConfig(value: unknown): DatastoreConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError('The datastore config must be a JSON object', 'Example: {"bucket":"my-bucket","prefix":"swamp"}');
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!CONFIG_KEYS.has(key)) {
      throw new ConfigError(`Unknown datastore config key "${key}"`, `Allowed keys: ${[...CONFIG_KEYS].join(', ')}`);
    }
  }
  const str = (key: string): string | undefined => {
    const v = record[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new ConfigError(`Datastore config "${key}" must be a string`);
    return v;
  };
  const bucket = str('bucket');
  if (!bucket) throw new ConfigError('The datastore config needs a "bucket"', 'Pass --bucket or --config \'{"bucket":"…"}\'');
  const fps = record.forcePathStyle;
  if (fps !== undefined && typeof fps !== 'boolean') throw new ConfigError('Datastore config "forcePathStyle" must be true or false');
  const endpoint = str('endpoint');
  if (endpoint !== undefined && !/^https?:\/\//.test(endpoint)) {
    throw new ConfigError(`Datastore config "endpoint" must be an http(s) URL, got "${endpoint}"`);
  }
  // The SDK would send every request under that path, and the store's "no such bucket" would name the wrong fault.
  const path = endpoint === undefined ? '' : endpointPath(endpoint);
  if (path) {
    throw new ConfigError(
      `Datastore config "endpoint" must not hold a path, got "${path}" in "${endpoint}"`,
      'Give only the scheme, host and port, e.g. "http://127.0.0.1:9000"',
    );
  }
  const prefix = str('prefix');
  // S3 keeps a space as part of the key: ` swamp` is another prefix than `swamp`, almost surely a slip of the shell.
  const edge = prefix === undefined ? undefined : /^\s/.test(prefix) ? 'starts' : /\s$/.test(prefix) ? 'ends' : undefined;
  if (edge) {
    throw new ConfigError(
      `Datastore config "prefix" ${edge} with a space, got ${JSON.stringify(prefix)}: S3 keeps it, so that is another prefix than ${JSON.stringify(prefix!.trim())}`,
      'Give the prefix without spaces around it',
    );
  }
  // `swamp/../swamp` or `a//b` would be written literally as keys no client reads.
  const normalized = normalizePrefix(prefix);
  const problem = normalized === '' ? undefined : segmentProblem(normalized);
  if (problem) {
    throw new ConfigError(
      `Datastore config "prefix" must not hold ${problem}, got "${prefix}"`,
      'Give the prefix exactly as clients use it, e.g. "swamp" or "team/swamp"',
    );
  }
  const region = str('region');
  if (region !== undefined) checkRegion(region, 'Datastore config "region"');
  return { bucket, prefix, region, endpoint, forcePathStyle: fps };
}

/**
 * Checks a region name early: the SDK only finds a bad one (`eu west 1`) when it builds a request's host
 * name, and that failure looks like an outage. `auto` and other S3-compatible names pass.
 */
export function checkRegion(region: string, what: string): void {
  if (!/^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$/.test(region)) {
    throw new ConfigError(
      `${what} must be a region name such as eu-west-1 (lowercase letters, digits and hyphens), got ${JSON.stringify(region)}`,
      "Pass the bucket's region, e.g. --region eu-west-1",
    );
  }
}

/**
 * A datastore config from swamp's `--config` JSON text, with separate settings (e.g. command-line
 * flags) overriding its keys; undefined overrides are ignored. Throws `ConfigError` naming the problem.
 * @example resolveDatastoreConfig('{"bucket":"b","prefix":"swamp"}', { region: 'eu-west-1' })
 */
export function resolveDatastoreConfig(json: string | undefined, overrides: Partial<DatastoreConfig> = {}): DatastoreConfig {
  let parsed: unknown = {};
  if (json !== undefined) {
    try {
      parsed = JSON.parse(json);
    } catch (err) {
      throw new ConfigError(
        `The datastore config is not valid JSON (${(err as Error).message})`,
        'Example: {"bucket":"my-bucket","prefix":"swamp"}',
      );
    }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return parseDatastoreConfig(parsed);
  const given = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  return parseDatastoreConfig({ ...parsed, ...given });
}

/** The root a config names. */
export function rootOf(config: DatastoreConfig): DatastoreRoot {
  return { bucket: config.bucket, prefix: normalizePrefix(config.prefix) };
}

/** The path (with query) of an endpoint URL, or '' for none; an unparsable URL is left to the SDK's own error. */
function endpointPath(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    return `${url.pathname === '/' ? '' : url.pathname}${url.search}`;
  } catch {
    return '';
  }
}
