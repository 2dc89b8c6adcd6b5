import { Schedule } from 'aws-cdk-lib/aws-events';
import { DatastoreIndexerPropError } from '../errors';
import { EventDelivery } from '../props';
import { validateNamespaces, validatePrefixes } from './validate';

/** One stack the app will create, read from CDK context. */
export interface IndexerStackConfig {
  /** CloudFormation stack name, derived from the bucket name. */
  readonly stackName: string;
  readonly bucketName: string;
  readonly prefixes: readonly string[];
  readonly bucketRoot?: boolean;
  readonly namespaces: readonly string[];
  readonly schedule?: Schedule;
  readonly eventDelivery?: EventDelivery;
  readonly maxConcurrency?: number;
  readonly alarmTopicArn?: string;
  readonly alarmEmail?: string;
  readonly kmsKeyArn?: string;
}

/** Context keys of one bucket, the same in `-c key=value` and in a `buckets` entry. */
const KEYS = [
  'bucketName',
  'prefixes',
  'bucketRoot',
  'namespaces',
  'schedule',
  'eventDelivery',
  'maxConcurrency',
  'alarmTopicArn',
  'alarmEmail',
  'kmsKeyArn',
] as const;

const USAGE =
  'Deploy with: npx cdk deploy -c bucketName=<shared-bucket> -c prefixes=a,b (or -c bucketRoot=true) [-c alarmEmail=ops@example.com], ' +
  'or list several buckets: -c buckets=\'[{"bucketName":"a","prefixes":["x"]},{"bucketName":"b"}]\' ' +
  '(or a "buckets" array in cdk.json context)';

/** S3's rules for (new) bucket names: 3-63 characters, lower case, digits, dots and hyphens. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The stack name for a bucket: CloudFormation allows letters, digits and hyphens only. */
export function stackNameFor(bucketName: string): string {
  return `DatastoreIndexer-${bucketName.replace(/[^A-Za-z0-9-]/g, '-')}`;
}

function optionalString(value: unknown, prop: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new DatastoreIndexerPropError(prop, `must be a string, got ${JSON.stringify(value)}`);
  return value;
}

/** A list arrives as `a,b` from the command line or as a JSON array from cdk.json. */
function parseList(value: unknown, prop: string): string[] {
  if (value === undefined || value === null || value === '') return [];
  const list = typeof value === 'string' ? value.split(',').map((p) => p.trim()) : value;
  if (!Array.isArray(list)) throw new DatastoreIndexerPropError(prop, 'must be a comma-separated string or an array of strings');
  return list as string[];
}

/** The roots from context: a value given but empty (`-c prefixes=`) is a mistake, never the bucket root. */
function parsePrefixes(value: unknown, prop: string, bucketRoot: boolean): readonly string[] {
  const blank = (typeof value === 'string' && value.trim() === '') || (Array.isArray(value) && value.length === 0);
  if (blank) {
    throw new DatastoreIndexerPropError(
      prop,
      `is empty (${JSON.stringify(value)}); list datastore roots such as -c ${prop.replace(/.*\./, '')}=swamp,infra, or leave it out and set bucketRoot=true for the bucket root`,
    );
  }
  const prefixes = validatePrefixes(parseList(value, prop), prop);
  if (!prefixes.length && !bucketRoot) {
    throw new DatastoreIndexerPropError(
      prop,
      `is missing: give -c prefixes=a,b, or -c bucketRoot=true to keep one datastore at the bucket root. ${USAGE}`,
    );
  }
  return prefixes;
}

function parseBoolean(value: unknown, prop: string): boolean | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new DatastoreIndexerPropError(prop, `must be true or false, got ${JSON.stringify(value)}`);
}

function parseSchedule(value: unknown, prop: string): Schedule | undefined {
  const expression = optionalString(value, prop);
  if (expression === undefined) return undefined;
  if (!/^(rate|cron)\(.+\)$/.test(expression)) {
    throw new DatastoreIndexerPropError(
      prop,
      `must be an EventBridge expression such as "rate(1 hour)" or "cron(0 * * * ? *)", got ${JSON.stringify(expression)}`,
    );
  }
  return Schedule.expression(expression);
}

