/**
 * The Lambda's crash-point table of `npm run chaos -- --crash-points`: the bundle, indexing a batch of uploads
 * on a shard-first or dual-write root, is SIGKILLed right after each S3 step of its publish; then, with no new
 * upload and no schedule, the queue alone is fed to a fresh instance (the stack's tuning, its 1 s batching
 * window), and the time from the kill until the scope is whole again is measured: what clients read equals the
 * listing (a dual-write mirror follows its monolith), no publish record, no lock. The killed batch itself is not
 * delivered again (SQS would, after its visibility timeout): only what the run queued before it died counts.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { INDEX_KEY, SHARD_META_KEY, publishRecordKey } from '../../lambda/lib/names';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { partitionOf } from '../../lambda/lib/keys';
import { LAMBDA_BUNDLE, lambdaWorkers, startEventSource } from '../../support/event-source';
import { sleep } from '../../support/sleep';
import { s3Event, s3EventRecord, sqsRecord } from '../helpers/factories';
import { type ChaosLayout, SwampClient, emptyClientStats } from './clients';
import { healedDetail } from './crash-points';
import { NO_FAULTS, startFaultProxy } from './fault-proxy';
import { PUBLISH_STEPS, type PublishStep, stepOf } from './kills';
import { LambdaWorker } from './lambda';
import { type Rng, seededRng } from './rng';
import { type SerialMoto, startSerialMoto, useLocalAwsEnv } from './setup';

/** The layouts whose publish clients can see half done. */
const LAYOUTS: readonly ChaosLayout[] = ['shard-first', 'dual-write'];

/** How long the queue must stay empty before a scope still not whole is given up on. */
const GIVE_UP_MS = 5_000;

/** One crash point of the Lambda: killed right after `step`, then the finish its queue brought. */
export interface FinishPointRow {
  readonly layout: ChaosLayout;
  readonly step: PublishStep;
  /** False when the run never reached that step (e.g. no monolith write on a shard-first root). */
  readonly killed: boolean;
  /** The run's publish record was there after the kill: a publish left half done. */
  readonly recordLeft: boolean;
  /** Milliseconds from the kill until the scope was whole (0: whole at the kill); undefined when it never was. */
  readonly wholeAfterMs?: number;
  /** What kept the scope from being whole at the end. */
  readonly detail: string[];
}

/** Kills the Lambda right after each step of a publish on each layout and measures how long until the scope is whole. */
export async function runFinishPoints(log: (line: string) => void = () => undefined): Promise<FinishPointRow[]> {
  useLocalAwsEnv();
  const moto = await startSerialMoto();
  const direct = new S3Store(createS3Client({ endpoint: moto.endpoint, forcePathStyle: true, region: 'us-east-1' }), 'finish-points');
  const sqs = new SQSClient({ endpoint: moto.endpoint, region: 'us-east-1' });
  const rows: FinishPointRow[] = [];
  const rng = seededRng(43);
  try {
    await direct.client.send(new CreateBucketCommand({ Bucket: direct.bucket }));
    for (const layout of LAYOUTS) {
      for (const step of PUBLISH_STEPS) {
        const row = await finishPoint(direct, sqs, moto, rng, layout, step);
        rows.push(row);
        const after = row.wholeAfterMs === undefined ? 'never whole' : `whole after ${(row.wholeAfterMs / 1000).toFixed(1)} s`;
        log(
          `lambda ${layout} ${step}: killed ${row.killed}, record left ${row.recordLeft}, ${after}${row.detail.length ? `: ${row.detail.join('; ')}` : ''}`,
        );
      }
    }
    return rows;
  } finally {
    direct.client.destroy();
    sqs.destroy();
    moto.stop();
  }
}

/** The function's environment as the stack sets it (tuning left at its defaults), pointed at the local S3 and SQS. */
function functionEnv(bucket: string, prefix: string, queueUrl: string, s3: string, sqsEndpoint: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATASTORE_BUCKET: bucket,
    DATASTORE_PREFIXES: prefix,
    DATASTORE_QUEUE_URL: queueUrl,
    DATASTORE_FORCE_PATH_STYLE: 'true',
    AWS_ENDPOINT_URL_S3: s3,
    AWS_ENDPOINT_URL_SQS: sqsEndpoint,
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
  };
}

