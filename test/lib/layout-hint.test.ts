/**
 * readLiveIndex remembers per store the layout it last saw of each scope: a scope last seen shard-first
 * is read without the speculative monolith GET, other scopes keep their one round trip, and a scope whose
 * layout changed since is still read as its manifest says (the hint costs a round trip, never a wrong read).
 */
import { INDEX_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import { S3Store } from '../../lambda/lib/s3';
import type { GetOptions } from '../../lambda/lib/s3-types';
import { readLiveIndex } from '../../lambda/lib/layouts/read';
import { indexEntry, shardMeta } from '../helpers/factories';
import { connectStore, deleteObject, putIndex, putObject, putShardLayout, testClient, testStore } from '../helpers/s3';

/** A store that notes, in order, each GET it sends and each answer it gets (`sent <key>`, `answered <key>`). */
class GetOrderStore extends S3Store {
  readonly order: string[] = [];

  override async get(key: string, options?: GetOptions): ReturnType<S3Store['get']> {
    this.order.push(`sent ${key}`);
    try {
      return await super.get(key, options);
    } finally {
      this.order.push(`answered ${key}`);
    }
  }
}

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

  it("reads a delta's partition files alongside the manifest once the scope was seen shard-first, and drops them when it no longer is", async () => {
    const seed = await testStore();
    await putShardLayout(seed, '', [a, b], shardMeta(['files']));
    const store = new GetOrderStore(testClient(), seed.bucket);
    const scope = { root: { bucket: seed.bucket, prefix: '' } };
    const delta = { partitions: new Set(['files']) };
    await readLiveIndex(store, scope);

    // Seen shard-first: the partition file is asked before the manifest has answered.
    store.order.length = 0;
    const live = await readLiveIndex(store, scope, delta);
    expect(live).toMatchObject({ layout: 'shard-first', state: 'valid' });
    expect(live.state === 'valid' && [...live.index.entries.keys()].sort()).toEqual(['files/a.txt', 'files/b.txt']);
    expect(store.order.indexOf('sent _index/files.json')).toBeLessThan(store.order.indexOf('answered _index/_meta.json'));

    // The manifest is gone: the read is the monolith's, whatever file was read ahead.
    await deleteObject(seed, SHARD_META_KEY);
    await putIndex(seed, INDEX_KEY, [a]);
    const back = await readLiveIndex(store, scope, delta);
    expect(back).toMatchObject({ layout: 'monolith', state: 'valid' });
    expect(back.state === 'valid' && [...back.index.entries.keys()]).toEqual(['files/a.txt']);
  });
});

describe('the monolith bytes of readLiveIndex', () => {
  it('hands them over once downloaded, a turn of the event loop before they are parsed, and not when unchanged', async () => {
    // GIVEN a monolith root
    const seed = await testStore();
    await putIndex(seed, INDEX_KEY, [a, b]);
    const store = connectStore(seed.bucket);
    const scope = { root: { bucket: seed.bucket, prefix: '' } };

    // WHEN it is read with a hook that notes the bytes, and what ran next
    const order: string[] = [];
    const monolithBody = (bytes: Uint8Array): void => {
      order.push(`bytes ${JSON.parse(Buffer.from(bytes).toString('utf8')).entries['files/a.txt'].key}`);
      setImmediate(() => order.push('a turn'));
    };
    const live = await readLiveIndex(store, scope, { monolithBody });
    order.push('read');

    // THEN the bytes came first, then a turn of the event loop, then the parsed index
    expect(order).toEqual(['bytes files/a.txt', 'a turn', 'read']);
    expect(live.state === 'valid' && [...live.index.entries.keys()]).toEqual(['files/a.txt', 'files/b.txt']);

    // and read again as known (same ETag, not downloaded), nothing is handed over
    const known = live.state === 'valid' ? { index: live.index, etag: live.etag } : undefined;
    order.length = 0;
    await readLiveIndex(store, scope, { monolithBody, known });
    expect(order).toEqual([]);
  });
});
