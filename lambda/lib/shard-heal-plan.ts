/** The plan of one commit of a heal by partitions: the changes it kept, applied to what the partitions hold now. */
import { mapLimit } from './concurrency';
import { resizedEntry } from './drift';
import { type IndexEntry, emptyIndex, entryFor } from './index-file';
import { PartitionedEntries } from './layouts/shards';
import type { LiveIndex } from './layouts/types';
import { baseIndexOf } from './layouts/types';
import { scopeBase } from './names';
import type { Plan } from './publish';
import type { S3Store } from './s3';
import type { IndexScope } from './scope';

/** One entry's change: what the file held when judged, and what it should hold (undefined: no entry). */
export interface Change {
  readonly before?: IndexEntry;
  readonly after?: IndexEntry;
}

/**
 * The changes kept for one partition: entries its file lacked, each the listed object's entry, held
 * without a wrapper or a key of their own (they are most of a heal's changes); and the rest by key.
 */
export interface PartitionChanges {
  readonly added: IndexEntry[];
  readonly changed: Map<string, Change>;
}

/** The number of entries `changes` changes. */
export function changeCount(changes: PartitionChanges): number {
  return changes.added.length + changes.changed.size;
}

/**
 * Applies kept changes to a read of their partitions: an entry still as judged takes its change; one
 * another writer changed since (or one already changed so) is settled by what S3 says now. The plan's
 * index holds the partitions read, by partition: a partition that changes is copied, one that does not is
 * kept as read (see `PartitionedEntries`); a changed partition the chunk did not read reaches the write, which
 * refuses it.
 */
export function chunkPlanner(
  store: S3Store,
  scope: IndexScope,
  changes: ReadonlyMap<string, PartitionChanges>,
  concurrency: number,
): (live: LiveIndex) => Promise<Plan<null>> {
  return async (live) => {
    const current = baseIndexOf(live) ?? emptyIndex();
    const read = live.shards?.byPartition ?? new Map<string, ReadonlyMap<string, IndexEntry>>();
    const entries = new PartitionedEntries(read);
    let changed = false;
    const doubtful: [partition: string, key: string][] = [];
    for (const [partition, { added, changed: others }] of changes) {
      const file = read.get(partition);
      const apply = (key: string, before: IndexEntry | undefined, after: IndexEntry | undefined): void => {
        const now = file?.get(key);
        if (sameEntry(now, after)) return;
        if (!sameEntry(now, before)) {
          doubtful.push([partition, key]);
          return;
        }
        if (after) entries.setIn(partition, key, after);
        else entries.deleteIn(partition, key);
        changed = true;
      };
      for (const entry of added) apply(entry.key, undefined, entry);
      for (const [key, change] of others) apply(key, change.before, change.after);
    }
    const base = scopeBase(scope);
    await mapLimit(doubtful, concurrency, async ([partition, key]) => {
      const info = await store.head(base + key);
      const now = read.get(partition)?.get(key);
      if (info && now?.size === info.size) return;
      const object = info ? { key, size: info.size, lastModified: info.lastModified.toISOString() } : undefined;
      if (object) entries.setIn(partition, key, now ? resizedEntry(now, object) : entryFor(object));
      else if (now) entries.deleteIn(partition, key);
      else return;
      changed = true;
    });
    if (!changed && live.state === 'valid' && !live.pending) return { facts: null };
    return { index: { ...current, entries, extra: { ...current.extra } }, facts: null };
  };
}

/** True when two entries say the same (both absent, or the same fields a heal reads or keeps). */
function sameEntry(a: IndexEntry | undefined, b: IndexEntry | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return (
    a.size === b.size &&
    a.lastModified === b.lastModified &&
    a.sha256 === b.sha256 &&
    a.localMtime === b.localMtime &&
    Object.keys(a).length === Object.keys(b).length
  );
}
