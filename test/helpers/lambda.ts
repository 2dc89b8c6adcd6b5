/**
 * Lambda test helpers: the bundle (`dist/lambda/index.js`) loaded fresh per configuration, a Lambda
 * context, captured log lines, a request-counting proxy in front of the test endpoint, a bucket whose
 * notifications moto delivers to a real SQS queue, and typed factories for the events the handler gets.
 *
 * @example
 * const proxy = await startCountingProxy(testEndpoint());
 * const fixture = await notifiedBucket('swamp');
 * const lambda = loadHandler(handlerEnv({ bucket: fixture.store.bucket, prefixes: 'swamp', s3: proxy.endpoint }));
 * const { result } = await invoke(lambda, sqsEventFrom(await fixture.receive()));
 */
import { join } from 'node:path';
import { DeleteMessageBatchCommand, type Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context, ScheduledEvent, SQSEvent, SQSRecord } from 'aws-lambda';
import type { S3Store } from '../../lambda/lib/s3';
import { rebuildIfStale } from './bundle';
import { notifyQueue } from '../../support/notifications';
import { type LoopbackProxy, startLoopbackProxy } from './proxy';
import { T0 } from './factories';
import { testEndpoint, testStore } from './s3';

// ---------------------------------------------------------------------------------------------
// The bundle
// ---------------------------------------------------------------------------------------------

const PROJECT_ROOT = join(__dirname, '..', '..');
// The SDK warns on every load of the bundle under node 20; the Lambda runtime is newer.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
/** The artifact the CDK stack deploys. */
export const BUNDLE = join(PROJECT_ROOT, 'dist', 'lambda', 'index.js');

/** Builds the bundle when it is missing or older than a source; the jest global setup already did so once per run. */
export function ensureBundle(): void {
  rebuildIfStale();
}

/** The bundle's export. */
export interface LambdaModule {
  handler(event: unknown, context: Context): Promise<unknown>;
}

/** Settings of {@link handlerEnv}. */
export interface HandlerEnvOptions {
  readonly bucket: string;
  /** DATASTORE_PREFIXES. @default '' (the bucket root) */
  readonly prefixes?: string;
  /** AWS_ENDPOINT_URL_S3 (e.g. a counting proxy). @default the test endpoint */
  readonly s3?: string;
  /** DATASTORE_QUEUE_URL; re-checks are off without it. */
  readonly queueUrl?: string;
  /** @default '1' */
  readonly recheckDelaySeconds?: string;
  /** @default '1' */
  readonly finishDelaySeconds?: string;
  /** @default '1' */
  readonly lockWaitSeconds?: string;
  /** @default '60' */
  readonly repairReserveSeconds?: string;
  /** AWS_LAMBDA_FUNCTION_MEMORY_SIZE, which the runtime sets: the function's memory in MiB. @default unset (the V8 heap decides) */
  readonly functionMemoryMiB?: string;
  /** AWS_LAMBDA_FUNCTION_NAME, which the runtime sets: the per-stack dimension of the handler's metrics. @default unset */
  readonly functionName?: string;
  /** DATASTORE_BUCKET_OWNER: the account every S3 request expects to own the bucket. @default unset */
  readonly bucketOwner?: string;
}

/** The environment the CDK stack gives the function, pointed at the test endpoint. */
export function handlerEnv(options: HandlerEnvOptions): Record<string, string | undefined> {
  return {
    DATASTORE_BUCKET: options.bucket,
    DATASTORE_PREFIXES: options.prefixes ?? '',
    DATASTORE_QUEUE_URL: options.queueUrl,
    DATASTORE_FORCE_PATH_STYLE: 'true',
    DATASTORE_RECHECK_DELAY_SECONDS: options.recheckDelaySeconds ?? '1',
    DATASTORE_FINISH_DELAY_SECONDS: options.finishDelaySeconds ?? '1',
    DATASTORE_LOCK_WAIT_SECONDS: options.lockWaitSeconds ?? '1',
    DATASTORE_REPAIR_RESERVE_SECONDS: options.repairReserveSeconds ?? '60',
    AWS_ENDPOINT_URL_S3: options.s3 ?? testEndpoint(),
    AWS_ENDPOINT_URL_SQS: testEndpoint(),
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: options.functionMemoryMiB,
    AWS_LAMBDA_FUNCTION_NAME: options.functionName,
    DATASTORE_BUCKET_OWNER: options.bucketOwner,
  };
}