/** One root of `layout` with uploads to index; the Lambda killed after `step`; then only its queue, until whole or drained. */
async function finishPoint(
  direct: S3Store,
  sqs: SQSClient,
  moto: SerialMoto,
  rng: Rng,
  layout: ChaosLayout,
  step: PublishStep,
): Promise<FinishPointRow> {
  const root = `lambda-${layout}-${step}`;
  const base = `${root}/`;
  if (layout === 'dual-write') await direct.put(base + SHARD_META_KEY, JSON.stringify({ version: 1, partitions: [] }));
  if (layout === 'shard-first') await direct.put(base + SHARD_META_KEY, JSON.stringify({ version: 2, partitions: [], commitSeq: 0 }));
  const client = new SwampClient(direct, root, layout, `c-${step}`, seededRng(rng.int(2 ** 31)), emptyClientStats(), new Map());
  await client.push();
  await client.push();
  // The uploads of the batch: in partitions the index has and in new ones.
  const uploads: Record<string, string> = { 'logs/oob-0.log': 'x', 'files/oob file.txt': 'yy', 'data/aws/lambda/f-1/1/raw': 'zzz' };
  for (const [rel, body] of Object.entries(uploads)) await direct.put(base + rel, body);
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: root }));
  const queueUrl = QueueUrl!;
  const batch = {
    Records: Object.entries(uploads).map(([rel, body], i) =>
      sqsRecord(
        s3Event([s3EventRecord({ bucket: direct.bucket, key: base + rel, size: body.length, eventTime: new Date().toISOString() })]),
        `upload-${i}`,
      ),
    ),
  };

  const proxy = await startFaultProxy(moto.endpoint, rng, NO_FAULTS);
  const victim = new LambdaWorker(LAMBDA_BUNDLE, functionEnv(direct.bucket, root, queueUrl, proxy.endpoint, moto.endpoint));
  let killedAt: number | undefined;
  proxy.onAnswered = (r) => {
    if (killedAt === undefined && stepOf(r) === step) {
      killedAt = Date.now();
      victim.kill();
    }
  };
  await victim.invoke(batch);
  victim.stop();
  await proxy.close();
  const end = killedAt ?? Date.now();
  const recordLeft = (await direct.head(publishRecordKey({ root: { bucket: direct.bucket, prefix: root } }))) !== undefined;

  // Only the queue from here: a fresh instance, as Lambda's event source feeds it.
  const workers = lambdaWorkers(functionEnv(direct.bucket, root, queueUrl, moto.endpoint, moto.endpoint), 1);
  const source = startEventSource({ sqs, queueUrl, batchingWindowMs: 1000, maxConcurrency: 1, invoke: workers.invoke });
  // Whole, or the queue empty (nothing visible, delayed or in flight) for a while: then nothing more will come.
  let emptySince: number | undefined;
  let detail = await wholeDetail(direct, base, layout);
  let wholeAfterMs: number | undefined = detail.length === 0 ? 0 : undefined;
  while (wholeAfterMs === undefined && (emptySince === undefined || Date.now() - emptySince < GIVE_UP_MS)) {
    await sleep(250);
    detail = await wholeDetail(direct, base, layout);
    if (detail.length === 0) wholeAfterMs = Date.now() - end;
    const depth = await queueDepth(sqs, queueUrl);
    emptySince = depth > 0 ? undefined : (emptySince ?? Date.now());
  }
  await source.stop();
  workers.stop();
  return { layout, step, killed: killedAt !== undefined, recordLeft, wholeAfterMs, detail };
}

/** Messages on the queue: visible, in flight or delayed. */
async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
    }),
  );
  return Object.values(Attributes ?? {}).reduce((sum, v) => sum + Number(v), 0);
}

/** What keeps the root at `base` from being whole: its truth against the listing, a lock or record left, a mirror behind its monolith. */
async function wholeDetail(direct: S3Store, base: string, layout: ChaosLayout): Promise<string[]> {
  const detail = await healedDetail(direct, base, layout);
  if (layout !== 'dual-write') return detail;
  const meta = await direct.get(base + SHARD_META_KEY);
  const listed = new Set<string>(meta ? ((JSON.parse(meta.body.toString('utf8')) as { partitions?: string[] }).partitions ?? []) : []);
  const monolith = await direct.get(base + INDEX_KEY);
  const entries = monolith ? Object.keys((JSON.parse(monolith.body.toString('utf8')) as { entries?: object }).entries ?? {}) : [];
  const want = new Map<string, string[]>();
  for (const rel of entries) {
    const p = partitionOf(rel);
    if (p !== undefined) want.set(p, [...(want.get(p) ?? []), rel].sort());
  }
  for (const p of new Set([...listed, ...want.keys()])) {
    if (!listed.has(p)) detail.push(`mirror: partition ${p} not in the manifest`);
    const file = await direct.get(`${base}_index/${p}.json`);
    const got = file ? Object.keys((JSON.parse(file.body.toString('utf8')) as { entries?: object }).entries ?? {}).sort() : [];
    if (JSON.stringify(got) !== JSON.stringify(want.get(p) ?? []))
      detail.push(`mirror: partition ${p} holds ${got.length} entries, the monolith ${want.get(p)?.length ?? 0}`);
  }
  return detail;
}
