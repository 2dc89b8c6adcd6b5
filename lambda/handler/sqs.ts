/**
 * An SQS batch of object events (S3 notifications or EventBridge events) and of the handler's own messages.
 *
 * The batch utility's model is one record, one outcome; here the records of one root must share one index
 * write and succeed or fail together. So the batch is grouped by root first and each root's work starts
 * once; `processPartialResponse` then runs a record handler per record that waits for the roots its record
 * touches and fails when one of them failed. The utility builds `batchItemFailures` from that, so a root
 * whose lock was busy goes back to the queue while the rest of the batch is done with.
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type DatastoreRoot, describeScope } from '../lib/scope';
import { namespaceOfMarker } from '../lib/keys';
import { normalizePrefix } from '../lib/config';
import { parseNotification, placeChange } from '../lib/notifications';
import { ownMessageOf } from './messages';
import { Metric, count, logRoot, logger, requestsSince, rootSummary } from './observability';
import { type RootProgress, type RootWork, processRoot, rootWork } from './root-batch';
import type { Runtime } from './runtime';

/** Why changes or messages were left alone; logged and counted, never failed. */
export interface Skipped {
  foreignBucket: number;
  outsideRoots: number;
  internal: number;
  testEvents: number;
  otherEventKinds: number;
  unknownMessages: number;
  unknownRoots: number;
}

/** A batch sorted by root: which roots each record touches, and what each root must do. */
export interface BatchPlan {
  /** Roots each record touches, by message id; `invalid` says why a record can never be processed. */
  readonly records: Map<string, { roots: string[]; invalid?: string }>;
  readonly roots: Map<string, RootWork>;
  readonly skipped: Skipped;
  /** A few skipped keys, for the log. */
  readonly samples: string[];
}

function rootByPrefix(roots: readonly DatastoreRoot[], prefix: string): DatastoreRoot | undefined {
  const wanted = normalizePrefix(prefix);
  return roots.find((r) => r.prefix === wanted);
}

/** Parses every record and sorts its changes into per-root work; pure. */
export function planBatch(records: readonly SQSRecord[], bucket: string, roots: readonly DatastoreRoot[]): BatchPlan {
  const plan: BatchPlan = {
    records: new Map(),
    roots: new Map(),
    skipped: { foreignBucket: 0, outsideRoots: 0, internal: 0, testEvents: 0, otherEventKinds: 0, unknownMessages: 0, unknownRoots: 0 },
    samples: [],
  };
  const workOf = (root: DatastoreRoot): RootWork => {
    let work = plan.roots.get(root.prefix);
    if (!work) {
      work = rootWork(root);
      plan.roots.set(root.prefix, work);
    }
    return work;
  };
  const sample = (what: string): void => {
    if (plan.samples.length < 5) plan.samples.push(what);
  };
  for (const record of records) {
    const touched = new Set<string>();
    plan.records.set(record.messageId, { roots: [] });
    let json: unknown;
    try {
      json = JSON.parse(record.body);
    } catch (err) {
      plan.records.set(record.messageId, { roots: [], invalid: `message ${record.messageId} is not JSON: ${(err as Error).message}` });
      continue;
    }
    const own = ownMessageOf(json);
    if (own) {
      const root = rootByPrefix(roots, own.request.prefix);
      if (!root) {
        plan.skipped.unknownRoots++;
        sample(`${own.kind} for unconfigured root "${own.request.prefix}"`);
      } else if (own.kind === 'recheck') {
        workOf(root).rechecks.push(own.request);
        touched.add(root.prefix);
      } else if (own.kind === 'finish-publish') {
        workOf(root).finishes.push(own.request);
        touched.add(root.prefix);
      } else {
        workOf(root).continuations.push(own.request);
        touched.add(root.prefix);
      }
      plan.records.set(record.messageId, { roots: [...touched] });
      continue;
    }
    const message = parseNotification(json);
    if (message.kind === 'test-event') {
      plan.skipped.testEvents++;
      continue;
    }
    if (message.kind === 'unknown') {
      plan.skipped.unknownMessages++;
      sample(`message ${record.messageId}: ${message.reason}`);
      continue;
    }
    plan.skipped.otherEventKinds += message.ignored;
    for (const change of message.changes) {
      const placed = placeChange(change, bucket, roots);
      if (placed.status === 'foreign-bucket' || placed.status === 'outside-roots') {
        plan.skipped[placed.status === 'foreign-bucket' ? 'foreignBucket' : 'outsideRoots']++;
        sample(`${placed.status}: s3://${change.bucket}/${change.key}`);
        continue;
      }
      if (placed.status === 'internal') {
        plan.skipped.internal++;
        if (namespaceOfMarker(placed.rel) !== undefined) {
          workOf(placed.root).markers.push({ change, rel: placed.rel });
          touched.add(placed.root.prefix);
        }
        continue;
      }
      workOf(placed.root).changes.push({ change, rel: placed.rel });
      touched.add(placed.root.prefix);
    }
    plan.records.set(record.messageId, { roots: [...touched] });
  }
  return plan;
}