/** Variables {@link loadHandler} sets and restores. */
const HANDLER_VARS = [
  'DATASTORE_BUCKET',
  'DATASTORE_PREFIXES',
  'DATASTORE_NAMESPACES',
  'DATASTORE_QUEUE_URL',
  'DATASTORE_FORCE_PATH_STYLE',
  'DATASTORE_RECHECK_DELAY_SECONDS',
  'DATASTORE_FINISH_DELAY_SECONDS',
  'DATASTORE_LOCK_WAIT_SECONDS',
  'DATASTORE_REPAIR_RESERVE_SECONDS',
  'AWS_ENDPOINT_URL_S3',
  'AWS_ENDPOINT_URL_SQS',
  'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_FUNCTION_NAME',
  'DATASTORE_BUCKET_OWNER',
];

/**
 * Requires a fresh instance of the bundle with `env` set, as a cold start does: the handler reads its
 * environment when it loads, so each configuration gets its own module instance. Log lines of the cold
 * start are returned too; a bad configuration throws (its log lines are attached as `lines`).
 */
export function loadHandler(env: Record<string, string | undefined>): LambdaModule & { coldStartLines: LogLine[] } {
  ensureBundle();
  const saved = new Map(HANDLER_VARS.map((k) => [k, process.env[k]]));
  for (const k of HANDLER_VARS) delete process.env[k];
  for (const [k, v] of Object.entries(env)) if (v !== undefined) process.env[k] = v;
  const capture = startCapture();
  try {
    let mod: LambdaModule | undefined;
    jest.isolateModules(() => {
      mod = require(BUNDLE) as LambdaModule;
    });
    return { handler: mod!.handler, coldStartLines: capture.stop() };
  } catch (err) {
    (err as { lines?: LogLine[] }).lines = capture.stop();
    throw err;
  } finally {
    capture.stop();
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Invoking
// ---------------------------------------------------------------------------------------------

/** A Lambda context whose remaining time is fixed, or computed by `remainingMs`. */
export function lambdaContext(remainingMs: number | (() => number) = 600_000): Context {
  const remaining = typeof remainingMs === 'number' ? () => remainingMs : remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'datastore-indexer-test',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:datastore-indexer-test',
    memoryLimitInMB: '1024',
    awsRequestId: `req-${Math.random().toString(36).slice(2, 10)}`,
    logGroupName: '/aws/lambda/datastore-indexer-test',
    logStreamName: 'test',
    getRemainingTimeInMillis: remaining,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** One line the function wrote: its JSON (a Powertools log line or an EMF metrics blob), or `raw` text. */
export type LogLine = Record<string, unknown> & { raw?: string };

function startCapture(): { stop(): LogLine[] } {
  const chunks: string[] = [];
  const spies = [process.stdout, process.stderr].map((stream) =>
    jest.spyOn(stream, 'write').mockImplementation((chunk: unknown) => {
      chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      return true;
    }),
  );
  let stopped = false;
  return {
    stop() {
      if (!stopped) for (const spy of spies) spy.mockRestore();
      stopped = true;
      return chunks
        .join('')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => {
          try {
            return JSON.parse(l) as LogLine;
          } catch {
            return { raw: l };
          }
        });
    },
  };
}

/** What an invocation returned and wrote. */
export interface Invocation<T> {
  readonly result: T;
  readonly lines: LogLine[];
  readonly ms: number;
  /** Log lines whose `message` is `message`. */
  logs(message: string): LogLine[];
  /** The values of an EMF metric across the invocation's metric blobs. */
  metric(name: string): number[];
}

/** Invokes the handler, capturing its output; rethrows its error with the lines attached. */
export async function invoke<T = unknown>(
  lambda: LambdaModule,
  event: unknown,
  context: Context = lambdaContext(),
): Promise<Invocation<T>> {
  const capture = startCapture();
  const started = Date.now();
  let result: T;
  try {
    result = (await lambda.handler(event, context)) as T;
  } catch (err) {
    (err as { lines?: LogLine[] }).lines = capture.stop();
    throw err;
  }
  const ms = Date.now() - started;
  const lines = capture.stop();
  return {
    result,
    lines,
    ms,
    logs: (message) => lines.filter((l) => l.message === message),
    metric: (name) =>
      lines
        .filter((l) => l._aws !== undefined && name in l)
        .flatMap((l) => {
          const v = l[name];
          return Array.isArray(v) ? (v as number[]) : [v as number];
        }),
  };
}

// ---------------------------------------------------------------------------------------------
// Counting S3 requests
// ---------------------------------------------------------------------------------------------

/** One HTTP request that went through the proxy. */
export interface ProxiedRequest {
  readonly method: string;
  /** The decoded path: `/<bucket>/<key>` (path-style). */
  readonly path: string;
  readonly query: string;
}

/** A loopback HTTP proxy in front of an S3 endpoint that records every request. */
export interface CountingProxy extends LoopbackProxy {
  readonly requests: ProxiedRequest[];
  reset(): void;
  /** Requests by S3 operation (GetObject, HeadObject, PutObject, DeleteObject, ListObjectsV2, Other). */
  byOperation(): Record<string, number>;
  /** PUTs of one object key. */
  putsOf(bucket: string, key: string): number;
}

function operationOf(r: ProxiedRequest): string {
  const isBucket = r.path.split('/').filter(Boolean).length <= 1;
  if (r.method === 'GET' && isBucket && r.query.includes('list-type=2')) return 'ListObjectsV2';
  if (isBucket) return 'Other';
  return { GET: 'GetObject', HEAD: 'HeadObject', PUT: 'PutObject', DELETE: 'DeleteObject' }[r.method] ?? 'Other';
}

/** Starts a counting proxy on 127.0.0.1 forwarding to `target`. */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const requests: ProxiedRequest[] = [];
  const proxy = await startLoopbackProxy(target, (req) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    requests.push({ method: req.method ?? 'GET', path: decodeURIComponent(url.pathname), query: url.search });
    return false;
  });
  return {
    ...proxy,
    requests,
    reset: () => void requests.splice(0),
    byOperation() {
      const counts: Record<string, number> = {};
      for (const r of requests) counts[operationOf(r)] = (counts[operationOf(r)] ?? 0) + 1;
      return counts;
    },
    putsOf: (bucket, key) => requests.filter((r) => r.method === 'PUT' && r.path === `/${bucket}/${key}`).length,
  };
}

