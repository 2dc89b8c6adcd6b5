/**
 * A current swamp client's push that holds no lock (the serve handler's): every index file it touches is
 * a compare-and-swap merge (read with its ETag, merge its own entries in, write with `If-Match`, or
 * `If-None-Match: *` for a new file, and on 412 read and merge again). Shard-first: the partition files,
 * then the manifest with every partition kept and `commitSeq` + 1. Dual-write: the monolith first, then
 * the partition files and the version-1 manifest. An emptied partition file is never deleted.
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import { partitionOf } from '../../lambda/lib/keys';
import { INDEX_KEY, SHARD_DIR, SHARD_META_KEY } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';

/** Which index files a lockless push writes. */
export type LocklessLayout = 'monolith' | 'dual-write' | 'shard-first';

/** Attempts of one compare-and-swap before the push gives up (a live store settles far sooner). */
const MAX_ROUNDS = 50;

/** An entry as a client writes it: the object's key and size, with the client fields an indexer must keep. */
export function clientEntry(key: string, size: number, tag = 'client'): IndexEntry {
  const now = new Date().toISOString();
  return { key, size, lastModified: now, localMtime: now, sha256: `${tag}-${key}` };
}

/**
 * Reads `key`, hands its JSON (undefined when absent) to `change`, and writes the result conditioned on
 * the version read, again from the read on a lost race. Returns the rounds it took.
 */
export async function compareAndSwap(
  store: S3Store,
  key: string,
  change: (current: Record<string, unknown> | undefined) => Record<string, unknown>,
): Promise<number> {
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const found = await store.get(key);
    const current = found ? (JSON.parse(found.body.toString('utf8')) as Record<string, unknown>) : undefined;
    const body = JSON.stringify(change(current), null, 2);
    const written = await store.put(key, body, found ? { ifMatch: found.etag } : { ifNoneMatch: '*' });
    if (written.status === 'written') return round;
  }
  throw new Error(`compare-and-swap of ${key} lost ${MAX_ROUNDS} races in a row`);
}

/** The entries of an index file's JSON with `entries` merged in (and `removed` taken out). */
function mergedEntries(
  current: Record<string, unknown> | undefined,
  entries: readonly IndexEntry[],
  removed: readonly string[],
): Record<string, unknown> {
  const merged = { ...((current?.entries as Record<string, unknown> | undefined) ?? {}) };
  for (const entry of entries) merged[entry.key] = entry;
  for (const key of removed) delete merged[key];
  return merged;
}

/** Options of a lockless push. */
export interface LocklessPush {
  /** The root's base: empty, or a prefix ending in `/`. */
  readonly base: string;
  readonly layout: LocklessLayout;
  /** Entries to merge in (their objects already uploaded). */
  readonly entries?: readonly IndexEntry[];
  /** Keys whose entries to take out (their objects already deleted). */
  readonly removed?: readonly string[];
}

/** Pushes index changes as a lockless current client does (see the module's comment). */
export async function locklessPush(store: S3Store, push: LocklessPush): Promise<void> {
  const { base, layout, entries = [], removed = [] } = push;
  if (layout !== 'shard-first') {
    await compareAndSwap(store, base + INDEX_KEY, (current) => ({
      version: 1,
      lastPulled: new Date().toISOString(),
      ...current,
      entries: mergedEntries(current, entries, removed),
    }));
  }
  if (layout === 'monolith') return;
  const touched = new Map<string, { entries: IndexEntry[]; removed: string[] }>();
  const group = (key: string) => {
    const partition = partitionOf(key);
    if (partition === undefined) return undefined;
    const found = touched.get(partition) ?? { entries: [], removed: [] };
    touched.set(partition, found);
    return found;
  };
  for (const entry of entries) group(entry.key)?.entries.push(entry);
  for (const key of removed) group(key)?.removed.push(key);
  for (const [partition, change] of touched) {
    await compareAndSwap(store, `${base}${SHARD_DIR}${partition}.json`, (current) => ({
      version: 1,
      ...current,
      entries: mergedEntries(current, change.entries, change.removed),
    }));
  }
  await compareAndSwap(store, base + SHARD_META_KEY, (current) => {
    const listed = Array.isArray(current?.partitions) ? (current.partitions as string[]) : [];
    const partitions = [...new Set([...listed, ...touched.keys()])].sort();
    if (layout === 'dual-write') return { ...current, version: 1, partitions };
    const seq = typeof current?.commitSeq === 'number' ? current.commitSeq : 0;
    return { ...current, version: 2, partitions, commitSeq: seq + 1 };
  });
}
