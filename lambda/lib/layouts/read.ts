/** Reading the live index of a scope, in the layout clients would see (see `Layout`). */
import { parseIndex } from '../index-file';
import { listShardPartitions } from '../list';
import { indexKeyOf, manifestKeyOf } from '../names';
import type { S3Store } from '../s3';
import type { IndexScope } from '../scope';
import { type ShardMeta, readManifest, salvageManifest } from './manifest';
import { withUnfinishedMirror } from './mirror';
import { speculativeGet } from './objects';
import { readShards } from './shards';
import { type KnownIndex, type LiveIndex, type LiveLayout, type UnreadablePart, baseIndexOf } from './types';

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
  const key = indexKeyOf(scope);
  const metaKey = manifestKeyOf(scope);
  // Still the version we wrote (same ETag): not downloaded (a conditional read) or at least not parsed again.
  const indexOptions = known ? { ifNoneMatch: known.etag } : {};
  // The monolith is read alongside the manifest (one round trip, not two); when the manifest says
  // shard-first it is aborted, so a stale monolith is not downloaded.
  const monolith = speculativeGet(store, key, indexOptions);
  let layout: LiveLayout = { layout: 'monolith' };
  try {
    const metaObject = await store.get(metaKey);
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
