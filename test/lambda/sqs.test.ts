/**
 * The bundled handler on SQS batches: real S3 notifications that moto delivers to SQS, EventBridge-shaped
 * events, the handler's own re-check messages, partial batch failures.
 */
import { INDEX_KEY, LOCK_KEY } from '../../lambda/lib/names';
import { lockBody, s3Event, s3EventRecord } from '../helpers/factories';
import {
  type CountingProxy,
  type NotifiedBucket,
  eventBridgeS3Event,
  handlerEnv,
  invoke,
  loadHandler,
  notifiedBucket,
  sqsEventFrom,
  sqsEventOf,
  startCountingProxy,
} from '../helpers/lambda';
import { deleteObject, putObject, readObject, testEndpoint } from '../helpers/s3';
import { sleep } from '../../support/sleep';
import { expectedFromListing, indexOf, indexedRoot } from './support';

type BatchResponse = { batchItemFailures: { itemIdentifier: string }[] };

let proxy: CountingProxy;
beforeAll(async () => {
  proxy = await startCountingProxy(testEndpoint());
});
afterAll(() => proxy.close());

/** Lets the clock pass the current millisecond, so the next event's time (read to the ms) is later. */
const nextMillisecond = (): Promise<void> => sleep(2);
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe('out-of-band changes on an indexed root (moto notifications)', () => {
  let fx: NotifiedBucket;
  beforeAll(async () => {
    fx = await notifiedBucket('oob');
    await indexedRoot(fx.store, 'swamp', 6, ['team']);
    await fx.receive();
  });

  test('uploads, an overwrite and a delete reach the index in one write', async () => {
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'swamp' };
    const before = await indexOf(store, { root });
    await putObject(store, 'swamp/data/aws/ec2/i-new/1/a b+c.json', 'new object');
    await putObject(store, `swamp/${before[0].key}`, 'rewritten with another size entirely');
    await deleteObject(store, `swamp/${before[1].key}`);
    await putObject(store, 'swamp/team/files/t.txt', 'namespace data');
    const messages = await fx.receive();
    expect(messages).toHaveLength(4);
    // moto sends keys URL-encoded: '/' as %2F, a space as '+', '+' as %2B.
    expect(messages.map((m) => m.Body).join('\n')).toContain('swamp%2Fdata%2Faws%2Fec2%2Fi-new%2F1%2Fa+b%2Bc.json');

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp', s3: proxy.endpoint }));
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));

    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }, ['team']));
    expect(await indexOf(store, { root, namespace: 'team' })).toEqual(await expectedFromListing(store, { root, namespace: 'team' }));
    expect((await indexOf(store, { root })).map((e) => e.key)).toContain('data/aws/ec2/i-new/1/a b+c.json');
    expect(proxy.putsOf(store.bucket, `swamp/${INDEX_KEY}`)).toBe(1);
    expect(proxy.putsOf(store.bucket, `swamp/team/${INDEX_KEY}`)).toBe(1);

    const [line] = run.logs('root done');
    expect(line).toMatchObject({ root: `s3://${store.bucket}/swamp`, eventsApplied: 4, added: 2, removed: 1, resized: 1, writes: 2 });
    expect(line.indexEntries).toBe(before.length);
    expect(typeof line.publishMs).toBe('number');
    expect(sum(run.metric('EventsApplied'))).toBe(4);
    expect(sum(run.metric('IndexWrites'))).toBe(2);
  });

  test('the notifications of its own writes (index, lock) are ignored: nothing is written', async () => {
    const { store } = fx;
    const own = (await fx.receive()).filter((m) => m.Body?.includes('Records'));
    const keys = own.map((m) => decodeURIComponent(JSON.parse(m.Body!).Records[0].s3.object.key));
    expect(keys).toEqual(expect.arrayContaining([`swamp/${INDEX_KEY}`, `swamp/${LOCK_KEY}`, `swamp/team/${INDEX_KEY}`]));

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp', s3: proxy.endpoint }));
    const indexBefore = await readObject(store, `swamp/${INDEX_KEY}`);
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(own));

    expect(run.result.batchItemFailures).toEqual([]);
    expect(proxy.byOperation().PutObject ?? 0).toBe(0);
    expect(await readObject(store, `swamp/${INDEX_KEY}`)).toEqual(indexBefore);
    expect(run.logs('batch done')[0].skipped).toMatchObject({ internal: own.length });
  });

  test('an index-named key in a folder that is not a namespace is data; in a namespace it is internal', async () => {
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'swamp' };
    await putObject(store, `swamp/plain/${INDEX_KEY}`, 'data that happens to share the name');
    const messages = await fx.receive();
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp', s3: proxy.endpoint }));
    const inNamespace = s3Event([s3EventRecord({ bucket: store.bucket, key: `swamp/team/${INDEX_KEY}`, size: 5 })]);
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, {
      Records: [...sqsEventFrom(messages).Records, ...sqsEventOf([inNamespace], 'ns').Records],
    });

    expect(run.result.batchItemFailures).toEqual([]);
    expect((await indexOf(store, { root })).map((e) => e.key)).toContain(`plain/${INDEX_KEY}`);
    expect((await indexOf(store, { root, namespace: 'team' })).map((e) => e.key)).not.toContain(INDEX_KEY);
    expect(proxy.putsOf(store.bucket, `swamp/team/${INDEX_KEY}`)).toBe(0);
  });
});

