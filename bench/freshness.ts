/**
 * Freshness and cost of the event path, end to end:
 *
 *   uploads (PutObject to the S3 model, `aws s3 cp`'s 10 at a time)
 *     → the model sends S3 event notifications to an SQS queue (bench/event-host.ts): the SQS model
 *       (bench/sqs-model.ts) by default, moto with `--sqs moto`
 *     → the emulated event source (support/event-source.ts) feeds batches to the Lambda bundle
 *       running in child processes, one per concurrent slot
 *     → the bundle reads and writes the index on the model.
 *
 * Freshness of a key: from the moment the model applied its PutObject to the moment it applied the
 * first index write that makes the key visible to clients (the monolith, or `_meta.json` listing the
 * partition that holds it). Cost: the indexer's S3 requests (all requests minus the uploads) and the
 * bytes it wrote, per 1,000 uploads, re-checks included.
 *
 * Requests are also priced by S3 Standard's request classes (bench/cost.ts).
 *
 *   npx tsx bench/freshness.ts [--latency-ms 80] [--window-s 1] [--max-concurrency 2] [--sqs model|moto]
 *                              [--entries 1000,100000] [--partitions 0,1000] [--bursts 1,100,5000] [--uploads 5]
 *                              [--layouts monolith,dual-write,shard-first] [--json]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { S3Store } from '../lambda/lib/s3';
import { SHARD_META_KEY } from '../lambda/lib/names';
import { createS3Client } from '../lambda/lib/s3-client';
import { healRoot } from '../lambda/lib/heal';
import { mapLimit } from '../lambda/lib/concurrency';
import { parallelLister } from '../lambda/lib/parallel-list';
import { lambdaWorkers, startEventSource } from '../support/event-source';
import { startMoto } from '../support/moto';
import type { EventHostRequest, KeyFreshness, WriteStats } from './event-host';
import { describe, freshnessJson, freshnessTable } from './freshness-report';
import type { FreshnessCell, FreshnessOptions, Layout } from './freshness-types';
import { type HostProcess, type WithoutId, forkHost } from './host';
import { startSqsModel } from './sqs-model';
import { startedAs } from './report';
import { SWAMP_PARTITIONS } from '../support/s3-model/seed';

/** The stack's default batching window (infra/private/validate.ts), in seconds. */
export const DEFAULT_WINDOW_S = 1;

export type { FreshnessCell, FreshnessOptions } from './freshness-types';

/** The `q`-quantile (0..1) of some numbers, nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** A request without its id (the host assigns it). */
type HostAsk = WithoutId<EventHostRequest>;

type Host = HostProcess<HostAsk>;

function startHost(latencyMs: number): Promise<Host> {
  return forkHost<HostAsk>(join(__dirname, 'event-host.ts'), [String(latencyMs)], 'event-host');
}

/** A root of `entries` objects with a true index in `layout`, made by the library's own heal. */
async function indexedRoot(
  host: Host,
  client: S3Client,
  bucket: string,
  entries: number,
  partitions: number,
  layout: Layout,
): Promise<void> {
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  await host.ask({ op: 'seed', bucket, options: { count: entries, prefix: 'root', layout: 'swamp', partitions: partitions || undefined } });
  const store = new S3Store(client, bucket);
  // A shard-first root is one whose manifest says version 2; the heal keeps that layout and fills it.
  if (layout === 'shard-first') await store.put(`root/${SHARD_META_KEY}`, JSON.stringify({ version: 2, partitions: [], commitSeq: 1 }));
  // A dual-write root is one whose manifest says version 1; the heal writes its monolith and every mirror file.
  if (layout === 'dual-write') await store.put(`root/${SHARD_META_KEY}`, JSON.stringify({ version: 1, partitions: [] }));
  const report = await healRoot(store, { bucket, prefix: 'root' }, { mode: 'repair', lister: parallelLister() });
  const scope = report.scopes[0];
  if (scope.layout !== layout) throw new Error(`seeding ${bucket}: expected a ${layout} root, the heal found ${scope.layout}`);
}

async function depth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return Object.values(Attributes ?? {}).reduce((sum, v) => sum + Number(v), 0);
}

