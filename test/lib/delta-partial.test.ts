/**
 * A delta on a shard-first root reads only the partition files its changes touch (and the manifest), and
 * still converges when another writer changes some other partition between that read and the write.
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { applyDelta } from '../../lambda/lib/delta';
import { publishRecordKey } from '../../lambda/lib/names';
import { indexEntry, objectChange, shardMeta } from '../helpers/factories';
import {
  connectStore,
  hookedStore,
  listObjects,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  testStore,
  trackRequests,
} from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

const T = '2026-07-01T00:00:00.000Z';
const RUNS = Array.from({ length: 30 }, (_, i) => `w${i}`);

/** A shard-first root under `s/` with one partition per workflow run plus `audit` and `logs`, at commitSeq 41. */
async function manyPartitions(store: S3Store): Promise<{ scope: { root: { bucket: string; prefix: string } }; partitions: string[] }> {
  const entries: IndexEntry[] = [
    indexEntry('audit/a.json'),
    indexEntry('logs/l.log'),
    ...RUNS.map((r) => indexEntry(`workflow-runs/${r}/run.json`)),
  ];
  const partitions = ['audit', 'logs', ...RUNS.map((r) => `workflow-runs--${r}`)].sort();
  await putShardLayout(store, 's/', entries, shardMeta(partitions, 41));
  await putObjects(store, { 's/workflow-runs/w3/new.json': 'hello' });
  return { scope: { root: { bucket: store.bucket, prefix: 's' } }, partitions };
}

const added = new Map([['workflow-runs/w3/new.json', objectChange('s/workflow-runs/w3/new.json', { size: 5, eventTime: T })]]);

/** ETags of the partition files, by key. */
async function shardEtags(store: S3Store): Promise<Map<string, string>> {
  return new Map((await listObjects(store, 's/_index/')).map((o) => [o.key, o.etag]));
}

