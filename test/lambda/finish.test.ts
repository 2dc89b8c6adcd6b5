/**
 * A killed publish finished by the Lambda alone: before its publish record a run queues a delayed
 * `finishPublish` for the scope; when it arrives (no new upload, no schedule) the scope is made whole, and a
 * finish for a scope whose publish ended costs one HeadObject. The killed run is the bundle in a child process,
 * SIGKILLed as a chosen S3 request arrives (before it reaches S3); the finish runs in a fresh one, fed by the
 * emulated SQS event source from the queue the notifications also go to.
 */
import { CreateQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { INDEX_KEY, LOCK_KEY, SHARD_META_KEY, publishRecordKey } from '../../lambda/lib/names';
import type { MirrorMeta, ShardMeta } from '../../lambda/lib/layouts/manifest';
import type { S3Store } from '../../lambda/lib/s3';
import { type EventSource, type LambdaWorkers, lambdaWorkers, startEventSource } from '../../support/event-source';
import { dualWriteRoot, swampObjects } from '../helpers/dual-write';
import { indexEntry, lockBody, s3Event, s3EventRecord, shardMeta } from '../helpers/factories';
import {
  type CountingProxy,
  ensureBundle,
  handlerEnv,
  invoke,
  loadHandler,
  notifiedBucket,
  sqsEventFrom,
  sqsEventOf,
  startCountingProxy,
  testSqs,
} from '../helpers/lambda';
import { startLoopbackProxy } from '../helpers/proxy';
import {
  type KeySize,
  deleteObject,
  groupSummaries,
  putObject,
  putIndex,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  readObject,
  readShardSummaries,
  sortByKey,
  summarize,
  testEndpoint,
  testStore,
} from '../helpers/s3';
import { expectedFromListing } from './support';

jest.setTimeout(300_000);

type BatchResponse = { batchItemFailures: { itemIdentifier: string }[] };

const sqs = testSqs();
let counting: CountingProxy;
beforeAll(async () => {
  ensureBundle();
  counting = await startCountingProxy(testEndpoint());
});
afterAll(() => counting.close());
const running: { source?: EventSource; workers: LambdaWorkers }[] = [];
afterEach(async () => {
  for (const { source, workers } of running.splice(0)) {
    await source?.stop();
    workers.stop();
  }
});

const OBJECTS: Record<string, string> = {
  'data/aws/ec2/i-1/1/raw': 'ec2 one',
  'workflow-runs/wf-1/run-1/log.txt': 'ran',
  'logs/run-1.log': 'log one',
  'files/readme.txt': 'hello',
};
/** The uploads the killed run indexes: one in a partition the index has, one in a new partition. */
const UPLOADS: Record<string, string> = { 'files/new.txt': 'a new file', 'data/aws/lambda/f-1/1/raw': 'a new function' };

/** What clients read of the root at `base`: the listed partition files (shard-first) or the monolith (dual-write). */
async function clientView(store: S3Store, base: string, layout: 'shard-first' | 'dual-write'): Promise<KeySize[]> {
  if (layout === 'dual-write') return summarize(await readIndex(store, base + INDEX_KEY));
  const meta = await readJson<ShardMeta>(store, base + SHARD_META_KEY);
  return sortByKey([...(await readShardSummaries(store, base, meta?.partitions ?? [])).values()].flat());
}

/** The partitions whose dual-write mirror does not follow the monolith: not listed in the manifest, or a file with other entries. */
async function staleMirrors(store: S3Store, base: string): Promise<string[]> {
  const listed = new Set((await readJson<MirrorMeta>(store, base + SHARD_META_KEY))?.partitions ?? []);
  const truth = groupSummaries(summarize(await readIndex(store, base + INDEX_KEY)));
  const files = await readShardSummaries(store, base, new Set([...listed, ...truth.keys()]));
  return [...files]
    .filter(([p, rows]) => !listed.has(p) || JSON.stringify(rows) !== JSON.stringify(truth.get(p) ?? []))
    .map(([p]) => p)
    .sort();
}

/** The decoded object key of a path-style request URL (bucket stripped). */
function keyOf(url: string | undefined): string {
  const path = new URL(url ?? '/', 'http://proxy').pathname;
  const slash = path.indexOf('/', 1);
  return slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1));
}

interface KillCase {
  readonly name: string;
  readonly layout: 'shard-first' | 'dual-write';
  /** The request the run is killed at, before it reaches S3. */
  readonly killAt: (method: string, rel: string) => boolean;
}

