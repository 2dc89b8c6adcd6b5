/**
 * The bundled handler's cold start, the scheduled repair, direct invokes, a 1,000-record batch and a
 * full repair that outlives its invocation.
 */
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { INDEX_KEY } from '../../lambda/lib/names';
import { mapLimit } from '../../lambda/lib/concurrency';
import { datastoreIndex, s3Event, s3EventRecord } from '../helpers/factories';
import {
  type CountingProxy,
  type LogLine,
  handlerEnv,
  invoke,
  lambdaContext,
  loadHandler,
  scheduledEvent,
  sqsEventFrom,
  sqsEventOf,
  startCountingProxy,
  testSqs,
} from '../helpers/lambda';
import {
  deleteObject,
  listKeys,
  putIndex,
  putObject,
  readIndex,
  readObject,
  seedDatastore,
  swampKeys,
  testEndpoint,
  testStore,
} from '../helpers/s3';
import { expectedFromListing, indexOf, indexedRoot } from './support';

type BatchResponse = { batchItemFailures: { itemIdentifier: string }[] };
type DriftReport = {
  complete: boolean;
  totals: { missing: number; stale: number; resized: number };
  roots: {
    root: string;
    status: string;
    scopes: {
      scope: string;
      namespace?: string;
      drift: { missing: number; stale: number; resized: number };
      published: boolean;
      sample: { missing: string[] };
    }[];
  }[];
};

let proxy: CountingProxy;
beforeAll(async () => {
  proxy = await startCountingProxy(testEndpoint());
});
afterAll(() => proxy.close());

describe('configuration, read at cold start', () => {
  const coldStartError = (env: Record<string, string | undefined>): { error: Error; lines: LogLine[] } => {
    try {
      loadHandler(env);
    } catch (err) {
      return { error: err as Error, lines: (err as { lines: LogLine[] }).lines };
    }
    throw new Error('the cold start did not fail');
  };

  test.each([
    ['DATASTORE_BUCKET unset', { DATASTORE_BUCKET: undefined }, /DATASTORE_BUCKET is not set/],
    ['nested roots', { DATASTORE_PREFIXES: 'swamp,swamp/inner' }, /"swamp\/inner" lies inside "swamp"/],
    ['an empty prefix entry', { DATASTORE_PREFIXES: 'swamp,,infra' }, /entry 2 is empty/],
    ['a prefix with a ".." segment', { DATASTORE_PREFIXES: 'swamp/../swamp' }, /"swamp\/\.\.\/swamp" is not a key prefix/],
    ['a bad path-style flag', { DATASTORE_FORCE_PATH_STYLE: 'yes' }, /DATASTORE_FORCE_PATH_STYLE must be "true" or "false"/],
    ['a bad endpoint', { AWS_ENDPOINT_URL_S3: 'localhost:9000' }, /AWS_ENDPOINT_URL_S3 must be an http\(s\) URL/],
    ['a bad lock wait', { DATASTORE_LOCK_WAIT_SECONDS: 'ten' }, /DATASTORE_LOCK_WAIT_SECONDS must be a whole number/],
  ])('%s fails the cold start with one clear log line', (_name, override, message) => {
    const { error, lines } = coldStartError({ ...handlerEnv({ bucket: 'configured-bucket', prefixes: 'swamp' }), ...override });
    expect(error.message).toMatch(message);
    const errors = lines.filter((l) => l.level === 'ERROR');
    expect(errors).toHaveLength(1);
    expect(String(errors[0].message)).toMatch(message);
    // The minified bundle still names the class, and the error is logged whole.
    expect(errors[0].error).toMatchObject({
      name: 'ConfigError',
      message: expect.stringMatching(message),
      stack: expect.stringContaining('ConfigError'),
    });
  });

  test('a failed invocation is logged by the bundle with the error class named, its stack and its hint', async () => {
    const lambda = loadHandler(handlerEnv({ bucket: 'configured-bucket' }));
    const failure = await invoke(lambda, { action: 'delete-everything' }).catch((err: unknown) => err as Error & { lines: LogLine[] });

    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).name).toBe('UnknownTriggerError');
    const [line] = (failure as { lines: LogLine[] }).lines.filter((l) => l.message === 'invocation failed');
    expect(line).toMatchObject({
      level: 'ERROR',
      errorType: 'UnknownTriggerError',
      error: {
        name: 'UnknownTriggerError',
        hint: expect.stringContaining('Example:'),
        stack: expect.stringMatching(/^UnknownTriggerError: "action" must be/),
      },
    });
  });

  test('an event that is none of the triggers is refused with a clear error', async () => {
    const lambda = loadHandler(handlerEnv({ bucket: 'configured-bucket' }));
    await expect(invoke(lambda, s3Event([s3EventRecord({ bucket: 'configured-bucket', key: 'a' })]))).rejects.toThrow(/not from SQS/);
    await expect(invoke(lambda, { action: 'delete-everything' })).rejects.toThrow(/"action" must be "check" or "repair"/);
    await expect(invoke(lambda, { hello: 'world' })).rejects.toThrow(/neither an SQS batch, a scheduled event nor a direct invoke/);
  });
});