/** At most `n` tasks at once. */
function limiter(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (task) => {
    while (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await task();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

const processor = new BatchProcessor(EventType.SQS);

/** Roots worked on at once; each takes its own lock. */
const ROOT_CONCURRENCY = 4;

/** Handles an SQS batch and reports the messages of failed roots as batch item failures. */
export async function handleSqs(rt: Runtime, event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
  const started = Date.now();
  const requestsBefore = { ...rt.store.requests };
  const plan = planBatch(event.Records, rt.config.bucket, rt.config.roots);
  const skipped = Object.values(plan.skipped).reduce((a, b) => a + b, 0);
  const remainingMs = (): number => context.getRemainingTimeInMillis();

  const limit = limiter(ROOT_CONCURRENCY);
  const outcomes = new Map<string, Promise<string | undefined>>();
  let internalInScopes = 0;
  for (const [prefix, work] of plan.roots) {
    const name = describeScope({ root: work.root });
    outcomes.set(
      prefix,
      limit(async () => {
        const progress: RootProgress = { summary: rootSummary(name, 'sqs'), internal: 0 };
        try {
          await processRoot(rt, work, remainingMs, progress);
          return undefined;
        } catch (err) {
          progress.summary = { ...progress.summary, outcome: 'failed', error: err as Error };
          return `${name}: ${(err as Error).message}`;
        } finally {
          internalInScopes += progress.internal;
          logRoot(progress.summary);
        }
      }),
    );
  }

  const recordHandler = async (record: SQSRecord): Promise<void> => {
    const planned = plan.records.get(record.messageId);
    if (planned?.invalid) throw new Error(planned.invalid);
    // Wait for every root of the record, so the batch is not answered while one still runs.
    const failures = (await Promise.all((planned?.roots ?? []).map((p) => outcomes.get(p)!))).filter((f): f is string => f !== undefined);
    if (failures.length) throw new Error(failures.join('; '));
  };
  const response = await processPartialResponse(event, recordHandler, processor, { context, throwOnFullBatchFailure: false });

  count(Metric.EventsSkipped, skipped + internalInScopes);
  const invalid = [...plan.records.values()].filter((r) => r.invalid).map((r) => r.invalid);
  if (invalid.length)
    logger.error('messages that can never be processed go back to the queue (and on to the dead-letter queue)', { invalid });
  logger.info('batch done', {
    records: event.Records.length,
    roots: plan.roots.size,
    batchItemFailures: response.batchItemFailures.length,
    skipped: { ...plan.skipped, internal: plan.skipped.internal + internalInScopes },
    skippedSamples: plan.samples,
    s3Requests: requestsSince(rt.store, requestsBefore),
    ms: Date.now() - started,
  });
  return response;
}
