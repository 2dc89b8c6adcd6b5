/**
 * Every index layout as clients really leave it, against moto: the heal keeps each scope in its layout
 * (a version-1 manifest stays version 1, no manifest stays none), keeps that layout's truth equal to the
 * listing, the dual-write mirror equal to the monolith, and commitSeq moving whenever a shard changed.
 */
import type { MirrorMeta, ShardMeta } from '../../lambda/lib/layouts/manifest';
import type { S3Store } from '../../lambda/lib/s3';
import { applyDelta } from '../../lambda/lib/delta';
import { HeldScopeError } from '../../lambda/lib/errors';
import { emptyIndex } from '../../lambda/lib/index-file';
import { readLiveIndex } from '../../lambda/lib/layouts/read';
import { writeIndex } from '../../lambda/lib/layouts/write';
import { healRoot } from '../../lambda/lib/heal';
import { partitionOf } from '../../lambda/lib/keys';
import { publishRecordKey } from '../../lambda/lib/names';
import { monolithOnlyPush } from '../helpers/dual-write';
import { indexEntry, objectChange, shardJson, shardMeta } from '../helpers/factories';
import {
  type KeySize,
  agedStore,
  connectStore,
  deleteObject,
  groupSummaries,
  hookedStore,
  listKeys,
  listObjects,
  putIndex,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  readObject,
  readShardSummaries,
  snapshotBucket,
  summarize,
  testStore,
} from '../helpers/s3';

/** Data a client pushed: a few models over several partitions. */
const CLIENT_OBJECTS: Record<string, string> = {
  'data/aws/ec2/i-1/1/raw': 'ec2 one',
  'data/aws/ec2/i-1/1/metadata.yaml': 'meta',
  'data/aws/s3/b-1/1/raw': 's3 bucket',
  'outputs/aws/ec2/i-1/run-1.json': '{"ok":true}',
  'workflow-runs/wf-1/run-1/log.txt': 'ran',
  'logs/run-1.log': 'log one',
  'files/readme.txt': 'hello',
};

/** Writes objects and the index a client's push leaves for them; returns the {key,size} rows. */
async function clientRoot(store: S3Store, base: string): Promise<KeySize[]> {
  await putObjects(store, Object.fromEntries(Object.entries(CLIENT_OBJECTS).map(([k, v]) => [base + k, v])));
  return Object.entries(CLIENT_OBJECTS).map(([key, body]) => ({ key, size: Buffer.byteLength(body) }));
}

function entriesOf(rows: readonly KeySize[]) {
  return rows.map((r) => indexEntry(r.key, { size: r.size, sha256: `sha-${r.key}` }));
}

/** What a current client's ordinary push leaves: the monolith, every partition file, and the version-1 manifest. */
async function dualWriteRoot(base: string) {
  const store = await testStore();
  const rows = await clientRoot(store, base);
  await putIndex(store, `${base}.datastore-index.json`, entriesOf(rows));
  await putShardLayout(store, base, entriesOf(rows));
  const partitions = [...groupSummaries(rows).keys()].sort();
  await putObject(store, `${base}_index/_meta.json`, JSON.stringify({ version: 1, partitions }));
  return { store, root: { bucket: store.bucket, prefix: base.slice(0, -1) }, rows, partitions };
}

/** The listing's truth after out-of-band changes: an upload into a new partition, an overwrite, a delete. */
async function changeOutOfBand(store: S3Store, base: string, rows: KeySize[]): Promise<KeySize[]> {
  await putObject(store, `${base}data/aws/lambda/f-1/1/raw`, 'new function');
  await putObject(store, `${base}logs/run-1.log`, 'log one, longer now');
  await deleteObject(store, `${base}files/readme.txt`);
  const next = rows.filter((r) => r.key !== 'files/readme.txt' && r.key !== 'logs/run-1.log');
  next.push({ key: 'data/aws/lambda/f-1/1/raw', size: 12 }, { key: 'logs/run-1.log', size: 19 });
  return next.sort((a, b) => (a.key < b.key ? -1 : 1));
}

