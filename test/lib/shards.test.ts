/** Shard-first roots (`_index/_meta.json` version 2 + shards), against moto: the heal keeps that layout true. */
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { healRoot } from '../../lambda/lib/heal';
import { partitionOf } from '../../lambda/lib/keys';
import { PartitionedEntries } from '../../lambda/lib/layouts/shards';
import { indexEntry, shardMeta } from '../helpers/factories';
import {
  connectStore,
  groupSummaries,
  listKeys,
  listObjects,
  putObject,
  putShardLayout,
  readIndex,
  readShardSummaries,
  readJson,
  readObject,
  seedDatastore,
  snapshotBucket,
  summarize,
  swampKeys,
  testStore,
  type KeySize,
  type SeededDatastore,
} from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

const OLD = '2020-01-01T00:00:00.000Z';
const PARTITIONS = [
  '_root',
  'audit',
  'data--aws--ec2',
  'definitions-evaluated--defs--d4',
  'files',
  'logs',
  'outputs--model-1--run',
  'workflow-runs--wf-2',
];

/** A root of swamp-like data plus one unshardable key, written by a shard-first client. */
async function shardRoot(prefix: string): Promise<{ store: S3Store; seeded: SeededDatastore; base: string; expected: KeySize[] }> {
  const store = await testStore();
  const objects = Object.fromEntries(swampKeys(8).map((k, i) => [k, `${k} ${'z'.repeat(i)}`]));
  objects['misc/x/y'] = 'no partition for me';
  const seeded = await seedDatastore(store, { prefix, objects });
  return { store, seeded, base: `${prefix}/`, expected: seeded.expectedEntries() };
}