describe('the schedule', () => {
  test('repairs every root and namespace, publishing only where drifted; a second run writes nothing', async () => {
    const store = await testStore({ bucketPrefix: 'schedule' });
    const r1 = await seedDatastore(store, { prefix: 'r1', objects: 5, internal: true }); // no index at all
    await indexedRoot(store, 'r2', 6, ['team']);
    await indexedRoot(store, 'r3', 4); // true already
    const r2 = { bucket: store.bucket, prefix: 'r2' };
    const r2Index = await indexOf(store, { root: r2 });
    await putObject(store, 'r2/files/late.txt', 'uploaded behind the index');
    await deleteObject(store, `r2/${r2Index[0].key}`);
    await deleteObject(store, `r2/team/${INDEX_KEY}`);

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'r1,r2,r3', s3: proxy.endpoint }));
    proxy.reset();
    const run = await invoke<{ roots: { root: string; status: string; drift: Record<string, number>; published: number }[] }>(
      lambda,
      scheduledEvent(),
    );

    expect(run.result.roots.map((r) => [r.root.split('/').pop(), r.status, r.published])).toEqual([
      ['r1', 'complete', 1],
      ['r2', 'complete', 2],
      ['r3', 'complete', 0],
    ]);
    expect(run.result.roots[1].drift).toEqual({ missing: 1 + 6, stale: 1, resized: 0 }); // team's 6 are missing: its index was gone
    expect(await indexOf(store, { root: r1.root })).toEqual(r1.expectedEntries());
    expect(await indexOf(store, { root: r2 })).toEqual(await expectedFromListing(store, { root: r2 }, ['team']));
    expect(await indexOf(store, { root: r2, namespace: 'team' })).toEqual(
      await expectedFromListing(store, { root: r2, namespace: 'team' }),
    );
    expect(proxy.putsOf(store.bucket, `r3/${INDEX_KEY}`)).toBe(0);
    expect(run.logs('root done')).toHaveLength(3);
    expect(run.metric('DriftFound').reduce((a, b) => a + b, 0)).toBe(5 + 7 + 1);

    proxy.reset();
    const again = await invoke<{ roots: { status: string; published: number }[] }>(lambda, scheduledEvent());
    expect(again.result.roots.map((r) => r.published)).toEqual([0, 0, 0]);
    expect(proxy.byOperation().PutObject ?? 0).toBe(0);
    expect(proxy.byOperation().DeleteObject ?? 0).toBe(0);
  });

  test('roots it has no time left for are deferred to continuation messages, which repair them', async () => {
    const store = await testStore({ bucketPrefix: 'deferred' });
    const a = await seedDatastore(store, { prefix: 'a', objects: 3 });
    const b = await seedDatastore(store, { prefix: 'b', objects: 4 });
    const { QueueUrl: queueUrl } = await testSqs().send(new CreateQueueCommand({ QueueName: `q-${store.bucket}` }));
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'a,b', s3: proxy.endpoint, queueUrl }));

    // 30 s left, under the 60 s reserve: the first root still runs, the second waits for a fresh invocation.
    const run = await invoke<{ roots: { status: string }[] }>(lambda, scheduledEvent(), lambdaContext(30_000));
    expect(run.result.roots.map((r) => r.status)).toEqual(['complete', 'deferred']);
    expect(await indexOf(store, { root: a.root })).toEqual(a.expectedEntries());
    expect(await indexOf(store, { root: b.root })).toEqual([]);

    const { ReceiveMessageCommand } = await import('@aws-sdk/client-sqs');
    const received = await testSqs().send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    expect((received.Messages ?? []).map((m) => JSON.parse(m.Body!))).toEqual([{ continueRepair: { prefix: 'b', start: true } }]);
    const continued = await invoke<BatchResponse>(lambda, sqsEventFrom(received.Messages!));
    expect(continued.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root: b.root })).toEqual(b.expectedEntries());
  });
});