function parseEventDelivery(value: unknown, prop: string): EventDelivery | undefined {
  const v = optionalString(value, prop);
  if (v === undefined) return undefined;
  const known = Object.values(EventDelivery) as string[];
  if (!known.includes(v)) throw new DatastoreIndexerPropError(prop, `must be one of ${known.join(', ')}, got ${JSON.stringify(v)}`);
  return v as EventDelivery;
}

/** A whole number from `-c key=3` (a string) or from cdk.json (a number); the construct checks its range. */
function optionalInteger(value: unknown, prop: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isInteger(n))
    throw new DatastoreIndexerPropError(prop, `must be a whole number, got ${JSON.stringify(value)}`);
  return n;
}

function parseBucket(entry: Record<string, unknown>, where: string): IndexerStackConfig {
  const at = (key: string): string => (where ? `${where}.${key}` : key);
  for (const key of Object.keys(entry)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new DatastoreIndexerPropError(at(key), `is not a known setting; use ${KEYS.join(', ')}`);
    }
  }
  const bucketName = optionalString(entry.bucketName, at('bucketName'));
  if (bucketName === undefined) throw new DatastoreIndexerPropError(at('bucketName'), `is missing. ${USAGE}`);
  if (!BUCKET_NAME.test(bucketName)) {
    throw new DatastoreIndexerPropError(at('bucketName'), `${JSON.stringify(bucketName)} is not an S3 bucket name`);
  }
  const bucketRoot = parseBoolean(entry.bucketRoot, at('bucketRoot'));
  const prefixes = parsePrefixes(entry.prefixes, at('prefixes'), bucketRoot === true);
  return {
    stackName: stackNameFor(bucketName),
    bucketName,
    prefixes,
    bucketRoot,
    namespaces: validateNamespaces(parseList(entry.namespaces, at('namespaces')), prefixes, at('namespaces')),
    schedule: parseSchedule(entry.schedule, at('schedule')),
    eventDelivery: parseEventDelivery(entry.eventDelivery, at('eventDelivery')),
    maxConcurrency: optionalInteger(entry.maxConcurrency, at('maxConcurrency')),
    alarmTopicArn: optionalString(entry.alarmTopicArn, at('alarmTopicArn')),
    alarmEmail: optionalString(entry.alarmEmail, at('alarmEmail')),
    kmsKeyArn: optionalString(entry.kmsKeyArn, at('kmsKeyArn')),
  };
}

/**
 * Reads the stacks to create from CDK context: either one bucket (`-c bucketName=… -c prefixes=…`)
 * or a `buckets` list (a JSON string from `-c`, or an array in cdk.json).
 *
 * @param context looks a context key up, e.g. `(k) => app.node.tryGetContext(k)`
 * @throws DatastoreIndexerPropError naming the missing or invalid context key
 */
export function readStackConfigs(context: (key: string) => unknown): IndexerStackConfig[] {
  const rawList = context('buckets');
  if (rawList === undefined || rawList === null || rawList === '') {
    const single: Record<string, unknown> = {};
    for (const key of KEYS) if (context(key) !== undefined) single[key] = context(key);
    return [parseBucket(single, '')];
  }
  const singleKeys = KEYS.filter((k) => context(k) !== undefined);
  if (singleKeys.length) {
    throw new DatastoreIndexerPropError('buckets', `cannot be combined with ${singleKeys.join(', ')}; put every bucket in the list`);
  }
  let list: unknown = rawList;
  if (typeof rawList === 'string') {
    try {
      list = JSON.parse(rawList);
    } catch (e) {
      throw new DatastoreIndexerPropError('buckets', `is not valid JSON (${(e as Error).message}). ${USAGE}`);
    }
  }
  if (!Array.isArray(list) || list.length === 0) throw new DatastoreIndexerPropError('buckets', `must be a non-empty array. ${USAGE}`);
  const configs = list.map((entry, i) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new DatastoreIndexerPropError(`buckets[${i}]`, 'must be an object such as {"bucketName":"a","prefixes":["x"]}');
    }
    return parseBucket(entry as Record<string, unknown>, `buckets[${i}]`);
  });
  const seen = new Map<string, number>();
  configs.forEach((c, i) => {
    const first = seen.get(c.stackName);
    if (first !== undefined) {
      throw new DatastoreIndexerPropError(
        `buckets[${i}].bucketName`,
        `${c.bucketName} gives the same stack name as buckets[${first}] (${c.stackName}); list each bucket once, with all its prefixes`,
      );
    }
    seen.set(c.stackName, i);
  });
  return configs;
}