describe('a dual-write root (version-1 manifest, as a current client pushes)', () => {
  it('check calls it dual-write and true, and writes nothing', async () => {
    const { store, root } = await dualWriteRoot('dw/');
    const before = await snapshotBucket(store);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'check' });

    expect(report.scopes[0]).toMatchObject({
      layout: 'dual-write',
      indexState: 'valid',
      drift: { missing: 0, stale: 0, resized: 0 },
      refused: 0,
    });
    expect(report.scopes[0].pending).toBeUndefined();
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('repair heals the monolith, refreshes the touched mirror files and keeps the manifest at version 1', async () => {
    const { store, root, rows } = await dualWriteRoot('dw/');
    const truth = await changeOutOfBand(store, 'dw/', rows);
    const untouched = (await listObjects(store, 'dw/_index/')).find((o) => o.key === 'dw/_index/workflow-runs--wf-1.json')!;

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({
      layout: 'dual-write',
      published: true,
      drift: { missing: 1, stale: 1, resized: 1 },
      mirrorFailures: 0,
    });
    const monolith = await readIndex(store, 'dw/.datastore-index.json');
    expect(summarize(monolith)).toEqual(truth);
    // client fields of untouched entries survive
    expect(monolith!.entries.get('data/aws/ec2/i-1/1/raw')).toMatchObject({ sha256: 'sha-data/aws/ec2/i-1/1/raw' });
    const meta = await readJson<MirrorMeta>(store, 'dw/_index/_meta.json');
    // the emptied partition stays listed, as clients keep it: a lockless client may be adding to it
    expect(meta).toEqual({ version: 1, partitions: [...groupSummaries(truth).keys(), 'files'].sort() });
    // every touched partition mirrors the monolith; the emptied one holds no stale entry
    const mirror = await readShardSummaries(store, 'dw/', ['data--aws--lambda', 'logs', 'files']);
    expect(mirror.get('data--aws--lambda')).toEqual(groupSummaries(truth).get('data--aws--lambda'));
    expect(mirror.get('logs')).toEqual(groupSummaries(truth).get('logs'));
    expect(mirror.get('files')).toEqual([]);
    // an untouched partition file is not rewritten
    const after = (await listObjects(store, 'dw/_index/')).find((o) => o.key === 'dw/_index/workflow-runs--wf-1.json')!;
    expect(after.etag).toBe(untouched.etag);

    const again = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(again.scopes[0]).toMatchObject({ layout: 'dual-write', indexState: 'valid', drift: { missing: 0, stale: 0, resized: 0 } });
  });

  it('finishes a publish that stopped between its monolith and its partition files: the next run refreshes them', async () => {
    const { store, root } = await dualWriteRoot('ds/');
    await putObject(store, 'ds/logs/run-2.log', 'two');
    const change = new Map([['logs/run-2.log', objectChange('ds/logs/run-2.log', { size: 3 })]]);
    // The first run dies (here: throws) at its first partition file, after the monolith was written.
    const dying = hookedStore(store.bucket, {
      beforePut: (key) => {
        if (key.startsWith('ds/_index/')) throw new Error('killed');
      },
    });
    await applyDelta(dying, { root }, change, { convergeRounds: 0 });
    expect((await readIndex(store, 'ds/.datastore-index.json'))!.entries.has('logs/run-2.log')).toBe(true);
    expect([...(await readIndex(store, 'ds/_index/logs.json'))!.entries.keys()]).toEqual(['logs/run-1.log']);
    expect(await readObject(store, publishRecordKey({ root }))).toBeDefined();

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      layout: 'dual-write',
      drift: { missing: 0, stale: 0, resized: 0 },
      pending: expect.stringMatching(/partition files/),
    });
    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'dual-write', published: true, mirrorFailures: 0 });
    expect([...(await readIndex(store, 'ds/_index/logs.json'))!.entries.keys()].sort()).toEqual(['logs/run-1.log', 'logs/run-2.log']);
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
    expect((await readJson<MirrorMeta>(store, 'ds/_index/_meta.json'))!.version).toBe(1);
  });

  it('a delta keeps the mirror of the partition it touches', async () => {
    const { store, root } = await dualWriteRoot('dd/');
    await putObject(store, 'dd/logs/run-2.log', 'two');

    const report = await applyDelta(
      connectStore(store.bucket),
      { root },
      new Map([['logs/run-2.log', objectChange('dd/logs/run-2.log', { size: 3 })]]),
    );

    expect(report).toMatchObject({ layout: 'dual-write', published: true, added: 1 });
    expect((await readIndex(store, 'dd/.datastore-index.json'))!.entries.has('logs/run-2.log')).toBe(true);
    expect([...(await readIndex(store, 'dd/_index/logs.json'))!.entries.keys()].sort()).toEqual(['logs/run-1.log', 'logs/run-2.log']);
    expect((await readJson<MirrorMeta>(store, 'dd/_index/_meta.json'))!.version).toBe(1);
  });
});

