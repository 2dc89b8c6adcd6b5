/** Structured logs and embedded-format metrics (Powertools), with the names docs/DESIGN.md documents. */
import { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import {
  FUNCTION_DIMENSION,
  INDEXER_ENV,
  INDEX_TOO_LARGE_METRIC,
  METRICS_NAMESPACE,
  ROOTS_FAILED_METRIC,
  RUNTIME_ENV,
  SERVICE_NAME,
} from '../env';
import type { DeltaReport } from '../lib/delta';
import type { HealReport } from '../lib/heal-types';
import { IndexTooLargeError } from '../lib/errors';
import type { LockOptions } from '../lib/lock';
import type { S3Store } from '../lib/s3';

const serviceName = process.env[INDEXER_ENV.serviceName] || SERVICE_NAME;

/** The handler's Powertools logger: under the construct's service name, or the default one. */
export const logger = new Logger({ serviceName });

const functionName = process.env[RUNTIME_ENV.functionName];

/** The handler's Powertools metrics: in the construct's namespace, or the default one, per function (the alarms' dimensions). */
export const metrics = new Metrics({
  namespace: process.env[INDEXER_ENV.metricsNamespace] || METRICS_NAMESPACE,
  serviceName,
  ...(functionName ? { defaultDimensions: { [FUNCTION_DIMENSION]: functionName } } : {}),
});

/** The metrics the handler emits (all counts). */
export const Metric = {
  /** Object changes folded into an index (after duplicates were dropped). */
  EventsApplied: 'EventsApplied',
  /** Changes ignored: internal keys, other buckets, outside every root, test events. */
  EventsSkipped: 'EventsSkipped',
  EntriesAdded: 'EntriesAdded',
  EntriesRemoved: 'EntriesRemoved',
  EntriesResized: 'EntriesResized',
  /** Index writes (a lost conditional write is not one). */
  IndexWrites: 'IndexWrites',
  /** Entries of an index after the handler touched it, one value per index. */
  IndexEntries: 'IndexEntries',
  /** Drifting keys a full check or repair found (missing + stale + resized). */
  DriftFound: 'DriftFound',
  /** Drifting keys a repair published a fix for. */
  DriftRepaired: 'DriftRepaired',
  /** Conditional index writes that lost a race (412). */
  PublishConflicts: 'PublishConflicts',
  /** Times the datastore lock was found held and waited for. */
  LockWaits: 'LockWaits',
  /** Roots a scheduled or direct repair could not heal (alarmed: nothing retries them before the next schedule). */
  RootsFailed: ROOTS_FAILED_METRIC,
  /** Roots whose batch items went back to the queue (retried; the dead-letter and queue-age alarms watch them). */
  RootsRetried: 'RootsRetried',
  /** Delayed re-checks sent, and keys a re-check had to restore. */
  RechecksSent: 'RechecksSent',
  RecheckRestored: 'RecheckRestored',
  /** Finishes of a publish queued before its record, and scopes a finish found left half done and healed. */
  FinishesSent: 'FinishesSent',
  PublishesFinished: 'PublishesFinished',
  /** Full repairs that ran out of time and saved their progress. */
  RepairsIncomplete: 'RepairsIncomplete',
  /** Namespaces met whose index was not written: not in the construct's `namespaces` prop. */
  NamespacesUnlisted: 'NamespacesUnlisted',
  /** Dual-write mirror partition files found to differ from the monolith (refreshed when the index was published). */
  StaleMirrors: 'StaleMirrors',
  /** Heals stopped by `IndexTooLargeError`: a root or scope whose whole index does not fit in the function's memory. */
  IndexTooLarge: INDEX_TOO_LARGE_METRIC,
} as const;

export type MetricName = (typeof Metric)[keyof typeof Metric];

/** Adds a count, skipping zeros so quiet invocations stay small. */
export function count(name: MetricName, value: number): void {
  if (value > 0) metrics.addMetric(name, MetricUnit.Count, value);
}

/** Lock options that wait up to `waitMs` and count every wait (also when the wait ends in `LockBusyError`). */
export function lockOptions(waitMs: number): LockOptions {
  return { waitMs, onWait: () => count(Metric.LockWaits, 1) };
}

/** Publishes what was counted during the invocation, if anything. */
export function flushMetrics(): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}

/** Counts of one root in one invocation: what the per-root log line says. */
export interface RootSummary {
  readonly root: string;
  readonly trigger: string;
  readonly outcome: 'ok' | 'failed' | 'incomplete';
  readonly eventsApplied: number;
  readonly added: number;
  readonly removed: number;
  readonly resized: number;
  /** Entries of the root's own index (namespaces are listed in `scopes`). */
  readonly indexEntries: number;
  readonly listingMs: number;
  readonly publishMs: number;
  readonly writes: number;
  readonly conflicts: number;
  readonly lockWaits: number;
  readonly scopes: readonly Record<string, unknown>[];
  /** Why the root failed: logged as an error (name, message, hint, stack and cause). */
  readonly error?: Error;
}

