/**
 * The one reader of shard-first partition files, read the three ways its callers read it: whole (every file,
 * orphans adoptable, an unparsable file salvaged and reported), a delta's partial read (strict: undefined on
 * anything it could not write safely) and a heal's chunk (entries of other partitions left out).
 */
import { IndexerError } from '../../lambda/lib/errors';
import { cloneIndex } from '../../lambda/lib/index-file';
import { readManifest } from '../../lambda/lib/layouts/manifest';
import { readShardChunk } from '../../lambda/lib/layouts/shard-chunk';
import { readShards, readShardsPartially, writeShards } from '../../lambda/lib/layouts/shards';
import { type LiveIndex, baseIndexOf } from '../../lambda/lib/layouts/types';
import type { S3Store, StoredObject } from '../../lambda/lib/s3';
import { indexEntry, shardJson, shardMeta } from '../helpers/factories';
import { putObjects, testStore } from '../helpers/s3';

const ORPHAN = 'outputs--m--run';

/**
 * A shard-first scope under `s/` listing `audit`, `files` and `logs`: the `audit` file also holds an entry of
 * `logs`, the `files` file does not parse, and an `outputs` file exists that the manifest does not list.
 */
async function scopeWithEveryCase(): Promise<{ store: S3Store; scope: { root: { bucket: string; prefix: string } } }> {
  const store = await testStore();
  await putObjects(store, {
    's/_index/audit.json': shardJson([indexEntry('audit/a.json'), indexEntry('logs/stray.log')]),
    's/_index/logs.json': shardJson([indexEntry('logs/l.log')]),
    's/_index/files.json': '{"version": 1, "entries": [',
    [`s/_index/${ORPHAN}.json`]: shardJson([indexEntry('outputs/m/run/o.json')]),
    's/_index/_meta.json': JSON.stringify(shardMeta(['audit', 'files', 'logs'], 7)),
  });
  return { store, scope: { root: { bucket: store.bucket, prefix: 's' } } };
}

async function manifestOf(store: S3Store): Promise<{ meta: ReturnType<typeof metaOf>; object: StoredObject }> {
  const object = (await store.get('s/_index/_meta.json'))!;
  return { meta: metaOf(object), object };
}

function metaOf(object: StoredObject) {
  const read = readManifest(object.body);
  if (read.kind !== 'v2') throw new Error('expected a version 2 manifest');
  return read.meta;
}

function keysOf(live: LiveIndex | undefined): string[] {
  const index = live?.state === 'valid' ? live.index : live?.state === 'unreadable' ? live.salvaged : undefined;
  return [...(index?.entries.keys() ?? [])].sort();
}

describe('reading shard-first partition files', () => {
  it('whole: every listed file and the candidates; an orphan waits to be adopted, an unparsable file is reported, strays stay', async () => {
    const { store, scope } = await scopeWithEveryCase();
    const { meta, object } = await manifestOf(store);

    const live = await readShards(store, scope, meta, object, new Set([ORPHAN, 'logs']));

    expect(live).toMatchObject({ layout: 'shard-first', state: 'unreadable', key: 's/_index/files.json' });
    expect(keysOf(live)).toEqual(['audit/a.json', 'logs/l.log', 'logs/stray.log']);
    expect([...live.shards!.orphans]).toEqual([ORPHAN]);
    expect([...live.shards!.adoptable.keys()]).toEqual(['outputs/m/run/o.json']);
    expect([...live.shards!.shardEtags.keys()]).toEqual(['audit', 'files', 'logs', ORPHAN]);
    expect([live.shards!.intentEtag, live.shards!.partial, live.shards!.recordUnread]).toEqual([undefined, undefined, undefined]);
    expect(live.pending).toBe(`partition files not in the manifest: ${ORPHAN}`);
  });

  it('partial: undefined on an entry of a partition not read, an unparsable file or an orphan; else the files read alone', async () => {
    const { store, scope } = await scopeWithEveryCase();
    const { meta, object } = await manifestOf(store);
    const partially = (...partitions: string[]) => readShardsPartially(store, scope, meta, object, new Set(partitions));

    expect(await partially('audit')).toBeUndefined();
    expect(await partially('files')).toBeUndefined();
    expect(await partially(ORPHAN)).toBeUndefined();
    const live = await partially('logs', 'audit', 'absent');

    expect(live).toMatchObject({ state: 'valid', pending: undefined });
    expect(keysOf(live)).toEqual(['audit/a.json', 'logs/l.log', 'logs/stray.log']);
    expect(live!.shards).toMatchObject({ recordUnread: true, partial: new Set(['absent', 'audit', 'logs']) });
    expect([...live!.shards!.missing]).toEqual([]);
  });

  it('a chunk: entries of other partitions left out, an unlisted file read as any, an unparsable one reported', async () => {
    const { store, scope } = await scopeWithEveryCase();

    const live = await readShardChunk(store, scope, new Set(['audit', ORPHAN]));
    const bad = await readShardChunk(store, scope, new Set(['files', 'logs']));

    expect(live).toMatchObject({ state: 'valid', etag: (await store.get('s/_index/_meta.json'))!.etag });
    expect(keysOf(live)).toEqual(['audit/a.json', 'outputs/m/run/o.json']);
    expect([...live.shards!.orphans]).toEqual([]);
    expect([...live.shards!.byPartition.get('audit')!.keys()]).toEqual(['audit/a.json']);
    expect(bad).toMatchObject({ state: 'unreadable', key: 's/_index/files.json', parts: [expect.anything()] });
    expect(keysOf(bad)).toEqual(['logs/l.log']);
  });

  it('a chunk read again after its write takes the entries as the write grouped them, not a new grouping', async () => {
    const { store, scope } = await scopeWithEveryCase();
    const chunk = new Set(['audit', 'logs']);
    const live = await readShardChunk(store, scope, chunk);
    const next = cloneIndex(baseIndexOf(live)!);
    next.entries.set('logs/new.log', indexEntry('logs/new.log'));

    const written = await writeShards(store, scope, live, next, true);
    if (written.status !== 'written') throw new Error('expected the write to win');
    const again = await readShardChunk(store, scope, chunk, {
      index: next,
      shardEtags: written.shardEtags,
      shardEntries: written.shardEntries,
    });

    expect(again).toMatchObject({ state: 'valid' });
    expect(again.state === 'valid' && again.index).toBe(next);
    expect(again.shards!.byPartition.get('logs')).toBe(written.shardEntries!.get('logs'));
    expect([...again.shards!.byPartition.get('logs')!.keys()]).toEqual(['logs/l.log', 'logs/new.log']);
  });

  it('a chunk throws when the manifest no longer says shard-first', async () => {
    const { store, scope } = await scopeWithEveryCase();
    await putObjects(store, { 's/_index/_meta.json': JSON.stringify({ version: 1, partitions: [] }) });

    await expect(readShardChunk(store, scope, new Set(['audit']))).rejects.toBeInstanceOf(IndexerError);
  });
});