describe('duplicated and reordered deliveries', () => {
  test('the index ends exact, and a replay of the batch writes nothing', async () => {
    const fx = await notifiedBucket('dup');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'p' };
    const before = await indexedRoot(store, 'p', 4).then(() => indexOf(store, { root }));
    await fx.receive();
    // moto's events carry no sequencer, only event times, which the handler orders to the millisecond.
    await putObject(store, 'p/files/k.txt', '12345');
    await nextMillisecond();
    await putObject(store, 'p/files/k.txt', '123456789');
    await nextMillisecond();
    await deleteObject(store, `p/${before[0].key}`);
    await putObject(store, 'p/files/k3.txt', 'k3');
    await nextMillisecond();
    await deleteObject(store, 'p/files/k3.txt');
    const messages = await fx.receive();
    expect(messages).toHaveLength(5);
    // The premise: changes of one key have distinct event times (else the order under test is undefined).
    const times = messages.map((m) => JSON.parse(m.Body!).Records[0] as { eventTime: string; s3: { object: { key: string } } });
    for (const key of ['p/files/k.txt', 'p/files/k3.txt']) {
      const ofKey = times
        .filter((r) => decodeURIComponent(r.s3.object.key.replace(/\+/g, ' ')) === key)
        .map((r) => Date.parse(r.eventTime));
      expect(ofKey).toHaveLength(2);
      expect(new Set(ofKey).size).toBe(2);
    }
    const shuffled = [...messages].reverse();
    const batch = sqsEventFrom([...shuffled, ...shuffled.slice(0, 3).map((m) => ({ ...m, MessageId: `${m.MessageId}-dup` }))]);

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'p', s3: proxy.endpoint }));
    const first = await invoke<BatchResponse>(lambda, batch);
    expect(first.result.batchItemFailures).toEqual([]);
    const index = await indexOf(store, { root });
    expect(index).toEqual(await expectedFromListing(store, { root }));
    expect(index).toContainEqual({ key: 'files/k.txt', size: 9 });
    expect(index.map((e) => e.key)).not.toContain('files/k3.txt');

    const etag = (await store.head(`p/${INDEX_KEY}`))!.etag;
    proxy.reset();
    const replay = await invoke<BatchResponse>(lambda, batch);
    expect(replay.result.batchItemFailures).toEqual([]);
    expect(proxy.putsOf(store.bucket, `p/${INDEX_KEY}`)).toBe(0);
    expect(proxy.putsOf(store.bucket, `p/${LOCK_KEY}`)).toBe(0);
    expect((await store.head(`p/${INDEX_KEY}`))!.etag).toBe(etag);
  });

  test('EventBridge events are ordered by sequencer, whatever order they arrive in', async () => {
    const fx = await notifiedBucket('eb');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'eb' };
    await indexedRoot(store, 'eb', 3);
    await putObject(store, 'eb/files/seq.txt', 'final-7');
    await fx.receive();
    const t = new Date().toISOString();
    const events = [
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/seq.txt', size: 7, sequencer: '0062E99A88DC407460', time: t }),
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/seq.txt', kind: 'removed', sequencer: '0062E99A88DC40745F', time: t }),
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/seq.txt', size: 3, sequencer: '62E99A88DC40745E', time: t }),
    ];
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'eb', s3: proxy.endpoint }));
    const run = await invoke<BatchResponse>(lambda, sqsEventOf(events));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toContainEqual({ key: 'files/seq.txt', size: 7 });
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
  });
});