const KILLS: KillCase[] = [
  {
    name: 'shard-first, after its partition files (at its manifest write)',
    layout: 'shard-first',
    killAt: (m, rel) => m === 'PUT' && rel === SHARD_META_KEY,
  },
  {
    name: 'dual-write, after its record (at its monolith write)',
    layout: 'dual-write',
    killAt: (m, rel) => m === 'PUT' && rel === INDEX_KEY,
  },
  {
    name: 'dual-write, after its monolith (at its first mirror file)',
    layout: 'dual-write',
    killAt: (m, rel) => m === 'PUT' && rel.startsWith('_index/') && rel !== SHARD_META_KEY,
  },
];

describe('a Lambda run killed in the middle of a publish', () => {
  test.each(KILLS)('$name: the delayed finish alone makes the scope whole', async ({ layout, killAt }) => {
    // GIVEN a root in the layout clients gave it, and uploads the run will index
    const fx = await notifiedBucket('fin');
    const { store } = fx;
    const prefix = 'sw';
    const base = `${prefix}/`;
    const root = { bucket: store.bucket, prefix };
    if (layout === 'shard-first') {
      await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [base + k, v])));
      const entries = Object.entries(OBJECTS).map(([k, v]) => indexEntry(k, { size: Buffer.byteLength(v) }));
      await putShardLayout(store, base, entries, shardMeta([...groupSummaries(entries).keys()].sort(), 3));
    } else {
      await dualWriteRoot(store, prefix, swampObjects(2));
    }
    await fx.receive();
    await putObjects(store, Object.fromEntries(Object.entries(UPLOADS).map(([k, v]) => [base + k, v])));
    const events = await fx.receive();
    expect(events).toHaveLength(Object.keys(UPLOADS).length);

    // WHEN a run on those events is killed at the chosen request
    let killedRun: LambdaWorkers | undefined;
    let killed = false;
    const killer = await startLoopbackProxy(testEndpoint(), (req, res) => {
      const key = keyOf(req.url);
      if (killed || !key.startsWith(base) || !killAt(req.method ?? '', key.slice(base.length))) return false;
      killed = true;
      killedRun?.stop();
      res.socket?.destroy();
      return true;
    });
    const env = handlerEnv({ bucket: store.bucket, prefixes: prefix, queueUrl: fx.queueUrl, s3: killer.endpoint });
    killedRun = lambdaWorkers({ ...env, POWERTOOLS_LOG_LEVEL: 'ERROR' }, 1);
    running.push({ workers: killedRun });
    await expect(killedRun.invoke(sqsEventFrom(events), 0)).rejects.toThrow(/exited/);
    await killer.close();

    // THEN it left the scope half done: its record, and what clients read is not the listing
    expect(killed).toBe(true);
    const listing = await expectedFromListing(store, { root });
    expect(await readObject(store, publishRecordKey({ root }))).toBeDefined();
    const halfDone = layout === 'dual-write' ? (await staleMirrors(store, base)).length > 0 : false;
    expect(halfDone || JSON.stringify(await clientView(store, base, layout)) !== JSON.stringify(listing)).toBe(true);

    // WHEN a fresh instance takes what the queue holds (no new upload, no schedule)
    const lines: string[] = [];
    const workers = lambdaWorkers(
      { ...handlerEnv({ bucket: store.bucket, prefixes: prefix, queueUrl: fx.queueUrl }), POWERTOOLS_METRICS_DISABLED: 'true' },
      1,
      {
        onLog: (line) => lines.push(line),
      },
    );
    const source = startEventSource({ sqs, queueUrl: fx.queueUrl, batchingWindowMs: 200, maxConcurrency: 1, invoke: workers.invoke });
    running.push({ source, workers });
    await source.drained();

    // THEN the finish made it whole: what clients read equals the listing, no record, no lock, the layout kept
    expect(lines.some((l) => l.includes('finished a publish left half done'))).toBe(true);
    expect(await clientView(store, base, layout)).toEqual(listing);
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
    expect(await readObject(store, base + LOCK_KEY)).toBeUndefined();
    if (layout === 'dual-write') {
      expect(await staleMirrors(store, base)).toEqual([]);
      expect((await readJson<MirrorMeta>(store, base + SHARD_META_KEY))?.version).toBe(1);
    } else {
      const meta = (await readJson<ShardMeta>(store, base + SHARD_META_KEY))!;
      expect(meta.version).toBe(2);
      expect(meta.commitSeq).toBeGreaterThan(3);
      expect(await readObject(store, base + INDEX_KEY)).toBeUndefined();
    }
    expect(source.invocations.filter((i) => i.failed > 0)).toEqual([]);
  });
});

