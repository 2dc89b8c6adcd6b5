/**
 * The bundled handler on each index layout as clients leave it: S3 notifications moto really sends, and
 * direct invokes. The layout stays as found and its truth equals the listing; refused keys are never indexed.
 */
import type { MirrorMeta, ShardMeta } from '../../lambda/lib/layouts/manifest';
import { isRefusedKey, partitionOf } from '../../lambda/lib/keys';
import { publishRecordKey } from '../../lambda/lib/names';
import { dualWriteRoot, monolithOnlyPush, partitionsOf, swampObjects } from '../helpers/dual-write';
import { indexEntry, shardMeta } from '../helpers/factories';
import { handlerEnv, invoke, loadHandler, notifiedBucket, scheduledEvent, sqsEventFrom } from '../helpers/lambda';
import {
  type KeySize,
  deleteObject,
  groupSummaries,
  listKeys,
  putIndex,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  readObject,
  readShardSummaries,
  snapshotBucket,
  sortByKey,
  summarize,
  testStore,
} from '../helpers/s3';
import { expectedFromListing } from './support';

type BatchResponse = { batchItemFailures: { itemIdentifier: string }[] };
type ScopeDrift = {
  layout: string;
  indexState: string;
  published: boolean;
  refused: number;
  pending?: string;
  held?: string;
  sample: { refused: string[] };
};
type DriftReport = { roots: { scopes: ScopeDrift[] }[] };

const OBJECTS: Record<string, string> = {
  'data/aws/ec2/i-1/1/raw': 'ec2 one',
  'data/aws/s3/b-1/1/raw': 's3 bucket',
  'workflow-runs/wf-1/run-1/log.txt': 'ran',
  'logs/run-1.log': 'log one',
  'files/readme.txt': 'hello',
};
const entriesOf = (objects: Record<string, string>) =>
  Object.entries(objects).map(([key, body]) => indexEntry(key, { size: Buffer.byteLength(body), sha256: `sha-${key}` }));
const byKey = (rows: KeySize[]) => rows.sort((a, b) => (a.key < b.key ? -1 : 1));

describe('the Lambda bundle on a dual-write root (S3 notifications)', () => {
  test('uploads, an overwrite, a delete and a refused key: the monolith equals the listing, the mirror follows, the manifest stays version 1', async () => {
    const fx = await notifiedBucket('dw');
    const { store } = fx;
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`swamp/${k}`, v])));
    await putIndex(store, 'swamp/.datastore-index.json', entriesOf(OBJECTS));
    await putShardLayout(store, 'swamp/', entriesOf(OBJECTS));
    const partitions = [...groupSummaries(entriesOf(OBJECTS)).keys()].sort();
    await putObject(store, 'swamp/_index/_meta.json', JSON.stringify({ version: 1, partitions }));
    await fx.receive();

    await putObject(store, 'swamp/data/aws/lambda/f-1/1/raw', 'new function');
    await putObject(store, 'swamp/logs/run-1.log', 'log one, rewritten longer');
    await deleteObject(store, 'swamp/files/readme.txt');
    await putObject(store, 'swamp/data/../../escape.txt', 'a key clients refuse');
    const messages = await fx.receive();
    expect(messages).toHaveLength(4);

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp' }));
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));

    expect(run.result.batchItemFailures).toEqual([]);
    const root = { bucket: store.bucket, prefix: 'swamp' };
    const truth = byKey((await expectedFromListing(store, { root })).filter((r) => !isRefusedKey(r.key)));
    const monolith = await readIndex(store, 'swamp/.datastore-index.json');
    expect(summarize(monolith)).toEqual(truth);
    expect(monolith!.entries.has('data/../../escape.txt')).toBe(false);
    // the emptied partition (files) stays listed, its file with no entries
    expect(await readJson<MirrorMeta>(store, 'swamp/_index/_meta.json')).toEqual({
      version: 1,
      partitions: [...groupSummaries(truth).keys(), 'files'].sort(),
    });
    const touched = ['data--aws--lambda', 'logs', 'files'];
    const mirror = await readShardSummaries(store, 'swamp/', touched);
    for (const p of touched) expect(mirror.get(p)).toEqual(groupSummaries(truth).get(p) ?? []);
    const [line] = run.logs('root done');
    expect(JSON.stringify(line)).toContain('"refused":1');
  });
});