/** An empty summary to fold reports into. */
export function rootSummary(root: string, trigger: string): RootSummary {
  return {
    root,
    trigger,
    outcome: 'ok',
    eventsApplied: 0,
    added: 0,
    removed: 0,
    resized: 0,
    indexEntries: 0,
    listingMs: 0,
    publishMs: 0,
    writes: 0,
    conflicts: 0,
    lockWaits: 0,
    scopes: [],
  };
}

/** Folds a delta report into a root's summary and counts its metrics. */
export function addDelta(summary: RootSummary, report: DeltaReport): RootSummary {
  count(Metric.EventsApplied, report.changes);
  count(Metric.EntriesAdded, report.added);
  count(Metric.EntriesRemoved, report.removed);
  count(Metric.EntriesResized, report.resized);
  count(Metric.IndexWrites, report.writes);
  count(Metric.PublishConflicts, report.conflicts);
  count(Metric.StaleMirrors, report.staleMirrors.length);
  // A delta that read only some partitions does not know the size of the whole index.
  if (report.status === 'applied' && !report.partial) metrics.addMetric(Metric.IndexEntries, MetricUnit.Count, report.entries);
  return {
    ...summary,
    eventsApplied: summary.eventsApplied + report.changes,
    added: summary.added + report.added,
    removed: summary.removed + report.removed,
    resized: summary.resized + report.resized,
    indexEntries: report.namespace || report.partial ? summary.indexEntries : report.entries,
    publishMs: summary.publishMs + report.publishMs,
    writes: summary.writes + report.writes,
    conflicts: summary.conflicts + report.conflicts,
    lockWaits: summary.lockWaits + report.lockWaits,
    scopes: [
      ...summary.scopes,
      {
        scope: report.scope,
        kind: 'delta',
        status: report.status,
        layout: report.layout,
        changes: report.changes,
        added: report.added,
        removed: report.removed,
        resized: report.resized,
        unshardable: report.unshardable,
        refused: report.refused,
        refusedKeys: report.refusedKeys.slice(0, 20),
        staleMirrors: report.staleMirrors.length,
        entries: report.entries,
        ...(report.partial ? { partial: true } : {}),
        writes: report.writes,
      },
    ],
  };
}

/** Folds a heal (full check or repair) into a root's summary and counts its metrics. */
export function addHeal(summary: RootSummary, report: HealReport, mode: 'check' | 'repair'): RootSummary {
  let next = { ...summary, listingMs: summary.listingMs + report.listingMs };
  for (const scope of report.scopes) {
    const drift = scope.drift.missing + scope.drift.stale + scope.drift.resized;
    count(Metric.DriftFound, drift);
    if (scope.published) count(Metric.DriftRepaired, drift);
    count(Metric.IndexWrites, scope.published ? 1 : 0);
    count(Metric.PublishConflicts, scope.conflicts);
    count(Metric.StaleMirrors, scope.staleMirrors.length);
    metrics.addMetric(Metric.IndexEntries, MetricUnit.Count, scope.entries);
    const applied = mode === 'repair' && scope.published;
    next = {
      ...next,
      added: next.added + (applied ? scope.drift.missing : 0),
      removed: next.removed + (applied ? scope.drift.stale : 0),
      resized: next.resized + (applied ? scope.drift.resized : 0),
      indexEntries: scope.namespace ? next.indexEntries : scope.entries,
      publishMs: next.publishMs + scope.publishMs,
      writes: next.writes + (scope.published ? 1 : 0),
      conflicts: next.conflicts + scope.conflicts,
      lockWaits: next.lockWaits + scope.lockWaits,
      scopes: [
        ...next.scopes,
        {
          scope: scope.scope,
          kind: mode,
          indexState: scope.indexState,
          layout: scope.layout,
          objects: scope.objects,
          drift: scope.drift,
          refused: scope.refused,
          refusedKeys: scope.refusedKeys.slice(0, 20),
          pending: scope.pending,
          held: scope.held,
          staleMirrors: scope.staleMirrors.length,
          mirrorFailures: scope.mirrorFailures,
          entries: scope.entries,
          published: scope.published,
        },
      ],
    };
  }
  return next;
}

/** Writes the one log line of a root for this invocation. */
export function logRoot(summary: RootSummary): void {
  if (summary.outcome === 'failed') count(summary.trigger === 'sqs' ? Metric.RootsRetried : Metric.RootsFailed, 1);
  if (summary.error instanceof IndexTooLargeError) {
    // Retries cannot help: only more memory can, so say which prop gives it.
    count(Metric.IndexTooLarge, 1);
    logger.error("index too large for the function's memory: raise the DatastoreIndexer memorySize prop", {
      scope: summary.error.scope,
      objects: summary.error.objects,
      memory: summary.error.memory,
      prop: 'memorySize',
    });
  }
  const message = summary.outcome === 'failed' ? 'root failed; its batch items go back to the queue' : 'root done';
  (summary.outcome === 'failed' ? logger.warn : logger.info).call(logger, message, { ...summary });
}

/** S3 requests made since `before` (a copy of `store.requests`), by operation. */
export function requestsSince(store: S3Store, before: Readonly<Record<string, number>>): Record<string, number> {
  const since: Record<string, number> = {};
  for (const [op, n] of Object.entries(store.requests)) if (n - (before[op] ?? 0) > 0) since[op] = n - (before[op] ?? 0);
  return since;
}
