/** Reading and writing the live index of a scope, in the layout clients see it in (monolith, dual-write or shard-first). */
import { mapLimit } from './concurrency';
import { type DatastoreIndex, type IndexEntry, emptyIndex, parseIndex, serializeIndex } from './index-file';
import { INDEXER_DIR, INDEX_KEY, SHARD_DIR, SHARD_META_KEY, indexerScopeFolder, partitionOf } from './keys';
import { listShardPartitions } from './list';
import { type IndexScope, rootBase, scopeBase } from './root';
import type { S3Store, StoredObject, WriteCondition } from './s3';

/**
 * Which index layout a scope uses, decided as clients decide it, from `<scope>/_index/_meta.json` alone:
 * `shard-first` (version 2: the partition files are the index), `dual-write` (version 1: the monolith is
 * the index, the partition files mirror it) or `monolith` (no manifest, whatever partition files exist).
 */
export type Layout = 'monolith' | 'dual-write' | 'shard-first';

/** The shard-first manifest; unknown fields are kept. */
export interface ShardMeta {
  version: 2;
  partitions: string[];
  commitSeq: number;
  [field: string]: unknown;
}

/** The dual-write manifest: which partition files mirror the monolith. */
export interface MirrorMeta {
  version: 1;
  partitions: string[];
  [field: string]: unknown;
}

/** Where the shard layout's pieces stood when read: ETags by partition, and the manifest's. */
export interface ShardState {
  readonly meta: ShardMeta;
  readonly metaEtag?: string;
  readonly shardEtags: ReadonlyMap<string, string>;
  readonly byPartition: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>;
  /** Partition files that exist but the manifest does not list: adopted (rewritten with If-Match, then listed). */
  readonly orphans: ReadonlySet<string>;
  /** Entries of the orphan files: clients do not see them, but an entry that matches its object keeps its client fields when adopted. */
  readonly adoptable: ReadonlyMap<string, IndexEntry>;
  /** Partitions the manifest lists whose file is missing (clients then fail: "index is corrupt"): written again. */
  readonly missing: ReadonlySet<string>;
  /** The ETag of the record an earlier publish left when it stopped between its shards and its manifest. */
  readonly intentEtag?: string;
}

/** The partition files beside a monolith (dual-write, or left by a writer that died half way). */
export interface MirrorState {
  /** The version-1 manifest of a dual-write scope; undefined on a monolith. */
  readonly meta?: MirrorMeta;
  /** Partition files known to exist (listed in the manifest or seen in a listing). */
  readonly files: ReadonlySet<string>;
  /** Partitions an earlier publish meant to refresh and may not have (its record was left): refreshed by the next write. */
  readonly unfinished?: ReadonlySet<string>;
}

/** One object of an index that could not be parsed, with its bytes so a copy can be kept. */
export interface UnreadablePart {
  readonly key: string;
  readonly reason: string;
  readonly bytes: Buffer;
  readonly etag: string;
}

/** What every read of a live index carries besides its entries. */
interface LiveLayout {
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

/** A monolithic index as we wrote it, and the ETag S3 gave that write: read back unchanged, it is not downloaded or parsed again. */
export interface KnownIndex {
  readonly etag: string;
  readonly index: DatastoreIndex;
}

/** Full key of a scope's monolithic index. */
export function indexKeyOf(scope: IndexScope): string {
  return scopeBase(scope) + INDEX_KEY;
}

/** Full key of the record a shard-first publish keeps while its shards are newer than its manifest. */
export function publishIntentKey(scope: IndexScope): string {
  return `${rootBase(scope.root)}${INDEXER_DIR}publishing/${indexerScopeFolder(scope.namespace)}.json`;
}

/** The index a heal builds on: the valid one, or what could be salvaged from an unreadable one. */
export function baseIndexOf(live: LiveIndex): DatastoreIndex | undefined {
  if (live.state === 'valid') return live.index;
  return live.state === 'unreadable' ? live.salvaged : undefined;
}

/** A `_meta.json` as clients read it: a manifest of version 1 or 2, `ignored` (parses, but clients take it for none), or `unparsable`. */
type ManifestRead =
  | { readonly kind: 'v2'; readonly meta: ShardMeta }
  | { readonly kind: 'v1'; readonly meta: MirrorMeta }
  | { readonly kind: 'ignored' }
  | { readonly kind: 'unparsable'; readonly reason: string };

/** Reads manifest bytes exactly as clients do: JSON with `version` 1 or 2 and a `partitions` array, else ignored; bad JSON makes them throw. */
export function readManifest(bytes: Buffer): ManifestRead {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return { kind: 'unparsable', reason: `not JSON (${(err as Error).message})` };
  }
  if (typeof json !== 'object' || json === null) return { kind: 'unparsable', reason: 'not a JSON object' };
  const meta = json as Record<string, unknown>;
  if (!Array.isArray(meta.partitions) || (meta.version !== 1 && meta.version !== 2)) return { kind: 'ignored' };
  const partitions = meta.partitions.filter((p): p is string => typeof p === 'string');
  if (meta.version === 1) return { kind: 'v1', meta: { ...meta, version: 1, partitions } };
  return { kind: 'v2', meta: { ...meta, version: 2, partitions, commitSeq: typeof meta.commitSeq === 'number' ? meta.commitSeq : 0 } };
}

