/**
 * The Lambda part of `npm run demo`: after hydrate, an out-of-band upload and delete in the local S3;
 * moto delivers their S3 notifications to an SQS queue on the same server, and the bundled handler
 * (`dist/lambda/index.js`, the artifact the stack deploys) turns that batch into one index write.
 */
import { join } from 'node:path';
import { DeleteMessageBatchCommand, type Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DatastoreRoot } from '../lambda/lib/scope';
import { INDEX_KEY, scopeBase } from '../lambda/lib/names';
import type { S3Store } from '../lambda/lib/s3';
import { readLiveIndex } from '../lambda/lib/layouts/read';
import { notifyQueue } from '../support/notifications';

/** What this step needs of the demo's shared state. */
interface LambdaDemoState {
  readonly bucket: string;
  readonly prefix: string;
  moto?: { readonly endpoint: string };
  store?: S3Store;
  objects: Map<string, Map<string, Buffer>>;
  readonly cleanups: (() => Promise<void> | void)[];
}

const BUNDLE = join(__dirname, '..', 'dist', 'lambda', 'index.js');

async function receiveAll(sqs: SQSClient, queueUrl: string): Promise<Message[]> {
  const all: Message[] = [];
  for (;;) {
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    if (!Messages.length) return all;
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    all.push(...Messages);
  }
}

/** The demo step; append it to `STEPS` after hydrate. */
export const lambdaStep = {
  title: 'Lambda: an out-of-band upload and delete reach the index through S3 notifications → SQS → the bundled handler',
  async run(state: LambdaDemoState): Promise<string[]> {
    const store = state.store!;
    const endpoint = state.moto!.endpoint;
    const sqs = new SQSClient({ endpoint, region: 'us-east-1' });
    state.cleanups.push(() => sqs.destroy());
    const queue = await notifyQueue(store.client, sqs, state.bucket, 'datastore-indexer-demo');
    const QueueUrl = queue.url;
    await receiveAll(sqs, QueueUrl); // the configuration's s3:TestEvent

    const root: DatastoreRoot = { bucket: state.bucket, prefix: state.prefix };
    const base = scopeBase({ root });
    const objects = state.objects.get('')!;
    const gone = [...objects.keys()].sort()[0];
    const added = 'files/uploaded out of band+1.txt';
    const bytes = Buffer.from('written straight to S3, behind every client\n');
    await store.put(base + added, bytes, undefined, 'text/plain');
    await store.delete(base + gone);
    objects.set(added, bytes);
    objects.delete(gone);
    const messages = await receiveAll(sqs, QueueUrl);
    const encoded = messages.map((m) => /"key": ?"([^"]*out[^"]*)"/.exec(m.Body ?? '')?.[1]).find(Boolean);

    // The function's environment, as the stack sets it; the handler reads it at its cold start (the require).
    Object.assign(process.env, {
      DATASTORE_BUCKET: state.bucket,
      DATASTORE_PREFIXES: state.prefix,
      DATASTORE_QUEUE_URL: QueueUrl,
      DATASTORE_FORCE_PATH_STYLE: 'true',
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_ENDPOINT_URL_SQS: endpoint,
      POWERTOOLS_LOG_LEVEL: 'WARN',
      POWERTOOLS_METRICS_DISABLED: 'true',
    });
    const { handler } = require(BUNDLE) as { handler: (event: unknown, context: unknown) => Promise<{ batchItemFailures: unknown[] }> };
    const event = {
      Records: messages.map((m) => ({
        messageId: m.MessageId,
        receiptHandle: m.ReceiptHandle,
        body: m.Body,
        attributes: {},
        messageAttributes: {},
        md5OfBody: m.MD5OfBody,
        eventSource: 'aws:sqs',
        eventSourceARN: queue.arn,
        awsRegion: 'us-east-1',
      })),
    };
    const context = { functionName: 'datastore-indexer-demo', awsRequestId: 'demo', getRemainingTimeInMillis: () => 300_000 };
    const started = Date.now();
    const response = await handler(event, context);
    const ms = Date.now() - started;
    if (response.batchItemFailures.length) throw new Error(`the handler returned batch item failures: ${JSON.stringify(response)}`);

    const live = await readLiveIndex(store, { root });
    if (live.state !== 'valid') throw new Error(`the index is ${live.state} after the handler ran`);
    const entries = live.index.entries;
    if (entries.get(added)?.size !== bytes.length || entries.has(gone) || entries.size !== objects.size) {
      throw new Error('the index does not show the upload and the delete');
    }
    return [
      `uploaded ${base}${added}, deleted ${base}${gone}`,
      `moto delivered ${messages.length} S3 notifications to the queue (the key arrives URL-encoded: ${encoded})`,
      `dist/lambda/index.js handler(SQS batch of ${messages.length}) → ${JSON.stringify(response)} in ${ms} ms`,
      `${base}${INDEX_KEY}: ${entries.size} entries, with the upload (${bytes.length} bytes) and without the deleted object`,
    ];
  },
};
