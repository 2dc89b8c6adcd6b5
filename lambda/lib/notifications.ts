/** S3 event notifications and S3 EventBridge events turned into `ObjectChange`s; pure. */
import { type ObjectChange, decodeEventKey } from './events';
import { isInternalKey } from './keys';
import { rootBase } from './names';
import type { DatastoreRoot } from './scope';

/** What one message body holds: object changes, S3's test event, or something the indexer does not know. */
export type NotificationMessage =
  | { readonly kind: 'changes'; readonly source: 's3' | 'eventbridge'; readonly changes: ObjectChange[]; readonly ignored: number }
  | { readonly kind: 'test-event' }
  | { readonly kind: 'unknown'; readonly reason: string };

/** Where a change lands: its root and the key relative to that root, or why it lands nowhere. */
export type ChangePlacement =
  | { readonly status: 'root'; readonly root: DatastoreRoot; readonly rel: string }
  | { readonly status: 'internal'; readonly root: DatastoreRoot; readonly rel: string }
  | { readonly status: 'foreign-bucket' }
  | { readonly status: 'outside-roots' };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * An event time as ISO 8601 with a zone: S3 sends `…Z`, while some S3-compatible stores leave the zone
 * out (read as UTC). Fractional digits are kept as sent.
 */
export function normalizeEventTime(time: unknown): string {
  if (typeof time !== 'string' || time === '') return new Date(0).toISOString();
  return /(Z|[+-]\d\d:?\d\d)$/i.test(time) ? time : `${time}Z`;
}

function sizeOf(value: unknown): number | undefined {
  const n = typeof value === 'string' && value !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** Decodes an event key; undefined when it is not valid URL encoding (S3 never sends such a key). */
function decodedKey(encoded: string): string | undefined {
  try {
    return decodeEventKey(encoded);
  } catch {
    return undefined;
  }
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The change both event shapes describe with `bucket.name`, `object.key`, size, ETag and sequencer.
 * An S3 notification's key is URL-encoded (documented: a space arrives as `+`). An EventBridge key is
 * taken as sent (what reports of real deliveries show); where decoding it would give another key, that
 * reading rides along as `otherReading` for S3 to decide.
 */
function changeOf(
  kind: ObjectChange['kind'] | undefined,
  bucket: unknown,
  object: unknown,
  source: 's3' | 'eventbridge',
  time: unknown,
): ObjectChange | undefined {
  if (!kind || !isRecord(bucket) || !isRecord(object) || typeof object.key !== 'string' || typeof bucket.name !== 'string')
    return undefined;
  const etagField = source === 's3' ? 'eTag' : 'etag';
  let key: string | undefined = object.key;
  let otherReading: string | undefined;
  if (source === 's3') key = decodedKey(object.key);
  else {
    const decoded = decodedKey(object.key);
    if (decoded !== undefined && decoded !== object.key) otherReading = decoded;
  }
  if (key === undefined || key === '') return undefined;
  return {
    bucket: bucket.name,
    key,
    kind,
    size: kind === 'created' ? sizeOf(object.size) : undefined,
    etag: kind === 'created' ? optionalString(object[etagField]) : undefined,
    sequencer: optionalString(object.sequencer),
    eventTime: normalizeEventTime(time),
    ...(otherReading !== undefined ? { otherReading } : {}),
  };
}

/** The change of one S3 notification record (`Records[i]`), or undefined for an event kind that changes no object list. */
export function changeFromS3Record(record: unknown): ObjectChange | undefined {
  if (!isRecord(record) || !isRecord(record.s3)) return undefined;
  const name = typeof record.eventName === 'string' ? record.eventName.replace(/^s3:/, '') : '';
  const kind = name.startsWith('ObjectCreated:') ? 'created' : name.startsWith('ObjectRemoved:') ? 'removed' : undefined;
  return changeOf(kind, record.s3.bucket, record.s3.object, 's3', record.eventTime);
}

/** The change of an S3 EventBridge event ("Object Created" / "Object Deleted"), or undefined for any other event. */
export function changeFromEventBridge(event: unknown): ObjectChange | undefined {
  if (!isRecord(event) || event.source !== 'aws.s3' || !isRecord(event.detail)) return undefined;
  const type = event['detail-type'];
  const kind = type === 'Object Created' ? 'created' : type === 'Object Deleted' ? 'removed' : undefined;
  return changeOf(kind, event.detail.bucket, event.detail.object, 'eventbridge', event.time);
}

/**
 * Reads one queue message body: an S3 event notification (`{"Records":[…]}`), S3's `s3:TestEvent`,
 * or an S3 EventBridge event. Records of other event kinds (restore, tagging, …) are counted in `ignored`.
 *
 * @example
 * const message = parseNotification(sqsRecord.body);
 * if (message.kind === 'changes') for (const change of message.changes) console.log(change.kind, change.key);
 */
export function parseNotification(body: string | unknown): NotificationMessage {
  let json: unknown = body;
  if (typeof body === 'string') {
    try {
      json = JSON.parse(body);
    } catch (err) {
      return { kind: 'unknown', reason: `not JSON (${(err as Error).message})` };
    }
  }
  if (!isRecord(json)) return { kind: 'unknown', reason: 'not a JSON object' };
  if (json.Event === 's3:TestEvent') return { kind: 'test-event' };
  if (Array.isArray(json.Records)) {
    const changes: ObjectChange[] = [];
    let ignored = 0;
    for (const record of json.Records) {
      const change = changeFromS3Record(record);
      if (change) changes.push(change);
      else ignored++;
    }
    return { kind: 'changes', source: 's3', changes, ignored };
  }
  if (json.source === 'aws.s3' && typeof json['detail-type'] === 'string') {
    const change = changeFromEventBridge(json);
    return { kind: 'changes', source: 'eventbridge', changes: change ? [change] : [], ignored: change ? 0 : 1 };
  }
  return { kind: 'unknown', reason: 'neither an S3 notification nor an S3 EventBridge event' };
}

/**
 * The root a change belongs to and its root-relative key. Changes for another bucket, outside every root,
 * or to a key that is internal at the root level (index, lock, `_control/`, `_index/`, markers) land nowhere.
 * Roots do not nest, so at most one root matches. A key inside a namespace folder may still be internal
 * relative to its namespace (e.g. `<ns>/.datastore-index.json`): check it again once the namespace is known.
 */
export function placeChange(
  change: Pick<ObjectChange, 'bucket' | 'key'>,
  bucket: string,
  roots: readonly DatastoreRoot[],
): ChangePlacement {
  if (change.bucket !== bucket) return { status: 'foreign-bucket' };
  for (const root of roots) {
    const base = rootBase(root);
    if (!change.key.startsWith(base) || change.key.length === base.length) continue;
    const rel = change.key.slice(base.length);
    return { status: isInternalKey(rel) ? 'internal' : 'root', root, rel };
  }
  return { status: 'outside-roots' };
}