/** What the bytes of an unparsable manifest still say: the version, and the commitSeq, when written plainly. */
function salvageManifest(bytes: Buffer): { version?: 1 | 2; commitSeq?: number } {
  const text = bytes.toString('utf8');
  const version = /"version"\s*:\s*([12])\b/.exec(text);
  const seq = /"commitSeq"\s*:\s*(\d{1,15})\b/.exec(text);
  return { version: version ? (Number(version[1]) as 1 | 2) : undefined, commitSeq: seq ? Number(seq[1]) : undefined };
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
 * Reads a scope's live index in the layout clients would see (see `Layout`). `shardPartitions` are the
 * partition files a listing saw under `<scope>/_index/`: on a shard-first scope the unlisted ones are
 * orphans to adopt; beside a monolith they are mirror files to keep fresh. They never decide the layout.
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
  // The monolith is read alongside the manifest (one round trip, not two); when the manifest says
  // shard-first it is aborted, so a stale monolith is not downloaded.
  const monolith = speculativeGet(store, key, indexOptions);
  let layout: LiveLayout = { layout: 'monolith' };
  try {
    const metaObject = await store.get(base + SHARD_META_KEY);
    const read = metaObject ? readManifest(metaObject.body) : undefined;
    const listed = new Set(shardPartitions ?? []);
    if (metaObject && read?.kind === 'unparsable') {
      const bad: UnreadablePart = {
        key: base + SHARD_META_KEY,
        reason: `the manifest _index/_meta.json does not parse: ${read.reason}`,
        bytes: metaObject.body,
        etag: metaObject.etag,
      };
      const salvage = salvageManifest(metaObject.body);
      const partitions = shardPartitions ?? (await listShardPartitions(store, base));
      if (salvage.version === 2 && partitions.length > 0) {
        monolith.drop();
        // No client can have seen a commitSeq it does not say; without one, a time is above any a client counted to.
        const rebuilt: ShardMeta = { version: 2, partitions: [...partitions].sort(), commitSeq: salvage.commitSeq ?? Date.now() };
        const shards = await readShards(store, scope, rebuilt, metaObject, new Set());
        const parts = [bad, ...(shards.state === 'unreadable' ? shards.parts : [])];
        const salvaged = baseIndexOf(shards);
        return {
          ...shards,
          state: 'unreadable',
          ...bad,
          parts,
          salvaged,
          badManifest: bad,
          pending: 'the manifest is rebuilt from the partition files',
        };
      }
      if (salvage.version === 1) {
        layout = {
          layout: 'dual-write',
          mirror: { meta: { version: 1, partitions: [] }, files: new Set(partitions) },
          badManifest: bad,
          pending: 'the manifest is rebuilt from the monolith',
        };
      } else {
        monolith.drop();
        const hold = `${bad.reason}, and it names no version (1 or 2) to rebuild it by`;
        return {
          state: 'unreadable',
          layout: partitions.length > 0 ? 'shard-first' : 'dual-write',
          ...bad,
          parts: [bad],
          badManifest: bad,
          hold,
        };
      }
    } else if (metaObject && read?.kind === 'v2') {
      monolith.drop();
      return await readShards(store, scope, read.meta, metaObject, new Set([...listed].filter((p) => !read.meta.partitions.includes(p))));
    } else if (read?.kind === 'v1') {
      layout = { layout: 'dual-write', mirror: { meta: read.meta, files: new Set([...read.meta.partitions, ...listed]) } };
    } else if (listed.size > 0) {
      layout = { layout: 'monolith', mirror: { files: listed } };
    }
  } catch (err) {
    // The manifest's error (or the shards') is the one to report, whatever became of the monolith's read.
    monolith.drop();
    throw err;
  }
  if (layout.mirror) layout = await withUnfinishedMirror(store, scope, layout, monolith);
  const object = await monolith.result;
  if (!object) return { ...layout, state: 'absent' };
  if (known && (object.notModified || object.etag === known.etag))
    return { ...layout, state: 'valid', index: known.index, etag: known.etag };
  const parsed = parseIndex(object.body);
  if (!parsed.ok) {
    const bad: UnreadablePart = { key, reason: parsed.reason, bytes: object.body, etag: object.etag };
    return { ...layout, state: 'unreadable', ...bad, parts: [bad] };
  }
  return { ...layout, state: 'valid', index: parsed.index, etag: object.etag };
}