describe('the Lambda bundle repairing by direct invoke', () => {
  test('a shard-first root with an orphan shard and a publish that died before its manifest: check says pending, repair finishes with a higher commitSeq', async () => {
    const store = await testStore({ bucketPrefix: 'lsf' });
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`sf/${k}`, v])));
    const listed = [...groupSummaries(entriesOf(OBJECTS)).keys()].filter((p) => p !== 'files').sort();
    await putShardLayout(store, 'sf/', entriesOf(OBJECTS), shardMeta(listed, 9));
    // a publish that wrote its shards and died: its record is still there
    const root = { bucket: store.bucket, prefix: 'sf' };
    await putObject(store, publishRecordKey({ root }), JSON.stringify({ commitSeq: 9 }));
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'sf' }));

    const check = await invoke<DriftReport>(lambda, { action: 'check' });
    expect(check.result.roots[0].scopes[0]).toMatchObject({
      layout: 'shard-first',
      indexState: 'valid',
      published: false,
      pending: expect.any(String),
    });

    const repair = await invoke<DriftReport>(lambda, { action: 'repair' });

    expect(repair.result.roots[0].scopes[0]).toMatchObject({ layout: 'shard-first', published: true });
    const meta = (await readJson<ShardMeta>(store, 'sf/_index/_meta.json'))!;
    expect(meta).toEqual({ version: 2, partitions: [...listed, 'files'].sort(), commitSeq: 10 });
    const shards = [...(await readShardSummaries(store, 'sf/', meta.partitions)).values()].flat();
    expect(byKey(shards)).toEqual(byKey(await expectedFromListing(store, { root })));
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
    expect(await readObject(store, 'sf/.datastore-index.json')).toBeUndefined();
    const again = await invoke<DriftReport>(lambda, { action: 'check' });
    expect(again.result.roots[0].scopes[0].pending).toBeUndefined();
  });

  test('an unparsable manifest that does not say its layout is held: a copy kept, nothing else written', async () => {
    const store = await testStore({ bucketPrefix: 'lum' });
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`um/${k}`, v])));
    await putIndex(store, 'um/.datastore-index.json', entriesOf(OBJECTS));
    await putObject(store, 'um/_index/_meta.json', 'garbage');
    const before = await snapshotBucket(store);
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'um' }));

    const repair = await invoke<DriftReport>(lambda, { action: 'repair' });

    expect(repair.result.roots[0].scopes[0]).toMatchObject({
      published: false,
      held: expect.stringContaining('names no version (1 or 2)'),
    });
    const copies = await listKeys(store, 'um/_control/datastore-indexer/unreadable/root/');
    expect(copies).toHaveLength(1);
    const after = await snapshotBucket(store);
    after.delete(copies[0]);
    expect(after).toEqual(before);
  });

  test('a refused key already in the index is removed by a repair and reported', async () => {
    const store = await testStore({ bucketPrefix: 'lrk' });
    const bad = `logs/${'y'.repeat(300)}`;
    await putObjects(store, Object.fromEntries(Object.entries({ ...OBJECTS, [bad]: 'too long a name' }).map(([k, v]) => [`rk/${k}`, v])));
    await putIndex(store, 'rk/.datastore-index.json', [...entriesOf(OBJECTS), indexEntry(bad, { size: 15 })]);
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'rk' }));

    const repair = await invoke<DriftReport>(lambda, { action: 'repair' });

    expect(repair.result.roots[0].scopes[0]).toMatchObject({ published: true, refused: 1, sample: { refused: [bad] } });
    const index = (await readIndex(store, 'rk/.datastore-index.json'))!;
    expect(index.entries.has(bad)).toBe(false);
    expect(partitionOf(bad)).toBe('logs');
    expect(summarize(index)).toEqual(byKey(entriesOf(OBJECTS).map((e) => ({ key: e.key, size: e.size }))));
  });
});

