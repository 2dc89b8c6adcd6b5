/** A direct invoke: `{"action": "check" | "repair", "prefix"?, "namespace"?}` answered with the drift report. */
import type { Context } from 'aws-lambda';
import { type DatastoreRoot, describeScope } from '../lib/scope';
import type { DriftCounts } from '../lib/drift';
import type { ScopeReport } from '../lib/heal-types';
import { namespaceExists } from '../lib/list';
import { normalizePrefix } from '../lib/config';
import { repairResumable } from '../lib/repair';
import { Metric, addHeal, count, logRoot, rootSummary } from './observability';
import { type Runtime, SAMPLE_KEYS, publishOptions } from './runtime';
import { isNamespaceListed } from './config';
import { unlistedMessage, unlistedNamespaces } from './unlisted';
import { type InvokeRequest, UnknownTriggerError } from './triggers';

/** The drift of one index. */
export interface ScopeDrift {
  readonly scope: string;
  readonly namespace?: string;
  readonly indexState: ScopeReport['indexState'];
  readonly layout: ScopeReport['layout'];
  /** Data objects listed. */
  readonly objects: number;
  readonly drift: DriftCounts;
  /** Keys clients refuse, in the listing or the index: never indexed (see `refusedKeyReason`). */
  readonly refused: number;
  /** Why the layout needed a write although its entries were true (an unfinished shard publish, an orphan shard). */
  readonly pending?: string;
  /** Why the index was left as it is (a manifest that does not parse and does not say its layout). */
  readonly held?: string;
  /** Up to 20 keys of each kind. */
  readonly sample: { readonly missing: string[]; readonly stale: string[]; readonly resized: string[]; readonly refused: string[] };
  /** Entries the index has after a repair (after a check: would have). */
  readonly entries: number;
  readonly published: boolean;
}

/** What a direct invoke answers. */
export interface DriftReport {
  readonly action: InvokeRequest['action'];
  readonly bucket: string;
  /** False when a root's listing ran out of time (a repair then continues it; a check reports nothing for it). */
  readonly complete: boolean;
  readonly totals: DriftCounts;
  readonly roots: {
    readonly root: string;
    readonly status: 'complete' | 'incomplete';
    readonly objectsListed: number;
    readonly listingMs: number;
    readonly scopes: ScopeDrift[];
  }[];
}

function rootsOf(rt: Runtime, request: InvokeRequest): DatastoreRoot[] {
  if (request.prefix === undefined) return [...rt.config.roots];
  const wanted = normalizePrefix(request.prefix);
  const root = rt.config.roots.find((r) => r.prefix === wanted);
  if (!root) {
    const known = rt.config.roots.map((r) => JSON.stringify(r.prefix)).join(', ');
    throw new UnknownTriggerError(`"prefix" ${JSON.stringify(request.prefix)} is not a configured datastore root`, `Configured: ${known}`);
  }
  return [root];
}

/** Runs a check (writes nothing) or a repair over the requested roots and returns the drift found. */
export async function handleInvoke(rt: Runtime, request: InvokeRequest, context: Context): Promise<DriftReport> {
  const roots = rootsOf(rt, request);
  const totals = { missing: 0, stale: 0, resized: 0 };
  const report: DriftReport = { action: request.action, bucket: rt.config.bucket, complete: true, totals, roots: [] };
  for (const root of roots) {
    if (request.namespace !== undefined && !(await namespaceExists(rt.store, root, request.namespace))) {
      throw new UnknownTriggerError(
        `${describeScope({ root })} has no namespace "${request.namespace}" (no ${request.namespace}/.namespace.json)`,
      );
    }
    if (request.action === 'repair' && request.namespace !== undefined && !isNamespaceListed(rt.config, root, request.namespace))
      throw new UnknownTriggerError(unlistedMessage(root, request.namespace), 'Only listed namespaces are repaired');
    let summary = rootSummary(describeScope({ root }), `invoke-${request.action}`);
    const run = await repairResumable(rt.store, root, {
      mode: request.action,
      namespace: request.namespace,
      skipNamespace: request.action === 'repair' ? unlistedNamespaces(rt, root) : undefined,
      remainingMs: () => context.getRemainingTimeInMillis(),
      reserveMs: rt.config.repairReserveMs,
      publish: publishOptions(rt),
      memoryBudget: rt.config.memory,
      keys: SAMPLE_KEYS,
    }).catch((err: unknown) => {
      logRoot({ ...summary, outcome: 'failed', error: err as Error });
      throw err;
    });
    if (run.status === 'incomplete') {
      (report as { complete: boolean }).complete = false;
      count(Metric.RepairsIncomplete, request.action === 'repair' ? 1 : 0);
      if (request.action === 'repair' && rt.queue)
        await rt.queue.sendContinuation({ root, namespace: request.namespace }, false, run.invocations);
      report.roots.push({
        root: describeScope({ root }),
        status: 'incomplete',
        objectsListed: run.objectsListed,
        listingMs: run.listingMs,
        scopes: [],
      });
      logRoot({ ...summary, outcome: 'incomplete' });
      continue;
    }
    summary = addHeal(summary, run.report, request.action);
    const scopes = run.report.scopes.map((s): ScopeDrift => {
      totals.missing += s.drift.missing;
      totals.stale += s.drift.stale;
      totals.resized += s.drift.resized;
      return {
        scope: s.scope,
        namespace: s.namespace,
        indexState: s.indexState,
        layout: s.layout,
        objects: s.objects,
        drift: s.drift,
        refused: s.refused,
        pending: s.pending,
        held: s.held,
        sample: {
          missing: s.driftKeys.missing.slice(0, SAMPLE_KEYS),
          stale: s.driftKeys.stale.slice(0, SAMPLE_KEYS),
          resized: s.driftKeys.resized.slice(0, SAMPLE_KEYS).map((r) => r.key),
          refused: s.refusedKeys.slice(0, SAMPLE_KEYS),
        },
        entries: s.entries,
        published: s.published,
      };
    });
    report.roots.push({
      root: describeScope({ root }),
      status: 'complete',
      objectsListed: run.report.objectsSeen,
      listingMs: run.report.listingMs,
      scopes,
    });
    logRoot(summary);
  }
  return report;
}
