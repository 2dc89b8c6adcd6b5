/** Reading and writing the live index of a scope, in whichever layout the root uses (monolith or shards). */
import { type DatastoreIndex, type IndexEntry, emptyIndex, parseIndex, serializeIndex } from './index-file';
import { INDEX_KEY, SHARD_DIR, SHARD_META_KEY, partitionOf } from './keys';
import { listShardPartitions } from './list';
import { type IndexScope, scopeBase } from './root';
import type { S3Store, StoredObject, WriteCondition } from './s3';

/** Which index layout a scope uses. */
export type Layout = 'monolith' | 'shards';

/** The shard-first manifest; unknown fields are kept. */
export interface ShardMeta {
  version: 2;
  partitions: string[];
  commitSeq: number;
  [field: string]: unknown;
}

/** Where the shard layout's pieces stood when read: ETags by partition, and the manifest's. */
export interface ShardState {
  readonly meta: ShardMeta;
  readonly metaEtag?: string;
  readonly shardEtags: ReadonlyMap<string, string>;
  readonly byPartition: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>;
}

/** One object of an index that could not be parsed, with its bytes so a copy can be kept. */
export interface UnreadablePart {
  readonly key: string;
  readonly reason: string;
  readonly bytes: Buffer;
  readonly etag: string;
}

/**
 * The live index of a scope: absent, unreadable, or valid. Unreadable names its first bad object
 * (`key`, `bytes`, `etag`, `reason`) and lists every bad one in `parts`; `salvaged` holds the entries
 * of the shards that did parse, so their client fields survive the rebuild.
 */
export type LiveIndex =
  | { readonly state: 'absent'; readonly layout: Layout; readonly shards?: ShardState }
  | ({
      readonly state: 'unreadable';
      readonly layout: Layout;
      readonly parts: readonly UnreadablePart[];
      readonly salvaged?: DatastoreIndex;
      readonly shards?: ShardState;
    } & UnreadablePart)
  | { readonly state: 'valid'; readonly layout: Layout; readonly index: DatastoreIndex; readonly etag?: string; readonly shards?: ShardState };

/** A monolithic index as we wrote it, and the ETag S3 gave that write: read back unchanged, it is not downloaded or parsed again. */
export interface KnownIndex {
  readonly etag: string;
  readonly index: DatastoreIndex;
}

/** Full key of a scope's monolithic index. */
export function indexKeyOf(scope: IndexScope): string {
  return scopeBase(scope) + INDEX_KEY;
}

/** The index a heal builds on: the valid one, or what could be salvaged from an unreadable one. */
export function baseIndexOf(live: LiveIndex): DatastoreIndex | undefined {
  if (live.state === 'valid') return live.index;
  return live.state === 'unreadable' ? live.salvaged : undefined;
}

function parseMeta(bytes: Buffer): ShardMeta | undefined {
  try {
    const json: unknown = JSON.parse(bytes.toString('utf8'));
    if (typeof json !== 'object' || json === null) return undefined;
    const meta = json as Partial<ShardMeta>;
    if (meta.version !== 2 || !Array.isArray(meta.partitions)) return undefined;
    const partitions = meta.partitions.filter((p): p is string => typeof p === 'string');
    return { ...meta, version: 2, partitions, commitSeq: typeof meta.commitSeq === 'number' ? meta.commitSeq : 0 };
  } catch {
    return undefined;
  }
}

/** A read started before it is known to be needed: dropped, it is aborted and its failure ignored. */
interface SpeculativeRead {
  readonly result: Promise<StoredObject | undefined>;
  readonly drop: () => void;
}

function speculativeGet(store: S3Store, key: string, options: { readonly ifNoneMatch?: string }): SpeculativeRead {
  const controller = new AbortController();
  const result = store.get(key, { ...options, abortSignal: controller.signal });
  // Handled here so a dropped read never surfaces as an unhandled rejection; a used one is awaited and throws there.
  result.catch(() => undefined);
  return { result, drop: () => controller.abort() };
}

/**
 * Reads a scope's live index. A `_meta.json` of version 2 means shards; so do shard objects
 * seen in a listing (`shardPartitions`) when the manifest is missing, as clients rebuild it then.
 */
