/** A shard-first scope read a few partitions at a time, for a heal that goes partition by partition. */
import { IndexerError } from '../errors';
import { type IndexEntry, emptyIndex, parseIndex } from '../index-file';
import { partitionOf } from '../keys';
import { manifestKeyOf, partitionKeyOf, partitionOfFile, publishRecordKey, scopeBase, SHARD_DIR } from '../names';
import type { S3Store } from '../s3';
import type { IndexScope } from '../scope';
import { mapLimit } from '../concurrency';
import { type ShardMeta, readManifest } from './manifest';
import { SHARD_FILES_AT_ONCE, groupByPartition, shardPending } from './shards';
import { type KnownIndex, type LiveIndex, type ShardState, type UnreadablePart, withNewerHold } from './types';

/** A shard-first scope as found before a heal by partitions: its manifest, and its partition files' ETags. */
export interface ShardBase {
  readonly meta: ShardMeta;
  readonly metaEtag: string;
}

/**
 * The scope's manifest when a heal may go partition by partition: version 2, no publish record left, and
 * the partition files under `_index/` exactly those listed, none newer than the manifest. Undefined
 * otherwise: the whole read handles an unfinished publish, orphans, missing files and a bad manifest.
 */
export async function shardBaseFor(store: S3Store, scope: IndexScope): Promise<ShardBase | undefined> {
  const metaObject = await store.get(manifestKeyOf(scope));
  const read = metaObject ? readManifest(metaObject.body) : undefined;
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

/** One partition file as read: its entries, or why it does not parse, or absent. */
export interface PartitionFile {
  readonly entries: ReadonlyMap<string, IndexEntry>;
  readonly etag?: string;
  readonly lastModified?: Date;
  readonly bad?: UnreadablePart;
}

/**
 * Reads one partition file; entries of keys of another partition (or none) are left out, as a write would
 * leave them. `known`: the file as we wrote it, not downloaded or parsed again while its ETag stands.
 */
export async function readPartitionFile(
  store: S3Store,
  scope: IndexScope,
  partition: string,
  known?: { readonly etag: string; readonly entries: ReadonlyMap<string, IndexEntry> },
): Promise<PartitionFile> {
  const key = partitionKeyOf(scope, partition);
  const object = await store.get(key, { ifNoneMatch: known?.etag });
  if (!object) return { entries: new Map() };
  if (known && (object.notModified || object.etag === known.etag)) return { entries: known.entries, etag: known.etag };
  const parsed = parseIndex(object.body);
  if (!parsed.ok) {
    const bad = { key, reason: `shard ${partition}: ${parsed.reason}`, bytes: object.body, etag: object.etag, version: parsed.version };
    // A file whose entries are mostly sound keeps them (and their client fields) through its rewrite.
    const salvaged = parsed.salvaged?.entries ?? new Map<string, IndexEntry>();
    for (const k of salvaged.keys()) if (partitionOf(k) !== partition) salvaged.delete(k);
    return { entries: salvaged, etag: object.etag, lastModified: object.lastModified, bad };
  }
  // Filtered where it was parsed: a partition file can be the largest thing a heal by partitions holds.
  const entries = parsed.index.entries;
  for (const k of entries.keys()) if (partitionOf(k) !== partition) entries.delete(k);
  return { entries, etag: object.etag, lastModified: object.lastModified };
}

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
  const written = known?.shardEtags ? groupByPartition(known.index.entries) : new Map<string, Map<string, IndexEntry>>();
  const knownFiles = new Map<string, { etag: string; entries: ReadonlyMap<string, IndexEntry> }>();
  for (const p of partitions) {
    const etag = known?.shardEtags?.get(p);
    if (etag !== undefined) knownFiles.set(p, { etag, entries: written.get(p) ?? new Map() });
  }
  const [metaObject, intent, files] = await Promise.all([
    store.get(manifestKeyOf(scope)),
    store.head(publishRecordKey(scope)),
    mapLimit(
      [...partitions].sort(),
      SHARD_FILES_AT_ONCE,
      async (p) => [p, await readPartitionFile(store, scope, p, knownFiles.get(p))] as const,
    ),
  ]);
  const read = metaObject ? readManifest(metaObject.body) : undefined;
  if (!metaObject || read?.kind !== 'v2') {
    throw new IndexerError(
      `The manifest ${manifestKeyOf(scope)} no longer says shard-first (version 2) while it was being healed; nothing more was written`,
      'Run the repair again',
    );
  }
  // Every file still as written: the index is the one written, and a re-check of it needs no new plan.
  let held = 0;
  for (const file of knownFiles.values()) held += file.entries.size;
  const unchanged = files.every(([p, file]) => file.entries === knownFiles.get(p)?.entries);
  const index = known && unchanged && held === known.index.entries.size ? known.index : emptyIndex();
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, ReadonlyMap<string, IndexEntry>>();
  const missing = new Set<string>();
  const parts: UnreadablePart[] = [];
  const listed = new Set(read.meta.partitions);
  let newer: string | undefined;
  for (const [partition, file] of files) {
    byPartition.set(partition, file.entries);
    if (file.etag) shardEtags.set(partition, file.etag);
    else if (listed.has(partition)) missing.add(partition);
    if (file.bad) parts.push(file.bad);
    if (file.lastModified && file.lastModified.getTime() > metaObject.lastModified.getTime()) newer ??= partition;
    if (index !== known?.index) for (const [k, entry] of file.entries) index.entries.set(k, entry);
  }
  const shards: ShardState = {
    meta: read.meta,
    metaEtag: metaObject.etag,
    shardEtags,
    byPartition,
    orphans: new Set(),
    adoptable: new Map(),
    missing,
    intentEtag: intent?.etag,
    partial: partitions,
  };
  const pending = shardPending({ intent: intent !== undefined, missing, orphans: new Set(), newer });
  if (parts.length > 0)
    return withNewerHold({ layout: 'shard-first', shards, pending, state: 'unreadable', ...parts[0], parts, salvaged: index });
  return { layout: 'shard-first', shards, pending, state: 'valid', index, etag: metaObject.etag };
}