/** Runs every burst on every root; see the module comment. */
export async function measureFreshness(o: FreshnessOptions): Promise<FreshnessCell[]> {
  const log = o.log ?? (() => undefined);
  const moto = o.sqs === 'moto' ? await startMoto() : await startSqsModel();
  const host = await startHost(o.latencyMs);
  const sqs = new SQSClient({ endpoint: moto.endpoint, region: process.env.AWS_REGION ?? 'us-east-1' });
  const client = createS3Client({ endpoint: host.endpoint, forcePathStyle: true }, { maxAttempts: 1 });
  const cells: FreshnessCell[] = [];
  try {
    for (const root of o.entries.flatMap((entries) => (o.partitions ?? [0]).map((partitions) => ({ entries, partitions })))) {
      const { entries } = root;
      const partitions = root.partitions || SWAMP_PARTITIONS;
      for (const layout of o.layouts) {
        const bucket = `fresh-${entries}-${partitions}-${layout}`;
        log(`freshness: seeding ${bucket} (${entries} objects, ${partitions} partitions, ${layout} index)`);
        await indexedRoot(host, client, bucket, entries, root.partitions, layout);
        const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${bucket}-dlq` }));
        const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes!
          .QueueArn!;
        const { QueueUrl } = await sqs.send(
          new CreateQueueCommand({
            QueueName: bucket,
            // The stack's 10 receives; a visibility timeout far shorter than the stack's, so that a failed item
            // comes back within the run (any failure is counted and printed).
            Attributes: { VisibilityTimeout: '60', RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 10 }) },
          }),
        );
        await host.ask({ op: 'notify', bucket, prefix: 'root', queueUrl: QueueUrl!, sqsEndpoint: moto.endpoint });
        const batches: { ms: number; records: number }[] = [];
        const onLog = (line: string): void => {
          if (!line.includes('"batch done"')) return;
          const entry = JSON.parse(line) as { ms: number; records: number };
          batches.push({ ms: entry.ms, records: entry.records });
        };
        const workers = lambdaWorkers(
          {
            DATASTORE_BUCKET: bucket,
            DATASTORE_PREFIXES: 'root',
            DATASTORE_QUEUE_URL: QueueUrl,
            DATASTORE_FORCE_PATH_STYLE: 'true',
            // Deployed, re-checks wait 30 s and finishes 15 s; here 2 s, so a run need not wait for them. They cost the same.
            DATASTORE_RECHECK_DELAY_SECONDS: '2',
            DATASTORE_FINISH_DELAY_SECONDS: '2',
            AWS_ENDPOINT_URL_S3: host.endpoint,
            AWS_ENDPOINT_URL_SQS: moto.endpoint,
            AWS_EC2_METADATA_DISABLED: 'true',
            POWERTOOLS_LOG_LEVEL: 'INFO',
            POWERTOOLS_METRICS_DISABLED: 'true',
          },
          o.maxConcurrency,
          { onLog },
        );
        const source = startEventSource({
          sqs,
          queueUrl: QueueUrl!,
          batchingWindowMs: o.windowS * 1000,
          maxConcurrency: o.maxConcurrency,
          invoke: workers.invoke,
        });
        try {
          for (const burst of o.bursts) {
            const rounds = burst === 1 ? (o.singles ?? 5) : 1;
            const samples: number[] = [];
            let missing = 0;
            let requests = 0;
            const byOperation: Record<string, number> = {};
            let bytes = 0;
            let uploadMs = 0;
            const before = source.invocations.length;
            batches.length = 0;
            for (let r = 0; r < rounds; r++) {
              await source.drained();
              const tag = `files/burst-${burst}-${r}/`;
              await host.ask({ op: 'reset', marker: tag });
              const keys = Array.from({ length: burst }, (_, i) => `${tag}${String(i).padStart(5, '0')}.bin`);
              const started = Date.now();
              await mapLimit(keys, o.uploadConcurrency ?? 10, (rel) =>
                client.send(
                  new PutObjectCommand({ Bucket: bucket, Key: `root/${rel}`, Body: Buffer.alloc(100 + (rel.length % 900), 120) }),
                ),
              );
              uploadMs = Math.max(uploadMs, Date.now() - started);
              await source.drained();
              const seen = await host.ask<KeyFreshness[]>({ op: 'freshness', keys });
              for (const k of seen) {
                if (k.putMs === undefined || k.indexedMs === undefined) missing++;
                else samples.push(k.indexedMs - k.putMs);
              }
              const stats = await host.ask<WriteStats>({ op: 'counts' });
              requests += Object.values(stats.requests).reduce((a, b) => a + b, 0) - burst;
              for (const [op, n] of Object.entries(stats.requests))
                byOperation[op] = (byOperation[op] ?? 0) + n - (op === 'PutObject' ? burst : 0);
              bytes += stats.internalBytesWritten;
            }
            const runs = source.invocations.slice(before);
            const uploads = burst * rounds;
            const cell: FreshnessCell = {
              entries,
              partitions,
              layout,
              burst,
              uploads,
              p50Ms: quantile(samples, 0.5),
              p99Ms: quantile(samples, 0.99),
              maxMs: quantile(samples, 1),
              missing,
              requestsPer1kUploads: (requests / uploads) * 1000,
              requestsByOperation: Object.fromEntries(Object.entries(byOperation).filter(([, n]) => n > 0)),
              bytesWrittenPer1kUploads: (bytes / uploads) * 1000,
              invocations: runs.length,
              invocationP50Ms: quantile(
                batches.map((b) => b.ms),
                0.5,
              ),
              batchP50: quantile(
                batches.map((b) => b.records),
                0.5,
              ),
              failedItems: runs.reduce((a, r) => a + r.failed, 0),
              deadLetters: await depth(sqs, dlq.QueueUrl!),
              uploadMs,
            };
            cells.push(cell);
            log(`  ${describe(cell)}`);
          }
        } finally {
          await source.stop();
          workers.stop();
        }
      }
    }
  } finally {
    client.destroy();
    sqs.destroy();
    await host.stop();
    await moto.stop();
  }
  return cells;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'latency-ms': { type: 'string' },
      'window-s': { type: 'string' },
      'max-concurrency': { type: 'string' },
      entries: { type: 'string' },
      partitions: { type: 'string' },
      bursts: { type: 'string' },
      uploads: { type: 'string' },
      layouts: { type: 'string' },
      sqs: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const list = (v: string | undefined, fallback: string): number[] => (v ?? fallback).split(',').map(Number);
  process.env.AWS_ACCESS_KEY_ID ??= 'bench';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'bench';
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const o: FreshnessOptions = {
    latencyMs: Number(values['latency-ms'] ?? 80),
    windowS: Number(values['window-s'] ?? DEFAULT_WINDOW_S),
    maxConcurrency: Number(values['max-concurrency'] ?? 2),
    entries: list(values.entries, '1000,100000'),
    partitions: list(values.partitions, '0'),
    singles: Number(values.uploads ?? 5),
    bursts: list(values.bursts, '1,100,5000'),
    layouts: (values.layouts ?? 'monolith,shard-first').split(',') as Layout[],
    sqs: values.sqs === 'moto' ? 'moto' : 'model',
    log: (line) => void process.stderr.write(`${line}\n`),
  };
  const cells = await measureFreshness(o);
  process.stdout.write(`${freshnessTable(cells, o)}\n`);
  if (values.json) process.stdout.write(`${JSON.stringify(freshnessJson(cells))}\n`);
}

if (startedAs('freshness')) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}

/** The freshness rows of `npm run bench`: the table to print and the `--json` fields. */
export async function freshnessBench(o: {
  latencyMs: number;
  quick: boolean;
  log: (line: string) => void;
}): Promise<{ table: string; json: Record<string, unknown> }> {
  const options: FreshnessOptions = {
    latencyMs: o.latencyMs,
    windowS: DEFAULT_WINDOW_S,
    maxConcurrency: 2,
    entries: o.quick ? [1000] : [1000, 100_000],
    bursts: o.quick ? [1, 100] : [1, 100, 5000],
    layouts: ['monolith', 'shard-first'],
    log: o.log,
  };
  const cells = await measureFreshness(options);
  return { table: freshnessTable(cells, options), json: freshnessJson(cells) };
}
