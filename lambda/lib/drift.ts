/** Drift between an index and a listing, and the merge that heals it. */
import { type DatastoreIndex, type IndexEntry, type ListedObject, cloneIndex, emptyIndex, entryFor } from './index-file';
import { isInternalKey, isRefusedKey, partitionOf } from './keys';

/** An entry whose size disagrees with its object. */
export interface ResizedEntry {
  readonly key: string;
  readonly indexSize: number;
  readonly objectSize: number;
}

/** What is wrong with an index: objects it lacks, entries whose object is gone, entries of the wrong size. */
export interface Drift {
  readonly missing: string[];
  readonly stale: string[];
  readonly resized: ResizedEntry[];
}

/** Counts of a drift, for reports and logs. */
export interface DriftCounts {
  readonly missing: number;
  readonly stale: number;
  readonly resized: number;
}

/** True when the drift changes nothing. */
export function isClean(drift: Drift): boolean {
  return drift.missing.length === 0 && drift.stale.length === 0 && drift.resized.length === 0;
}

/** The counts of a drift. */
export function driftCounts(drift: Drift): DriftCounts {
  return { missing: drift.missing.length, stale: drift.stale.length, resized: drift.resized.length };
}

/** Compares index entries with the listing of their scope; keys come out sorted. */
export function diffIndex(entries: ReadonlyMap<string, IndexEntry>, listing: ReadonlyMap<string, ListedObject>): Drift {
  return diffInOrder(entries, listing) ?? diffByLookup(entries, listing);
}

/** Out-of-order keys past which the index is diffed by lookups: sorting more would cost more than they do. */
const MAX_UNSORTED_SHARE = 1 / 8;

/** Keys and their values, side by side. */
interface Columns<V> {
  readonly keys: string[];
  readonly values: V[];
}

/** True when `keys` run in strictly ascending order. */
function ascending(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1] < keys[i])) return false;
  return true;
}

/**
 * The index's keys and entries in ascending key order, when they are so already but for a short tail (a
 * client appends its new entries): the tail is sorted and merged in. Undefined for any other order.
 */
function indexInOrder(entries: ReadonlyMap<string, IndexEntry>): Columns<IndexEntry> | undefined {
  const keys = Array.from(entries.keys());
  const values = Array.from(entries.values());
  let run = 1;
  while (run < keys.length && keys[run - 1] < keys[run]) run++;
  if (run >= keys.length) return { keys, values };
  if (keys.length - run > keys.length * MAX_UNSORTED_SHARE) return undefined;
  const tail = Array.from({ length: keys.length - run }, (_, i) => run + i).sort((a, b) => (keys[a] < keys[b] ? -1 : 1));
  const merged: Columns<IndexEntry> = { keys: [], values: [] };
  let h = 0;
  let t = 0;
  while (h < run || t < tail.length) {
    const from = t >= tail.length || (h < run && keys[h] < keys[tail[t]]) ? h++ : tail[t++];
    merged.keys.push(keys[from]);
    merged.values.push(values[from]);
  }
  return ascending(merged.keys) ? merged : undefined;
}

/**
 * The diff walked side by side, when both sides' keys run in ascending order (a listing's; an index a client
 * sorted, maybe with new entries appended): a comparison per key rather than a lookup in the other map.
 * Undefined otherwise.
 */
function diffInOrder(entries: ReadonlyMap<string, IndexEntry>, listing: ReadonlyMap<string, ListedObject>): Drift | undefined {
  const listed = Array.from(listing.keys());
  if (!ascending(listed)) return undefined;
  const index = indexInOrder(entries);
  if (!index) return undefined;
  const { keys: indexed, values: held } = index;
  const objects = Array.from(listing.values());
  const missing: string[] = [];
  const stale: string[] = [];
  const resized: ResizedEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < listed.length && j < indexed.length) {
    const key = listed[i];
    if (key === indexed[j]) {
      const { size } = held[j];
      if (size !== objects[i].size) resized.push({ key, indexSize: size, objectSize: objects[i].size });
      i++;
      j++;
    } else if (key < indexed[j]) {
      missing.push(key);
      i++;
    } else stale.push(indexed[j++]);
  }
  while (i < listed.length) missing.push(listed[i++]);
  while (j < indexed.length) stale.push(indexed[j++]);
  return { missing, stale, resized };
}