describe('queueing a finish', () => {
  test('a dual-write delta queues one finish before its publish record; a monolith publish with a record queues none', async () => {
    // GIVEN a dual-write root and a monolith root beside a partition file a writer left, each with an upload,
    // and SQS seen through the same proxy as S3
    const store = await testStore({ bucketPrefix: 'finq' });
    await dualWriteRoot(store, 'dw', swampObjects(1));
    const mono = Object.entries(OBJECTS).map(([k, v]) => indexEntry(k, { size: Buffer.byteLength(v) }));
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`mo/${k}`, v])));
    await putIndex(store, `mo/${INDEX_KEY}`, mono);
    await putShardLayout(
      store,
      'mo/',
      mono.filter((e) => e.key.startsWith('files/')),
    );
    await putObjects(store, { 'dw/files/new.txt': 'new', 'mo/files/new.txt': 'new' });
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `q-${store.bucket}` }));
    const env = handlerEnv({
      bucket: store.bucket,
      prefixes: 'dw,mo',
      s3: counting.endpoint,
      queueUrl: QueueUrl,
      finishDelaySeconds: '0',
      recheckDelaySeconds: '0',
    });
    const lambda = loadHandler({ ...env, AWS_ENDPOINT_URL_SQS: counting.endpoint });
    const recordOf = (prefix: string) => `PUT /${store.bucket}/${publishRecordKey({ root: { bucket: store.bucket, prefix } })}`;
    counting.reset();

    // WHEN the dual-write upload's event arrives, and a repair publishes the monolith root
    const run = await invoke<BatchResponse>(
      lambda,
      sqsEventOf([s3Event([s3EventRecord({ bucket: store.bucket, key: 'dw/files/new.txt', size: 3 })])]),
    );
    const repair = await invoke(lambda, { action: 'repair', prefix: 'mo' });

    // THEN one finish, for the dual-write root, sent before its record was written; the monolith wrote a record and queued none
    expect(run.result.batchItemFailures).toEqual([]);
    expect(JSON.stringify(repair.result)).toContain('"published":true');
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    const finishes = (received.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}')).filter((b) => 'finishPublish' in b);
    expect(finishes).toEqual([{ finishPublish: { prefix: 'dw', round: 1 } }]);
    const order = counting.requests.map((r) => `${r.method} ${r.path}`);
    expect(order).toContain(recordOf('mo'));
    const firstSend = order.findIndex((r) => r.startsWith('POST '));
    expect(firstSend).toBeGreaterThanOrEqual(0);
    expect(firstSend).toBeLessThan(order.indexOf(recordOf('dw')));
    expect(run.metric('FinishesSent')).toEqual([1]);
  });
});

describe('a delta that meets an earlier publish record (shard-first)', () => {
  test('finishes the manifest, and the finish it queues adopts, from a listing, the partition file that publish left unlisted', async () => {
    // GIVEN a shard-first root where a killed publish wrote a new partition's file and its record, not the manifest
    const store = await testStore({ bucketPrefix: 'fina' });
    const root = { bucket: store.bucket, prefix: 'sf' };
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`sf/${k}`, v])));
    const entries = Object.entries(OBJECTS).map(([k, v]) => indexEntry(k, { size: Buffer.byteLength(v) }));
    await putShardLayout(store, 'sf/', entries, shardMeta([...groupSummaries(entries).keys()].sort(), 3));
    await putObject(store, 'sf/data/aws/lambda/f-1/1/raw', 'a new function');
    await putShardLayout(store, 'sf/', [indexEntry('data/aws/lambda/f-1/1/raw', { size: 14 })]);
    await putObject(store, publishRecordKey({ root }), JSON.stringify({ commitSeq: 3, partitions: ['data--aws--lambda'] }));
    await putObject(store, 'sf/files/new.txt', 'new');
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `q-${store.bucket}` }));
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'sf', queueUrl: QueueUrl, finishDelaySeconds: '0' }));

    // WHEN an upload's event arrives
    const delta = await invoke<BatchResponse>(
      lambda,
      sqsEventOf([s3Event([s3EventRecord({ bucket: store.bucket, key: 'sf/files/new.txt', size: 3 })])]),
    );

    // THEN the record is gone but clients still miss the unlisted partition's entry, and a finish asks for a listing
    expect(delta.result.batchItemFailures).toEqual([]);
    expect(await readObject(store, publishRecordKey({ root }))).toBeUndefined();
    const listing = await expectedFromListing(store, { root });
    expect((await clientView(store, 'sf/', 'shard-first')).map((r) => r.key)).not.toContain('data/aws/lambda/f-1/1/raw');
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    const finishes = (received.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}')).filter((b) => 'finishPublish' in b);
    expect(finishes).toEqual([{ finishPublish: { prefix: 'sf', round: 1, listing: true } }]);

    // WHEN that finish arrives
    const finish = await invoke<BatchResponse>(lambda, sqsEventOf(finishes));

    // THEN what clients read equals the listing
    expect(finish.result.batchItemFailures).toEqual([]);
    expect(await clientView(store, 'sf/', 'shard-first')).toEqual(listing);
  });
});

