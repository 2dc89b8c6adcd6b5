/** applyDelta and observeKeys against moto: event-driven updates of a live index. */
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { applyDelta } from '../../lambda/lib/delta';
import { observeKeys } from '../../lambda/lib/observe';
import { indexEntry, objectChange, shardMeta } from '../helpers/factories';
import {
  connectStore,
  listObjects,
  putIndex,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  snapshotBucket,
  testStore,
  trackRequests,
} from '../helpers/s3';

const T = '2026-07-01T00:00:00.000Z';

describe('applyDelta on a monolithic index', () => {
  async function indexedRoot() {
    const store = await testStore();
    const root = { bucket: store.bucket, prefix: 'd' };
    const kept = indexEntry('logs/kept.log', { size: 4, sha256: 'k', localMtime: 'm', custom: [1] });
    const grows = indexEntry('logs/grows.log', { size: 1, sha256: 'g', custom: 'stays' });
    await putIndex(store, 'd/.datastore-index.json', [kept, grows, indexEntry('logs/goes.log')], { clientVersion: '2026.04.28' });
    const changes = new Map([
      ['logs/kept.log', objectChange('d/logs/kept.log', { size: 4, eventTime: T })],
      ['logs/grows.log', objectChange('d/logs/grows.log', { size: 9, eventTime: T })],
      ['logs/goes.log', objectChange('d/logs/goes.log', { kind: 'removed' })],
      ['logs/new.log', objectChange('d/logs/new.log', { size: 2, eventTime: T })],
    ]);
    return { store, scope: { root }, kept, changes };
  }

  it('adds, removes and resizes in one write, keeping client and unknown fields', async () => {
    const { store, scope, kept, changes } = await indexedRoot();
    const writer = connectStore(store.bucket);
    const log = trackRequests(writer);

    const report = await applyDelta(writer, scope, changes);

    expect(report).toMatchObject({
      status: 'applied',
      layout: 'monolith',
      added: 1,
      removed: 1,
      resized: 1,
      changes: 4,
      entries: 3,
      published: true,
      writes: 1,
      conflicts: 0,
    });
    const index = (await readIndex(store, 'd/.datastore-index.json'))!;
    expect([...index.entries.keys()].sort()).toEqual(['logs/grows.log', 'logs/kept.log', 'logs/new.log']);
    expect(index.entries.get('logs/kept.log')).toEqual(kept);
    expect(index.entries.get('logs/grows.log')).toEqual({ key: 'logs/grows.log', size: 9, lastModified: T, custom: 'stays' });
    expect(index.entries.get('logs/new.log')).toEqual({ key: 'logs/new.log', size: 2, lastModified: T });
    expect(index.extra).toEqual({ clientVersion: '2026.04.28' });
    const indexWrites = log.filter((r) => r.op === 'PutObject' && r.key === 'd/.datastore-index.json');
    expect(indexWrites).toHaveLength(1);
    expect(indexWrites[0].ifMatch).toEqual(expect.any(String));
  });

  it('writes nothing and takes no lock when the delta is a replay', async () => {
    const { store, scope, changes } = await indexedRoot();
    await applyDelta(connectStore(store.bucket), scope, changes);
    const before = await snapshotBucket(store);
    const replayer = connectStore(store.bucket);

    const report = await applyDelta(replayer, scope, changes);

    expect(report).toMatchObject({ status: 'applied', published: false, writes: 0, added: 0, removed: 0, resized: 0 });
    expect(replayer.requests.PutObject ?? 0).toBe(0);
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it.each([
    ['absent', undefined],
    ['unreadable', '{"foo":1}'],
  ])('leaves an %s index alone and reports no-index', async (state, body) => {
    const store = await testStore();
    if (body) await putObjects(store, { 'd/.datastore-index.json': body });
    const before = await snapshotBucket(store);

    const report = await applyDelta(
      connectStore(store.bucket),
      { root: { bucket: store.bucket, prefix: 'd' } },
      new Map([['logs/a', objectChange('d/logs/a')]]),
    );

    expect(report).toMatchObject({ status: 'no-index', indexState: state, published: false });
    expect(await snapshotBucket(store)).toEqual(before);
  });
});

describe('applyDelta on a shard-first index', () => {
  it('writes only the shards it changes, bumps commitSeq and leaves unshardable keys out', async () => {
    const store = await testStore();
    await putShardLayout(
      store,
      's/',
      [indexEntry('logs/a.log'), indexEntry('audit/1.json'), indexEntry('files/f.txt')],
      shardMeta(['audit', 'files', 'logs'], 41),
    );
    const before = new Map((await listObjects(store, 's/_index/')).map((o) => [o.key, o.etag]));
    const changes = new Map([
      ['logs/b.log', objectChange('s/logs/b.log', { size: 5, eventTime: T })],
      ['misc/x/y', objectChange('s/misc/x/y', { size: 5, eventTime: T })],
      ['notes.md', objectChange('s/notes.md', { size: 3, eventTime: T })],
    ]);

    const report = await applyDelta(connectStore(store.bucket), { root: { bucket: store.bucket, prefix: 's' } }, changes);

    expect(report).toMatchObject({ status: 'applied', layout: 'shard-first', added: 2, unshardable: 1, published: true });
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual({
      version: 2,
      partitions: ['_root', 'audit', 'files', 'logs'],
      commitSeq: 42,
    });
    expect([...(await readIndex(store, 's/_index/logs.json'))!.entries.keys()]).toEqual(['logs/a.log', 'logs/b.log']);
    expect([...(await readIndex(store, 's/_index/_root.json'))!.entries.keys()]).toEqual(['notes.md']);
    const after = new Map((await listObjects(store, 's/_index/')).map((o) => [o.key, o.etag]));
    expect(after.get('s/_index/audit.json')).toBe(before.get('s/_index/audit.json'));
    expect(after.get('s/_index/files.json')).toBe(before.get('s/_index/files.json'));
    expect(await snapshotBucket(store, 's/misc')).toEqual(new Map());
  });
});

describe('observeKeys', () => {
  it('says what S3 holds now: created with size and LastModified, or removed', async () => {
    const store = await testStore();
    await putObjects(store, { 'o/ns/logs/here.log': 'hello' });

    const observed = await observeKeys(connectStore(store.bucket), { root: { bucket: store.bucket, prefix: 'o' }, namespace: 'ns' }, [
      'logs/here.log',
      'logs/gone.log',
      'logs/here.log',
    ]);

    expect([...observed.keys()].sort()).toEqual(['logs/gone.log', 'logs/here.log']);
    expect(observed.get('logs/here.log')).toMatchObject({
      bucket: store.bucket,
      key: 'o/ns/logs/here.log',
      kind: 'created',
      size: 5,
      etag: expect.any(String),
    });
    expect(Date.parse(observed.get('logs/here.log')!.eventTime)).not.toBeNaN();
    expect(observed.get('logs/gone.log')).toMatchObject({ key: 'o/ns/logs/gone.log', kind: 'removed' });
  });
});

describe('applyDelta with a stale event (found by the chaos suite)', () => {
  it('a late "created" of an overwritten object does not strip the newer entry of its client fields', async () => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 's' } };
    // The client overwrote the object (now 10 bytes) and indexed it with its fields; the first upload's event (3 bytes) comes last.
    await putObjects(store, { 's/logs/over.log': 'x'.repeat(10), 's/logs/back.log': 'y'.repeat(4) });
    const over = indexEntry('logs/over.log', { size: 10, sha256: 'newer', localMtime: 'm2', custom: 'kept' });
    const back = indexEntry('logs/back.log', { size: 4, sha256: 'b', localMtime: 'mb' });
    await putIndex(store, 's/.datastore-index.json', [over, back]);
    const changes = new Map([
      ['logs/over.log', objectChange('s/logs/over.log', { size: 3, eventTime: T })],
      // Deleted and written again since: the removal is stale too.
      ['logs/back.log', objectChange('s/logs/back.log', { kind: 'removed' })],
    ]);

    const report = await applyDelta(connectStore(store.bucket), scope, changes);

    expect(report.published).toBe(false);
    const index = await readIndex(store, 's/.datastore-index.json');
    expect(index!.entries.get('logs/over.log')).toEqual(over);
    expect(index!.entries.get('logs/back.log')).toEqual(back);
  });
});
