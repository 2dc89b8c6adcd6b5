/**
 * A local stand-in for Lambda's SQS event source mapping, for tests and the benchmark (no jest here).
 *
 * It reads a real queue (moto's) the way the mapping does: up to `maxConcurrency` invocations at once,
 * each fed a batch of up to `batchSize` messages gathered over at most `batchingWindowMs` from the first
 * message, then deletes what succeeded. Messages named in `batchItemFailures` (or every message, when
 * the invocation throws) are left alone: SQS makes them visible again after the visibility timeout and,
 * with a redrive policy, moves them to the dead-letter queue after `maxReceiveCount` receives — the
 * queue's own behaviour, which moto implements, as SQS does for Lambda.
 *
 * The function runs in child processes (`lambdaWorkers`), one per concurrent slot, each a warm instance
 * of the bundle (`dist/lambda/index.js`) with the environment the stack gives it.
 *
 * @example
 * const workers = lambdaWorkers(env, 2);
 * const source = startEventSource({ sqs, queueUrl, maxConcurrency: 2, batchingWindowMs: 2000, invoke: workers.invoke });
 * await source.drained();
 * await source.stop(); workers.stop();
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { sleep } from './sleep';

/** The artifact the CDK stack deploys. */
export const LAMBDA_BUNDLE = join(__dirname, '..', 'dist', 'lambda', 'index.js');

/** Receives in flight at once while a batch fills. */
const POLLERS = 5;

/** Lambda's cap on the payload of one SQS batch. */
const MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;

/** How the mapping is set, as on `AWS::Lambda::EventSourceMapping`. */
export interface EventSourceOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  /** `BatchSize`. @default 1000 */
  readonly batchSize?: number;
  /** `MaximumBatchingWindowInSeconds`, in ms. */
  readonly batchingWindowMs: number;
  /** `ScalingConfig.MaximumConcurrency`. @default 2 */
  readonly maxConcurrency?: number;
  /** Runs one invocation; a throw fails the whole batch. `slot` is 0 … maxConcurrency-1. */
  readonly invoke: (event: SQSEvent, slot: number) => Promise<SQSBatchResponse | undefined>;
  /** ARN put in each record's `eventSourceARN`. */
  readonly queueArn?: string;
}

/** One invocation, as the mapping saw it. */
export interface InvocationRecord {
  readonly slot: number;
  readonly records: number;
  readonly failed: number;
  readonly error?: string;
  readonly startedMs: number;
  readonly ms: number;
}

/** A running emulated event source. */
export interface EventSource {
  readonly invocations: InvocationRecord[];
  /** Resolves with the first invocation, made already or to come, that `matches`: a test waits for it rather than polls. */
  invocation(matches: (record: InvocationRecord) => boolean): Promise<InvocationRecord>;
  /**
   * Resolves once a poller's long poll comes back empty while the queue holds nothing (visible, in flight
   * or delayed) and no invocation runs: the pollers' own receives are the signal, not a clock.
   */
  drained(): Promise<void>;
  /** Stops polling and waits for running invocations. */
  stop(): Promise<void>;
}

/** The SQS record Lambda builds from a received message. */
export function sqsRecordFromMessage(message: Message, queueArn: string): SQSRecord {
  const a = message.Attributes ?? {};
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? String(Date.now()),
      SenderId: a.SenderId ?? 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: process.env.AWS_REGION ?? 'us-east-1',
  };
}

