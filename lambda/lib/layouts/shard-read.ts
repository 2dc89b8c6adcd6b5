/**
 * The one reader of a shard-first scope's partition files (manifest version 2), and the one place their
 * `ShardState` and live index are built. A whole read, a delta's partial read and a heal's chunk differ
 * only in its options (see `readShards`, `readShardsPartially`, `readShardChunk`).
 */
import { mapLimit } from '../concurrency';
import { IndexerError } from '../errors';
import { type DatastoreIndex, type IndexEntry, emptyIndex, parseIndex } from '../index-file';
import { partitionOf } from '../keys';
import { manifestKeyOf, partitionKeyOf, publishRecordKey } from '../names';
import type { S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import { type ShardMeta, readManifest } from './manifest';
import { type LiveIndex, type ShardState, type UnreadablePart, withNewerHold } from './types';

/** One partition file as read: its entries, or why it does not parse (`bad`), or absent (no `etag`). */
export interface PartitionFile {
  readonly entries: ReadonlyMap<string, IndexEntry>;
  readonly etag?: string;
  readonly lastModified?: Date;
  readonly bad?: UnreadablePart;
}

/** A partition file as we wrote it: while its ETag stands it is not downloaded or parsed again. */
export interface KnownFile {
  readonly etag: string;
  readonly entries: ReadonlyMap<string, IndexEntry>;
}

/** How one partition file is read. */
export interface PartitionFileRead {
  readonly known?: KnownFile;
  /**
   * Entries of keys of another partition (or of none) are kept, as clients merge every file; without, they
   * are left out, as a write would leave them.
   */
  readonly others?: boolean;
  /** Stops the read (see `readFilesAhead`). */
  readonly abortSignal?: AbortSignal;
}

/** Reads one partition file (see `PartitionFileRead`); one that does not parse keeps its sound entries. */
export async function readPartitionFile(
  store: S3Store,
  scope: IndexScope,
  partition: string,
  read: PartitionFileRead = {},
): Promise<PartitionFile> {
  const { known } = read;
  const key = partitionKeyOf(scope, partition);
  const object = await store.get(key, { ifNoneMatch: known?.etag, abortSignal: read.abortSignal });
  if (!object) return { entries: new Map() };
  if (known && (object.notModified || object.etag === known.etag)) return { entries: known.entries, etag: known.etag };
  const parsed = parseIndex(object.body);
  // Filtered where it was parsed: a partition file can be the largest thing a heal by partitions holds.
  const kept = (entries: Map<string, IndexEntry>): Map<string, IndexEntry> => {
    if (!read.others) for (const k of entries.keys()) if (partitionOf(k) !== partition) entries.delete(k);
    return entries;
  };
  const found = { etag: object.etag, lastModified: object.lastModified };
  if (parsed.ok) return { entries: kept(parsed.index.entries), ...found };
  const bad = { key, reason: `shard ${partition}: ${parsed.reason}`, bytes: object.body, etag: object.etag, version: parsed.version };
  // A file whose entries are mostly sound keeps them (and their client fields) through its rewrite.
  return { entries: kept(parsed.salvaged?.entries ?? new Map<string, IndexEntry>()), ...found, bad };
}

/** Partition files read before the manifest said the scope is shard-first: `files` by partition, or `drop` them. */
export interface FilesAhead {
  readonly files: ReadonlyMap<string, Promise<PartitionFile>>;
  drop(): void;
}

/**
 * Reads these partitions' files now, as clients would (entries of other partitions kept), to be used once
 * the manifest says shard-first (see `ShardRead.ahead`); a failure surfaces only where a file is used.
 */
export function readFilesAhead(store: S3Store, scope: IndexScope, partitions: Iterable<string>): FilesAhead {
  const controller = new AbortController();
  const files = new Map<string, Promise<PartitionFile>>();
  for (const partition of partitions) {
    const file = readPartitionFile(store, scope, partition, { others: true, abortSignal: controller.signal });
    file.catch(() => undefined);
    files.set(partition, file);
  }
  return { files, drop: () => controller.abort() };
}

/** A shard-first manifest as read: what it says, and its object (ETag, time). */
export interface ShardManifest {
  readonly meta: ShardMeta;
  readonly object: StoredObject;
}

/** How `readShardFiles` reads a shard-first scope. */
export interface ShardRead {
  /** The partitions whose files are read, in this order (the first file newer than the manifest is named). */
  readonly partitions: readonly string[];
  /** Set when these partitions are the only ones read (see `ShardState.partial`); the index holds their entries alone. */
  readonly partial?: ReadonlySet<string>;
  /**
   * A file that exists and the manifest does not list is an orphan: its entries wait in `adoptable`, out of
   * the index. Without, it is read as any partition's file (and a write lists it).
   */
  readonly orphans: boolean;
  /**
   * Undefined wherever a partial read cannot be written safely, and the whole index must be read: a file
   * does not parse, one exists that the manifest does not list (an orphan is adopted only by what reads
   * every file), or one holds an entry of a partition not read (clients merge every file, so the entry
   * counts wherever it is filed; a write moves it to its own). Without, a file that does not parse is
   * reported unreadable, its sound entries kept (see `readPartitionFile`).
   */
  readonly strict: boolean;
  /** Each file's entries of other partitions are kept (see `PartitionFileRead.others`). */
  readonly others: boolean;
  /**
   * Files as we wrote them, by partition, and the index of that write: that index is the one returned when
   * every file read is still as written and they hold all of it.
   */
  readonly known?: { readonly index: DatastoreIndex; readonly files: ReadonlyMap<string, KnownFile> };
  /** The publish record is asked; without, it is left for a write to ask (see `ShardState.recordUnread`). */
  readonly record: boolean;
  /** Files read at once; all at once by default. */
  readonly atOnce?: number;
  /** Files already being read, as `others` asks (see `readFilesAhead`): used instead of reading them again. */
  readonly ahead?: FilesAhead;
}

/**
 * Reads partition files against a manifest into a shard-first live index. `manifest`: as read, or
 * `alongside`: read with the files, and the read throws when it no longer says version 2.
 */
export function readShardFiles(
  store: S3Store,
  scope: IndexScope,
  manifest: ShardManifest | 'alongside',
  read: ShardRead & { readonly strict: true },
): Promise<LiveIndex | undefined>;
export function readShardFiles(
  store: S3Store,
  scope: IndexScope,
  manifest: ShardManifest | 'alongside',
  read: ShardRead & { readonly strict: false },
): Promise<LiveIndex>;
export async function readShardFiles(
  store: S3Store,
  scope: IndexScope,
  manifest: ShardManifest | 'alongside',
  read: ShardRead,
): Promise<LiveIndex | undefined> {
  const { known, others } = read;
  const [metaObject, intent, files] = await Promise.all([
    manifest === 'alongside' ? store.get(manifestKeyOf(scope)) : manifest.object,
    read.record ? store.head(publishRecordKey(scope)) : undefined,
    mapLimit(
      read.partitions,
      read.atOnce ?? Number.POSITIVE_INFINITY,
      async (p) =>
        [p, await (read.ahead?.files.get(p) ?? readPartitionFile(store, scope, p, { known: known?.files.get(p), others }))] as const,
    ),
  ]);
  const { meta, object } = manifest === 'alongside' ? stillShardFirst(scope, metaObject) : manifest;
  // Every file still as written: the index is the one written, and a re-check of it needs no new plan.
  let held = 0;
  for (const file of known?.files.values() ?? []) held += file.entries.size;
  const unchanged = files.every(([p, file]) => file.entries === known?.files.get(p)?.entries);
  const index = known && unchanged && held === known.index.entries.size ? known.index : emptyIndex();
  const readSet = read.strict ? (read.partial ?? new Set(read.partitions)) : undefined;
  const listed = new Set(meta.partitions);
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, ReadonlyMap<string, IndexEntry>>();
  const missing = new Set<string>();
  const orphans = new Set<string>();
  const adoptable = new Map<string, IndexEntry>();
  const parts: UnreadablePart[] = [];
  let newer: string | undefined;
  for (const [partition, file] of files) {
    // A file not listed that does not exist is no orphan, and not missing either: no client was told to read it.
    const unlisted = file.etag !== undefined && !listed.has(partition);
    if (readSet && (unlisted || file.bad || holdsUnread(file.entries, partition, readSet))) return undefined;
    if (unlisted && read.orphans) orphans.add(partition);
    byPartition.set(partition, file.entries);
    // Every file's ETag: a rewrite after an unreadable file must replace (If-Match) the files after it too.
    if (file.etag !== undefined) shardEtags.set(partition, file.etag);
    else if (listed.has(partition)) missing.add(partition);
    if (file.bad) parts.push(file.bad);
    // A file written after the manifest: a publish stopped before its manifest, so clients may skip that file.
    if (file.lastModified && file.lastModified.getTime() > object.lastModified.getTime()) newer ??= partition;
    if (index === known?.index) continue;
    // What clients see is what the manifest lists; an orphan's entries only wait to be adopted.
    const into = orphans.has(partition) ? adoptable : index.entries;
    for (const [k, entry] of file.entries) into.set(k, entry);
  }
  const shards: ShardState = {
    meta,
    metaEtag: object.etag,
    shardEtags,
    byPartition,
    orphans,
    adoptable,
    missing,
    ...(read.record ? { intentEtag: intent?.etag } : { recordUnread: true }),
    ...(read.partial ? { partial: read.partial } : {}),
  };
  const pending = shardPending({ intent: intent !== undefined, missing, orphans, newer });
  if (parts.length > 0)
    return withNewerHold({ layout: 'shard-first', shards, pending, state: 'unreadable', ...parts[0], parts, salvaged: index });
  return { layout: 'shard-first', shards, pending, state: 'valid', index, etag: object.etag };
}

/** Whether a file holds an entry of a partition not read: a write would move it to its own file, which is unread. */
function holdsUnread(entries: ReadonlyMap<string, IndexEntry>, partition: string, read: ReadonlySet<string>): boolean {
  for (const k of entries.keys()) if (!read.has(partitionOf(k) ?? partition)) return true;
  return false;
}

/** The manifest read alongside a heal's files, which must still say shard-first: nothing is written otherwise. */
function stillShardFirst(scope: IndexScope, object: StoredObject | undefined): ShardManifest {
  const read = object ? readManifest(object.body) : undefined;
  if (!object || read?.kind !== 'v2') {
    throw new IndexerError(
      `The manifest ${manifestKeyOf(scope)} no longer says shard-first (version 2) while it was being healed; nothing more was written`,
      'Run the repair again',
    );
  }
  return { meta: read.meta, object };
}

/** What a read of a shard-first scope found that its layout still needs written, whatever its entries say. */
interface ShardFindings {
  /** An earlier publish left its record. */
  readonly intent: boolean;
  readonly missing: ReadonlySet<string>;
  readonly orphans: ReadonlySet<string>;
  /** A partition file written after the manifest. */
  readonly newer?: string;
}

/** Why a shard-first scope needs a write even when its entries are true (`LiveLayout.pending`), or undefined. */
function shardPending(found: ShardFindings): string | undefined {
  if (found.intent) return 'an earlier publish stopped between its shards and its manifest';
  if (found.missing.size > 0) return `partition files the manifest lists are missing: ${[...found.missing].sort().join(', ')}`;
  if (found.orphans.size > 0) return `partition files not in the manifest: ${[...found.orphans].sort().join(', ')}`;
  return found.newer === undefined ? undefined : `shard ${found.newer} is newer than the manifest`;
}