describe('a dual-write mirror an older client left stale', () => {
  it('repair refreshes the stale files from the monolith alone; a file a client rewrote meanwhile is read again, not overwritten blindly', async () => {
    // GIVEN a dual-write root whose logs mirror an older client's push left stale
    const { store, root, rows } = await dualWriteRoot('dm/');
    await monolithOnlyPush(store, 'dm', { 'logs/run-2.log': 'log two' });
    const monolithBefore = await readObject(store, 'dm/.datastore-index.json');
    // ...and a client that rewrites that mirror file (still stale) just before the indexer's first write of it
    let rewrites = 0;
    const racing = hookedStore(store.bucket, {
      async beforePut(key) {
        if (key === 'dm/_index/logs.json' && rewrites++ === 0)
          await putObject(
            store,
            key,
            shardJson(
              entriesOf(rows).filter((e) => e.key.startsWith('logs/')),
              '2026-06-01T00:00:00.000Z',
            ),
          );
      },
    });

    // WHEN repaired
    const report = await healRoot(racing, root, { mode: 'repair' });

    // THEN the conditional write lost, the publish read again and wrote the monolith's entries; the monolith is as it was
    expect(report.scopes[0]).toMatchObject({ layout: 'dual-write', published: true, staleMirrors: ['logs'], conflicts: 1 });
    expect(rewrites).toBe(2);
    const monolith = (await readIndex(store, 'dm/.datastore-index.json'))!;
    expect(await readObject(store, 'dm/.datastore-index.json')).toEqual(monolithBefore);
    const mirror = (await readIndex(store, 'dm/_index/logs.json'))!;
    expect([...mirror.entries.keys()].sort()).toEqual([...monolith.entries.keys()].filter((k) => k.startsWith('logs/')).sort());
    expect(await readJson<MirrorMeta>(store, 'dm/_index/_meta.json')).toMatchObject({ version: 1 });
    expect((await healRoot(store, root, { mode: 'check' })).scopes[0]).toMatchObject({ staleMirrors: [], pending: undefined });
  });

  it('a delta whose change the monolith already holds refreshes the stale mirror of its partition', async () => {
    const { store, root } = await dualWriteRoot('dd/');
    await monolithOnlyPush(store, 'dd', { 'files/notes.txt': 'notes' });

    const report = await applyDelta(store, { root }, new Map([['files/notes.txt', objectChange('dd/files/notes.txt', { size: 5 })]]));

    expect(report).toMatchObject({ status: 'applied', added: 0, published: true, staleMirrors: ['files'] });
    expect([...(await readIndex(store, 'dd/_index/files.json'))!.entries.keys()].sort()).toEqual(['files/notes.txt', 'files/readme.txt']);
  });
});

describe('a monolith root', () => {
  it('stays a monolith with no manifest, whatever partition files a dead writer left', async () => {
    const store = await testStore();
    const rows = await clientRoot(store, 'mo/');
    await putIndex(store, 'mo/.datastore-index.json', entriesOf(rows.filter((r) => !r.key.startsWith('logs/'))));
    await putShardLayout(store, 'mo/', [indexEntry('logs/old.log', { size: 1 })]);
    const root = { bucket: store.bucket, prefix: 'mo' };

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({ layout: 'monolith', indexState: 'valid', drift: { missing: 1, stale: 0, resized: 0 } });

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'monolith', published: true });
    expect(await readObject(store, 'mo/_index/_meta.json')).toBeUndefined();
    expect(summarize(await readIndex(store, 'mo/.datastore-index.json'))).toEqual(summarize(new Map(rows.map((r) => [r.key, r]))));
    expect(summarize(await readIndex(store, 'mo/_index/logs.json'))).toEqual([{ key: 'logs/run-1.log', size: 7 }]);
    expect(await listKeys(store, 'mo/_index/')).toEqual(['mo/_index/logs.json']);
  });
});

