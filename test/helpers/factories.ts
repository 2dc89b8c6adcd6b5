/**
 * Typed builders for the values the library and its faces pass around: index entries and indexes,
 * listings, object changes, lock bodies, namespace markers, shard manifests and S3/SQS events.
 *
 * Every builder takes the few fields a test cares about and fills the rest with fixed, valid
 * defaults, so a test reads as the facts it depends on instead of a pasted JSON blob.
 *
 * @example
 * const index = datastoreIndex([indexEntry('data/a/b/c/raw', { size: 3, sha256: 'ab' })]);
 * const event = s3Event([s3EventRecord({ bucket: 'b', key: 'swamp/data/a b', size: 5 })]);
 */
import type { S3Event, S3EventRecord, SQSEvent, SQSRecord } from 'aws-lambda';
import type { DatastoreIndex, IndexEntry, ListedObject } from '../../lambda/lib/index-file';
import type { LockBody } from '../../lambda/lib/lock';
import type { ObjectChange } from '../../lambda/lib/events';
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';

/** A fixed instant the builders use by default: 2026-05-04T15:20:00.000Z. */
export const T0 = '2026-05-04T15:20:00.000Z';

/** An ISO timestamp `ms` milliseconds before now (negative for the future). */
export function isoAgo(ms: number): string {
  return new Date(Date.now() - ms).toISOString();
}

/** An index entry: `{key, size: 1, lastModified: T0}` plus whatever `fields` override or add (client or unknown fields too). */
export function indexEntry(key: string, fields: Partial<IndexEntry> = {}): IndexEntry {
  return { key, size: 1, lastModified: T0, ...fields };
}

/** Options of {@link datastoreIndex}. */
export interface DatastoreIndexOptions {
  /** @default T0 */
  readonly lastPulled?: string;
  /** Top-level fields the library does not know; a rewrite must keep them. @default {} */
  readonly extra?: Record<string, unknown>;
}

/** A parsed index holding `entries` (keyed by their `key`). */
export function datastoreIndex(entries: Iterable<IndexEntry> = [], options: DatastoreIndexOptions = {}): DatastoreIndex {
  return {
    version: 1,
    lastPulled: options.lastPulled ?? T0,
    entries: new Map([...entries].map((e) => [e.key, e])),
    extra: { ...options.extra },
  };
}

/** The JSON text of an index as a swamp client writes it (pretty-printed), with optional unknown top-level fields. */
export function indexJson(entries: Iterable<IndexEntry>, extra: Record<string, unknown> = {}, lastPulled = T0): string {
  const map: Record<string, IndexEntry> = {};
  for (const entry of entries) map[entry.key] = entry;
  return JSON.stringify({ version: 1, lastPulled, ...extra, entries: map }, null, 2);
}

/** An object as a listing reports it, keyed relative to its scope. */
export function listedObject(key: string, fields: Partial<Omit<ListedObject, 'key'>> = {}): ListedObject {
  return { key, size: 1, lastModified: T0, etag: 'd41d8cd98f00b204e9800998ecf8427e', ...fields };
}

/** A listing (relative key → object) as `diffIndex`/`healIndex` take it. */
export function listingOf(objects: Iterable<ListedObject>): Map<string, ListedObject> {
  return new Map([...objects].map((o) => [o.key, o]));
}

/** An object change; by default a creation of size 1 at T0 in bucket `bucket`, without a sequencer. */
export function objectChange(key: string, fields: Partial<Omit<ObjectChange, 'key'>> = {}): ObjectChange {
  const kind = fields.kind ?? 'created';
  return {
    bucket: 'bucket',
    key,
    kind,
    eventTime: T0,
    ...(kind === 'created' ? { size: 1, etag: 'd41d8cd98f00b204e9800998ecf8427e' } : {}),
    ...fields,
  };
}

/** A lock body as a swamp client writes it into `.datastore.lock`; fresh (acquired now, ttl 30 s) by default. */
export function lockBody(fields: Partial<LockBody> = {}): LockBody {
  return {
    holder: 'swamp-cli',
    hostname: 'laptop.local',
    pid: 4242,
    acquiredAt: new Date().toISOString(),
    ttlMs: 30_000,
    nonce: 'nonce-of-another-writer',
    ...fields,
  };
}