/**
 * The layout beside a monolith, with the partitions whose mirror files an earlier publish recorded (before
 * its monolith write) and did not finish: a run that stopped between the two leaves stale partition files
 * that a scoped pull would read, while the monolith already looks true.
 */
async function withUnfinishedMirror(store: S3Store, scope: IndexScope, layout: LiveLayout, monolith: SpeculativeRead): Promise<LiveLayout> {
  let record: StoredObject | undefined;
  try {
    record = await store.get(publishIntentKey(scope));
  } catch (err) {
    monolith.drop();
    throw err;
  }
  if (!record) return layout;
  let partitions: string[] | undefined;
  try {
    const json = JSON.parse(record.body.toString('utf8')) as { partitions?: unknown };
    if (Array.isArray(json.partitions)) partitions = json.partitions.filter((p): p is string => typeof p === 'string');
  } catch {
    // An unreadable record: every mirror file is refreshed.
  }
  const mirror = layout.mirror!;
  const unfinished = new Set(partitions ?? [...mirror.files]);
  return {
    ...layout,
    mirror: { ...mirror, unfinished },
    pending: layout.pending ?? 'an earlier publish stopped between its index and its partition files',
  };
}

async function readShards(
  store: S3Store,
  scope: IndexScope,
  meta: ShardMeta,
  metaObject: StoredObject,
  orphans: ReadonlySet<string>,
): Promise<LiveIndex> {
  const base = scopeBase(scope);
  const index = emptyIndex();
  const shardEtags = new Map<string, string>();
  const byPartition = new Map<string, Map<string, IndexEntry>>();
  const all = [...meta.partitions, ...orphans];
  const [intent, objects] = await Promise.all([
    store.head(publishIntentKey(scope)),
    Promise.all(all.map(async (p) => [p, await store.get(`${base}${SHARD_DIR}${p}.json`)] as const)),
  ]);
  const missing = new Set(objects.filter(([, object]) => !object).map(([partition]) => partition));
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
        key: `${base}${SHARD_DIR}${partition}.json`,
        reason: `shard ${partition}: ${parsed.reason}`,
        bytes: object.body,
        etag: object.etag,
      });
      continue;
    }
    // What clients see is what the manifest lists; an orphan's entries only wait to be adopted.
    const into = orphans.has(partition) ? adoptable : index.entries;
    for (const [k, entry] of parsed.index.entries) {
      entries.set(k, entry);
      into.set(k, entry);
    }
  }
  const pending = intent
    ? 'an earlier publish stopped between its shards and its manifest'
    : missing.size > 0
      ? `partition files the manifest lists are missing: ${[...missing].sort().join(', ')}`
      : orphans.size > 0
        ? `partition files not in the manifest: ${[...orphans].sort().join(', ')}`
        : newer !== undefined
          ? `shard ${newer} is newer than the manifest`
          : undefined;
  const layout: LiveLayout = { layout: 'shard-first', shards, pending };
  if (parts.length > 0) return { ...layout, state: 'unreadable', ...parts[0], parts, salvaged: index };
  return { ...layout, state: 'valid', index, etag: metaObject.etag };
}