describe('a shard-first root', () => {
  async function shardFirstRoot(base: string, commitSeq = 5) {
    const store = await testStore();
    const rows = await clientRoot(store, base);
    await putShardLayout(store, base, entriesOf(rows), shardMeta([...groupSummaries(rows).keys()].sort(), commitSeq));
    return { store, root: { bucket: store.bucket, prefix: base.slice(0, -1) }, rows };
  }

  it('repair keeps the shards equal to the listing and raises commitSeq', async () => {
    const { store, root, rows } = await shardFirstRoot('sf/');
    const truth = await changeOutOfBand(store, 'sf/', rows);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true });
    const meta = (await readJson<ShardMeta>(store, 'sf/_index/_meta.json'))!;
    expect(meta.version).toBe(2);
    expect(meta.commitSeq).toBe(6);
    const shards = await readShardSummaries(store, 'sf/', meta.partitions);
    const union = [...shards.values()].flat().sort((a, b) => (a.key < b.key ? -1 : 1));
    expect(union).toEqual(truth);
    expect(await readObject(store, 'sf/.datastore-index.json')).toBeUndefined();
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
  });

  it('adopts an orphan shard (a file the manifest does not list): lists it, raises commitSeq, exits cleanly', async () => {
    const { store, root, rows } = await shardFirstRoot('or/');
    // A client wrote the new partition's shard, then died before its manifest.
    await putObject(store, 'or/data/aws/lambda/f-1/1/raw', 'new function');
    await putShardLayout(store, 'or/', [indexEntry('data/aws/lambda/f-1/1/raw', { size: 12, sha256: 'client' })]);

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      layout: 'shard-first',
      indexState: 'valid',
      pending: expect.stringContaining('data--aws--lambda'),
    });

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true, conflicts: 0 });
    const meta = (await readJson<ShardMeta>(store, 'or/_index/_meta.json'))!;
    expect(meta.partitions).toContain('data--aws--lambda');
    expect(meta.commitSeq).toBe(6);
    const adopted = await readIndex(store, 'or/_index/data--aws--lambda.json');
    expect(adopted!.entries.get('data/aws/lambda/f-1/1/raw')).toMatchObject({ size: 12, sha256: 'client' });
    expect(rows.length + 1).toBe([...(await readShardSummaries(store, 'or/', meta.partitions)).values()].flat().length);

    const again = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(again.scopes[0].pending).toBeUndefined();
  });

  it('a delta into an orphan partition adopts the file instead of losing its create six times', async () => {
    const { store, root } = await shardFirstRoot('od/');
    await putShardLayout(store, 'od/', [indexEntry('data/aws/lambda/f-1/1/raw', { size: 12 })]);
    await putObject(store, 'od/data/aws/lambda/f-1/2/raw', 'second');

    const report = await applyDelta(
      connectStore(store.bucket),
      { root },
      new Map([['data/aws/lambda/f-1/2/raw', objectChange('od/data/aws/lambda/f-1/2/raw', { size: 6 })]]),
    );

    expect(report).toMatchObject({ layout: 'shard-first', published: true, conflicts: 0 });
    const meta = (await readJson<ShardMeta>(store, 'od/_index/_meta.json'))!;
    expect(meta.partitions).toContain('data--aws--lambda');
    expect(meta.commitSeq).toBe(6);
    expect((await readIndex(store, 'od/_index/data--aws--lambda.json'))!.entries.has('data/aws/lambda/f-1/2/raw')).toBe(true);
  });

  it('finishes a publish that died between its shards and its manifest: the next run raises commitSeq', async () => {
    const { store, root } = await shardFirstRoot('hf/');
    await putObject(store, 'hf/logs/run-2.log', 'two');
    const dying = hookedStore(store.bucket, {
      beforePut: (key) => {
        if (key.endsWith('_index/_meta.json')) throw new Error('killed before the manifest');
      },
    });
    await expect(healRoot(dying, root, { mode: 'repair' })).rejects.toThrow('killed before the manifest');
    expect((await readJson<ShardMeta>(store, 'hf/_index/_meta.json'))!.commitSeq).toBe(5);
    expect((await readIndex(store, 'hf/_index/logs.json'))!.entries.has('logs/run-2.log')).toBe(true);

    // Its entries are true now, but clients that recorded commitSeq 5 would never see them.
    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      indexState: 'valid',
      drift: { missing: 0, stale: 0, resized: 0 },
      pending: expect.any(String),
    });

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ published: true });
    expect((await readJson<ShardMeta>(store, 'hf/_index/_meta.json'))!.commitSeq).toBe(6);
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
    const again = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(again.scopes[0].pending).toBeUndefined();
  });

  it('writes again a partition file the manifest lists but S3 lacks (clients call that index corrupt)', async () => {
    const { store, root } = await shardFirstRoot('ms/');
    const meta = (await readJson<ShardMeta>(store, 'ms/_index/_meta.json'))!;
    await putObject(store, 'ms/_index/_meta.json', JSON.stringify({ ...meta, partitions: [...meta.partitions, 'audit'].sort() }));

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      indexState: 'valid',
      drift: { missing: 0, stale: 0, resized: 0 },
      pending: 'partition files the manifest lists are missing: audit',
    });
    await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(summarize(await readIndex(store, 'ms/_index/audit.json'))).toEqual([]);
    expect((await readJson<ShardMeta>(store, 'ms/_index/_meta.json'))!.commitSeq).toBe(6);
    expect((await healRoot(connectStore(store.bucket), root, { mode: 'check' })).scopes[0].pending).toBeUndefined();
  });

  it('notices a shard a client wrote after the manifest (it died before bumping commitSeq)', async () => {
    const { store, root } = await shardFirstRoot('cl/');
    // The layout as first written reads a second older: LastModified has whole seconds, and no test waits for the next.
    const first = new Set((await listObjects(store, 'cl/_index/')).map((o) => o.etag));
    await putObject(store, 'cl/logs/run-2.log', 'two');
    await putShardLayout(store, 'cl/', [indexEntry('logs/run-1.log', { size: 7 }), indexEntry('logs/run-2.log', { size: 3 })]);
    const reader = () => agedStore(store.bucket, first, 1000);

    const check = await healRoot(reader(), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      indexState: 'valid',
      drift: { missing: 0, stale: 0, resized: 0 },
      pending: 'shard logs is newer than the manifest',
    });
    await healRoot(reader(), root, { mode: 'repair' });

    expect((await readJson<ShardMeta>(store, 'cl/_index/_meta.json'))!.commitSeq).toBe(6);
  });
});

