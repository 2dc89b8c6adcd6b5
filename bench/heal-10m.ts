/**
 * The heal of a very large unindexed shard-first root on the Lambda's own path: the bundled handler is
 * invoked by a schedule event, then by each continuation it queues, as the stack's rule and queue invoke
 * it. Each invocation runs in a fresh process with the function's memory (its `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`
 * and a V8 heap to match) and a remaining-time clock short enough that the heal must continue; its peak RSS
 * is its own. At the end every partition file is checked against a listing of the root.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateQueueCommand, DeleteMessageBatchCommand, type Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { LAMBDA_BUNDLE, sqsRecordFromMessage } from '../support/event-source';
import type { ModelProcess } from './model';
import { makeShardFirst, partitionsEqualListing } from './rows';
import { startSqsModel } from './sqs-model';

/** What the row measured; `heal10MShardFirst` in `npm run bench -- --json`. */
export interface Heal10M {
  readonly invocations: number;
  readonly seconds: number;
  /** The largest peak RSS of one invocation, and each one's. */
  readonly peakRssMb: number;
  readonly peakRssMbEach: number[];
  readonly requests: number;
  readonly partitionsEqualListing: number;
  readonly objects: number;
  readonly remainingMs: number;
  readonly memoryMb: number;
  /** What stopped the heal, when an invocation reported the root failed (e.g. a partition too large for the memory). */
  readonly error?: string;
}

/** The error an invocation's result reports for its root, if any (a schedule's `roots`, a batch's failures). */
function failureOf(result: unknown): string | undefined {
  const r = result as { roots?: { status?: string; error?: string }[]; batchItemFailures?: unknown[] } | null;
  const failed = r?.roots?.find((root) => root.status === 'failed');
  if (failed) return failed.error ?? 'failed';
  return r?.batchItemFailures?.length ? 'the continuation failed; its message went back to the queue' : undefined;
}

/** What one invocation printed last: the handler's result and its process's peak RSS. */
interface Invocation {
  readonly result: unknown;
  readonly peakRssMb: number;
  readonly seconds: number;
}

/** The heap flags the Lambda runtime gives a function of `memoryMb`: a tenth as new space (half of it per semi-space), the rest old. */
export const lambdaHeapFlags = (memoryMb: number): string[] => [
  `--max-old-space-size=${memoryMb - Math.floor(memoryMb / 10)}`,
  `--max-semi-space-size=${Math.floor(memoryMb / 20)}`,
];

function invokeOnce(env: NodeJS.ProcessEnv, event: unknown, timeoutMs: number, memoryMb: number): Promise<Invocation> {
  const resultFile = join(tmpdir(), `invoke-once-${process.pid}-${Date.now()}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...lambdaHeapFlags(memoryMb), join(__dirname, 'invoke-once.js')], {
      env: {
        ...env,
        LAMBDA_BUNDLE,
        INVOKE_EVENT: JSON.stringify(event),
        INVOKE_TIMEOUT_MS: String(timeoutMs),
        INVOKE_RESULT_FILE: resultFile,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let errTail = '';
    let outTail = '';
    child.stdout.on('data', (chunk: Buffer) => {
      outTail = (outTail + chunk.toString()).slice(-4000);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      errTail = (errTail + chunk.toString()).slice(-4000);
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      const written = existsSync(resultFile) ? readFileSync(resultFile, 'utf8') : '';
      rmSync(resultFile, { force: true });
      if (code !== 0 || !written) reject(new Error(`an invocation failed (exit ${code}): ${errTail.trim()}\n${outTail.trim()}`));
      else resolve(JSON.parse(written) as Invocation);
    });
  });
}

/** The schedule's event, as EventBridge sends it. */
function scheduleEvent(): Record<string, unknown> {
  return {
    version: '0',
    id: 'bench-schedule',
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: ['arn:aws:events:us-east-1:123456789012:rule/datastore-indexer-drift-repair'],
    detail: {},
  };
}

/**
 * Seeds `entries` objects under `prefix` of the bucket `bench-10m`, makes the root shard-first (an empty
 * version-2 manifest), then runs the handler until it queues no continuation.
 */
export async function heal10M(
  model: ModelProcess,
  options: { readonly entries: number; readonly remainingMs: number; readonly memoryMb: number; readonly log: (text: string) => void },
): Promise<Heal10M> {
  const { entries, remainingMs, memoryMb, log } = options;
  const bucket = 'bench-10m';
  const prefix = 'root';
  await model.seed(bucket, { count: entries, prefix, layout: 'swamp' });
  const target = { endpoint: model.endpoint, bucket, prefix };
  await makeShardFirst(target);
  const sqsModel = await startSqsModel();
  const sqs = new SQSClient({
    endpoint: sqsModel.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  try {
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'datastore-indexer-bench' }))).QueueUrl!;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATASTORE_BUCKET: bucket,
      DATASTORE_PREFIXES: prefix,
      DATASTORE_QUEUE_URL: queueUrl,
      DATASTORE_FORCE_PATH_STYLE: 'true',
      AWS_ENDPOINT_URL_S3: model.endpoint,
      AWS_ENDPOINT_URL_SQS: sqsModel.endpoint,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(memoryMb),
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'bench',
      AWS_SECRET_ACCESS_KEY: 'bench',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'WARN',
    };
    await model.reset();
    const started = performance.now();
    const peaks: number[] = [];
    let error: string | undefined;
    let event: unknown = scheduleEvent();
    for (;;) {
      const run = await invokeOnce(env, event, remainingMs, memoryMb);
      peaks.push(run.peakRssMb);
      log(`  invocation ${peaks.length}: ${run.seconds.toFixed(1)} s, peak RSS ${run.peakRssMb.toFixed(0)} MiB`);
      error ??= failureOf(run.result);
      if (error) {
        log(`  the root failed: ${error}`);
        break;
      }
      const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, AttributeNames: ['All'] }));
      const messages: Message[] = received.Messages ?? [];
      if (messages.length === 0) break;
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      event = { Records: messages.map((m) => sqsRecordFromMessage(m, 'arn:aws:sqs:us-east-1:123456789012:datastore-indexer-bench')) };
    }
    const seconds = (performance.now() - started) / 1000;
    const counts = await model.counts();
    const requests = Object.values(counts).reduce((sum, n) => sum + n, 0);
    log(`  checking every partition file against a listing of the root`);
    const checked = await partitionsEqualListing(target);
    return {
      invocations: peaks.length,
      seconds,
      peakRssMb: Math.max(...peaks),
      peakRssMbEach: peaks,
      requests,
      partitionsEqualListing: checked.partitionsEqualListing,
      objects: entries,
      remainingMs,
      memoryMb,
      ...(error ? { error } : {}),
    };
  } finally {
    sqs.destroy();
    await sqsModel.stop();
  }
}
