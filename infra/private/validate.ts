import { Duration, Token } from 'aws-cdk-lib';
import { Schedule } from 'aws-cdk-lib/aws-events';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { segmentProblem } from '../../lambda/lib/names';
import { DatastoreIndexerPropError } from '../errors';
import { EventDelivery, type DatastoreIndexerProps } from '../props';
import { namespaceRoot } from './s3-access';

/** The props with every default filled in, checked. */
export interface ResolvedIndexerProps {
  readonly prefixes: readonly string[];
  readonly namespaces: readonly string[];
  readonly schedule: Schedule;
  readonly batchingWindow: Duration;
  readonly maxConcurrency: number;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly logRetention: RetentionDays;
  readonly eventDelivery: EventDelivery;
}

/**
 * Characters a prefix may not hold: IAM wildcards would widen the grants, `${…}` would be read as an IAM policy
 * variable (`team${aws:username}`), a comma would split DATASTORE_PREFIXES.
 */
const FORBIDDEN = /[*?,${}\u0000-\u001f\u007f]/;

/**
 * Checks the datastore roots and returns them unchanged.
 *
 * Each prefix is used literally in S3 filters, EventBridge patterns and IAM ARNs, so anything that
 * would make those mean something else is refused here, naming the prop.
 */
export function validatePrefixes(prefixes: readonly string[], prop = 'prefixes'): readonly string[] {
  const seen = new Map<string, number>();
  prefixes.forEach((p, i) => {
    const at = `${prop}[${i}]`;
    const fail = (detail: string): never => {
      throw new DatastoreIndexerPropError(prop, `${at} ${JSON.stringify(p)} ${detail}`);
    };
    if (typeof p !== 'string') fail('must be a string');
    if (Token.isUnresolved(p)) fail('must be known at synth time, not a token');
    if (p.trim() === '') fail('is empty; list datastore roots such as "swamp", or set bucketRoot for one datastore at the bucket root');
    if (p.startsWith('/')) fail('must not start with \'/\': keys are relative to the bucket, e.g. "swamp"');
    if (p.endsWith('/')) fail("must not end with '/': write \"swamp\", the indexer adds the '/'");
    const problem = segmentProblem(p);
    if (problem) fail(`must not contain ${problem}: it would be used literally, as a key no client reads`);
    const bad = FORBIDDEN.exec(p);
    if (bad) fail(`must not contain ${JSON.stringify(bad[0])}: no '*', '?', '$', '{', '}', ',' or control characters`);
    if (p.length > 900) fail('is too long for an S3 key prefix');
    const first = seen.get(p);
    if (first !== undefined) fail(`is listed twice (also ${prop}[${first}])`);
    seen.set(p, i);
  });
  // S3 refuses two notification rules whose prefixes overlap, and one datastore root inside
  // another would be indexed twice.
  for (const a of prefixes) {
    for (const b of prefixes) {
      if (b.startsWith(`${a}/`)) {
        throw new DatastoreIndexerPropError(
          prop,
          `${prop} ${JSON.stringify(b)} lies inside ${JSON.stringify(a)}; datastore roots must not nest`,
        );
      }
    }
  }
  return prefixes;
}

/** Top-level folders that are never a namespace: swamp's data folders and its internal folders. */
const NOT_NAMESPACES = new Set([
  'data',
  'outputs',
  'definitions-evaluated',
  'workflow-runs',
  'workflows-evaluated',
  'auto-definitions',
  'audit',
  'telemetry',
  'logs',
  'files',
  '_index',
  '_control',
]);

/**
 * Checks the namespaces (`<prefix>/<namespace>`, or `<namespace>` at the bucket root) and returns them
 * unchanged. Each is used literally in IAM ARNs and in DATASTORE_NAMESPACES.
 */
