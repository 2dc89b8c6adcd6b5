/** The shard-first layout (manifest version 2): the partition files are the index, the manifest says which to read. */
import { type DatastoreIndex, type IndexEntry, serializeIndex } from '../index-file';
import { mapLimit } from '../concurrency';
import { UnexpectedError } from '../errors';
import { type PartitionPlace, partitionOf, partitionPlaces } from '../keys';
import { partitionKeyOf, manifestKeyOf, publishRecordKey } from '../names';
import type { S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import type { ShardMeta } from './manifest';
import { conditionFor } from './objects';
import { type FilesAhead, readShardFiles } from './shard-read';
import type { IndexWriteResult, LiveIndex, ShardState, WriteOptions } from './types';

/**
 * Reads the partition files a manifest lists (and `candidates` it does not: those that exist are orphans) into
 * one index, as clients merge them; a file that does not parse is reported unreadable, its sound entries kept.
 */
export async function readShards(
  store: S3Store,
  scope: IndexScope,
  meta: ShardMeta,
  metaObject: StoredObject,
  candidates: ReadonlySet<string>,
): Promise<LiveIndex> {
  const listed = new Set(meta.partitions);
  const partitions = [...meta.partitions, ...[...candidates].filter((p) => !listed.has(p))];
  return readShardFiles(
    store,
    scope,
    { meta, object: metaObject },
    { partitions, orphans: true, strict: false, others: true, record: true },
  );
}

/**
 * Reads the manifest's view of some partitions only (those a delta touches): their files, with ETags; the
 * publish record is left for a write to ask (see `ShardState.recordUnread`). Undefined when that is not
 * enough to write safely, and the whole index must be read (see `ShardRead.strict`). `ahead`: files
 * read before the manifest (see `readFilesAhead`).
 */
export async function readShardsPartially(
  store: S3Store,
  scope: IndexScope,
  meta: ShardMeta,
  metaObject: StoredObject,
  partitions: ReadonlySet<string>,
  ahead?: FilesAhead,
): Promise<LiveIndex | undefined> {
  return readShardFiles(
    store,
    scope,
    { meta, object: metaObject },
    { partitions: [...partitions].sort(), partial: partitions, orphans: false, strict: true, others: true, record: false, ahead },
  );
}

/**
 * Writes the changed partition files of a shard-first scope, then a manifest with a higher `commitSeq`,
 * each conditioned on the version read. After a partial read only the partitions read can change; the
 * manifest's condition makes any other writer's change since that read a lost race.
 */
export async function writeShards(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  next: DatastoreIndex,
  conditional: boolean,
  options: WriteOptions = {},
): Promise<IndexWriteResult> {
  const shards = live.shards!;
  // Entries held by partition already (a heal's chunk) are written as held: grouping them again copies them all.
  const grouped = next.entries instanceof PartitionedEntries ? next.entries.byPartition() : groupedForWrite(next, shards);
  const partitions = new Set([...shards.meta.partitions, ...shards.orphans, ...grouped.keys()]);
  const { partial } = shards;
  // A partition not read has no entries here: written, it would be emptied.
  const unread = partial ? [...grouped.keys()].filter((p) => !partial.has(p)) : [];
  if (unread.length > 0) {
    throw new UnexpectedError('writeShards', {
      name: 'UnreadPartitionWrite',
      message: `a partial shard-first read cannot write partitions it did not read: ${unread.join(', ')}`,
    });
  }
  const changed = [...(partial ?? partitions)].sort().filter((partition) => {
    const key = partitionKeyOf(scope, partition);
    const unreadable = live.state === 'unreadable' && live.parts.some((part) => part.key === key);
    return (
      unreadable ||
      shards.orphans.has(partition) ||
      shards.missing.has(partition) ||
      !sameEntries(shards.byPartition.get(partition), grouped.get(partition) ?? new Map())
    );
  });
  const recordKey = publishRecordKey(scope);
  // A record this publication left when it lost a race is its own: no earlier publish to adopt from a listing.
  const earlier = shards.intentEtag !== undefined && shards.intentEtag !== options.ownRecord;
  if (changed.length > 0 || shards.intentEtag) await options.beforeRecord?.(earlier);
  // Recorded before the first shard: a run that stops before the manifest leaves it, and the next run finishes.
  let record: string | undefined;
  if (changed.length > 0 && !shards.intentEtag) {
    const put = await store.put(
      recordKey,
      JSON.stringify({ commitSeq: shards.meta.commitSeq, startedAt: new Date().toISOString(), partitions: changed }),
    );
    if (put.status === 'written') record = put.etag;
  }
  // Shards at once, the manifest after all of them; the first lost race decides.
  let lost: string | undefined;
  const etags = new Map(shards.shardEtags);
  await mapLimit(changed, SHARD_FILES_AT_ONCE, async (partition) => {
    if (lost !== undefined) return;
    const entries = grouped.get(partition) ?? new Map<string, IndexEntry>();
    const key = partitionKeyOf(scope, partition);
    const body = serializeIndex({ version: 1, entries, extra: {}, lastPulled: next.lastPulled });
    // A file created or changed since it was read is someone's merge: never replaced unread (see `conditionFor`).
    const result = await store.put(key, body, conditional ? conditionFor(shards.shardEtags.get(partition)) : undefined);
    if (result.status === 'conflict') lost ??= key;
    else etags.set(partition, result.etag);
  });
  if (lost !== undefined) return { status: 'conflict', key: lost, record, mirrorFailures: [] };
  // Clients skip a change unless commitSeq moves on, and read only the partitions listed.
  const meta: ShardMeta = { ...shards.meta, version: 2, partitions: [...partitions].sort(), commitSeq: shards.meta.commitSeq + 1 };
  const metaKey = manifestKeyOf(scope);
  const result = await store.put(metaKey, JSON.stringify(meta), conditional ? conditionFor(shards.metaEtag) : undefined);
  if (result.status === 'conflict') return { status: 'conflict', key: metaKey, record, mirrorFailures: [] };
  // Gone or not, the manifest is written: a record left behind costs one more commitSeq, never a lost change.
  if (changed.length > 0 || shards.intentEtag) await store.delete(recordKey).catch(() => undefined);
  return { status: 'written', shardEtags: etags, shardEntries: grouped, record, mirrorFailures: [] };
}

/** `next`'s entries grouped by partition; a key no partition takes stays in the file it was read from, where clients see it. */
function groupedForWrite(next: DatastoreIndex, shards: ShardState): Map<string, Map<string, IndexEntry>> {
  const grouped = groupByPartition(next.entries);
  let placed = 0;
  for (const entries of grouped.values()) placed += entries.size;
  if (placed === next.entries.size) return grouped;
  for (const [partition, entries] of shards.byPartition) {
    for (const key of entries.keys()) {
      const entry = partitionOf(key) === undefined ? next.entries.get(key) : undefined;
      if (!entry) continue;
      const group = grouped.get(partition) ?? new Map<string, IndexEntry>();
      grouped.set(partition, group.set(key, entry));
    }
  }
  return grouped;
}

/** Partition files read or written at once by one publish: a commit of a large heal touches many. */
export const SHARD_FILES_AT_ONCE = 32;

/** Groups entries by shard partition; keys without a partition are left out (clients cannot shard them). */
export function groupByPartition(entries: ReadonlyMap<string, IndexEntry>): Map<string, Map<string, IndexEntry>> {
  const grouped = new Map<string, Map<string, IndexEntry>>();
  const place = partitionPlaces();
  // Keys come a folder at a time: the group of the last place is the usual one.
  let last: PartitionPlace | undefined;
  let group = new Map<string, IndexEntry>();
  for (const [key, entry] of entries) {
    const at = place(key);
    if (at === undefined) continue;
    if (at !== last) {
      last = at;
      group = grouped.get(at.partition) ?? new Map<string, IndexEntry>();
      grouped.set(at.partition, group);
    }
    group.set(key, entry);
  }
  return grouped;
}

/**
 * An index's entries held by partition, each partition's map the one its file is written from: what a
 * shard-first write needs, without a second map of every entry. Maps handed in are never changed: a
 * partition's is copied before its first change here. Keys without a partition are not held.
 */
export class PartitionedEntries implements Map<string, IndexEntry> {
  private readonly groups = new Map<string, ReadonlyMap<string, IndexEntry>>();
  private readonly own = new WeakSet<ReadonlyMap<string, IndexEntry>>();
  private count = 0;
  readonly [Symbol.toStringTag] = 'PartitionedEntries';

  /** `groups`: each partition's entries, held as they are (not copied); empty ones are left out. */
  constructor(groups: Iterable<readonly [string, ReadonlyMap<string, IndexEntry>]> = []) {
    for (const [partition, entries] of groups) {
      if (entries.size === 0) continue;
      this.groups.set(partition, entries);
      this.count += entries.size;
    }
  }

  /** The entries of each partition holding any, by partition (as `groupByPartition` groups them). */
  byPartition(): ReadonlyMap<string, ReadonlyMap<string, IndexEntry>> {
    return this.groups;
  }

  get size(): number {
    return this.count;
  }

  get(key: string): IndexEntry | undefined {
    const partition = partitionOf(key);
    return partition === undefined ? undefined : this.groups.get(partition)?.get(key);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  set(key: string, entry: IndexEntry): this {
    const partition = partitionOf(key);
    if (partition === undefined) {
      throw new UnexpectedError('PartitionedEntries.set', { name: 'UnshardableKey', message: `${key} has no shard partition` });
    }
    this.setIn(partition, key, entry);
    return this;
  }

  delete(key: string): boolean {
    const partition = partitionOf(key);
    return partition !== undefined && this.deleteIn(partition, key);
  }

  /** `set` for a caller that knows the key's partition (`partitionOf(key)`), without working it out again. */
  setIn(partition: string, key: string, entry: IndexEntry): void {
    const group = this.writable(partition);
    if (!group.has(key)) this.count++;
    group.set(key, entry);
  }

  /** `delete` for a caller that knows the key's partition (see `setIn`). */
  deleteIn(partition: string, key: string): boolean {
    if (!this.groups.get(partition)?.has(key)) return false;
    const group = this.writable(partition);
    group.delete(key);
    this.count--;
    if (group.size === 0) this.groups.delete(partition);
    return true;
  }

  clear(): void {
    this.groups.clear();
    this.count = 0;
  }

  forEach(fn: (entry: IndexEntry, key: string, map: Map<string, IndexEntry>) => void, self?: unknown): void {
    for (const [key, entry] of this) fn.call(self, entry, key, this);
  }

  *entries(): MapIterator<[string, IndexEntry]> {
    for (const group of this.groups.values()) yield* group;
  }

  *keys(): MapIterator<string> {
    for (const group of this.groups.values()) yield* group.keys();
  }

  *values(): MapIterator<IndexEntry> {
    for (const group of this.groups.values()) yield* group.values();
  }

  [Symbol.iterator](): MapIterator<[string, IndexEntry]> {
    return this.entries();
  }

  /** The partition's own map, copied from the one handed in before its first change. */
  private writable(partition: string): Map<string, IndexEntry> {
    const held = this.groups.get(partition);
    if (held && this.own.has(held)) return held as Map<string, IndexEntry>;
    const group = new Map(held);
    this.own.add(group);
    this.groups.set(partition, group);
    return group;
  }
}

function sameEntries(a: ReadonlyMap<string, IndexEntry> | undefined, b: ReadonlyMap<string, IndexEntry>): boolean {
  if (!a || a.size !== b.size) return false;
  for (const [key, entry] of b) if (a.get(key) !== entry) return false;
  return true;
}