describe('an unparsable _meta.json', () => {
  it('is kept, reported and left alone when it does not say its layout', async () => {
    const store = await testStore();
    const rows = await clientRoot(store, 'um/');
    await putIndex(store, 'um/.datastore-index.json', entriesOf(rows));
    await putShardLayout(store, 'um/', entriesOf(rows));
    await putObject(store, 'um/_index/_meta.json', '<html>oops</html>');
    const root = { bucket: store.bucket, prefix: 'um' };
    const before = await snapshotBucket(store);

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({ indexState: 'unreadable', held: expect.stringContaining('names no version (1 or 2)') });
    expect(await snapshotBucket(store)).toEqual(before);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({
      published: false,
      held: expect.any(String),
      keptCopy: expect.stringMatching(/^um\/_control\/datastore-indexer\/unreadable\/root\//),
    });
    const after = await snapshotBucket(store);
    after.delete(report.scopes[0].keptCopy!);
    expect(after).toEqual(before);
    // every later run meets it again: still one copy of that version
    await healRoot(connectStore(store.bucket), root, { mode: 'repair' });
    expect(await listKeys(store, 'um/_control/')).toEqual([report.scopes[0].keptCopy]);
  });

  it('is refused by a direct write of its index, typed and with nothing written', async () => {
    const store = await testStore();
    await putObject(store, 'uw/_index/_meta.json', '<html>oops</html>');
    const scope = { root: { bucket: store.bucket, prefix: 'uw' } };
    const live = await readLiveIndex(connectStore(store.bucket), scope);
    const before = await snapshotBucket(store);

    const error = await writeIndex(connectStore(store.bucket), scope, live, emptyIndex(), true).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(HeldScopeError);
    expect(error).toMatchObject({ name: 'HeldScopeError', scope: `s3://${store.bucket}/uw`, hint: expect.stringMatching(/^Run check/) });
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('is rebuilt at version 1 from the monolith when it says version 1', async () => {
    const { store, root, rows } = await dualWriteRoot('u1/');
    await putObject(store, 'u1/_index/_meta.json', '{"version": 1, "partitions": ["data--aws--ec2--i-1"');

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({
      layout: 'dual-write',
      published: true,
      keptCopy: expect.stringContaining('_control/datastore-indexer/unreadable/root/'),
    });
    expect(await readJson<MirrorMeta>(store, 'u1/_index/_meta.json')).toEqual({
      version: 1,
      partitions: [...groupSummaries(rows).keys()].sort(),
    });
    expect(summarize(await readIndex(store, 'u1/.datastore-index.json'))).toEqual(summarize(new Map(rows.map((r) => [r.key, r]))));
  });
});

describe('keys clients refuse', () => {
  const REFUSED = ['data/../../escape.txt', `files/${'x'.repeat(256)}`, 'logs/./dot.log'];

  it('never enter an index from a listing; an index holding one loses it; check lists them under refused', async () => {
    const store = await testStore();
    const rows = await clientRoot(store, 'rk/');
    await putObjects(store, Object.fromEntries(REFUSED.map((k) => [`rk/${k}`, 'bad'])));
    await putIndex(store, 'rk/.datastore-index.json', [...entriesOf(rows), indexEntry('logs/./dot.log', { size: 3 })]);
    const root = { bucket: store.bucket, prefix: 'rk' };

    const check = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(check.scopes[0]).toMatchObject({
      refused: REFUSED.length,
      refusedKeys: [...REFUSED].sort(),
      drift: { missing: 0, stale: 1, resized: 0 },
    });

    await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    const index = (await readIndex(store, 'rk/.datastore-index.json'))!;
    for (const key of REFUSED) expect(index.entries.has(key)).toBe(false);
    expect(summarize(index)).toEqual(summarize(new Map(rows.map((r) => [r.key, r]))));
    const again = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(again.scopes[0]).toMatchObject({ refused: REFUSED.length, drift: { missing: 0, stale: 0, resized: 0 } });
  });

  it('never enter a dual-write mirror either: the monolith and every partition file lose them, the manifest stays version 1', async () => {
    const { store, root, rows, partitions } = await dualWriteRoot('rd/');
    await putObjects(store, Object.fromEntries(REFUSED.map((k) => [`rd/${k}`, 'bad'])));
    // A writer that did not check keys left one in the monolith and in its partition file.
    await putIndex(store, 'rd/.datastore-index.json', [...entriesOf(rows), indexEntry('logs/./dot.log', { size: 3 })]);
    await putShardLayout(store, 'rd/', [...entriesOf(rows), indexEntry('logs/./dot.log', { size: 3 })]);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    expect(report.scopes[0]).toMatchObject({ layout: 'dual-write', published: true, refused: REFUSED.length, mirrorFailures: 0 });
    const monolith = (await readIndex(store, 'rd/.datastore-index.json'))!;
    expect(summarize(monolith)).toEqual(summarize(new Map(rows.map((r) => [r.key, r]))));
    const mirror = [...(await readShardSummaries(store, 'rd/', partitions)).values()].flat().map((r) => r.key);
    for (const key of REFUSED) expect(mirror).not.toContain(key);
    expect(await readJson<MirrorMeta>(store, 'rd/_index/_meta.json')).toEqual({ version: 1, partitions });
  });

  it('never enter a shard either, whether from a listing or an event', async () => {
    const store = await testStore();
    const rows = await clientRoot(store, 'rs/');
    await putShardLayout(store, 'rs/', entriesOf(rows), shardMeta([...groupSummaries(rows).keys()].sort(), 3));
    await putObjects(store, Object.fromEntries(REFUSED.map((k) => [`rs/${k}`, 'bad'])));
    const root = { bucket: store.bucket, prefix: 'rs' };

    const delta = await applyDelta(
      connectStore(store.bucket),
      { root },
      new Map(REFUSED.map((k) => [k, objectChange(`rs/${k}`, { size: 3 })])),
    );
    expect(delta).toMatchObject({ refused: REFUSED.length, published: false });
    await healRoot(connectStore(store.bucket), root, { mode: 'repair' });

    const meta = (await readJson<ShardMeta>(store, 'rs/_index/_meta.json'))!;
    const keys = [...(await readShardSummaries(store, 'rs/', meta.partitions)).values()].flat().map((r) => r.key);
    for (const key of REFUSED) expect(keys).not.toContain(key);
    expect(REFUSED.filter((k) => partitionOf(k) !== undefined).length).toBeGreaterThan(0);
  });
});