export async function readLiveIndex(
  store: S3Store,
  scope: IndexScope,
  shardPartitions?: readonly string[],
  known?: KnownIndex,
): Promise<LiveIndex> {
  const base = scopeBase(scope);
  const key = base + INDEX_KEY;
  // Still the version we wrote (same ETag): not downloaded (a conditional read) or at least not parsed again.
  const indexOptions = known ? { ifNoneMatch: known.etag } : {};
  // The monolith is read alongside the manifest (one round trip, not two) unless listed shards already
  // decide for shards; when the manifest decides for shards it is aborted, so a stale monolith is not downloaded.
  const listedShards = shardPartitions !== undefined && shardPartitions.length > 0;
  const monolith = listedShards ? undefined : speculativeGet(store, key, indexOptions);
  try {
    const metaObject = await store.get(base + SHARD_META_KEY);
    const meta = metaObject ? parseMeta(metaObject.body) : undefined;
    if (metaObject && !meta) {
      // A manifest that does not parse still marks a shard-first root if shards exist beside it.
      const partitions = shardPartitions ?? (await listShardPartitions(store, base));
      if (partitions.length > 0) {
        monolith?.drop();
        const seq = /"commitSeq"\s*:\s*(\d+)/.exec(metaObject.body.toString('utf8'));
        const rebuilt: ShardMeta = { version: 2, partitions: [...partitions].sort(), commitSeq: seq ? Number(seq[1]) : 0 };
        const shards = await readShards(store, base, rebuilt, metaObject.etag);
        const bad: UnreadablePart = { key: base + SHARD_META_KEY, reason: 'the shard manifest _meta.json is unreadable', bytes: metaObject.body, etag: metaObject.etag };
        const parts = [bad, ...(shards.state === 'unreadable' ? shards.parts : [])];
        const salvaged = shards.state === 'valid' ? shards.index : shards.state === 'unreadable' ? shards.salvaged : undefined;
        return { state: 'unreadable', layout: 'shards', ...bad, parts, salvaged, shards: shards.shards };
      }
    }
    if (meta || (!metaObject && listedShards)) {
      monolith?.drop();
      return await readShards(store, base, meta ?? { version: 2, partitions: [...shardPartitions!].sort(), commitSeq: 0 }, metaObject?.etag);
    }
  } catch (err) {
    // The manifest's error (or the shards') is the one to report, whatever became of the monolith's read.
    monolith?.drop();
    throw err;
  }
  const object = await (monolith?.result ?? store.get(key, indexOptions));
  if (!object) return { state: 'absent', layout: 'monolith' };
  if (known && (object.notModified || object.etag === known.etag)) return { state: 'valid', layout: 'monolith', index: known.index, etag: known.etag };
  const parsed = parseIndex(object.body);
  if (!parsed.ok) {
    const bad: UnreadablePart = { key, reason: parsed.reason, bytes: object.body, etag: object.etag };
    return { state: 'unreadable', layout: 'monolith', ...bad, parts: [bad] };
  }
  return { state: 'valid', layout: 'monolith', index: parsed.index, etag: object.etag };
}

async function readShards(store: S3Store, base: string, meta: ShardMeta, metaEtag: string | undefined): Promise<LiveIndex> {
  const index = emptyIndex();
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, Map<string, IndexEntry>>();
  const objects = await Promise.all(meta.partitions.map(async (p) => [p, await store.get(`${base}${SHARD_DIR}${p}.json`)] as const));
  const shards: ShardState = { meta, metaEtag, shardEtags, byPartition };
  // Every shard's ETag first: a rewrite after an unreadable shard must replace (If-Match) the shards after it too.
  for (const [partition, object] of objects) if (object) shardEtags.set(partition, object.etag);
  const parts: UnreadablePart[] = [];
  for (const [partition, object] of objects) {
    const entries = new Map<string, IndexEntry>();
    byPartition.set(partition, entries);
    if (!object) continue;
    const parsed = parseIndex(object.body);
    if (!parsed.ok) {
      parts.push({ key: `${base}${SHARD_DIR}${partition}.json`, reason: `shard ${partition}: ${parsed.reason}`, bytes: object.body, etag: object.etag });
      continue;
    }
    for (const [k, entry] of parsed.index.entries) {
      entries.set(k, entry);
      index.entries.set(k, entry);
    }
  }
  if (parts.length > 0) return { state: 'unreadable', layout: 'shards', ...parts[0], parts, salvaged: index, shards };
  return { state: 'valid', layout: 'shards', index, etag: metaEtag, shards };
}

/** The condition that replaces exactly the version we read, or creates when there was none. */
function conditionFor(etag: string | undefined): WriteCondition {
  return etag ? { ifMatch: etag } : { ifNoneMatch: '*' };
}

/** Writes `next` in the scope's layout, conditioned on what was read; 'conflict' when a write lost its race. */
export async function writeIndex(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  next: DatastoreIndex,
  conditional: boolean,
  onMonolithWritten?: (etag: string) => void,
): Promise<'written' | 'conflict'> {
  const base = scopeBase(scope);
  if (live.layout === 'monolith') {
    const etag = live.state === 'absent' ? undefined : live.etag;
    const result = await store.put(base + INDEX_KEY, serializeIndex(next), conditional ? conditionFor(etag) : undefined);
    if (result.status === 'written' && result.etag) onMonolithWritten?.(result.etag);
    return result.status;
  }
  const shards = live.shards!;
  const grouped = groupByPartition(next.entries);
  const partitions = new Set([...shards.meta.partitions, ...grouped.keys()]);
  for (const partition of [...partitions].sort()) {
    const entries = grouped.get(partition) ?? new Map<string, IndexEntry>();
    const key = `${base}${SHARD_DIR}${partition}.json`;
    const unreadable = live.state === 'unreadable' && live.parts.some((part) => part.key === key);
    if (!unreadable && sameEntries(shards.byPartition.get(partition), entries)) continue;
    const body = serializeIndex({ version: 1, entries, extra: {}, lastPulled: next.lastPulled });
    const etag = shards.shardEtags.get(partition);
    const result = await store.put(`${base}${SHARD_DIR}${partition}.json`, body, conditional ? conditionFor(etag) : undefined);
    if (result.status === 'conflict') return 'conflict';
  }
  // Clients skip a change unless commitSeq moves on, and read only the partitions listed.
  const meta: ShardMeta = { ...shards.meta, version: 2, partitions: [...partitions].sort(), commitSeq: shards.meta.commitSeq + 1 };
  const result = await store.put(base + SHARD_META_KEY, JSON.stringify(meta), conditional ? conditionFor(shards.metaEtag) : undefined);
  return result.status;
}

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