/** The condition that replaces exactly the version we read, or creates when there was none. */
function conditionFor(etag: string | undefined): WriteCondition {
  return etag ? { ifMatch: etag } : { ifNoneMatch: '*' };
}

/** How a write of an index went: written, or which object's conditional write lost its race. */
export type IndexWriteResult = { readonly status: 'written' } | { readonly status: 'conflict'; readonly key: string };

/** A partition file the mirror of a monolith could not refresh (clients treat those writes as best effort too). */
export interface MirrorFailure {
  readonly key: string;
  readonly error: string;
}

/** Hooks of `writeIndex`. */
export interface WriteHooks {
  /** The monolith was written and S3 gave it this ETag. */
  readonly onMonolithWritten?: (etag: string) => void;
  /** A mirror partition file or the version-1 manifest could not be written. */
  readonly onMirrorFailed?: (failure: MirrorFailure) => void;
}

/**
 * Writes `next` in the scope's layout, conditioned on what was read: the monolith (and, beside it, the
 * partition files of every partition that changed, plus the version-1 manifest of a dual-write scope, as a
 * client's push does), or the changed shards then a manifest with a higher `commitSeq`.
 */
export async function writeIndex(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  next: DatastoreIndex,
  conditional: boolean,
  hooks: WriteHooks = {},
): Promise<IndexWriteResult> {
  const base = scopeBase(scope);
  if (live.hold) throw new Error(`writeIndex called on a held scope: ${live.hold}`);
  if (live.layout !== 'shard-first') {
    const etag = live.state === 'absent' ? undefined : live.etag;
    // Grouped once, for both the partitions to refresh and their bodies; a plain monolith needs neither.
    const grouped = live.mirror ? groupByPartition(next.entries) : new Map<string, Map<string, IndexEntry>>();
    const targets = live.mirror ? mirrorTargets(live, next, grouped) : [];
    const intentKey = publishIntentKey(scope);
    // Recorded before the monolith: a run that stops before its partition files leaves it, and the next run refreshes them.
    if (targets.length > 0) await store.put(intentKey, JSON.stringify({ startedAt: new Date().toISOString(), partitions: targets }));
    const result = await store.put(base + INDEX_KEY, serializeIndex(next), conditional ? conditionFor(etag) : undefined);
    if (result.status === 'conflict') return { status: 'conflict', key: base + INDEX_KEY };
    if (result.etag) hooks.onMonolithWritten?.(result.etag);
    if (live.mirror) {
      const whole = await writeMirror(store, base, live, grouped, targets, hooks);
      // A mirror write that failed keeps the record, so the next run tries those partitions again.
      if (whole && (targets.length > 0 || live.mirror.unfinished)) await store.delete(intentKey).catch(() => undefined);
    }
    return { status: 'written' };
  }
  const shards = live.shards!;
  const grouped = groupByPartition(next.entries);
  const partitions = new Set([...shards.meta.partitions, ...shards.orphans, ...grouped.keys()]);
  const changed = [...partitions].sort().filter((partition) => {
    const key = `${base}${SHARD_DIR}${partition}.json`;
    const unreadable = live.state === 'unreadable' && live.parts.some((part) => part.key === key);
    return (
      unreadable ||
      shards.orphans.has(partition) ||
      shards.missing.has(partition) ||
      !sameEntries(shards.byPartition.get(partition), grouped.get(partition) ?? new Map())
    );
  });
  const intentKey = publishIntentKey(scope);
  // Recorded before the first shard: a run that stops before the manifest leaves it, and the next run finishes.
  if (changed.length > 0 && !shards.intentEtag) {
    await store.put(
      intentKey,
      JSON.stringify({ commitSeq: shards.meta.commitSeq, startedAt: new Date().toISOString(), partitions: changed }),
    );
  }
  for (const partition of changed) {
    const entries = grouped.get(partition) ?? new Map<string, IndexEntry>();
    const key = `${base}${SHARD_DIR}${partition}.json`;
    const body = serializeIndex({ version: 1, entries, extra: {}, lastPulled: next.lastPulled });
    const status = await putAdopting(store, key, body, conditional ? conditionFor(shards.shardEtags.get(partition)) : undefined);
    if (status === 'conflict') return { status: 'conflict', key };
  }
  // Clients skip a change unless commitSeq moves on, and read only the partitions listed.
  const meta: ShardMeta = { ...shards.meta, version: 2, partitions: [...partitions].sort(), commitSeq: shards.meta.commitSeq + 1 };
  const metaKey = base + SHARD_META_KEY;
  const result = await store.put(metaKey, JSON.stringify(meta), conditional ? conditionFor(shards.metaEtag) : undefined);
  if (result.status === 'conflict') return { status: 'conflict', key: metaKey };
  // Gone or not, the manifest is written: a record left behind costs one more commitSeq, never a lost change.
  if (changed.length > 0 || shards.intentEtag) await store.delete(intentKey).catch(() => undefined);
  return { status: 'written' };
}

