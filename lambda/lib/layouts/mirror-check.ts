/**
 * Checking a dual-write scope's mirror: the partition files a scoped pull reads instead of the monolith,
 * compared entry by entry with the monolith's entries for each partition. A client that writes only the
 * monolith (an older one, or one whose mirror write failed) leaves them stale, and nothing else notices.
 */
import { mapLimit } from '../concurrency';
import { type DatastoreIndex, type IndexEntry, parseIndex } from '../index-file';
import { sameJson } from '../json-text';
import { partitionKeyOf } from '../names';
import type { S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import { groupByPartition } from './shards';
import type { MirrorState } from './types';

/** Which mirror files of a dual-write scope a read compares with the monolith: every one, or those of some partitions. */
export type MirrorCheck = 'all' | ReadonlySet<string>;

/** Mirror files read at once. */
const READ_CONCURRENCY = 16;

/** Reads the mirror files of `partitions`: each one's object, or undefined when it is absent. */
export async function readMirrorFiles(
  store: S3Store,
  scope: IndexScope,
  partitions: Iterable<string>,
): Promise<Map<string, StoredObject | undefined>> {
  const files = new Map<string, StoredObject | undefined>();
  await mapLimit(new Set(partitions), READ_CONCURRENCY, async (partition) => {
    files.set(partition, await store.get(partitionKeyOf(scope, partition)));
  });
  return files;
}

/**
 * The mirror of a dual-write scope held against its monolith: reads the files `check` names (with 'all',
 * those the manifest lists or a listing saw, and those of every partition that has entries), and returns
 * the mirror with the ETag each file was read at and the partitions whose file differs from the monolith.
 */
export async function checkMirror(
  store: S3Store,
  scope: IndexScope,
  mirror: MirrorState,
  index: DatastoreIndex,
  check: MirrorCheck,
  firstRead?: Promise<Map<string, StoredObject | undefined>>,
): Promise<MirrorState> {
  const grouped = groupByPartition(index.entries);
  const files = new Map(await (firstRead ?? readMirrorFiles(store, scope, check === 'all' ? mirror.files : check)));
  if (check === 'all') {
    // A partition with entries and no known file: a scoped pull finds nothing there, or a file the listing missed.
    const unread = [...grouped.keys()].filter((partition) => !files.has(partition));
    for (const [partition, object] of await readMirrorFiles(store, scope, unread)) files.set(partition, object);
  }
  const read = new Map<string, string | undefined>();
  const stale = new Set<string>();
  for (const [partition, object] of files) {
    read.set(partition, object?.etag);
    if (!mirrorFileHolds(object, grouped.get(partition))) stale.add(partition);
  }
  return { ...mirror, read, stale };
}

/** Starts reading the mirror files a check names up front, so they travel with the monolith's read. */
export function readMirrorAhead(
  store: S3Store,
  scope: IndexScope,
  mirror: MirrorState,
  check: MirrorCheck,
): Promise<Map<string, StoredObject | undefined>> {
  const read = readMirrorFiles(store, scope, check === 'all' ? mirror.files : check);
  read.catch(() => undefined);
  return read;
}

/** True when a mirror file holds exactly `entries` (none: absent, or a file with no entries). */
function mirrorFileHolds(object: StoredObject | undefined, entries: ReadonlyMap<string, IndexEntry> | undefined): boolean {
  if (!object) return !entries || entries.size === 0;
  const parsed = parseIndex(object.body);
  if (!parsed.ok) return false;
  const found = parsed.index.entries;
  if (found.size !== (entries?.size ?? 0)) return false;
  for (const [key, entry] of entries ?? []) {
    const other = found.get(key);
    if (!other || !sameEntry(entry, other)) return false;
  }
  return true;
}

/** True when two entries hold the same fields with the same values, whatever the order their fields had; values of any depth. */
function sameEntry(a: IndexEntry, b: IndexEntry): boolean {
  const fields = Object.keys(a);
  if (fields.length !== Object.keys(b).length) return false;
  return fields.every((field) => field in b && sameJson(a[field], b[field]));
}
