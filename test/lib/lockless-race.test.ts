/**
 * A heal racing a current client that writes index files without the lock: the client's compare-and-swap
 * merge lands between the indexer's read of an index file (or its finding it absent) and the indexer's
 * write of it. Afterwards both sides' entries are in what clients read, the client's fields untouched.
 */
import { healRoot } from '../../lambda/lib/heal';
import type { IndexEntry } from '../../lambda/lib/index-file';
import { partitionOf } from '../../lambda/lib/keys';
import { INDEX_KEY, LOCK_KEY, SHARD_DIR, SHARD_META_KEY } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';
import { indexEntry, shardMeta } from '../helpers/factories';
import { type LocklessLayout, clientEntry, compareAndSwap, locklessPush } from '../helpers/lockless';
import {
  connectStore,
  hookedStore,
  putIndex,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  testStore,
  trackRequests,
} from '../helpers/s3';

const PREFIX = 'team';
const BASE = `${PREFIX}/`;

/** What a client of the layout reads: the monolith's entries, or every listed partition file's; plus, for dual-write, each mirror file's. */
async function clientView(
  store: S3Store,
  layout: LocklessLayout,
): Promise<{ index: Map<string, IndexEntry>; mirror: Map<string, IndexEntry> }> {
  const index = new Map<string, IndexEntry>();
  const mirror = new Map<string, IndexEntry>();
  const meta = await readJson<{ partitions: string[] }>(store, BASE + SHARD_META_KEY);
  for (const partition of meta?.partitions ?? []) {
    const file = await readIndex(store, `${BASE}${SHARD_DIR}${partition}.json`);
    if (!file) throw new Error(`listed partition file ${partition} is missing`);
    for (const [key, entry] of file.entries) (layout === 'shard-first' ? index : mirror).set(key, entry);
  }
  if (layout !== 'shard-first') for (const [key, entry] of (await readIndex(store, BASE + INDEX_KEY))?.entries ?? []) index.set(key, entry);
  return { index, mirror };
}

/** A root of the layout with one indexed object, plus `unindexed` objects no index names yet. */
async function rootWith(store: S3Store, layout: LocklessLayout, unindexed: readonly string[]): Promise<IndexEntry> {
  const indexedKey = 'logs/old.log';
  await putObject(store, BASE + indexedKey, 'old');
  const indexed = indexEntry(indexedKey, { size: 3, sha256: 'sha-old', localMtime: '2026-05-04T15:19:58.120Z' });
  await putObjects(store, Object.fromEntries(unindexed.map((key) => [BASE + key, `body of ${key}`])));
  if (layout === 'shard-first') await putShardLayout(store, BASE, [indexed], shardMeta(['logs'], 4));
  else await putIndex(store, BASE + INDEX_KEY, [indexed]);
  if (layout === 'dual-write') {
    await putShardLayout(store, BASE, [indexed]);
    await putObject(store, BASE + SHARD_META_KEY, JSON.stringify({ version: 1, partitions: ['logs'] }));
  }
  return indexed;
}

/**
 * Heals the root with a store that, just before the indexer's first write of `racedKey`, lets a lockless
 * client upload `clientKey` and push its entry. Returns the client's entry and the indexer's requests.
 */
async function healRacing(store: S3Store, layout: LocklessLayout, racedKey: string, clientKey: string) {
  const client = connectStore(store.bucket);
  const body = `client body of ${clientKey}`;
  const entry = clientEntry(clientKey, Buffer.byteLength(body));
  let raced = false;
  const indexer = hookedStore(store.bucket, {
    async beforePut(key) {
      if (raced || key !== racedKey) return;
      raced = true;
      await putObject(client, BASE + clientKey, body);
      await locklessPush(client, { base: BASE, layout, entries: [entry] });
    },
  });
  const requests = trackRequests(indexer);
  const report = await healRoot(indexer, { bucket: store.bucket, prefix: PREFIX }, { mode: 'repair' });
  expect(raced).toBe(true);
  return { entry, requests, report };
}