/** Starts `maxConcurrency` pollers on the queue; see the module comment for the semantics. */
export function startEventSource(options: EventSourceOptions): EventSource {
  const { sqs, queueUrl, invoke } = options;
  const batchSize = options.batchSize ?? 1000;
  const maxConcurrency = options.maxConcurrency ?? 2;
  const queueArn = options.queueArn ?? 'arn:aws:sqs:us-east-1:123456789012:datastore-indexer';
  const invocations: InvocationRecord[] = [];
  const awaited: { matches: (record: InvocationRecord) => boolean; resolve: (record: InvocationRecord) => void }[] = [];
  let stopping = false;
  let running = 0;
  const drainWaiters: (() => void)[] = [];

  const receive = async (max: number, wait: number): Promise<Message[]> => {
    const out = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: max, WaitTimeSeconds: wait, AttributeNames: ['All'] }),
    );
    return out.Messages ?? [];
  };

  /**
   * Gathers one batch: waits for a first message, then keeps receiving until the window closes or the
   * batch is full. Once a batch has begun, up to `POLLERS` receives run at once, as Lambda's several
   * pollers do, so a deep queue fills a batch in a few round trips.
   */
  const gather = async (): Promise<Message[]> => {
    const batch: Message[] = [];
    let bytes = 0;
    let closesAt = Infinity;
    while (!stopping && batch.length < batchSize && bytes < MAX_PAYLOAD_BYTES) {
      const remaining = closesAt - Date.now();
      if (remaining <= 0) break;
      let got: Message[];
      if (batch.length === 0) {
        got = await receive(Math.min(10, batchSize), 1);
        if (got.length) closesAt = Date.now() + options.batchingWindowMs;
        else await tellIfDrained();
      } else {
        // Short polls near the end of the window; long polling is in whole seconds.
        const wait = Math.min(20, Math.floor(remaining / 1000));
        const room = batchSize - batch.length;
        const calls = Math.min(POLLERS, Math.ceil(room / 10));
        got = (await Promise.all(Array.from({ length: calls }, (_, i) => receive(Math.min(10, room - i * 10), wait)))).flat();
        if (!got.length && wait === 0) await sleep(Math.min(50, Math.max(0, closesAt - Date.now())));
      }
      for (const m of got) {
        batch.push(m);
        bytes += Buffer.byteLength(m.Body ?? '');
      }
    }
    return batch;
  };

  const settle = async (batch: Message[], failedIds: ReadonlySet<string>): Promise<void> => {
    const done = batch.filter((m) => !failedIds.has(m.MessageId ?? ''));
    const chunks = Array.from({ length: Math.ceil(done.length / 10) }, (_, i) => done.slice(i * 10, i * 10 + 10));
    for (let i = 0; i < chunks.length; i += POLLERS) {
      await Promise.all(
        chunks.slice(i, i + POLLERS).map((chunk) =>
          sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle })),
            }),
          ),
        ),
      );
    }
  };

  const poller = async (slot: number): Promise<void> => {
    while (!stopping) {
      let batch: Message[];
      try {
        batch = await gather();
      } catch {
        await sleep(200);
        continue;
      }
      if (!batch.length) continue;
      running++;
      const startedMs = Date.now();
      let failedIds = new Set<string>();
      let error: string | undefined;
      try {
        const response = await invoke({ Records: batch.map((m) => sqsRecordFromMessage(m, queueArn)) }, slot);
        failedIds = new Set((response?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
        failedIds = new Set(batch.map((m) => m.MessageId ?? ''));
      }
      try {
        await settle(batch, failedIds);
      } finally {
        const record = { slot, records: batch.length, failed: failedIds.size, error, startedMs, ms: Date.now() - startedMs };
        invocations.push(record);
        for (const waiter of awaited.filter((w) => w.matches(record))) {
          awaited.splice(awaited.indexOf(waiter), 1);
          waiter.resolve(record);
        }
        running--;
      }
    }
  };

  /** After an empty long poll: wakes those waiting for the queue to drain, if it has. */
  async function tellIfDrained(): Promise<void> {
    if (drainWaiters.length === 0 || running > 0) return;
    if ((await queueDepth()) > 0 || running > 0) return;
    for (const wake of drainWaiters.splice(0)) wake();
  }

  const queueDepth = async (): Promise<number> => {
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
      }),
    );
    return Object.values(Attributes ?? {}).reduce((sum, v) => sum + Number(v), 0);
  };

  const pollers = Array.from({ length: maxConcurrency }, (_, slot) => poller(slot));

  return {
    invocations,
    invocation(matches) {
      const made = invocations.find(matches);
      if (made) return Promise.resolve(made);
      return new Promise((resolve) => awaited.push({ matches, resolve }));
    },
    drained() {
      return new Promise<void>((resolve) => drainWaiters.push(resolve));
    },
    async stop() {
      stopping = true;
      await Promise.all(pollers);
    },
  };
}

/** Makes failed messages visible again at once (a test's shortcut for waiting out the visibility timeout). */
export async function releaseInFlight(sqs: SQSClient, queueUrl: string, messages: readonly Message[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 10) {
    const chunk = messages.slice(i, i + 10);
    await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queueUrl,
        Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 })),
      }),
    );
  }
}

/** Child processes running the bundle, one per slot: what `invoke` of {@link startEventSource} calls. */
export interface LambdaWorkers {
  invoke(event: SQSEvent, slot: number): Promise<SQSBatchResponse>;
  /** Kills every worker. */
  stop(): void;
}

/**
 * Starts `count` warm instances of the bundle in child processes with `env` (the function's
 * environment: DATASTORE_*, AWS_ENDPOINT_URL_*). Their output (Powertools logs) goes to `onLog`
 * when given, else nowhere; each invocation gets `timeoutMs` as its remaining time.
 */
export function lambdaWorkers(
  env: Record<string, string | undefined>,
  count: number,
  options: { timeoutMs?: number; onLog?: (line: string) => void } = {},
): LambdaWorkers {
  if (!existsSync(LAMBDA_BUNDLE)) throw new Error(`${LAMBDA_BUNDLE} is missing: run npm run bundle`);
  const workers: ChildProcess[] = [];
  const pending = new Map<number, { resolve: (r: SQSBatchResponse) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  for (let i = 0; i < count; i++) {
    const child = fork(join(__dirname, 'lambda-worker.js'), [], {
      env: { ...process.env, ...env, LAMBDA_BUNDLE, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      execArgv: [],
    });
    // Powertools writes to both streams; the tail of stderr explains a worker that dies.
    let partial = '';
    let stderrTail = '';
    const onData = (chunk: Buffer): void => {
      if (!options.onLog) return;
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) options.onLog(line);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString()).slice(-2000);
      onData(chunk);
    });
    child.on('message', (reply: { id: number; result?: SQSBatchResponse; error?: string }) => {
      const p = pending.get(reply.id);
      if (!p) return;
      pending.delete(reply.id);
      if (reply.error !== undefined) p.reject(new Error(reply.error));
      else p.resolve(reply.result ?? { batchItemFailures: [] });
    });
    child.on('exit', (code) => {
      for (const [id, p] of pending) {
        pending.delete(id);
        p.reject(new Error(`lambda worker exited (${code}): ${stderrTail.trim()}`));
      }
    });
    workers.push(child);
  }
  return {
    invoke(event, slot) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        workers[slot % workers.length].send({ id, event, timeoutMs: options.timeoutMs ?? 300_000 });
      });
    },
    stop() {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
    },
  };
}
