/** The live index of a scope as read, in the layout clients see it in, and what a write of it reports. */
import type { DatastoreIndex, EarlyBody, IndexEntry } from '../index-file';
import type { MirrorMeta, ShardMeta } from './manifest';

/**
 * Which index layout a scope uses, decided as clients decide it, from `<scope>/_index/_meta.json` alone:
 * `shard-first` (version 2: the partition files are the index), `dual-write` (version 1: the monolith is
 * the index, the partition files mirror it) or `monolith` (no manifest, whatever partition files exist).
 */
export type Layout = 'monolith' | 'dual-write' | 'shard-first';

/** Where the shard layout's pieces stood when read: ETags by partition, and the manifest's. */
export interface ShardState {
  readonly meta: ShardMeta;
  readonly metaEtag?: string;
  readonly shardEtags: ReadonlyMap<string, string>;
  readonly byPartition: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>;
  /** Partition files that exist but the manifest does not list: adopted (rewritten with If-Match, then listed). */
  readonly orphans: ReadonlySet<string>;
  /**
   * Entries of the orphan files: clients do not see them yet, but the file may be a lockless client's merge
   * whose manifest write is still to come, so a heal merges them like any entry (see `withOrphanEntries`).
   */
  readonly adoptable: ReadonlyMap<string, IndexEntry>;
  /** Partitions the manifest lists whose file is missing (clients then fail: "index is corrupt"): written again. */
  readonly missing: ReadonlySet<string>;
  /** The ETag of the record an earlier publish left when it stopped between its shards and its manifest. */
  readonly intentEtag?: string;
  /**
   * Set when only these partitions' files were read (a delta's): the index holds their entries alone, and a
   * write keeps every other listed partition as the manifest lists it. Never the whole index: no heal uses it.
   */
  readonly partial?: ReadonlySet<string>;
  /**
   * The publish record was not asked for (a delta's partial read, which may write nothing): a publish asks
   * for it under the lock before writing, and one found has the whole index read instead.
   */
  readonly recordUnread?: boolean;
}

/** The partition files beside a monolith (dual-write, or left by a writer that died half way). */
export interface MirrorState {
  /** The version-1 manifest of a dual-write scope; undefined on a monolith. */
  readonly meta?: MirrorMeta;
  /** Partition files known to exist (listed in the manifest or seen in a listing). */
  readonly files: ReadonlySet<string>;
  /** Partitions an earlier publish meant to refresh and may not have (its record was left): refreshed by the next write. */
  readonly unfinished?: ReadonlySet<string>;
  /** The version-1 manifest's ETag as read. */
  readonly metaEtag?: string;
  /** Mirror files read and held against the monolith: the ETag each was read at, undefined when it was absent. */
  readonly read?: ReadonlyMap<string, string | undefined>;
  /** Partitions whose mirror file differs from the monolith's entries for them (missing, unparsable or other entries). */
  readonly stale?: ReadonlySet<string>;
}

/** One object of an index that could not be parsed, with its bytes so a copy can be kept. */
export interface UnreadablePart {
  readonly key: string;
  readonly reason: string;
  readonly bytes: Buffer;
  readonly etag: string;
  /** The version it says, when this indexer does not know it (see `withNewerHold`). */
  readonly version?: number;
}

/** What every read of a live index carries besides its entries. */
export interface LiveLayout {
  readonly layout: Layout;
  readonly shards?: ShardState;
  readonly mirror?: MirrorState;
  /** Why the layout needs a write even when its entries are true (an unfinished publish, an orphan shard, a manifest to rebuild). */
  readonly pending?: string;
  /** Why nothing may be written to this scope: its manifest does not parse and does not say which layout it was. */
  readonly hold?: string;
  /** A `_meta.json` that does not parse: a copy is kept before it is rebuilt (or instead, when held). */
  readonly badManifest?: UnreadablePart;
}

