/**
 * The bundle fed by the emulated SQS event source (support/event-source.ts), from the notifications
 * moto sends: batches, concurrency, partial batch failures back on the queue after the visibility
 * timeout, and the dead-letter queue after maxReceiveCount receives.
 */
import { PutBucketNotificationConfigurationCommand } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { LOCK_KEY } from '../../lambda/lib/names';
import { type EventSource, type LambdaWorkers, lambdaWorkers, startEventSource } from '../../support/event-source';
import { lockBody } from '../helpers/factories';
import { ensureBundle, handlerEnv, testSqs } from '../helpers/lambda';
import { deleteObject, putObject, testStore } from '../helpers/s3';
import { expectedFromListing, indexOf, indexedRoot } from './support';

const sqs = testSqs();
beforeAll(() => ensureBundle());
const running: { source: EventSource; workers: LambdaWorkers }[] = [];
afterEach(async () => {
  for (const { source, workers } of running.splice(0)) {
    await source.stop();
    workers.stop();
  }
});

/** A bucket whose notifications moto sends to a queue with a dead-letter queue, as the stack wires them. */
async function wiredBucket(name: string, queue: { visibilityTimeoutS: number; maxReceiveCount: number }) {
  const store = await testStore({ bucketPrefix: name });
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${store.bucket}-dlq`.slice(0, 80) }));
  const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes!
    .QueueArn!;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${store.bucket}-q`.slice(0, 80),
      Attributes: {
        VisibilityTimeout: String(queue.visibilityTimeoutS),
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: queue.maxReceiveCount }),
      },
    }),
  );
  const queueArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
  await store.client.send(
    new PutBucketNotificationConfigurationCommand({
      Bucket: store.bucket,
      NotificationConfiguration: { QueueConfigurations: [{ QueueArn: queueArn, Events: ['s3:ObjectCreated:*', 's3:ObjectRemoved:*'] }] },
    }),
  );
  const deadLetters = async (): Promise<number> => {
    const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }));
    return (out.Messages ?? []).length;
  };
  return { store, queueUrl: QueueUrl!, deadLetters };
}

function start(
  env: Record<string, string | undefined>,
  queueUrl: string,
  options: { windowMs: number; maxConcurrency: number; batchSize?: number },
): EventSource {
  const workers = lambdaWorkers({ ...env, POWERTOOLS_LOG_LEVEL: 'ERROR', POWERTOOLS_METRICS_DISABLED: 'true' }, options.maxConcurrency);
  const source = startEventSource({
    sqs,
    queueUrl,
    batchingWindowMs: options.windowMs,
    maxConcurrency: options.maxConcurrency,
    batchSize: options.batchSize,
    invoke: workers.invoke,
  });
  running.push({ source, workers });
  return source;
}

describe('the emulated SQS event source', () => {
  test('a burst lands in the index through batches of at most batchSize, two at a time, nothing dead-lettered', async () => {
    const fx = await wiredBucket('es-burst', { visibilityTimeoutS: 30, maxReceiveCount: 10 });
    const root = { bucket: fx.store.bucket, prefix: 'es' };
    await indexedRoot(fx.store, 'es', 3);
    const source = start(handlerEnv({ bucket: fx.store.bucket, prefixes: 'es', queueUrl: fx.queueUrl }), fx.queueUrl, {
      windowMs: 1000,
      maxConcurrency: 2,
      batchSize: 10,
    });

    await Promise.all(Array.from({ length: 24 }, (_, i) => putObject(fx.store, `es/files/burst/${i}.txt`, 'x'.repeat(i + 1))));
    await source.drained();

    const index = await indexOf(fx.store, { root });
    expect(index).toEqual(await expectedFromListing(fx.store, { root }));
    expect(index.filter((e) => e.key.startsWith('files/burst/'))).toHaveLength(24);
    expect(source.invocations.every((i) => i.records <= 10 && i.failed === 0 && i.error === undefined)).toBe(true);
    expect(new Set(source.invocations.map((i) => i.slot)).size).toBeLessThanOrEqual(2);
    expect(await fx.deadLetters()).toBe(0);
  });

  test("a busy lock sends the root's items back; they come back after the visibility timeout and land once it is free", async () => {
    const fx = await wiredBucket('es-lock', { visibilityTimeoutS: 2, maxReceiveCount: 10 });
    const root = { bucket: fx.store.bucket, prefix: 'lk' };
    await indexedRoot(fx.store, 'lk', 2);
    await putObject(
      fx.store,
      `lk/${LOCK_KEY}`,
      JSON.stringify(lockBody({ holder: 'swamp-client', acquiredAt: new Date().toISOString(), ttlMs: 60_000 })),
    );
    const source = start(handlerEnv({ bucket: fx.store.bucket, prefixes: 'lk', lockWaitSeconds: '1' }), fx.queueUrl, {
      windowMs: 1000,
      maxConcurrency: 2,
    });

    await putObject(fx.store, 'lk/files/late.txt', 'late');
    await source.invocation((i) => i.failed > 0);
    expect((await indexOf(fx.store, { root })).map((e) => e.key)).not.toContain('files/late.txt');

    await deleteObject(fx.store, `lk/${LOCK_KEY}`);
    await source.drained();
    expect((await indexOf(fx.store, { root })).map((e) => e.key)).toContain('files/late.txt');
    expect(await fx.deadLetters()).toBe(0);
  });

  test('a message that can never be processed reaches the dead-letter queue after maxReceiveCount receives', async () => {
    const fx = await wiredBucket('es-dlq', { visibilityTimeoutS: 1, maxReceiveCount: 2 });
    const source = start(handlerEnv({ bucket: fx.store.bucket, prefixes: 'p' }), fx.queueUrl, { windowMs: 1000, maxConcurrency: 2 });
    await sqs.send(new SendMessageCommand({ QueueUrl: fx.queueUrl, MessageBody: '{not json' }));
    await source.drained();
    // Counted as receives, not invocations: on a slow machine the visibility timeout can pass inside one
    // batching window, and the same message then comes twice in one batch. moto serves receives on parallel
    // threads, so a receive more than SQS would allow can slip in: at least maxReceiveCount is the rule.
    const receives = source.invocations.filter((i) => i.failed > 0).reduce((sum, i) => sum + i.records, 0);
    expect(receives).toBeGreaterThanOrEqual(2);
    expect(await fx.deadLetters()).toBe(1);
  });
});