describe('a finish message', () => {
  const root = (bucket: string) => ({ bucket, prefix: 'h' });

  test('for a scope whose publish ended costs one HeadObject and writes nothing', async () => {
    // GIVEN a whole dual-write root and a namespace in it
    const store = await testStore({ bucketPrefix: 'finh' });
    await dualWriteRoot(store, 'h', swampObjects(1));
    await putObject(store, 'h/team/.namespace.json', JSON.stringify({ namespace: 'team' }));
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'h', s3: counting.endpoint }));
    counting.reset();

    // WHEN a finish of the root and of the namespace arrive
    const run = await invoke<BatchResponse>(
      lambda,
      sqsEventOf([{ finishPublish: { prefix: 'h', round: 1 } }, { finishPublish: { prefix: 'h', namespace: 'team', round: 1 } }]),
    );

    // THEN each costs its HeadObject, nothing else
    expect(run.result.batchItemFailures).toEqual([]);
    expect(counting.byOperation()).toEqual({ HeadObject: 2 });
    expect(counting.requests.map((r) => r.path).sort()).toEqual(
      [publishRecordKey({ root: root(store.bucket) }), publishRecordKey({ root: root(store.bucket), namespace: 'team' })]
        .map((k) => `/${store.bucket}/${k}`)
        .sort(),
    );
  });

  test('foreign or corrupt ones are skipped without a request; one naming no namespace writes nothing', async () => {
    // GIVEN a root whose listed namespace is team, and a record under a folder that is no namespace
    const store = await testStore({ bucketPrefix: 'finx' });
    await dualWriteRoot(store, 'h', swampObjects(1));
    await putObject(store, publishRecordKey({ root: root(store.bucket), namespace: 'ghost' }), '{}');
    const lambda = loadHandler({
      ...handlerEnv({ bucket: store.bucket, prefixes: 'h', s3: counting.endpoint }),
      DATASTORE_NAMESPACES: 'h/team,h/ghost',
    });
    counting.reset();

    // WHEN malformed finishes, one for another root, one for an unlisted namespace arrive
    const skipped = await invoke<BatchResponse>(
      lambda,
      sqsEventOf([
        { finishPublish: 'h' },
        { finishPublish: { prefix: 'h', namespace: '../team' } },
        { finishPublish: { prefix: 'h', namespace: '_control' } },
        { finishPublish: { prefix: 'h', namespace: 'a/b' } },
        { finishPublish: { prefix: 'h', round: 0 } },
        { finishPublish: { prefix: 'h', round: '1' } },
        { finishPublish: { prefix: 'elsewhere', round: 1 } },
        { finishPublish: { prefix: 'h', namespace: 'other', round: 1 } },
      ]),
    );

    // THEN none fails the batch and none makes a request
    expect(skipped.result.batchItemFailures).toEqual([]);
    expect(counting.requests).toEqual([]);
    expect(skipped.logs('batch done')[0].skipped).toMatchObject({ unknownMessages: 6, unknownRoots: 1 });

    // WHEN a finish names a listed folder that is no namespace, with a record there
    const ghost = await invoke<BatchResponse>(lambda, sqsEventOf([{ finishPublish: { prefix: 'h', namespace: 'ghost', round: 1 } }]));

    // THEN it asks, and writes nothing
    expect(ghost.result.batchItemFailures).toEqual([]);
    expect(counting.requests.filter((r) => r.method !== 'GET' && r.method !== 'HEAD')).toEqual([]);
  });

  test('meeting a record whose publish ends while the lock is read, it lists nothing and writes nothing', async () => {
    // GIVEN a whole dual-write root, and a publish's record that its live writer deletes, then frees the lock, as the finish reads the lock
    const store = await testStore({ bucketPrefix: 'fine' });
    await dualWriteRoot(store, 'h', swampObjects(1));
    const recordKey = publishRecordKey({ root: root(store.bucket) });
    await putObject(store, recordKey, JSON.stringify({ partitions: ['files'] }));
    const seen: string[] = [];
    const proxy = await startLoopbackProxy(testEndpoint(), (req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://proxy').pathname);
      seen.push(`${req.method} ${path}`);
      if (req.method !== 'GET' || path !== `/${store.bucket}/h/${LOCK_KEY}`) return false;
      void deleteObject(store, recordKey).then(() => {
        res.writeHead(404, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>',
        );
      });
      return true;
    });
    try {
      const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'h', s3: proxy.endpoint }));

      // WHEN its finish arrives
      const run = await invoke<BatchResponse>(lambda, sqsEventOf([{ finishPublish: { prefix: 'h', round: 1 } }]));

      // THEN it asked for the record, the lock and the record again, and stopped there
      expect(run.result.batchItemFailures).toEqual([]);
      expect(seen).toEqual([
        `HEAD /${store.bucket}/${recordKey}`,
        `GET /${store.bucket}/h/${LOCK_KEY}`,
        `HEAD /${store.bucket}/${recordKey}`,
      ]);
    } finally {
      await proxy.close();
    }
  });

  test('meeting a live lock, it writes nothing and sends its next round; that round finishes once the lock is gone', async () => {
    // GIVEN a dual-write publish left half done (its record, a stale mirror file) while a client holds the lock
    const store = await testStore({ bucketPrefix: 'finl' });
    const entries = await dualWriteRoot(store, 'h', swampObjects(1));
    await putObject(store, 'h/files/later.txt', 'pushed since');
    const index = await readIndex(store, `h/${INDEX_KEY}`);
    await putObject(
      store,
      `h/${INDEX_KEY}`,
      JSON.stringify({
        version: 1,
        lastPulled: index!.lastPulled,
        entries: Object.fromEntries([...entries, indexEntry('files/later.txt', { size: 12 })].map((e) => [e.key, e])),
      }),
    );
    await putObject(store, publishRecordKey({ root: root(store.bucket) }), JSON.stringify({ partitions: ['files'] }));
    await putObject(store, `h/${LOCK_KEY}`, JSON.stringify(lockBody()));
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `q-${store.bucket}` }));
    const lambda = loadHandler(
      handlerEnv({ bucket: store.bucket, prefixes: 'h', s3: counting.endpoint, queueUrl: QueueUrl, finishDelaySeconds: '0' }),
    );
    counting.reset();

    // WHEN its finish arrives
    const busy = await invoke<BatchResponse>(lambda, sqsEventOf([{ finishPublish: { prefix: 'h', round: 1 } }]));

    // THEN the batch succeeds having asked for the record and the lock alone (no listing, nothing written), and round 2 waits on the queue
    expect(busy.result.batchItemFailures).toEqual([]);
    expect(counting.byOperation()).toEqual({ HeadObject: 1, GetObject: 1 });
    expect(counting.requests.find((r) => r.method === 'GET')?.path).toBe(`/${store.bucket}/h/${LOCK_KEY}`);
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    const next = (received.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}')).filter((b) => 'finishPublish' in b);
    expect(next).toEqual([{ finishPublish: { prefix: 'h', round: 2 } }]);
    expect(await staleMirrors(store, 'h/')).toEqual(['files']);

    // WHEN the client has released the lock and round 2 arrives
    await deleteObject(store, `h/${LOCK_KEY}`);
    const done = await invoke<BatchResponse>(lambda, sqsEventOf(next));

    // THEN the mirror follows the monolith and the record is gone
    expect(done.result.batchItemFailures).toEqual([]);
    expect(await staleMirrors(store, 'h/')).toEqual([]);
    expect(await readObject(store, publishRecordKey({ root: root(store.bucket) }))).toBeUndefined();
  });
});