describe('EventBridge keys', () => {
  test('a key is taken as sent when its object exists; where the readings differ S3 decides; no entry for a key that does not exist', async () => {
    const fx = await notifiedBucket('ebkeys');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'eb' };
    await indexedRoot(store, 'eb', 3);
    await putObject(store, 'eb/files/a+b.txt', 'plus');
    await putObject(store, 'eb/files/x%41.txt', 'percent');
    await putObject(store, 'eb/files/c d.txt', 'space');
    await fx.receive();
    const t = new Date().toISOString();
    const events = [
      // As reports of real deliveries show: the key as it is.
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/a+b.txt', size: 4, time: t }),
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/x%41.txt', size: 7, time: t }),
      // Were it URL-encoded after all, the decoded reading is the object that exists.
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/c d.txt', keyAsSent: 'eb/files/c+d.txt', size: 5, time: t }),
      // Neither reading exists: nothing is indexed.
      eventBridgeS3Event({ bucket: store.bucket, key: 'eb/files/gone+x.txt', size: 1, time: t }),
    ];
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'eb', s3: proxy.endpoint }));
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventOf(events));

    expect(run.result.batchItemFailures).toEqual([]);
    const keys = (await indexOf(store, { root })).map((e) => e.key);
    expect(keys).toEqual(expect.arrayContaining(['files/a+b.txt', 'files/x%41.txt', 'files/c d.txt']));
    expect(keys).not.toEqual(expect.arrayContaining(['files/a b.txt']));
    expect(
      keys.filter((k) => ['files/a b.txt', 'files/xA.txt', 'files/c+d.txt', 'files/gone+x.txt', 'files/gone x.txt'].includes(k)),
    ).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
    // One HeadObject where the key as sent exists, two where it does not.
    const heads = proxy.requests.filter((r) => r.method === 'HEAD').map((r) => r.path.replace(`/${store.bucket}/eb/files/`, ''));
    expect(heads.sort()).toEqual(['a+b.txt', 'c d.txt', 'c+d.txt', 'gone x.txt', 'gone+x.txt', 'x%41.txt']);
  });
});

describe('events that are not ours', () => {
  test('a foreign bucket, keys outside every root and the test event are logged, counted, not failed, and cost no request', async () => {
    const fx = await notifiedBucket('foreign');
    const lambda = loadHandler(handlerEnv({ bucket: fx.store.bucket, prefixes: 'swamp,infra', s3: proxy.endpoint }));
    const bodies = [
      s3Event([s3EventRecord({ bucket: 'someone-elses-bucket', key: 'swamp/data/x/y/z/raw' })]),
      s3Event([s3EventRecord({ bucket: fx.store.bucket, key: 'elsewhere/data/x/y/z/raw' })]),
      s3Event([s3EventRecord({ bucket: fx.store.bucket, key: 'swamp-other/files/a.txt' })]),
      { Service: 'Amazon S3', Event: 's3:TestEvent', Time: new Date().toISOString(), Bucket: fx.store.bucket },
    ];
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventOf(bodies));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(proxy.requests).toEqual([]);
    const [done] = run.logs('batch done');
    expect(done.skipped).toMatchObject({ foreignBucket: 1, outsideRoots: 2, testEvents: 1 });
    expect(JSON.stringify(done.skippedSamples)).toContain('someone-elses-bucket');
    expect(run.metric('EventsSkipped')).toEqual([4]);
  });

  test('a body that is not JSON is a batch item failure, the rest of the batch is done', async () => {
    const fx = await notifiedBucket('poison');
    const root = { bucket: fx.store.bucket, prefix: 'p' };
    await indexedRoot(fx.store, 'p', 2);
    await putObject(fx.store, 'p/files/ok.txt', 'ok');
    const lambda = loadHandler(handlerEnv({ bucket: fx.store.bucket, prefixes: 'p', s3: proxy.endpoint }));
    const event = sqsEventOf(['{not json', s3Event([s3EventRecord({ bucket: fx.store.bucket, key: 'p/files/ok.txt', size: 2 })])]);
    const run = await invoke<BatchResponse>(lambda, event);
    expect(run.result.batchItemFailures).toEqual([{ itemIdentifier: 'msg-0' }]);
    expect(await indexOf(fx.store, { root })).toContainEqual({ key: 'files/ok.txt', size: 2 });
  });
});