export function validateNamespaces(namespaces: readonly string[], prefixes: readonly string[], prop = 'namespaces'): readonly string[] {
  const seen = new Map<string, number>();
  namespaces.forEach((entry, i) => {
    const fail = (detail: string): never => {
      throw new DatastoreIndexerPropError(prop, `${prop}[${i}] ${JSON.stringify(entry)} ${detail}`);
    };
    if (typeof entry !== 'string') fail('must be a string');
    if (Token.isUnresolved(entry)) fail('must be known at synth time, not a token');
    if (FORBIDDEN.test(entry)) fail("must not contain '*', '?', '$', '{', '}', ',' or control characters");
    const at = namespaceRoot(prefixes, entry);
    if (!at) {
      fail(
        prefixes.length
          ? `must be "<prefix>/<namespace>" with one of the prefixes (${prefixes.map((p) => JSON.stringify(p)).join(', ')}) and one folder name`
          : 'must be one folder name (the root is the bucket root)',
      );
    }
    const { namespace } = at!;
    if (namespace === '.' || namespace === '..' || namespace.startsWith('.') || NOT_NAMESPACES.has(namespace))
      fail('names a folder that is never a namespace');
    const first = seen.get(entry);
    if (first !== undefined) fail(`is listed twice (also ${prop}[${first}])`);
    seen.set(entry, i);
  });
  return namespaces;
}

function seconds(d: Duration, prop: string): number {
  if (Token.isUnresolved(d.toString())) throw new DatastoreIndexerPropError(prop, 'must be known at synth time, not a token');
  return d.toSeconds({ integral: false });
}

/**
 * The datastore roots, or none for the bucket root, which takes `bucketRoot: true`: a forgotten `prefixes` would
 * otherwise let the role read every object of the bucket.
 */
export function rootPrefixes(prefixes: readonly string[] | undefined, bucketRoot: boolean | undefined): readonly string[] {
  const list = validatePrefixes(prefixes ?? []);
  if (bucketRoot && list.length) {
    throw new DatastoreIndexerPropError('bucketRoot', 'cannot be combined with prefixes; give one or the other');
  }
  if (!bucketRoot && !list.length) {
    throw new DatastoreIndexerPropError(
      'prefixes',
      'none given; list the datastore roots (e.g. ["swamp"]), or set bucketRoot: true to keep one datastore at the bucket root (the role then reads every object of the bucket)',
    );
  }
  return list;
}

/** Fills in the defaults and fails early, naming the prop, on anything AWS would refuse at deploy time. */
export function resolveProps(props: DatastoreIndexerProps): ResolvedIndexerProps {
  const prefixes = rootPrefixes(props.prefixes, props.bucketRoot);
  const namespaces = validateNamespaces(props.namespaces ?? [], prefixes);

  const batchingWindow = props.batchingWindow ?? Duration.seconds(1);
  const window = seconds(batchingWindow, 'batchingWindow');
  // A batch larger than 10 needs a window of at least 1 s; Lambda caps the window at 300 s.
  if (!Number.isInteger(window) || window < 1 || window > 300) {
    throw new DatastoreIndexerPropError('batchingWindow', `must be a whole number of seconds from 1 to 300, got ${window}`);
  }

  const maxConcurrency = props.maxConcurrency ?? 2;
  // Lambda's bounds for an SQS event source mapping's maximum concurrency.
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 2 || maxConcurrency > 1000) {
    throw new DatastoreIndexerPropError('maxConcurrency', `must be a whole number from 2 to 1000, got ${maxConcurrency}`);
  }

  const timeout = props.timeout ?? Duration.minutes(5);
  const t = seconds(timeout, 'timeout');
  if (!Number.isInteger(t) || t < 1 || t > 900) {
    throw new DatastoreIndexerPropError('timeout', `must be a whole number of seconds from 1 to 900 (15 min), got ${t}`);
  }

  const memorySize = props.memorySize ?? 1024;
  if (!Number.isInteger(memorySize) || memorySize < 128 || memorySize > 10240) {
    throw new DatastoreIndexerPropError('memorySize', `must be a whole number of MiB from 128 to 10240, got ${memorySize}`);
  }

  const eventDelivery = props.eventDelivery ?? EventDelivery.S3_NOTIFICATIONS;
  if (!Object.values(EventDelivery).includes(eventDelivery)) {
    throw new DatastoreIndexerPropError(
      'eventDelivery',
      `must be one of ${Object.values(EventDelivery).join(', ')}, got ${String(eventDelivery)}`,
    );
  }

  return {
    prefixes,
    namespaces,
    schedule: props.schedule ?? Schedule.rate(Duration.hours(1)),
    batchingWindow,
    maxConcurrency,
    memorySize,
    timeout,
    logRetention: props.logRetention ?? RetentionDays.ONE_MONTH,
    eventDelivery,
  };
}