/** The body of `<ns>/.namespace.json`. */
export function namespaceMarker(namespace: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { namespace, repoId: `repo-${namespace}`, registeredAt: T0, ...fields };
}

/** A shard-first manifest (`_index/_meta.json`). */
export function shardMeta(partitions: readonly string[], commitSeq = 1, extra: Record<string, unknown> = {}): ShardMeta {
  return { version: 2, partitions: [...partitions], commitSeq, ...extra };
}

/** The body of one shard (`_index/<partition>.json`). */
export function shardJson(entries: Iterable<IndexEntry>, lastPulled = T0): string {
  return indexJson(entries, {}, lastPulled);
}

/** Encodes an object key the way S3 event notifications do: URL-encoded, space as `+`, `/` kept. */
export function encodeEventKey(key: string): string {
  return encodeURIComponent(key).replace(/%20/g, '+').replace(/%2F/gi, '/');
}

/** What an S3 event record is about; the key is given decoded and encoded as S3 would. */
export interface S3EventRecordOptions {
  readonly bucket: string;
  /** The full object key, decoded. */
  readonly key: string;
  /** @default 'created' */
  readonly kind?: 'created' | 'removed';
  /** Size of a created object. @default 1 */
  readonly size?: number;
  /** ETag of a created object, without quotes. @default an md5-looking hex */
  readonly etag?: string;
  /** @default '0055AED6DCD90281E5' */
  readonly sequencer?: string;
  /** @default T0 */
  readonly eventTime?: string;
  /** Overrides the event name. @default 'ObjectCreated:Put' or 'ObjectRemoved:Delete' */
  readonly eventName?: string;
}

/** One S3 notification record, shaped as S3 delivers it (removals carry no size or eTag). */
export function s3EventRecord(options: S3EventRecordOptions): S3EventRecord {
  const kind = options.kind ?? 'created';
  const object = {
    key: encodeEventKey(options.key),
    sequencer: options.sequencer ?? '0055AED6DCD90281E5',
    ...(kind === 'created' ? { size: options.size ?? 1, eTag: options.etag ?? 'd41d8cd98f00b204e9800998ecf8427e' } : {}),
  } as S3EventRecord['s3']['object'];
  return {
    eventVersion: '2.1',
    eventSource: 'aws:s3',
    awsRegion: 'us-east-1',
    eventTime: options.eventTime ?? T0,
    eventName: options.eventName ?? (kind === 'created' ? 'ObjectCreated:Put' : 'ObjectRemoved:Delete'),
    userIdentity: { principalId: 'AWS:EXAMPLE' },
    requestParameters: { sourceIPAddress: '127.0.0.1' },
    responseElements: {
      'x-amz-request-id': 'C3D13FE58DE4C810',
      'x-amz-id-2': 'FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD',
    },
    s3: {
      s3SchemaVersion: '1.0',
      configurationId: 'datastore-indexer',
      bucket: { name: options.bucket, ownerIdentity: { principalId: 'EXAMPLE' }, arn: `arn:aws:s3:::${options.bucket}` },
      object,
    },
  };
}

/** An S3 event holding `records`. */
export function s3Event(records: S3EventRecord[]): S3Event {
  return { Records: records };
}

/** An SQS record whose body is `body` (an S3 event is JSON-encoded, as S3 → SQS delivers it). */
export function sqsRecord(body: S3Event | string, messageId = `msg-${Math.random().toString(36).slice(2, 10)}`): SQSRecord {
  return {
    messageId,
    receiptHandle: `handle-${messageId}`,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.parse(T0)),
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: String(Date.parse(T0)),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:datastore-indexer',
    awsRegion: 'us-east-1',
  };
}

/** An SQS event of one record per body. */
export function sqsEvent(bodies: (S3Event | string)[]): SQSEvent {
  return { Records: bodies.map((b, i) => sqsRecord(b, `msg-${i}`)) };
}
