/**
 * The bundled handler's re-check of a burst in one folder: one ListObjectsV2 instead of a HeadObject per
 * key, with what a push erased, an object deleted and one rewritten since the delta all made true.
 */
import { INDEX_KEY } from '../../lambda/lib/names';
import { type CountingProxy, handlerEnv, invoke, loadHandler, notifiedBucket, sqsEventFrom, startCountingProxy } from '../helpers/lambda';
import { deleteObject, putObject, putObjects, readObject, testEndpoint } from '../helpers/s3';
import { expectedFromListing, indexOf, indexedRoot } from './support';

type BatchResponse = { batchItemFailures: { itemIdentifier: string }[] };

let proxy: CountingProxy;
beforeAll(async () => {
  proxy = await startCountingProxy(testEndpoint());
});
afterAll(() => proxy.close());

test('a re-check of a burst in one folder lists it once, and makes a push, a delete and a rewrite since true', async () => {
  const fx = await notifiedBucket('recheck-list');
  const { store } = fx;
  const root = { bucket: store.bucket, prefix: 'b' };
  await indexedRoot(store, 'b', 3);
  await fx.receive();
  const burst = Array.from({ length: 20 }, (_, i) => `files/burst/${String(i).padStart(2, '0')} é+%.bin`);
  await putObjects(store, Object.fromEntries(burst.map((rel, i) => [`b/${rel}`, 'x'.repeat(i + 1)])));
  const lambda = loadHandler(
    handlerEnv({ bucket: store.bucket, prefixes: 'b', s3: proxy.endpoint, queueUrl: fx.queueUrl, recheckDelaySeconds: '0' }),
  );
  const events = await fx.receive();
  expect(events).toHaveLength(burst.length);
  const delta = await invoke<BatchResponse>(lambda, sqsEventFrom(events));
  expect(delta.result.batchItemFailures).toEqual([]);
  const later = await fx.receive();
  const recheck = later.filter((m) => m.Body?.includes('"recheck"'));
  expect(recheck).toHaveLength(1);

  // Since the delta: a push erased an entry, one object was deleted and another rewritten at another size.
  const index = JSON.parse((await readObject(store, `b/${INDEX_KEY}`))!.toString('utf8')) as { entries: Record<string, unknown> };
  delete index.entries[burst[3]];
  await putObject(store, `b/${INDEX_KEY}`, JSON.stringify(index));
  await deleteObject(store, `b/${burst[7]}`);
  await putObject(store, `b/${burst[11]}`, 'rewritten');

  proxy.reset();
  const run = await invoke<BatchResponse>(lambda, sqsEventFrom(recheck));
  expect(run.result.batchItemFailures).toEqual([]);
  const ops = proxy.byOperation();
  expect(ops.HeadObject ?? 0).toBe(0);
  expect(ops.ListObjectsV2).toBe(1);
  const now = await indexOf(store, { root });
  expect(now).toEqual(await expectedFromListing(store, { root }));
  expect(now).toContainEqual({ key: burst[3], size: 4 });
  expect(now).toContainEqual({ key: burst[11], size: 9 });
  expect(now.map((e) => e.key)).not.toContain(burst[7]);
});
