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
import type { IndexWriteResult, LiveIndex, WriteOptions } from './types';

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
  const grouped = groupByPartition(next.entries);
  let placed = 0;
  for (const entries of grouped.values()) placed += entries.size;
  // A key no partition takes has no file of its own: it stays in the file it was read from, where clients see it.
  if (placed < next.entries.size) {
    for (const [partition, entries] of shards.byPartition) {
      for (const key of entries.keys()) {
        const entry = partitionOf(key) === undefined ? next.entries.get(key) : undefined;
        if (!entry) continue;
        const group = grouped.get(partition) ?? new Map<string, IndexEntry>();
        grouped.set(partition, group.set(key, entry));
      }
    }
  }
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

function sameEntries(a: ReadonlyMap<string, IndexEntry> | undefined, b: ReadonlyMap<string, IndexEntry>): boolean {
  if (!a || a.size !== b.size) return false;
  for (const [key, entry] of b) if (a.get(key) !== entry) return false;
  return true;
}