describe('the Lambda bundle and a dual-write mirror an older client left stale', () => {
  test('the events of a push the monolith already holds refresh the stale mirror files of their partitions, and only those', async () => {
    // GIVEN a dual-write root, and an older client's push that rewrote only the monolith
    const fx = await notifiedBucket('dws');
    const { store } = fx;
    await dualWriteRoot(store, 'swamp', swampObjects(4));
    expect((await fx.receive()).length).toBeGreaterThanOrEqual(20);
    const pushed = { 'data/aws/ec2/i-1/2/raw': 'model 1, version 2', 'logs/run-2.log': 'log two' };
    await monolithOnlyPush(store, 'swamp', pushed);
    const messages = await fx.receive();
    // Keys in a notification are URL-encoded.
    const keys = messages.map((m) => decodeURIComponent(m.Body ?? ''));
    expect(keys.some((k) => k.includes('swamp/logs/run-2.log')) && keys.some((k) => k.includes('swamp/data/aws/ec2/i-1/2/raw'))).toBe(true);
    const monolithBefore = await readObject(store, 'swamp/.datastore-index.json');
    const untouched = await readObject(store, 'swamp/_index/data--aws--s3.json');

    // WHEN the Lambda gets the push's notifications (the monolith already holds both keys)
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp' }));
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));

    // THEN the two partitions' mirror files equal the monolith again; the monolith and other mirror files are as they were
    expect(run.result.batchItemFailures).toEqual([]);
    const monolith = (await readIndex(store, 'swamp/.datastore-index.json'))!;
    expect(await readObject(store, 'swamp/.datastore-index.json')).toEqual(monolithBefore);
    for (const partition of partitionsOf(Object.keys(pushed))) {
      const mirror = await readIndex(store, `swamp/_index/${partition}.json`);
      const expected = [...monolith.entries.values()].filter((e) => partitionOf(e.key) === partition);
      expect(sortByKey([...(mirror?.entries.values() ?? [])])).toEqual(sortByKey(expected));
    }
    expect(await readObject(store, 'swamp/_index/data--aws--s3.json')).toEqual(untouched);
    expect(await readJson<MirrorMeta>(store, 'swamp/_index/_meta.json')).toMatchObject({ version: 1 });
    expect(run.metric('StaleMirrors').reduce((a, b) => a + b, 0)).toBe(2);
  });
});

describe('the Lambda bundle on a shard-first root (the schedule)', () => {
  test('the scheduled repair heals it partition by partition: every partition file equals the listing, client fields stay, commitSeq moves', async () => {
    const store = await testStore();
    const current = { ...OBJECTS, 'logs/run-1.log': 'log one, rewritten longer', 'data/aws/lambda/f-1/1/raw': 'new function' };
    await putObjects(store, Object.fromEntries(Object.entries(current).map(([k, v]) => [`swamp/${k}`, v])));
    // The index as a client left it: true but for the new function (missing), the rewritten log (resized) and a gone file (stale).
    const entries = [...entriesOf(OBJECTS), indexEntry('files/gone.txt')];
    await putShardLayout(store, 'swamp/', entries);
    const partitions = [...groupSummaries(entries).keys()].sort();
    await putObject(store, 'swamp/_index/_meta.json', JSON.stringify(shardMeta(partitions, 4)));

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp' }));
    const run = await invoke<{ roots: { status: string; drift: Record<string, number> }[] }>(lambda, scheduledEvent());

    expect(run.result.roots[0]).toMatchObject({ status: 'complete', drift: { missing: 1, stale: 1, resized: 1 } });
    const root = { bucket: store.bucket, prefix: 'swamp' };
    const truth = groupSummaries(byKey(await expectedFromListing(store, { root })));
    const meta = (await readJson<ShardMeta>(store, 'swamp/_index/_meta.json'))!;
    expect(meta.commitSeq).toBeGreaterThan(4);
    const files = await readShardSummaries(store, 'swamp/', meta.partitions);
    expect(new Map([...files].filter(([, rows]) => rows.length > 0))).toEqual(truth);
    const ec2 = await readIndex(store, 'swamp/_index/data--aws--ec2.json');
    expect(ec2!.entries.get('data/aws/ec2/i-1/1/raw')).toMatchObject({ sha256: 'sha-data/aws/ec2/i-1/1/raw' });
  });
});