describe('direct invokes', () => {
  test('check returns the drift counts and writes nothing', async () => {
    const store = await testStore({ bucketPrefix: 'check' });
    const root = await indexedRoot(store, 'c', 8, ['team']);
    const entries = await indexOf(store, { root });
    await putObject(store, 'c/files/missing-1.txt', 'one');
    await putObject(store, 'c/files/missing-2.txt', 'two');
    await deleteObject(store, `c/${entries[0].key}`);
    await putObject(store, `c/${entries[1].key}`, 'a different size from before, surely');
    const before = await readObject(store, `c/${INDEX_KEY}`);

    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'c', s3: proxy.endpoint }));
    proxy.reset();
    const run = await invoke<DriftReport>(lambda, { action: 'check', prefix: 'c' });

    expect(run.result.complete).toBe(true);
    expect(run.result.totals).toEqual({ missing: 2, stale: 1, resized: 1 });
    expect(run.result.roots[0].scopes.map((s) => [s.namespace ?? '', s.drift, s.published])).toEqual([
      ['', { missing: 2, stale: 1, resized: 1 }, false],
      ['team', { missing: 0, stale: 0, resized: 0 }, false],
    ]);
    expect(run.result.roots[0].scopes[0].sample.missing).toEqual(['files/missing-1.txt', 'files/missing-2.txt']);
    expect(proxy.byOperation().PutObject ?? 0).toBe(0);
    expect(proxy.byOperation().DeleteObject ?? 0).toBe(0);
    expect(await readObject(store, `c/${INDEX_KEY}`)).toEqual(before);
  });

  test('repair of one namespace touches only that index; unknown roots and namespaces are refused', async () => {
    const store = await testStore({ bucketPrefix: 'invoke' });
    const root = await indexedRoot(store, 'p', 4, ['team']);
    await putObject(store, 'p/team/files/new.txt', 'new');
    await putObject(store, 'p/files/root-new.txt', 'new in the root');
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'p', s3: proxy.endpoint }));
    proxy.reset();
    const run = await invoke<DriftReport>(lambda, { action: 'repair', prefix: 'p', namespace: 'team' });
    expect(run.result.totals).toEqual({ missing: 1, stale: 0, resized: 0 });
    expect(await indexOf(store, { root, namespace: 'team' })).toEqual(await expectedFromListing(store, { root, namespace: 'team' }));
    expect(proxy.putsOf(store.bucket, `p/${INDEX_KEY}`)).toBe(0);
    expect((await indexOf(store, { root })).map((e) => e.key)).not.toContain('files/root-new.txt');

    await expect(invoke(lambda, { action: 'check', prefix: 'nope' })).rejects.toThrow(/"nope" is not a configured datastore root/);
    await expect(invoke(lambda, { action: 'repair', prefix: 'p', namespace: 'files' })).rejects.toThrow(/has no namespace "files"/);
  });
});

