/**
 * readLiveIndex remembers per store the layout it last saw of each scope: a scope last seen shard-first
 * is read without the speculative monolith GET, other scopes keep their one round trip, and a scope whose
 * layout changed since is still read as its manifest says (the hint costs a round trip, never a wrong read).
 */
import { INDEX_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';
import { readLiveIndex } from '../../lambda/lib/layouts/read';
import { indexEntry, shardMeta } from '../helpers/factories';
import { connectStore, deleteObject, putIndex, putObject, putShardLayout, testStore } from '../helpers/s3';

const a = indexEntry('files/a.txt', { size: 3 });
const b = indexEntry('files/b.txt', { size: 5 });

/** The GetObject requests one read of the root sends, and the keys of the index it read. */
async function readCounted(store: S3Store, bucket: string): Promise<{ gets: number; layout: string; keys: string[] }> {
  const before = store.requests.GetObject ?? 0;
  const live = await readLiveIndex(store, { root: { bucket, prefix: '' } });
  const keys = live.state === 'valid' ? [...live.index.entries.keys()].sort() : [];
  return { gets: (store.requests.GetObject ?? 0) - before, layout: live.layout, keys };
}

describe('the layout hint of readLiveIndex', () => {
  it('drops the monolith GET of a shard-first scope once it has been seen shard-first', async () => {
    const seed = await testStore();
    await putIndex(seed, INDEX_KEY, [a]);
    await putShardLayout(seed, '', [a, b], shardMeta(['files']));
    const store = connectStore(seed.bucket);
    // First read: the manifest and the speculative monolith (then aborted) go out together.
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 3, layout: 'shard-first', keys: ['files/a.txt', 'files/b.txt'] });
    // Later reads: the manifest and the partition file only.
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 2, layout: 'shard-first', keys: ['files/a.txt', 'files/b.txt'] });
  });

  it('keeps the one round trip of monolith and dual-write scopes', async () => {
    const mono = await testStore();
    await putIndex(mono, INDEX_KEY, [a]);
    const monoStore = connectStore(mono.bucket);
    for (let i = 0; i < 2; i++)
      expect(await readCounted(monoStore, mono.bucket)).toEqual({ gets: 2, layout: 'monolith', keys: ['files/a.txt'] });

    const dual = await testStore();
    await putIndex(dual, INDEX_KEY, [a, b]);
    await putObject(dual, SHARD_META_KEY, JSON.stringify({ version: 1, partitions: ['files'] }));
    const dualStore = connectStore(dual.bucket);
    // The manifest, the monolith and the publish record, each read.
    for (let i = 0; i < 2; i++)
      expect(await readCounted(dualStore, dual.bucket)).toEqual({ gets: 3, layout: 'dual-write', keys: ['files/a.txt', 'files/b.txt'] });
  });

  it('reads a scope right after its layout changed, both ways', async () => {
    const seed = await testStore();
    await putIndex(seed, INDEX_KEY, [a]);
    const store = connectStore(seed.bucket);
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 2, layout: 'monolith', keys: ['files/a.txt'] });

    // A client's migrate-index: partition files, then a version-2 manifest; the monolith stays behind, stale.
    await putShardLayout(seed, '', [a, b], shardMeta(['files']));
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 3, layout: 'shard-first', keys: ['files/a.txt', 'files/b.txt'] });
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 2, layout: 'shard-first', keys: ['files/a.txt', 'files/b.txt'] });

    // The manifest now says version 1 (a dual-write root): the monolith is the truth, read after the manifest.
    await putObject(seed, SHARD_META_KEY, JSON.stringify({ version: 1, partitions: ['files'] }));
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 3, layout: 'dual-write', keys: ['files/a.txt'] });
    await putShardLayout(seed, '', [a, b], shardMeta(['files'], 2));
    expect(await readCounted(store, seed.bucket)).toEqual({ gets: 3, layout: 'shard-first', keys: ['files/a.txt', 'files/b.txt'] });

    // No manifest at all: a monolith again, whatever the hint said.
    await deleteObject(seed, SHARD_META_KEY);
    const back = await readCounted(store, seed.bucket);
    expect(back).toEqual({ gets: 2, layout: 'monolith', keys: ['files/a.txt'] });
  });
});