describe('applyDelta on a shard-first root with many partitions', () => {
  it('reads only the manifest and the touched partition file, and writes only that file and the manifest', async () => {
    const store = await testStore();
    const { scope, partitions } = await manyPartitions(store);
    const before = await shardEtags(store);
    const writer = connectStore(store.bucket);
    const log = trackRequests(writer);

    const report = await applyDelta(writer, scope, added, { convergeRounds: 0 });

    expect(report).toMatchObject({ status: 'applied', layout: 'shard-first', added: 1, published: true, partial: true, conflicts: 0 });
    const shardReads = log.filter((r) => r.op === 'GetObject' && r.key?.startsWith('s/_index/')).map((r) => r.key);
    expect(shardReads.sort()).toEqual(['s/_index/_meta.json', 's/_index/workflow-runs--w3.json']);
    const written = log.filter((r) => r.op === 'PutObject' && r.key?.startsWith('s/_index/'));
    expect(written).toEqual([
      expect.objectContaining({ key: 's/_index/workflow-runs--w3.json', ifMatch: expect.any(String) }),
      expect.objectContaining({ key: 's/_index/_meta.json', ifMatch: expect.any(String) }),
    ]);
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual({ version: 2, partitions, commitSeq: 42 });
    expect([...(await readIndex(store, 's/_index/workflow-runs--w3.json'))!.entries.keys()].sort()).toEqual([
      'workflow-runs/w3/new.json',
      'workflow-runs/w3/run.json',
    ]);
    const after = await shardEtags(store);
    for (const [key, etag] of before) {
      if (!key.endsWith('/_meta.json') && !key.endsWith('/workflow-runs--w3.json')) expect([key, after.get(key)]).toEqual([key, etag]);
    }
  });

  it('a delta that changes nothing asks only for the manifest and the touched file: the publish record is asked only to write', async () => {
    const store = await testStore();
    const { scope } = await manyPartitions(store);
    const writer = connectStore(store.bucket);
    const first = trackRequests(writer);
    await applyDelta(writer, scope, added, { convergeRounds: 0 });
    expect(first.filter((r) => r.key === publishRecordKey(scope)).map((r) => r.op)).toEqual(['HeadObject', 'PutObject', 'DeleteObject']);

    const again = connectStore(store.bucket);
    const log = trackRequests(again);
    const report = await applyDelta(again, scope, added, { convergeRounds: 0 });

    expect(report).toMatchObject({ status: 'applied', added: 0, published: false, partial: true });
    expect(log.map((r) => `${r.op} ${r.key}`).sort()).toEqual([
      'GetObject s/.datastore-index.json',
      'GetObject s/_index/_meta.json',
      'GetObject s/_index/workflow-runs--w3.json',
    ]);
  });

  it('converges when another writer changed another partition and the manifest between its read and its write', async () => {
    const store = await testStore();
    const { scope, partitions } = await manyPartitions(store);
    let raced = false;
    const writer = hookedStore(store.bucket, {
      async beforePut(key, conditional) {
        if (raced || !conditional || key !== 's/_index/workflow-runs--w3.json') return;
        raced = true;
        // A client's push lands first: a new entry in `audit`, then its manifest.
        await putObject(
          store,
          's/_index/audit.json',
          JSON.stringify({
            version: 1,
            entries: { 'audit/a.json': indexEntry('audit/a.json'), 'audit/b.json': indexEntry('audit/b.json') },
          }),
        );
        await putObject(store, 's/_index/_meta.json', JSON.stringify(shardMeta(partitions, 42)));
      },
    });
    const log = trackRequests(writer);

    const report = await applyDelta(writer, scope, added, { convergeRounds: 0 });

    expect(raced).toBe(true);
    // Its shard was written before the manifest lost: read again, the entry is there and only the manifest is due.
    expect(report).toMatchObject({ status: 'applied', published: true, writes: 1, conflicts: 1 });
    // The lost race on the manifest's If-Match is read again, whole, and planned again.
    expect(log.filter((r) => r.op === 'GetObject' && r.key === 's/_index/logs.json')).toHaveLength(1);
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual({ version: 2, partitions, commitSeq: 43 });
    expect([...(await readIndex(store, 's/_index/audit.json'))!.entries.keys()].sort()).toEqual(['audit/a.json', 'audit/b.json']);
    expect([...(await readIndex(store, 's/_index/workflow-runs--w3.json'))!.entries.keys()].sort()).toEqual([
      'workflow-runs/w3/new.json',
      'workflow-runs/w3/run.json',
    ]);
    expect(await listObjects(store, 's/_control/')).toEqual([]);
  });

  it('reads every partition when an earlier publish left its record, and finishes it', async () => {
    const store = await testStore();
    const { scope, partitions } = await manyPartitions(store);
    await putObject(store, publishRecordKey(scope), JSON.stringify({ commitSeq: 41, partitions: ['logs'] }));
    const writer = connectStore(store.bucket);
    const log = trackRequests(writer);

    const report = await applyDelta(writer, scope, added, { convergeRounds: 0 });

    expect(report).toMatchObject({ status: 'applied', added: 1, published: true, partial: false });
    const reads = new Set(log.filter((r) => r.op === 'GetObject' && r.key?.startsWith('s/_index/')).map((r) => r.key));
    expect(reads).toEqual(new Set(['s/_index/_meta.json', ...partitions.map((p) => `s/_index/${p}.json`)]));
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual({ version: 2, partitions, commitSeq: 42 });
    expect(await listObjects(store, 's/_control/')).toEqual([]);
  });

  it('a race lost after its record was written does not take that record, met again, for an earlier publish', async () => {
    const store = await testStore();
    const { scope, partitions } = await manyPartitions(store);
    let raced = false;
    // Another writer moves the manifest on just before ours is written: our conditional write loses.
    const writer = hookedStore(store.bucket, {
      async beforePut(key) {
        if (raced || key !== 's/_index/_meta.json') return;
        raced = true;
        await putObject(store, 's/_index/_meta.json', JSON.stringify(shardMeta(partitions, 42)));
      },
    });
    const earlier: (boolean | undefined)[] = [];

    const report = await applyDelta(writer, scope, added, {
      convergeRounds: 0,
      beforeRecord: async (_scope, earlierRecord) => {
        earlier.push(earlierRecord);
      },
    });

    expect(raced).toBe(true);
    // Its first write put the entry in the partition file before the manifest lost: the last plan finds it there.
    expect(report).toMatchObject({ status: 'applied', published: true });
    expect(report.conflicts).toBeGreaterThan(0);
    expect(earlier.length).toBeGreaterThan(1);
    expect(earlier).not.toContain(true);
    expect((await readJson<ShardMeta>(store, 's/_index/_meta.json'))!.commitSeq).toBe(43);
    expect(await listObjects(store, 's/_control/')).toEqual([]);
  });

  it('reads every partition when a touched partition file exists that the manifest does not list', async () => {
    const store = await testStore();
    const { scope, partitions } = await manyPartitions(store);
    await putObject(store, 's/_index/files.json', JSON.stringify({ version: 1, entries: {} }));
    const writer = connectStore(store.bucket);
    const log = trackRequests(writer);

    const report = await applyDelta(writer, scope, new Map([['files/f.txt', objectChange('s/files/f.txt', { size: 5, eventTime: T })]]), {
      convergeRounds: 0,
    });

    expect(report).toMatchObject({ status: 'applied', added: 1, published: true, partial: false });
    expect(log.filter((r) => r.op === 'GetObject' && r.key === 's/_index/logs.json').length).toBeGreaterThan(0);
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual({
      version: 2,
      partitions: [...partitions, 'files'].sort(),
      commitSeq: 42,
    });
    expect([...(await readIndex(store, 's/_index/files.json'))!.entries.keys()]).toEqual(['files/f.txt']);
  });
});
