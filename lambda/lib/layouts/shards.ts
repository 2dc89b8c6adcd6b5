/** The shard-first layout (manifest version 2): the partition files are the index, the manifest says which to read. */
import { type DatastoreIndex, type IndexEntry, emptyIndex, parseIndex, serializeIndex } from '../index-file';
import { mapLimit } from '../concurrency';
import { partitionOf } from '../keys';
import { partitionKeyOf, manifestKeyOf, publishRecordKey } from '../names';
import type { S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import type { ShardMeta } from './manifest';
import { conditionFor } from './objects';
import type { IndexWriteResult, LiveIndex, LiveLayout, ShardState, UnreadablePart, WriteOptions } from './types';

/**
 * Reads the partition files a manifest lists (and `candidates` it does not: those that exist are orphans) into
 * one index, as clients merge them.
 */
export async function readShards(
  store: S3Store,
  scope: IndexScope,
  meta: ShardMeta,
  metaObject: StoredObject,
  candidates: ReadonlySet<string>,
): Promise<LiveIndex> {
  const index = emptyIndex();
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, Map<string, IndexEntry>>();
  const listed = new Set(meta.partitions);
  const all = [...meta.partitions, ...[...candidates].filter((p) => !listed.has(p))];
  const [intent, objects] = await Promise.all([
    store.head(publishRecordKey(scope)),
    Promise.all(all.map(async (p) => [p, await store.get(partitionKeyOf(scope, p))] as const)),
  ]);
  // A candidate with no file is no orphan, and not missing either: no client was told to read it.
  const missing = new Set(objects.filter(([p, object]) => !object && listed.has(p)).map(([partition]) => partition));
  const orphans = new Set(objects.filter(([p, object]) => object && !listed.has(p)).map(([partition]) => partition));
  const adoptable = new Map<string, IndexEntry>();
  const shards: ShardState = {
    meta,
    metaEtag: metaObject.etag,
    shardEtags,
    byPartition,
    orphans,
    adoptable,
    missing,
    intentEtag: intent?.etag,
  };
  // Every shard's ETag first: a rewrite after an unreadable shard must replace (If-Match) the shards after it too.
  for (const [partition, object] of objects) if (object) shardEtags.set(partition, object.etag);
  const parts: UnreadablePart[] = [];
  let newer: string | undefined;
  for (const [partition, object] of objects) {
    const entries = new Map<string, IndexEntry>();
    byPartition.set(partition, entries);
    if (!object) continue;
    // A shard written after the manifest: a publish stopped before its manifest, so clients may skip that shard.
    if (object.lastModified.getTime() > metaObject.lastModified.getTime()) newer ??= partition;
    const parsed = parseIndex(object.body);
    if (!parsed.ok) {
      parts.push({
        key: partitionKeyOf(scope, partition),
        reason: `shard ${partition}: ${parsed.reason}`,
        bytes: object.body,
        etag: object.etag,
        version: parsed.version,
      });
    }
    // A file whose entries are mostly sound keeps them (and their client fields) through its rewrite.
    const found = parsed.ok ? parsed.index.entries : parsed.salvaged?.entries;
    if (!found) continue;
    // What clients see is what the manifest lists; an orphan's entries only wait to be adopted.
    const into = orphans.has(partition) ? adoptable : index.entries;
    for (const [k, entry] of found) {
      entries.set(k, entry);
      into.set(k, entry);
    }
  }
  const pending = shardPending({ intent: intent !== undefined, missing, orphans, newer });
  const layout: LiveLayout = { layout: 'shard-first', shards, pending };
  if (parts.length > 0) return { ...layout, state: 'unreadable', ...parts[0], parts, salvaged: index };
  return { ...layout, state: 'valid', index, etag: metaObject.etag };
}

/** What a read of a shard-first scope found that its layout still needs written, whatever its entries say. */
export interface ShardFindings {
  /** An earlier publish left its record. */
  readonly intent: boolean;
  readonly missing: ReadonlySet<string>;
  readonly orphans: ReadonlySet<string>;
  /** A partition file written after the manifest. */
  readonly newer?: string;
}

/** Why a shard-first scope needs a write even when its entries are true (`LiveLayout.pending`), or undefined. */
export function shardPending(found: ShardFindings): string | undefined {
  if (found.intent) return 'an earlier publish stopped between its shards and its manifest';
  if (found.missing.size > 0) return `partition files the manifest lists are missing: ${[...found.missing].sort().join(', ')}`;
  if (found.orphans.size > 0) return `partition files not in the manifest: ${[...found.orphans].sort().join(', ')}`;
  return found.newer === undefined ? undefined : `shard ${found.newer} is newer than the manifest`;
}

/**
 * Reads the manifest's view of some partitions only (those a delta touches): their files, with ETags; the
 * publish record is left for a write to ask (see `ShardState.recordUnread`). Undefined when that is not
 * enough to write safely, and the whole index must be read: a touched file does not parse, one exists that
 * the manifest does not list (an orphan is adopted only by what reads every file), or one holds an entry of
 * a partition not read (clients merge every file, so the entry counts wherever it is filed; a write moves
 * it to its own).
 */
export async function readShardsPartially(
  store: S3Store,
  scope: IndexScope,
  meta: ShardMeta,
  metaObject: StoredObject,
  partitions: ReadonlySet<string>,
): Promise<LiveIndex | undefined> {
  const wanted = [...partitions].sort();
  const objects = await Promise.all(wanted.map(async (p) => [p, await store.get(partitionKeyOf(scope, p))] as const));
  const index = emptyIndex();
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, Map<string, IndexEntry>>();
  const missing = new Set<string>();
  const listed = new Set(meta.partitions);
  let newer: string | undefined;
  for (const [partition, object] of objects) {
    const entries = new Map<string, IndexEntry>();
    byPartition.set(partition, entries);
    if (!object) {
      if (listed.has(partition)) missing.add(partition);
      continue;
    }
    if (!listed.has(partition)) return undefined;
    const parsed = parseIndex(object.body);
    if (!parsed.ok) return undefined;
    // An entry filed in a partition not read would be moved to its own file on write, and that file is unread.
    for (const k of parsed.index.entries.keys()) if (!partitions.has(partitionOf(k) ?? partition)) return undefined;
    shardEtags.set(partition, object.etag);
    if (object.lastModified.getTime() > metaObject.lastModified.getTime()) newer ??= partition;
    for (const [k, entry] of parsed.index.entries) {
      entries.set(k, entry);
      index.entries.set(k, entry);
    }
  }
  const shards: ShardState = {
    meta,
    metaEtag: metaObject.etag,
    shardEtags,
    byPartition,
    orphans: new Set(),
    adoptable: new Map(),
    missing,
    partial: partitions,
    recordUnread: true,
  };
  const pending = shardPending({ intent: false, missing, orphans: new Set(), newer });
  return { layout: 'shard-first', shards, pending, state: 'valid', index, etag: metaObject.etag };
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
  if (unread.length > 0) throw new Error(`a partial shard-first read cannot write partitions it did not read: ${unread.join(', ')}`);
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
  return { status: 'written', shardEtags: etags, record, mirrorFailures: [] };
}

/** Partition files read or written at once by one publish: a commit of a large heal touches many. */
export const SHARD_FILES_AT_ONCE = 32;

/** Groups entries by shard partition; keys without a partition are left out (clients cannot shard them). */
export function groupByPartition(entries: ReadonlyMap<string, IndexEntry>): Map<string, Map<string, IndexEntry>> {
  const grouped = new Map<string, Map<string, IndexEntry>>();
  for (const [key, entry] of entries) {
    const partition = partitionOf(key);
    if (partition === undefined) continue;
    let group = grouped.get(partition);
    if (!group) {
      group = new Map();
      grouped.set(partition, group);
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