/** The diff by a lookup of each key in the other map, for keys in any order. */
function diffByLookup(entries: ReadonlyMap<string, IndexEntry>, listing: ReadonlyMap<string, ListedObject>): Drift {
  const missing: string[] = [];
  const stale: string[] = [];
  const resized: ResizedEntry[] = [];
  for (const [key, object] of listing) {
    const entry = entries.get(key);
    if (!entry) missing.push(key);
    else if (entry.size !== object.size) resized.push({ key, indexSize: entry.size, objectSize: object.size });
  }
  for (const key of entries.keys()) if (!listing.has(key)) stale.push(key);
  missing.sort();
  stale.sort();
  resized.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { missing, stale, resized };
}

/**
 * Applies a drift to an index: adds missing entries, drops stale ones, fixes sizes; client fields of kept
 * entries survive, and so do those of a missing key's entry in `donors` (e.g. an orphan shard) when its size
 * matches; a missing key the listing lacks takes its donor's entry as it is.
 * An index that held nothing, healed to the whole listing, shares the listing's map (see `listingAsEntries`).
 */
export function healIndex(
  index: DatastoreIndex | undefined,
  drift: Drift,
  listing: ReadonlyMap<string, ListedObject>,
  donors?: ReadonlyMap<string, IndexEntry>,
): DatastoreIndex {
  const whole =
    !index?.entries.size &&
    !donors?.size &&
    drift.stale.length === 0 &&
    drift.resized.length === 0 &&
    drift.missing.length === listing.size;
  const shared = whole ? listingAsEntries(listing) : undefined;
  if (shared) return { ...(index ? cloneIndex(index) : emptyIndex()), entries: shared };
  const healed = index ? cloneIndex(index) : emptyIndex();
  for (const key of drift.stale) healed.entries.delete(key);
  for (const key of drift.missing) {
    const object = listing.get(key);
    const donor = donors?.get(key);
    if (object) healed.entries.set(key, donor && donor.size === object.size ? donor : entryFor(object));
    // Not listed, yet missing: a donor's entry whose object was confirmed after the listing passed it.
    else if (donor) healed.entries.set(key, donor);
  }
  for (const { key } of drift.resized) {
    const object = listing.get(key);
    const entry = healed.entries.get(key);
    if (object && entry) healed.entries.set(key, resizedEntry(entry, object));
  }
  return healed;
}

/**
 * The listing's own map as the entries of an index, when each object is exactly an entry (key, size and
 * time; no ETag kept): no copy of a root's every key. Sharing is safe because an index is never changed in
 * place (every change clones it first) and a listing is never changed once listed. Undefined otherwise.
 */
function listingAsEntries(listing: ReadonlyMap<string, ListedObject>): Map<string, IndexEntry> | undefined {
  for (const object of listing.values()) if (object.etag !== undefined) return undefined;
  return listing as Map<string, IndexEntry>;
}

/** An entry updated to a changed object: `sha256` and `localMtime` described the old bytes, so they go; unknown fields stay. */
export function resizedEntry(entry: IndexEntry, object: Pick<ListedObject, 'size' | 'lastModified'>): IndexEntry {
  const { sha256: _sha, localMtime: _mtime, ...rest } = entry;
  return { ...rest, size: object.size, lastModified: object.lastModified };
}

/**
 * The keys of orphan partition files' entries (see `ShardState.adoptable`) that neither the index nor the
 * listing holds and that were written since `since` (ms): a lockless client's upload that the listing had
 * passed, and whose file its manifest write has not listed yet. Kept when S3 confirms the object.
 */
export function recentOrphans(
  orphans: ReadonlyMap<string, IndexEntry> | undefined,
  entries: ReadonlyMap<string, IndexEntry>,
  listing: ReadonlyMap<string, ListedObject>,
  since: number,
): string[] {
  const keys: string[] = [];
  for (const [key, entry] of orphans ?? []) {
    if (entries.has(key) || listing.has(key) || partitionOf(key) === undefined || isRefusedKey(key) || isInternalKey(key)) continue;
    if (!(Date.parse(entry.lastModified) < since)) keys.push(key);
  }
  return keys.sort();
}