/**
 * A conditional write that adopts what it finds: a create (`If-None-Match`) that loses because the object
 * exists (an orphan left by a writer that died) is retried as a replace of exactly that version.
 */
async function putAdopting(
  store: S3Store,
  key: string,
  body: Buffer,
  condition: WriteCondition | undefined,
): Promise<'written' | 'conflict'> {
  const result = await store.put(key, body, condition);
  if (result.status === 'written' || !condition || !('ifNoneMatch' in condition)) return result.status;
  const existing = await store.head(key);
  if (!existing) return 'conflict';
  return (await store.put(key, body, { ifMatch: existing.etag })).status;
}

/** The partitions whose entries differ between two indexes (all of them when there was no readable index before). */
function touchedPartitions(before: DatastoreIndex | undefined, next: DatastoreIndex): Set<string> {
  const touched = new Set<string>();
  const note = (key: string): void => {
    const partition = partitionOf(key);
    if (partition !== undefined) touched.add(partition);
  };
  if (!before) {
    for (const key of next.entries.keys()) note(key);
    return touched;
  }
  for (const [key, entry] of next.entries) if (before.entries.get(key) !== entry) note(key);
  for (const key of before.entries.keys()) if (!next.entries.has(key)) note(key);
  return touched;
}

/**
 * Refreshes the partition files beside a monolith as a client's push does: each touched partition's file
 * (`{version: 1, entries}`), then for dual-write the version-1 manifest listing every partition. Best effort,
 * as for clients (the monolith is the truth); a failure is reported through `onMirrorFailed`.
 * Beside a plain monolith only partition files that already exist are refreshed, and no manifest is made.
 */
async function writeMirror(
  store: S3Store,
  base: string,
  live: LiveIndex,
  grouped: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>,
  targets: readonly string[],
  hooks: WriteHooks,
): Promise<boolean> {
  const dualWrite = live.layout === 'dual-write';
  let whole = true;
  const attempt = async (key: string, body: string): Promise<void> => {
    try {
      await store.put(key, body);
    } catch (err) {
      whole = false;
      hooks.onMirrorFailed?.({ key, error: (err as Error).message });
    }
  };
  await mapLimit(targets, 8, (partition) => {
    // A partition emptied by this change keeps a file with no entries rather than a stale one.
    const entries = Object.fromEntries(grouped.get(partition) ?? new Map<string, IndexEntry>());
    return attempt(`${base}${SHARD_DIR}${partition}.json`, JSON.stringify({ version: 1, entries }));
  });
  if (dualWrite && grouped.size > 0) {
    const meta: MirrorMeta = { version: 1, partitions: [...grouped.keys()].sort() };
    await attempt(base + SHARD_META_KEY, JSON.stringify(meta));
  }
  return whole;
}

/** The partition files a write beside a monolith refreshes: those its change touched, and those an earlier publish left unfinished. */
function mirrorTargets(live: LiveIndex, next: DatastoreIndex, grouped: ReadonlyMap<string, unknown>): string[] {
  const mirror = live.mirror!;
  const dualWrite = live.layout === 'dual-write';
  const touched = touchedPartitions(live.state === 'valid' && !live.badManifest ? live.index : undefined, next);
  for (const partition of mirror.unfinished ?? []) touched.add(partition);
  return [...touched].filter((p) => (dualWrite ? grouped.has(p) || mirror.files.has(p) : mirror.files.has(p))).sort();
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