/**
 * The live index of a scope: absent, unreadable, or valid. Unreadable names its first bad object
 * (`key`, `bytes`, `etag`, `reason`) and lists every bad one in `parts`; `salvaged` holds the entries
 * of the shards that did parse, so their client fields survive the rebuild.
 */
export type LiveIndex =
  | (LiveLayout & { readonly state: 'absent' })
  | (LiveLayout & {
      readonly state: 'unreadable';
      readonly parts: readonly UnreadablePart[];
      readonly salvaged?: DatastoreIndex;
    } & UnreadablePart)
  | (LiveLayout & { readonly state: 'valid'; readonly index: DatastoreIndex; readonly etag?: string });

/** An index as we wrote it, and the ETags S3 gave that write: read back unchanged, it is not downloaded or parsed again. */
export interface KnownIndex {
  /** The monolith's; absent when a shard-first scope was written. */
  readonly etag?: string;
  readonly index: DatastoreIndex;
  /** Shard-first: each partition file of the write as it stands after it (written, or left as read), by partition. */
  readonly shardEtags?: ReadonlyMap<string, string>;
  /** Shard-first: the entries of those files, by partition, as the write grouped them (absent: grouped again when needed). */
  readonly shardEntries?: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>;
}

/** The index a heal builds on: the valid one, or what could be salvaged from an unreadable one. */
export function baseIndexOf(live: LiveIndex): DatastoreIndex | undefined {
  if (live.state === 'valid') return live.index;
  return live.state === 'unreadable' ? live.salvaged : undefined;
}

/**
 * The live index held when one of its files says an index version this indexer does not know: a newer
 * client wrote it, and a rebuild would write it back in an older format. Left as it is, reported.
 */
export function withNewerHold(live: LiveIndex): LiveIndex {
  if (live.state !== 'unreadable' || live.hold) return live;
  const newer = live.parts.find((p) => p.version !== undefined);
  if (!newer) return live;
  const hold = `${newer.key} says index version ${newer.version}, which this indexer does not know: a newer datastore-indexer is needed`;
  return { ...live, hold };
}

/** A partition file the mirror of a monolith could not refresh (clients treat those writes as best effort too). */
export interface MirrorFailure {
  readonly key: string;
  readonly error: string;
}

/** What any write of an index leaves, whether it won or lost its race. */
export interface IndexWriteTrace {
  /** The ETag of the publish record a shard-first write left: after a lost race it is this publication's own. */
  readonly record?: string;
  /** Mirror partition files (or the version-1 manifest) that could not be refreshed. */
  readonly mirrorFailures: readonly MirrorFailure[];
}

/**
 * How a write of an index went: written, with the versions S3 gave it (`monolithEtag`; `shardEtags`, each
 * partition file of a shard-first write as it stands after it, written or left as read), or which object's
 * conditional write lost its race.
 */
export type IndexWriteResult =
  | (IndexWriteTrace & {
      readonly status: 'written';
      readonly monolithEtag?: string;
      readonly shardEtags?: ReadonlyMap<string, string>;
      /** The entries of each partition file written or left as read, by partition (see `KnownIndex.shardEntries`). */
      readonly shardEntries?: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>;
    })
  | (IndexWriteTrace & { readonly status: 'conflict'; readonly key: string });

/** How `writeIndex` goes about a write. */
export interface WriteOptions {
  /**
   * Awaited before the first write of a publish that clients could see half done if the writer died
   * (shard-first, dual-write): from then until the publish ends its record is left for whoever finishes it.
   * `earlierRecord`: a shard-first publish found the record of an earlier one, whose partition files the
   * manifest may not list yet; only a read with a listing adopts those.
   */
  readonly beforeRecord?: (earlierRecord?: boolean) => Promise<void>;
  /** The ETag of the record this publication wrote before a lost race: read again, that record is its own, no earlier one's. */
  readonly ownRecord?: string;
  /** The monolith's bytes made while the lock was taken: written when they are of the index written. */
  readonly body?: EarlyBody;
}