// ---------------------------------------------------------------------------------------------
// S3 notifications delivered by moto to SQS
// ---------------------------------------------------------------------------------------------

const sqsClients = new Set<SQSClient>();
if (typeof afterAll === 'function')
  afterAll(() => {
    for (const c of sqsClients) c.destroy();
  });

/** An SQS client for the test endpoint, destroyed after the file. */
export function testSqs(): SQSClient {
  const client = new SQSClient({ endpoint: testEndpoint(), region: process.env.AWS_REGION ?? 'us-east-1' });
  sqsClients.add(client);
  return client;
}

/** A bucket whose object events moto sends to a queue of its own, like the stack's S3 → SQS delivery. */
export interface NotifiedBucket {
  readonly store: S3Store;
  readonly queueUrl: string;
  /**
   * Receives (and deletes) every message waiting now: moto queues an object's notification before it
   * answers the request, and the handler its re-checks before it returns, so nothing is still on its way.
   */
  receive(): Promise<Message[]>;
}

/** Creates a bucket and a queue, and has moto deliver ObjectCreated/ObjectRemoved notifications to it. */
export async function notifiedBucket(prefix = 'lambda'): Promise<NotifiedBucket> {
  const store = await testStore({ bucketPrefix: prefix });
  const sqs = testSqs();
  const { url: QueueUrl } = await notifyQueue(store.client, sqs, store.bucket, `q-${store.bucket}`.slice(0, 80));
  const receiveOnce = async (): Promise<Message[]> => {
    const out = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, AttributeNames: ['All'] }),
    );
    const messages = out.Messages ?? [];
    if (messages.length) {
      await sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl, Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })) }),
      );
    }
    return messages;
  };
  const receive = async (): Promise<Message[]> => {
    const all: Message[] = [];
    for (;;) {
      const batch = await receiveOnce();
      if (!batch.length) return all;
      all.push(...batch);
    }
  };
  await receive(); // the s3:TestEvent of the new configuration
  return { store, queueUrl: QueueUrl, receive };
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/** An SQS record carrying `body`, as the Lambda SQS event source hands it over. */
export function sqsRecordOf(body: string, messageId: string, receiveCount = 1): SQSRecord {
  return {
    messageId,
    receiptHandle: `handle-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(receiveCount),
      SentTimestamp: String(Date.parse(T0)),
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: String(Date.parse(T0)),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:datastore-indexer',
    awsRegion: 'us-east-1',
  };
}

/** The SQS Lambda event of messages received from a queue (ids and bodies kept). */
export function sqsEventFrom(messages: readonly Message[]): SQSEvent {
  return { Records: messages.map((m) => sqsRecordOf(m.Body ?? '', m.MessageId ?? '', Number(m.Attributes?.ApproximateReceiveCount ?? 1))) };
}

/** An SQS Lambda event of one record per body (objects are JSON-encoded); ids are `<idPrefix>-<i>`. */
export function sqsEventOf(bodies: readonly unknown[], idPrefix = 'msg'): SQSEvent {
  return { Records: bodies.map((b, i) => sqsRecordOf(typeof b === 'string' ? b : JSON.stringify(b), `${idPrefix}-${i}`)) };
}

/** What an S3 EventBridge event is about. */
export interface EventBridgeS3Options {
  readonly bucket: string;
  /** The object key; EventBridge sends it as it is (no URL encoding), as reports of real deliveries show. */
  readonly key: string;
  /** `detail.object.key` exactly as sent, when it should differ from `key` (e.g. URL-encoded). */
  readonly keyAsSent?: string;
  /** @default 'created' */
  readonly kind?: 'created' | 'removed';
  /** @default 1 */
  readonly size?: number;
  readonly sequencer?: string;
  /** @default T0 */
  readonly time?: string;
}

/** An S3 "Object Created" / "Object Deleted" event as EventBridge forwards it to SQS. */
export function eventBridgeS3Event(options: EventBridgeS3Options): Record<string, unknown> {
  const created = (options.kind ?? 'created') === 'created';
  return {
    version: '0',
    id: `evt-${Math.random().toString(36).slice(2, 10)}`,
    'detail-type': created ? 'Object Created' : 'Object Deleted',
    source: 'aws.s3',
    account: '123456789012',
    time: options.time ?? T0,
    region: 'us-east-1',
    resources: [`arn:aws:s3:::${options.bucket}`],
    detail: {
      version: '0',
      bucket: { name: options.bucket },
      object: {
        key: options.keyAsSent ?? options.key,
        ...(created ? { size: options.size ?? 1, etag: 'd41d8cd98f00b204e9800998ecf8427e' } : {}),
        ...(options.sequencer ? { sequencer: options.sequencer } : {}),
      },
      'request-id': 'N4N7GDK58NMKJ12R',
      requester: '123456789012',
      reason: created ? 'PutObject' : 'DeleteObject',
      ...(created ? {} : { 'deletion-type': 'Permanently Deleted' }),
    },
  };
}

/** The EventBridge scheduled event that runs the drift repair. */
export function scheduledEvent(): ScheduledEvent {
  return {
    version: '0',
    id: 'schedule-1',
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: ['arn:aws:events:us-east-1:123456789012:rule/datastore-indexer-drift-repair'],
    detail: {},
  };
}