describe('roots without a usable index', () => {
  test('an unindexed root is healed from a listing on its first event, namespaces included', async () => {
    const fx = await notifiedBucket('fresh');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'fresh' };
    const { seedDatastore } = await import('../helpers/s3');
    const seeded = await seedDatastore(store, { prefix: 'fresh', objects: 9, internal: true, namespaces: ['ns1'] });
    const messages = await fx.receive();
    // An event of the root's own scope (SQS delivers in any order, and the namespace has files too).
    const one = messages.find((m) => m.Body?.includes('files') && !m.Body.includes('ns1'));
    expect(one).toBeDefined();
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'fresh', s3: proxy.endpoint }));
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom([one!]));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(seeded.expectedEntries());
    expect(await indexOf(store, { root, namespace: 'ns1' })).toEqual(seeded.expectedEntries('ns1'));
    expect(run.logs('root done')[0].scopes).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'delta', status: 'no-index' })]),
    );
  });

  test('an unreadable index is kept under _control/ and replaced by a healed one', async () => {
    const fx = await notifiedBucket('unreadable');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'u' };
    await indexedRoot(store, 'u', 4);
    await putObject(store, `u/${INDEX_KEY}`, '{"version":1,"entries":');
    await putObject(store, 'u/files/new.txt', 'new');
    const messages = (await fx.receive()).filter((m) => m.Body?.includes('new.txt'));
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'u', s3: proxy.endpoint }));
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
    const { listKeys } = await import('../helpers/s3');
    expect((await listKeys(store, 'u/_control/datastore-indexer/unreadable/root/')).length).toBe(1);
  });
});

describe('a lock held by a live client', () => {
  test('its root goes back to the queue as batch item failures, the other root is done, the redelivery loses nothing', async () => {
    const fx = await notifiedBucket('locked');
    const { store } = fx;
    const busy = { bucket: store.bucket, prefix: 'busy' };
    const free = { bucket: store.bucket, prefix: 'free' };
    await indexedRoot(store, 'busy', 3);
    await indexedRoot(store, 'free', 3);
    await putObject(
      store,
      `busy/${LOCK_KEY}`,
      JSON.stringify(lockBody({ holder: 'swamp-client', acquiredAt: new Date().toISOString(), ttlMs: 60_000 })),
    );
    await fx.receive();
    await putObject(store, 'busy/files/b.txt', 'busy upload');
    await putObject(store, 'free/files/f.txt', 'free upload');
    const messages = await fx.receive();
    const busyIds = messages.filter((m) => m.Body?.includes('busy%2Ffiles')).map((m) => m.MessageId);
    expect(busyIds).toHaveLength(1);
    const indexBefore = await readObject(store, `busy/${INDEX_KEY}`);

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'busy,free', s3: proxy.endpoint, lockWaitSeconds: '1' }));
    const first = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));
    expect(first.result.batchItemFailures).toEqual(busyIds.map((id) => ({ itemIdentifier: id })));
    expect(await readObject(store, `busy/${INDEX_KEY}`)).toEqual(indexBefore);
    expect(await indexOf(store, { root: free })).toContainEqual({ key: 'files/f.txt', size: 11 });
    // The minified bundle logs the error whole: its class by name, its hint and its stack.
    expect(first.logs('root failed; its batch items go back to the queue')[0]).toMatchObject({
      root: `s3://${store.bucket}/busy`,
      error: {
        name: 'LockBusyError',
        lockKey: 'busy/.datastore.lock',
        hint: expect.stringContaining('Another writer is busy'),
        stack: expect.stringContaining('LockBusyError'),
      },
    });
    expect(first.metric('RootsRetried')).toEqual([1]);
    expect(first.metric('LockWaits')[0]).toBeGreaterThan(0);

    await deleteObject(store, `busy/${LOCK_KEY}`);
    const again = await invoke<BatchResponse>(lambda, sqsEventFrom(messages.filter((m) => busyIds.includes(m.MessageId))));
    expect(again.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root: busy })).toEqual(await expectedFromListing(store, { root: busy }));
    expect(await indexOf(store, { root: busy })).toContainEqual({ key: 'files/b.txt', size: 11 });
  });
});

