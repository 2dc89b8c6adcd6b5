/** The scheduled full drift repair: every configured root, its own index and every namespace in it. */
import type { Context } from 'aws-lambda';
import { describeScope } from '../lib/scope';
import { repairResumable } from '../lib/repair';
import { Metric, addHeal, count, logRoot, logger, requestsSince, rootSummary } from './observability';
import { type Runtime, publishOptions, SAMPLE_KEYS } from './runtime';
import { unlistedNamespaces } from './unlisted';

/** What the schedule did for one root. */
export interface ScheduledRootResult {
  readonly root: string;
  /** `complete`: listed, diffed, published where drifted. `incomplete`: progress saved, to be continued. `deferred`: no time left to start. */
  readonly status: 'complete' | 'incomplete' | 'deferred' | 'failed';
  readonly drift?: { missing: number; stale: number; resized: number };
  readonly published?: number;
  readonly error?: string;
}

/**
 * Repairs every root in turn (resuming a saved listing where one exists). A root that runs out of time
 * saves its progress under `<root>/_control/` and is continued by a queued message, or by the next schedule.
 */
export async function handleSchedule(rt: Runtime, context: Context): Promise<{ roots: ScheduledRootResult[] }> {
  const started = Date.now();
  const requestsBefore = { ...rt.store.requests };
  const remainingMs = (): number => context.getRemainingTimeInMillis();
  const results: ScheduledRootResult[] = [];
  for (const root of rt.config.roots) {
    const name = describeScope({ root });
    let summary = rootSummary(name, 'schedule');
    try {
      if (results.length > 0 && remainingMs() < rt.config.repairReserveMs) {
        results.push({ root: name, status: 'deferred' });
        summary = { ...summary, outcome: 'incomplete' };
        if (rt.queue) await rt.queue.sendContinuation({ root }, true);
        logRoot(summary);
        continue;
      }
      const run = await repairResumable(rt.store, root, {
        mode: 'repair',
        skipNamespace: unlistedNamespaces(rt, root),
        remainingMs,
        reserveMs: rt.config.repairReserveMs,
        publish: publishOptions(rt),
        memoryBudget: rt.config.memory,
        keys: SAMPLE_KEYS,
      });
      if (run.status === 'incomplete') {
        summary = { ...summary, outcome: 'incomplete' };
        count(Metric.RepairsIncomplete, 1);
        if (rt.queue) await rt.queue.sendContinuation({ root }, false, run.invocations);
        results.push({ root: name, status: 'incomplete' });
      } else {
        summary = addHeal(summary, run.report, 'repair');
        const drift = { missing: 0, stale: 0, resized: 0 };
        for (const s of run.report.scopes) {
          drift.missing += s.drift.missing;
          drift.stale += s.drift.stale;
          drift.resized += s.drift.resized;
        }
        results.push({ root: name, status: 'complete', drift, published: run.report.scopes.filter((s) => s.published).length });
      }
    } catch (err) {
      summary = { ...summary, outcome: 'failed', error: err as Error };
      results.push({ root: name, status: 'failed', error: (err as Error).message });
    }
    logRoot(summary);
  }
  logger.info('schedule done', { roots: results.length, s3Requests: requestsSince(rt.store, requestsBefore), ms: Date.now() - started });
  return { roots: results };
}
