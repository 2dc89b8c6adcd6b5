/** A shard-first scope read a few partitions at a time, for a heal that goes partition by partition. */
import type { IndexEntry } from '../index-file';
import { manifestKeyOf, partitionOfFile, publishRecordKey, scopeBase, SHARD_DIR } from '../names';
import type { S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import { type ShardMeta, readManifest } from './manifest';
import { type KnownFile, readShardFiles } from './shard-read';
import { SHARD_FILES_AT_ONCE, groupByPartition } from './shards';
import type { KnownIndex, LiveIndex } from './types';

/** A shard-first scope as found before a heal by partitions: its manifest and the manifest's ETag. */
export interface ShardBase {
  readonly meta: ShardMeta;
  readonly metaEtag: string;
}

/**
 * The scope's manifest when a heal may go partition by partition: version 2, no publish record left, and
 * the partition files under `_index/` exactly those listed, none newer than the manifest. Undefined
 * otherwise: the whole read handles an unfinished publish, orphans, missing files and a bad manifest.
 * `manifestRead` is given the manifest (undefined when absent) as soon as it is read, and whether it says
 * shard-first (version 2).
 */
export async function shardBaseFor(
  store: S3Store,
  scope: IndexScope,
  manifestRead?: (object: StoredObject | undefined, shardFirst: boolean) => void,
): Promise<ShardBase | undefined> {
  const metaObject = await store.get(manifestKeyOf(scope));
  const read = metaObject ? readManifest(metaObject.body) : undefined;
  manifestRead?.(metaObject, read?.kind === 'v2');
  if (!metaObject || read?.kind !== 'v2') return undefined;
  if (await store.head(publishRecordKey(scope))) return undefined;
  const base = scopeBase(scope);
  const listed = new Set(read.meta.partitions);
  const seen = new Set<string>();
  for await (const page of store.listPages({ prefix: base + SHARD_DIR })) {
    for (const object of page.objects) {
      const partition = partitionOfFile(object.key.slice(base.length));
      if (partition === undefined) continue;
      if (!listed.has(partition) || Date.parse(object.lastModified) > metaObject.lastModified.getTime()) return undefined;
      seen.add(partition);
    }
  }
  if (seen.size !== listed.size) return undefined;
  return { meta: read.meta, metaEtag: metaObject.etag };
}

// The file a heal by partitions reads, as the chunk read below reads it: entries of other partitions left out.
export { type PartitionFile, readPartitionFile } from './shard-read';

/**
 * Reads the manifest, the publish record and these partitions' files as a partial live index (see
 * `ShardState.partial`); unlike a delta's partial read, a file that does not parse is reported unreadable
 * (its copy is kept before it is replaced) rather than sending the read to the whole index. Throws when
 * the scope is no longer shard-first.
 */
export async function readShardChunk(
  store: S3Store,
  scope: IndexScope,
  partitions: ReadonlySet<string>,
  known?: KnownIndex,
): Promise<LiveIndex> {
  // The write's own grouping when it handed one over: grouping a chunk's entries again costs as much as the write did.
  const written: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>> = !known?.shardEtags
    ? new Map()
    : (known.shardEntries ?? groupByPartition(known.index.entries));
  const files = new Map<string, KnownFile>();
  for (const p of partitions) {
    const etag = known?.shardEtags?.get(p);
    if (etag !== undefined) files.set(p, { etag, entries: written.get(p) ?? new Map() });
  }
  return readShardFiles(store, scope, 'alongside', {
    partitions: [...partitions].sort(),
    partial: partitions,
    orphans: false,
    strict: false,
    others: false,
    known: known && { index: known.index, files },
    record: true,
    atOnce: SHARD_FILES_AT_ONCE,
  });
}