describe('a large root', () => {
  const COUNT = 1000;
  let store: Awaited<ReturnType<typeof testStore>>;
  let keys: string[];
  const sizes = new Map<string, number>();
  let queueUrl: string;

  beforeAll(async () => {
    store = await testStore({ bucketPrefix: 'large' });
    keys = swampKeys(COUNT, 'big');
    const started = Date.now();
    await mapLimit(keys, 32, async (rel, i) => {
      const body = `${rel}:${'x'.repeat(i % 97)}`;
      sizes.set(rel, body.length);
      await putObject(store, `big/${rel}`, body);
    });
    // An indexed root whose index predates every one of these objects.
    await putIndex(store, `big/${INDEX_KEY}`, datastoreIndex());
    ({ QueueUrl: queueUrl } = (await testSqs().send(new CreateQueueCommand({ QueueName: `q-${store.bucket}` }))) as { QueueUrl: string });
    console.log(`seeded ${COUNT} objects in ${Date.now() - started} ms`);
  });

  test('a batch of 1,000 records for one root makes exactly one index write', async () => {
    const root = { bucket: store.bucket, prefix: 'big' };
    const t = Date.now();
    const bodies = keys.map((rel, i) =>
      s3Event([
        s3EventRecord({
          bucket: store.bucket,
          key: `big/${rel}`,
          size: sizes.get(rel)!,
          sequencer: (0x1000 + i).toString(16),
          eventTime: new Date(t + i).toISOString(),
        }),
      ]),
    );
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'big', s3: proxy.endpoint, queueUrl }));
    proxy.reset();
    const run = await invoke<BatchResponse>(lambda, sqsEventOf(bodies));

    expect(run.result.batchItemFailures).toEqual([]);
    expect(proxy.putsOf(store.bucket, `big/${INDEX_KEY}`)).toBe(1);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
    const counts = proxy.byOperation();
    // One one-key listing per top-level folder (is it a namespace?), never a listing of the root.
    expect(counts.ListObjectsV2).toBe(new Set(keys.filter((k) => k.includes('/')).map((k) => k.split('/')[0])).size);
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBeLessThan(30);
    const sequence = proxy.requests
      .filter((r) => !r.query.includes('list-type'))
      .map((r) => `${r.method} ${r.path.slice(store.bucket.length + 2)}`);
    console.log(
      `1,000-record batch: ${run.ms} ms, S3 requests ${JSON.stringify(counts)} (${sequence.join(', ')}); ` +
        `handler says ${JSON.stringify(run.logs('batch done')[0].s3Requests)}`,
    );
  });

  test('a full repair that runs out of time saves its progress, publishes nothing, and is finished by its continuation', async () => {
    const root = { bucket: store.bucket, prefix: 'big' };
    // More than one listing page, and an index a client pushed without 40 of the entries.
    await mapLimit(['files/extra-1.txt', 'files/extra-2.txt', 'files/extra-3.txt'], 3, (rel) => putObject(store, `big/${rel}`, rel));
    const index = (await readIndex(store, `big/${INDEX_KEY}`))!;
    for (const key of [...index.entries.keys()].slice(0, 40)) index.entries.delete(key);
    await putIndex(store, `big/${INDEX_KEY}`, index);
    const shortIndex = await readObject(store, `big/${INDEX_KEY}`);

    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'big', s3: proxy.endpoint, queueUrl, repairReserveSeconds: '60' }),
    );
    proxy.reset();
    // 30 s left, less than the 60 s reserve: one page, then stop.
    const first = await invoke<DriftReport>(lambda, { action: 'repair', prefix: 'big' }, lambdaContext(30_000));
    expect(first.result.complete).toBe(false);
    expect(first.result.roots[0].status).toBe('incomplete');
    expect(proxy.byOperation().ListObjectsV2).toBe(1);
    expect(proxy.putsOf(store.bucket, `big/${INDEX_KEY}`)).toBe(0);
    expect(await readObject(store, `big/${INDEX_KEY}`)).toEqual(shortIndex);
    const progress = JSON.parse((await readObject(store, `big/_control/datastore-indexer/repair/root/progress.json`))!.toString('utf8'));
    expect(progress).toMatchObject({ version: 1, objectsListed: 1000, invocations: 1 });
    expect(progress.lastKey.startsWith('big/')).toBe(true);

    const { ReceiveMessageCommand } = await import('@aws-sdk/client-sqs');
    const received = await testSqs().send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    const continuation = (received.Messages ?? []).filter((m) => m.Body?.includes('continueRepair'));
    expect(continuation).toHaveLength(1);

    const second = await invoke<BatchResponse>(lambda, sqsEventFrom(continuation));
    expect(second.result.batchItemFailures).toEqual([]);
    expect(await indexOf(store, { root })).toEqual(await expectedFromListing(store, { root }));
    expect(await listKeys(store, 'big/_control/')).toEqual([]);
    expect(second.logs('root done')[0]).toMatchObject({ added: 43, removed: 0 });

    // A duplicate continuation of the finished repair starts nothing.
    proxy.reset();
    const duplicate = await invoke<BatchResponse>(lambda, sqsEventFrom(continuation));
    expect(duplicate.result.batchItemFailures).toEqual([]);
    expect(proxy.byOperation().ListObjectsV2 ?? 0).toBe(0);
  });
});
