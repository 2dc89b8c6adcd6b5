/** S3 object changes (from event notifications) folded and applied to an index; pure. */
import { resizedEntry } from './drift';
import { type DatastoreIndex, cloneIndex } from './index-file';

/** One object change taken from an S3 event; `key` is the decoded full object key. */
export interface ObjectChange {
  readonly bucket: string;
  readonly key: string;
  readonly kind: 'created' | 'removed';
  readonly size?: number;
  readonly etag?: string;
  readonly sequencer?: string;
  readonly eventTime: string;
  /**
   * The key read the other way, when the event's encoding is in doubt and the two readings differ: an
   * EventBridge key is taken as sent, and this is its URL-decoded reading. `settleKeyReadings` asks S3 which one exists.
   */
  readonly otherReading?: string;
}

/** What applying changes did to an index. */
export interface ApplyResult {
  readonly index: DatastoreIndex;
  readonly added: number;
  readonly removed: number;
  readonly resized: number;
}

/** Decodes an event's object key: S3 URL-encodes it and sends a space as `+`. */
export function decodeEventKey(encoded: string): string {
  return decodeURIComponent(encoded.replace(/\+/g, ' '));
}

/** Compares two sequencers as S3 says: hex, after left-padding to equal length. */
export function compareSequencers(a: string, b: string): number {
  const width = Math.max(a.length, b.length);
  const pa = a.toUpperCase().padStart(width, '0');
  const pb = b.toUpperCase().padStart(width, '0');
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

/** True when change `a` happened after change `b` for the same key. */
export function isLater(a: ObjectChange, b: ObjectChange): boolean {
  if (a.sequencer && b.sequencer) return compareSequencers(a.sequencer, b.sequencer) > 0;
  const ta = Date.parse(a.eventTime);
  const tb = Date.parse(b.eventTime);
  // Equal times cannot be ordered; a removal is the safer guess since a listing repairs it later.
  return ta > tb || (ta === tb && a.kind === 'removed' && b.kind === 'created');
}

/** Keeps only the latest change of each key, whatever order they came in. */
export function latestChanges(
  changes: Iterable<ObjectChange>,
  keyOf: (c: ObjectChange) => string = (c) => c.key,
): Map<string, ObjectChange> {
  const latest = new Map<string, ObjectChange>();
  for (const change of changes) {
    const key = keyOf(change);
    const seen = latest.get(key);
    if (!seen || isLater(change, seen)) latest.set(key, change);
  }
  return latest;
}

/** Applies changes keyed by relative key to an index; entries a change does not alter stay as they were. */
export function applyChanges(index: DatastoreIndex, changes: ReadonlyMap<string, ObjectChange>): ApplyResult {
  let next: DatastoreIndex | undefined;
  const writable = (): DatastoreIndex => (next ??= cloneIndex(index));
  let added = 0;
  let removed = 0;
  let resized = 0;
  for (const [rel, change] of changes) {
    const entry = (next ?? index).entries.get(rel);
    if (change.kind === 'removed') {
      if (entry) {
        writable().entries.delete(rel);
        removed++;
      }
      continue;
    }
    const size = change.size ?? 0;
    if (!entry) {
      writable().entries.set(rel, { key: rel, size, lastModified: change.eventTime });
      added++;
    } else if (entry.size !== size) {
      writable().entries.set(rel, resizedEntry(entry, { size, lastModified: change.eventTime }));
      resized++;
    }
  }
  return { index: next ?? index, added, removed, resized };
}