/** Every write of an index file the indexer sent replaces a version it names (If-Match) or creates (If-None-Match). */
function blindIndexWrites(requests: ReturnType<typeof trackRequests>): string[] {
  const indexFile = (key: string) => key.endsWith(INDEX_KEY) || (key.includes(`/${SHARD_DIR}`) && key.endsWith('.json'));
  return requests.filter((r) => r.op === 'PutObject' && r.key && indexFile(r.key) && !r.ifMatch && !r.ifNoneMatch).map((r) => r.key!);
}

describe('a heal racing a lockless client', () => {
  it('shard-first: a partition file found absent and then created by the client keeps both sides', async () => {
    // GIVEN a shard-first root whose data partition has no file yet, and two unindexed objects in it
    const store = await testStore();
    const unindexed = ['data/aws/ec2/i-1/1/raw', 'data/aws/ec2/i-2/1/raw'];
    const indexed = await rootWith(store, 'shard-first', unindexed);
    const partition = partitionOf(unindexed[0])!;

    // WHEN the client creates that partition file (and lists it) between the indexer's read and its write
    const { entry, requests } = await healRacing(store, 'shard-first', `${BASE}${SHARD_DIR}${partition}.json`, 'data/aws/ec2/i-9/1/raw');

    // THEN clients read the indexer's entries and the client's, with its fields
    const { index } = await clientView(store, 'shard-first');
    expect([...index.keys()].sort()).toEqual([...unindexed, entry.key, indexed.key].sort());
    expect(index.get(entry.key)).toEqual(entry);
    expect(index.get(indexed.key)).toEqual(indexed);
    expect(blindIndexWrites(requests)).toEqual([]);
    const meta = await readJson<{ partitions: string[]; commitSeq: number }>(store, BASE + SHARD_META_KEY);
    expect(meta?.partitions).toEqual([partition, 'logs']);
    expect(meta?.commitSeq).toBeGreaterThan(5);
  });

  it('shard-first: a partition file read and then changed by the client keeps both sides', async () => {
    // GIVEN a shard-first root whose logs partition file exists and an unindexed log beside it
    const store = await testStore();
    const indexed = await rootWith(store, 'shard-first', ['logs/new.log']);

    // WHEN the client merges its own log into that file between the indexer's read and its write
    const { entry, requests } = await healRacing(store, 'shard-first', `${BASE}${SHARD_DIR}logs.json`, 'logs/client.log');

    // THEN the file holds the old entry, the healed one and the client's
    const { index } = await clientView(store, 'shard-first');
    expect([...index.keys()].sort()).toEqual(['logs/client.log', 'logs/new.log', 'logs/old.log']);
    expect(index.get(entry.key)).toEqual(entry);
    expect(index.get(indexed.key)).toEqual(indexed);
    expect(blindIndexWrites(requests)).toEqual([]);
  });

  it('shard-first: an unlisted partition file a lockless client is still pushing to is merged, its new entry kept', async () => {
    // GIVEN a shard-first root with a partition file its manifest does not list yet (a client's push under way)
    const store = await testStore();
    const indexed = await rootWith(store, 'shard-first', ['data/aws/ec2/i-1/1/raw']);
    const partition = partitionOf('data/aws/ec2/i-1/1/raw')!;
    const fileKey = `${BASE}${SHARD_DIR}${partition}.json`;
    const first = clientEntry('data/aws/ec2/i-1/1/raw', Buffer.byteLength('body of data/aws/ec2/i-1/1/raw'));
    await putShardLayout(store, BASE, [first]);
    const client = connectStore(store.bucket);
    const late = 'data/aws/ec2/i-9/1/raw';
    const entry = clientEntry(late, 4);

    // WHEN, after the listing and before the indexer reads that file, the client uploads one more object and
    // merges it into the file; its manifest write comes after the heal
    let raced = false;
    const indexer = hookedStore(store.bucket, {
      async beforeGet(key) {
        if (raced || key !== fileKey) return;
        raced = true;
        await putObject(client, BASE + late, 'late');
        await compareAndSwap(client, fileKey, (current) => ({ ...current, entries: { ...(current?.entries as object), [late]: entry } }));
      },
    });
    await healRoot(indexer, { bucket: store.bucket, prefix: PREFIX }, { mode: 'repair' });
    expect(raced).toBe(true);
    await compareAndSwap(client, BASE + SHARD_META_KEY, (meta) => ({
      ...meta,
      partitions: [...new Set([...((meta?.partitions as string[] | undefined) ?? []), partition])].sort(),
      commitSeq: ((meta?.commitSeq as number | undefined) ?? 0) + 1,
    }));

    // THEN clients read all three entries, both of the client's with their fields
    const { index } = await clientView(store, 'shard-first');
    expect([...index.keys()].sort()).toEqual([first.key, late, indexed.key].sort());
    expect(index.get(late)).toEqual(entry);
    expect(index.get(first.key)).toEqual(first);
  });

  it('dual-write: a mirror file found absent and then created by the client keeps both sides, in the monolith and the mirror', async () => {
    // GIVEN a dual-write root and two unindexed objects of a partition with no mirror file yet
    const store = await testStore();
    const unindexed = ['data/aws/ec2/i-1/1/raw', 'data/aws/ec2/i-2/1/raw'];
    const indexed = await rootWith(store, 'dual-write', unindexed);
    const partition = partitionOf(unindexed[0])!;

    // WHEN the client pushes into that partition (monolith, then the mirror file) just before the indexer writes that file
    const { entry, requests } = await healRacing(store, 'dual-write', `${BASE}${SHARD_DIR}${partition}.json`, 'data/aws/ec2/i-9/1/raw');

    // THEN the monolith and the mirror both hold every entry, the client's with its fields
    const { index, mirror } = await clientView(store, 'dual-write');
    const every = [...unindexed, entry.key, indexed.key].sort();
    expect([...index.keys()].sort()).toEqual(every);
    expect([...mirror.keys()].sort()).toEqual(every);
    expect(index.get(entry.key)).toEqual(entry);
    expect(mirror.get(entry.key)).toEqual(entry);
    expect(blindIndexWrites(requests)).toEqual([]);
  });

  it('a lost race gives the lock back before the next try, so clients that take the lock are not kept out meanwhile', async () => {
    // GIVEN a monolith root and an unindexed object
    const store = await testStore();
    await rootWith(store, 'monolith', ['files/new.txt']);

    // WHEN a lockless client's merge makes the indexer's first write of the monolith lose its race
    const { requests, report } = await healRacing(store, 'monolith', BASE + INDEX_KEY, 'files/client.txt');

    // THEN between the lost write and the next one the lock was released and taken again
    expect(report.scopes[0].conflicts).toBe(1);
    const writes = requests.flatMap((r, i) => (r.op === 'PutObject' && r.key === BASE + INDEX_KEY ? [i] : []));
    expect(writes).toHaveLength(2);
    const between = requests.slice(writes[0], writes[1]).filter((r) => r.key === BASE + LOCK_KEY);
    expect(between.map((r) => r.op)).toEqual(expect.arrayContaining(['DeleteObject', 'PutObject']));
    expect(between.findIndex((r) => r.op === 'DeleteObject')).toBeLessThan(
      between.findIndex((r) => r.op === 'PutObject' && r.ifNoneMatch === '*'),
    );
  });

  it('monolith: a monolith read and then changed by the client keeps both sides', async () => {
    // GIVEN a monolith root and an unindexed object
    const store = await testStore();
    const indexed = await rootWith(store, 'monolith', ['files/new.txt']);

    // WHEN the client merges its entry into the monolith between the indexer's read and its write
    const { entry, requests } = await healRacing(store, 'monolith', BASE + INDEX_KEY, 'files/client.txt');

    // THEN the monolith holds every entry, the client's with its fields
    const { index } = await clientView(store, 'monolith');
    expect([...index.keys()].sort()).toEqual(['files/client.txt', 'files/new.txt', 'logs/old.log']);
    expect(index.get(entry.key)).toEqual(entry);
    expect(index.get(indexed.key)).toEqual(indexed);
    expect(blindIndexWrites(requests)).toEqual([]);
  });
});