describe('healRoot on a shard-first root', () => {
  async function driftedShardRoot() {
    const { store, seeded, base, expected } = await shardRoot('sh');
    const sizeOf = (key: string) => expected.find((e) => e.key === key)!.size;
    const entries = expected
      .filter((e) => e.key !== 'logs/run-3.log' && e.key !== 'misc/x/y')
      .map((e) =>
        e.key === 'audit/6.json'
          ? indexEntry(e.key, { size: e.size + 50, sha256: 'old', note: 'kept' })
          : indexEntry(e.key, { size: e.size, sha256: `sha-${e.key}`, localMtime: '2026-05-04T15:19:58.120Z' }),
      );
    entries.push(indexEntry('files/gone.txt', { size: 3, lastModified: OLD }));
    const partitions = PARTITIONS.filter((p) => p !== 'logs');
    await putShardLayout(store, base, entries, shardMeta(partitions, 7, { writer: 'swamp 2026.06' }));
    // the monolith a shard-first client no longer maintains: stale, and not ours to touch
    const monolithEtag = await putObject(store, `${base}.datastore-index.json`, JSON.stringify({ version: 1, entries: {} }));
    return { store, seeded, base, expected, entries, sizeOf, monolithEtag };
  }

  it('check reports the drift of the shards, the unshardable key apart, and writes nothing', async () => {
    const { store, seeded, sizeOf } = await driftedShardRoot();
    const before = await snapshotBucket(store);

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'check' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', indexState: 'valid', unshardable: 1, published: false });
    expect(report.scopes[0].driftKeys).toEqual({
      missing: ['logs/run-3.log'],
      stale: ['files/gone.txt'],
      resized: [{ key: 'audit/6.json', indexSize: sizeOf('audit/6.json') + 50, objectSize: sizeOf('audit/6.json') }],
    });
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('repair rewrites only the drifted shards, bumps commitSeq, lists every partition and leaves the monolith alone', async () => {
    const { store, seeded, base, expected, entries, monolithEtag } = await driftedShardRoot();
    const before = new Map((await listObjects(store, `${base}_index/`)).map((o) => [o.key, o.etag]));

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true, unshardable: 1 });
    const meta = await readJson<ShardMeta>(store, `${base}_index/_meta.json`);
    expect(meta).toEqual({ version: 2, partitions: PARTITIONS, commitSeq: 8, writer: 'swamp 2026.06' });
    expect(await readShardSummaries(store, base, PARTITIONS)).toEqual(groupSummaries(expected));
    // client fields of untouched entries survive in their shards
    const data = await readIndex(store, `${base}_index/data--aws--ec2.json`);
    expect([...data!.entries.values()]).toEqual(entries.filter((e) => partitionOf(e.key) === 'data--aws--ec2'));
    expect((await readIndex(store, `${base}_index/audit.json`))!.entries.get('audit/6.json')).toMatchObject({ note: 'kept' });
    // only the shards that drifted (and the manifest) were written
    const after = new Map((await listObjects(store, `${base}_index/`)).map((o) => [o.key, o.etag]));
    const changed = [...after]
      .filter(([k, etag]) => before.get(k) !== etag)
      .map(([k]) => k)
      .sort();
    expect(changed).toEqual([
      `${base}_index/_meta.json`,
      `${base}_index/audit.json`,
      `${base}_index/files.json`,
      `${base}_index/logs.json`,
    ]);
    // the monolith is untouched and the unshardable key is in no shard
    expect((await listObjects(store, `${base}.datastore-index.json`))[0].etag).toBe(monolithEtag);
    expect(JSON.stringify([...after.keys()])).not.toContain('misc');

    // a second repair publishes nothing
    const again = connectStore(store.bucket);
    const second = await healRoot(again, seeded.root, { mode: 'repair' });
    expect(second.scopes[0]).toMatchObject({ published: false, drift: { missing: 0, stale: 0, resized: 0 } });
    expect(again.requests.PutObject ?? 0).toBe(0);
  });

  it('keeps a root with partition files but no manifest a monolith: heals the monolith, refreshes the files it touched, creates no manifest', async () => {
    const { store, seeded, base, expected } = await shardRoot('nometa');
    const logs = expected.find((e) => e.key === 'logs/run-3.log')!;
    await putShardLayout(store, base, [indexEntry(logs.key, { size: logs.size + 1 })], undefined);

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'monolith', published: true });
    expect(await readObject(store, `${base}_index/_meta.json`)).toBeUndefined();
    expect(summarize(await readIndex(store, `${base}.datastore-index.json`))).toEqual(expected);
    expect((await readShardSummaries(store, base, ['logs'])).get('logs')).toEqual(groupSummaries(expected).get('logs'));
    expect(await listKeys(store, `${base}_index/`)).toEqual([`${base}_index/logs.json`]);
  });

  it.each([
    ['listed first', ['logs', '_root', 'audit', 'files']],
    ['listed last', ['_root', 'audit', 'files', 'logs']],
  ])('replaces an unreadable shard %s in the manifest, keeping a copy, without losing races to itself', async (_where, partitions) => {
    const { store, seeded, base, expected } = await shardRoot(`bad${partitions[0].replace('_', '')}`);
    const good = expected
      .filter((e) => ['_root', 'audit', 'files'].includes(partitionOf(e.key) ?? ''))
      .map((e) => indexEntry(e.key, { size: e.size }));
    await putShardLayout(store, base, good, shardMeta(partitions, 3));
    await putObject(store, `${base}_index/logs.json`, '{"version":1,"entries":');

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', indexState: 'unreadable', published: true, conflicts: 0 });
    expect(report.scopes[0].unreadableReason).toMatch(/shard logs/);
    const copies = await listKeys(store, `${base}_control/datastore-indexer/unreadable/root/`);
    expect(copies).toHaveLength(1);
    expect(copies[0]).toMatch(/-_index~logs\.json$/);
    expect((await readObject(store, copies[0]))!.toString()).toBe('{"version":1,"entries":');
    expect(await readShardSummaries(store, base, PARTITIONS)).toEqual(groupSummaries(expected));
    expect(await readJson<ShardMeta>(store, `${base}_index/_meta.json`)).toEqual({ version: 2, partitions: PARTITIONS, commitSeq: 4 });
  });

  it('keeps the client fields of the shards that parse when another shard is unreadable', async () => {
    const { store, seeded, base, expected } = await shardRoot('badkeep');
    const good = expected
      .filter((e) => partitionOf(e.key) !== undefined && partitionOf(e.key) !== 'logs')
      .map((e) => indexEntry(e.key, { size: e.size, sha256: `sha-${e.key}`, note: 'kept' }));
    await putShardLayout(store, base, good, shardMeta(PARTITIONS, 2));
    await putObject(store, `${base}_index/logs.json`, 'not json');

    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    const audit = await readIndex(store, `${base}_index/audit.json`);
    expect(audit!.entries.size).toBeGreaterThan(0);
    for (const entry of audit!.entries.values()) expect(entry).toMatchObject({ sha256: `sha-${entry.key}`, note: 'kept' });
    expect(await readShardSummaries(store, base, PARTITIONS)).toEqual(groupSummaries(expected));
  });

  it('reads an unparsable manifest beside shards as a shard-first root: keeps a copy, rewrites it past the old commitSeq', async () => {
    const { store, seeded, base, expected } = await shardRoot('badmeta');
    const entries = expected.filter((e) => partitionOf(e.key) !== undefined).map((e) => indexEntry(e.key, { size: e.size }));
    await putShardLayout(store, base, entries, shardMeta(PARTITIONS, 9));
    const corrupt = '{"version":2,"commitSeq":41,"partitions":[';
    await putObject(store, `${base}_index/_meta.json`, corrupt);

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', indexState: 'unreadable', published: true });
    const copies = await listKeys(store, `${base}_control/datastore-indexer/unreadable/root/`);
    expect(copies).toHaveLength(1);
    expect((await readObject(store, copies[0]))!.toString()).toBe(corrupt);
    expect(await readJson<ShardMeta>(store, `${base}_index/_meta.json`)).toEqual({ version: 2, partitions: PARTITIONS, commitSeq: 42 });
    expect(await readShardSummaries(store, base, PARTITIONS)).toEqual(groupSummaries(expected));
    expect(await readIndex(store, `${base}.datastore-index.json`)).toBeUndefined();
  });
});

describe('PartitionedEntries', () => {
  it('holds entries by partition as a map of them all, and copies a partition before its first change', () => {
    const logs = new Map([['logs/a.log', indexEntry('logs/a.log')]]);
    const files = new Map([['files/b.txt', indexEntry('files/b.txt')]]);
    const entries = new PartitionedEntries([
      ['logs', logs],
      ['files', files],
      ['audit', new Map()],
    ]);

    entries.set('logs/c.log', indexEntry('logs/c.log'));
    entries.delete('files/b.txt');

    expect([...entries.keys()]).toEqual(['logs/a.log', 'logs/c.log']);
    expect(entries.size).toBe(2);
    expect(entries.get('logs/c.log')?.key).toBe('logs/c.log');
    expect(entries.has('files/b.txt')).toBe(false);
    expect([...entries.byPartition().keys()]).toEqual(['logs']);
    // The maps handed in are what the partitions were read as: never changed.
    expect([...logs.keys()]).toEqual(['logs/a.log']);
    expect([...files.keys()]).toEqual(['files/b.txt']);
    expect(() => entries.set('misc/thing.txt', indexEntry('misc/thing.txt'))).toThrow(/no shard partition/);
  });
});
