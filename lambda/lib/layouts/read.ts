/** Reading the live index of a scope, in the layout clients would see (see `Layout`). */
import { parseIndexInSteps } from '../index-steps';
import { listShardPartitions } from '../list';
import { indexKeyOf, manifestKeyOf } from '../names';
import type { GetOptions, S3Store, StoredObject } from '../s3';
import type { IndexScope } from '../scope';
import { type ShardMeta, readManifest, salvageManifest } from './manifest';
import { withUnfinishedMirror } from './mirror';
import { type MirrorCheck, checkMirror, readMirrorAhead } from './mirror-check';
import { type SpeculativeRead, speculativeGet } from './objects';
import { readFilesAhead } from './shard-read';
import { readShards, readShardsPartially } from './shards';
import {
  type KnownIndex,
  type Layout,
  type LiveIndex,
  type LiveLayout,
  type MirrorState,
  type UnreadablePart,
  baseIndexOf,
  withNewerHold,
} from './types';

/** How to read a live index. */
export interface ReadOptions {
  /**
   * The partition files a listing saw under `<scope>/_index/`: on a shard-first scope the unlisted ones are
   * orphans to adopt; beside a monolith they are mirror files to keep fresh. They never decide the layout.
   */
  readonly shardPartitions?: readonly string[];
  /** The monolith as we wrote it: read back unchanged, it is not downloaded or parsed again. */
  readonly known?: KnownIndex;
  /** Mirror files of a dual-write scope to hold against the monolith (see `MirrorState.stale`). */
  readonly mirrors?: MirrorCheck;
  /**
   * On a shard-first scope, read only these partitions' files (a delta's): see `ShardState.partial`. The
   * whole index is read instead where a partial read cannot be written safely, or a listing saw the files.
   */
  readonly partitions?: ReadonlySet<string>;
  /** Called with the monolith's size before it is downloaded: a throw (e.g. `IndexTooLargeError`) stops the read. */
  readonly monolithBytes?: (bytes: number) => void;
  /** Called with the monolith's bytes once downloaded, a turn of the event loop before they are parsed (a listing's hint). */
  readonly monolithBody?: (bytes: Uint8Array) => void;
  /**
   * The monolith's read, begun before this one (`readMonolithAhead`, so without `known` or `monolithBytes`):
   * used rather than sent again, dropped where the manifest says shard-first.
   */
  readonly monolithAhead?: SpeculativeRead;
  /** The manifest as read a moment before (by `shardBaseFor`; undefined when absent): not read again. */
  readonly manifest?: { readonly object: StoredObject | undefined };
}

/**
 * Begins reading a scope's monolith before its layout is known (for `ReadOptions.monolithAhead`, without
 * `options`); none for a scope last seen shard-first, whose read would most likely be wasted.
 */
export function readMonolithAhead(
  store: S3Store,
  scope: IndexScope,
  options: Omit<GetOptions, 'abortSignal'> = {},
): SpeculativeRead | undefined {
  return store.layoutsSeen.get(manifestKeyOf(scope)) === 'shard-first' ? undefined : speculativeGet(store, indexKeyOf(scope), options);
}

/** Scopes remembered per store, at most: enough for every root and namespace a process serves. */
const LAYOUT_MEMO_SIZE = 1000;

/** Notes the layout read in the store's `layoutsSeen`, the oldest scope forgotten past its size. */
function rememberLayout(store: S3Store, metaKey: string, layout: Layout): void {
  const seen = store.layoutsSeen;
  seen.delete(metaKey);
  seen.set(metaKey, layout);
  if (seen.size > LAYOUT_MEMO_SIZE) seen.delete(seen.keys().next().value as string);
}

/** Reads a scope's live index in the layout clients would see (see `Layout`). */
export async function readLiveIndex(store: S3Store, scope: IndexScope, options: ReadOptions = {}): Promise<LiveIndex> {
  const live = withNewerHold(await readScope(store, scope, options));
  rememberLayout(store, manifestKeyOf(scope), live.layout);
  return live;
}

