/** The plan of one commit of a heal by partitions: the changes it kept, applied to what the partitions hold now. */
import { mapLimit } from './concurrency';
import { resizedEntry } from './drift';
import { type DatastoreIndex, type IndexEntry, cloneIndex, emptyIndex, entryFor } from './index-file';
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
 * Applies kept changes to a read of their partitions: an entry still as judged takes its change; one
 * another writer changed since (or one already changed so) is settled by what S3 says now.
 */
export function chunkPlanner(
  store: S3Store,
  scope: IndexScope,
  changes: ReadonlyMap<string, ReadonlyMap<string, Change>>,
  concurrency: number,
): (live: LiveIndex) => Promise<Plan<null>> {
  return async (live) => {
    const current = baseIndexOf(live) ?? emptyIndex();
    const next: DatastoreIndex = cloneIndex(current);
    let changed = false;
    const doubtful: string[] = [];
    for (const partitionChanges of changes.values()) {
      for (const [key, change] of partitionChanges) {
        const now = current.entries.get(key);
        if (sameEntry(now, change.after)) continue;
        if (!sameEntry(now, change.before)) {
          doubtful.push(key);
          continue;
        }
        if (change.after) next.entries.set(key, change.after);
        else next.entries.delete(key);
        changed = true;
      }
    }
    const base = scopeBase(scope);
    await mapLimit(doubtful, concurrency, async (key) => {
      const info = await store.head(base + key);
      const now = current.entries.get(key);
      if (info && now?.size === info.size) return;
      const object = info ? { key, size: info.size, lastModified: info.lastModified.toISOString() } : undefined;
      if (object) next.entries.set(key, now ? resizedEntry(now, object) : entryFor(object));
      else if (now) next.entries.delete(key);
      else return;
      changed = true;
    });
    if (!changed && live.state === 'valid' && !live.pending) return { facts: null };
    return { index: next, facts: null };
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