describe('convergence with a client push racing the delta', () => {
  test('the delayed re-check restores the entry the push erased', async () => {
    const fx = await notifiedBucket('race');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'r' };
    await indexedRoot(store, 'r', 4);
    await fx.receive();
    // The client reads the index before the out-of-band upload lands ...
    const clientRead = (await readObject(store, `r/${INDEX_KEY}`))!;
    await putObject(store, 'r/files/oob.txt', 'out of band');
    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'r', s3: proxy.endpoint, queueUrl: fx.queueUrl, recheckDelaySeconds: '0' }),
    );
    const delta = await invoke<BatchResponse>(lambda, sqsEventFrom(await fx.receive()));
    expect(delta.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toContainEqual({ key: 'files/oob.txt', size: 11 });
    expect(delta.metric('RechecksSent')).toEqual([1]);
    // ... and pushes it back unconditionally after the delta: the entry is gone.
    await putObject(store, `r/${INDEX_KEY}`, clientRead);
    expect((await indexOf(store, { root })).map((e) => e.key)).not.toContain('files/oob.txt');

    const later = await fx.receive();
    const recheck = later.filter((m) => m.Body?.includes('"recheck"'));
    expect(recheck).toHaveLength(1);
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(later));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
    expect(run.logs('re-check restored what a push erased')).toHaveLength(1);
    expect(run.metric('RecheckRestored')).toEqual([1]);
    // Having had to restore, it checks once more; that round finds the index true and writes nothing.
    const round2 = await fx.receive();
    expect(round2.some((m) => m.Body?.includes('"round":2'))).toBe(true);
    proxy.reset();
    const settled = await invoke<BatchResponse>(lambda, sqsEventFrom(round2.filter((m) => m.Body?.includes('"recheck"'))));
    expect(settled.result.batchItemFailures).toEqual([]);
    expect(proxy.putsOf(store.bucket, `r/${INDEX_KEY}`)).toBe(0);
  });

  test('a re-check asks S3 about every key the delta indexed as present, and restores the one a push erased', async () => {
    const fx = await notifiedBucket('recheck-cheap');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'c' };
    await indexedRoot(store, 'c', 3);
    await fx.receive();
    await putObject(store, 'c/files/kept.txt', 'kept');
    await putObject(store, 'c/files/erased.txt', 'erased');
    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'c', s3: proxy.endpoint, queueUrl: fx.queueUrl, recheckDelaySeconds: '0' }),
    );
    const delta = await invoke<BatchResponse>(lambda, sqsEventFrom(await fx.receive()));
    expect(delta.result.batchItemFailures).toEqual([]);
    const later = await fx.receive();
    const recheck = later.filter((m) => m.Body?.includes('"recheck"'));
    expect(JSON.parse(recheck[0].Body!).recheck.expected).toEqual({ 'files/erased.txt': 6, 'files/kept.txt': 4 });
    // A push erases one of the two entries.
    const index = JSON.parse((await readObject(store, `c/${INDEX_KEY}`))!.toString('utf8')) as { entries: Record<string, unknown> };
    delete index.entries['files/erased.txt'];
    await putObject(store, `c/${INDEX_KEY}`, JSON.stringify(index));

    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(recheck));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(
      proxy.requests
        .filter((r) => r.method === 'HEAD')
        .map((r) => r.path)
        .sort(),
    ).toEqual([`/${store.bucket}/c/files/erased.txt`, `/${store.bucket}/c/files/kept.txt`]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
  });

  test('a late created event for an object deleted since is indexed, then removed by its re-check', async () => {
    const fx = await notifiedBucket('recheck-late');
    const { store } = fx;
    const root = { bucket: store.bucket, prefix: 'l' };
    await indexedRoot(store, 'l', 3);
    await fx.receive();
    await putObject(store, 'l/files/gone.txt', 'gone');
    const created = (await fx.receive()).filter((m) => m.Body?.includes('gone.txt'));
    // The object is deleted, and its delete event handled, before the create event comes (SQS reorders and redelivers).
    await deleteObject(store, 'l/files/gone.txt');
    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'l', s3: proxy.endpoint, queueUrl: fx.queueUrl, recheckDelaySeconds: '0' }),
    );
    const removed = (await fx.receive()).filter((m) => m.Body?.includes('gone.txt'));
    expect((await invoke<BatchResponse>(lambda, sqsEventFrom(removed))).result.batchItemFailures).toEqual([]);
    expect((await invoke<BatchResponse>(lambda, sqsEventFrom(created))).result.batchItemFailures).toEqual([]);
    expect((await indexOf(store, { root })).map((e) => e.key)).toContain('files/gone.txt');

    // The create's own re-check (it expects the entry it wrote), not the delete's (which expects none).
    const ofCreate = (m: { Body?: string }) =>
      !!m.Body?.includes('"recheck"') && JSON.parse(m.Body).recheck.expected?.['files/gone.txt'] === 4;
    const recheck = (await fx.receive()).filter(ofCreate);
    expect(recheck).toHaveLength(1);
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(recheck));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
  });

  test('a re-check that shares its batch with new events sends no further round when nothing was erased', async () => {
    const fx = await notifiedBucket('recheck-mixed');
    const { store } = fx;
    await indexedRoot(store, 'm', 3);
    await fx.receive();
    await putObject(store, 'm/files/first.txt', 'first');
    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'm', s3: proxy.endpoint, queueUrl: fx.queueUrl, recheckDelaySeconds: '0' }),
    );
    await invoke<BatchResponse>(lambda, sqsEventFrom(await fx.receive()));
    const recheck = (await fx.receive()).filter((m) => m.Body?.includes('"recheck"'));
    expect(recheck).toHaveLength(1);
    await putObject(store, 'm/files/second.txt', 'second');
    const events = (await fx.receive()).filter((m) => m.Body?.includes('second.txt'));

    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom([...recheck, ...events]));
    expect(run.result.batchItemFailures).toEqual([]);
    // The first upload's entry is confirmed with S3; S3 agrees, so nothing counts as restored.
    expect(proxy.requests.filter((r) => r.method === 'HEAD').map((r) => r.path)).toEqual([`/${store.bucket}/m/files/first.txt`]);
    // Only the new event's own first-round re-check is sent, not a second round of the first one.
    const sent = (await fx.receive()).filter((m) => m.Body?.includes('"recheck"'));
    expect(sent.map((m) => JSON.parse(m.Body!).recheck)).toEqual([expect.objectContaining({ keys: ['files/second.txt'], round: 1 })]);
    expect(run.metric('RecheckRestored')).toEqual([]);
  });

  test('without DATASTORE_QUEUE_URL the handler works and says once, at cold start, that re-checks are off', async () => {
    const fx = await notifiedBucket('noqueue');
    const root = { bucket: fx.store.bucket, prefix: 'n' };
    await indexedRoot(fx.store, 'n', 2);
    await putObject(fx.store, 'n/files/x.txt', 'x');
    const messages = (await fx.receive()).filter((m) => m.Body?.includes('x.txt'));
    const lambda = loadHandler(handlerEnv({ bucket: fx.store.bucket, prefixes: 'n', s3: proxy.endpoint }));
    const off = lambda.coldStartLines.filter((l) => String(l.message).includes('re-checks'));
    expect(off).toHaveLength(1);
    const run = await invoke<BatchResponse>(lambda, sqsEventFrom(messages));
    expect(run.result.batchItemFailures).toEqual([]);
    expect(run.lines.filter((l) => String(l.message).includes('re-checks'))).toEqual([]);
    expect(await indexOf(fx.store, { root })).toContainEqual({ key: 'files/x.txt', size: 1 });
  });
});