async function readScope(store: S3Store, scope: IndexScope, options: ReadOptions): Promise<LiveIndex> {
  const { shardPartitions, known } = options;
  const key = indexKeyOf(scope);
  const metaKey = manifestKeyOf(scope);
  // Still the version we wrote (same ETag): not downloaded (a conditional read) or at least not parsed again.
  const indexOptions = { ifNoneMatch: known?.etag, beforeBody: options.monolithBytes };
  // The monolith is read alongside the manifest (one round trip, not two); when the manifest says
  // shard-first it is aborted, so a stale monolith is not downloaded. A scope last seen shard-first would
  // waste that read: it starts only once the manifest says it is needed (a wrong hint costs a round trip).
  const seenShardFirst = store.layoutsSeen.get(metaKey) === 'shard-first';
  let monolith = options.monolithAhead ?? readMonolithAhead(store, scope, indexOptions);
  const monolithRead = (): SpeculativeRead => (monolith ??= speculativeGet(store, key, indexOptions));
  // A delta of a scope last seen shard-first reads its partition files alongside the manifest, not after
  // it: a round trip sooner. They are dropped when the manifest says otherwise.
  const ahead = options.partitions && !shardPartitions && seenShardFirst ? readFilesAhead(store, scope, options.partitions) : undefined;
  let layout: LiveLayout = { layout: 'monolith' };
  try {
    const metaObject = options.manifest ? options.manifest.object : await store.get(metaKey);
    const read = metaObject ? readManifest(metaObject.body) : undefined;
    const listed = new Set(shardPartitions ?? []);
    if (metaObject && read?.kind === 'unparsable') {
      const bad: UnreadablePart = {
        key: metaKey,
        reason: `the manifest _index/_meta.json does not parse: ${read.reason}`,
        bytes: metaObject.body,
        etag: metaObject.etag,
      };
      const salvage = salvageManifest(metaObject.body);
      const partitions = shardPartitions ?? (await listShardPartitions(store, scope));
      if (salvage.version === 2 && partitions.length > 0) {
        monolith?.drop();
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
        monolith?.drop();
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
      monolith?.drop();
      const partial =
        options.partitions && !shardPartitions
          ? await readShardsPartially(store, scope, read.meta, metaObject, options.partitions, ahead)
          : undefined;
      if (partial) return partial;
      // Without a listing, the unlisted files a delta touches are the orphans it can see: read, their entries can be adopted.
      const candidates = shardPartitions ? listed : (options.partitions ?? listed);
      return readShards(store, scope, read.meta, metaObject, new Set([...candidates].filter((p) => !read.meta.partitions.includes(p))));
    } else if (read?.kind === 'v1') {
      const files = new Set([...read.meta.partitions, ...listed]);
      layout = { layout: 'dual-write', mirror: { meta: read.meta, files, metaEtag: metaObject?.etag } };
    } else if (listed.size > 0) {
      layout = { layout: 'monolith', mirror: { files: listed } };
    }
  } catch (err) {
    // The manifest's error (or the shards') is the one to report, whatever became of the monolith's read.
    monolith?.drop();
    throw err;
  } finally {
    // Used by now where the manifest said shard-first; not wanted anywhere else.
    ahead?.drop();
  }
  // The layout is not shard-first: the bytes are handed over as soon as they arrive, not after the mirror's reads.
  const isUnchanged = (object: StoredObject): boolean => known?.etag !== undefined && (object.notModified || object.etag === known.etag);
  const { monolithBody } = options;
  const handedOver = monolithBody
    ? monolithRead().result.then(
        (object) => object && !isUnchanged(object) && monolithBody(object.body),
        () => undefined,
      )
    : undefined;
  if (layout.mirror) layout = await withUnfinishedMirror(store, scope, layout, monolithRead());
  const checking = layout.layout === 'dual-write' && layout.mirror && !layout.badManifest ? options.mirrors : undefined;
  const mirrorFiles = checking && layout.mirror ? readMirrorAhead(store, scope, layout.mirror, checking) : undefined;
  const object = await monolithRead().result;
  if (!object) return { ...layout, state: 'absent' };
  const unchanged = known !== undefined && isUnchanged(object);
  if (!unchanged && handedOver) {
    await handedOver;
    // The parse holds the thread a while: what the call set going (a listing's requests) is sent first.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const parsed = unchanged ? { ok: true as const, index: known.index } : await parseIndexInSteps(object.body);
  if (!parsed.ok) {
    const bad: UnreadablePart = { key, reason: parsed.reason, bytes: object.body, etag: object.etag, version: parsed.version };
    return { ...layout, state: 'unreadable', ...bad, parts: [bad], salvaged: parsed.salvaged };
  }
  const etag = unchanged ? known.etag : object.etag;
  if (checking && layout.mirror)
    layout = withStaleMirror(layout, await checkMirror(store, scope, layout.mirror, parsed.index, checking, mirrorFiles));
  return { ...layout, state: 'valid', index: parsed.index, etag };
}

/** The layout with its checked mirror; stale files make it pending, naming their partitions. */
function withStaleMirror(layout: LiveLayout, mirror: MirrorState): LiveLayout {
  const stale = [...(mirror.stale ?? [])].sort();
  if (stale.length === 0) return { ...layout, mirror };
  const why = `mirror partition files differ from the monolith: ${stale.join(', ')}`;
  return { ...layout, mirror, pending: layout.pending ? `${layout.pending}; ${why}` : why };
}
