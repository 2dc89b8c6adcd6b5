/**
 * One root's share of an SQS batch: its events folded per scope (the root's own index and each namespace),
 * each scope's delta applied in one write, a full heal where there is no index, re-checks sent for later.
 */
import { type DatastoreRoot, type IndexScope, describeScope } from '../lib/scope';
import { type ObjectChange, latestChanges } from '../lib/events';
import { LockBusyError } from '../lib/errors';
import { NamespaceResolver } from '../lib/namespaces';
import { applyDelta, recheckChanges, settleKeyReadings } from '../lib/delta';
import { isInternalKey, namespaceOfMarker, topFolder } from '../lib/keys';
import { liveLockHolder } from '../lib/lock';
import { lockKeyOf, repairProgressKey, publishRecordKey, scopeBase } from '../lib/names';
import { loadRepairProgress, repairResumable } from '../lib/repair';
import { namespaceExists } from '../lib/list';
import { isNamespaceListed } from './config';
import {
  type ContinueRepairRequest,
  type FinishPublishRequest,
  MAX_FINISH_ROUNDS,
  MAX_RECHECK_ROUNDS,
  type RecheckRequest,
} from './messages';
import { Metric, type RootSummary, addDelta, addHeal, count, logger } from './observability';
import { type Runtime, publishOptions, SAMPLE_KEYS } from './runtime';
import { unlistedNamespaces } from './unlisted';

/** A change placed in a root: `rel` is its key relative to the root. */
export interface PlacedChange {
  readonly change: ObjectChange;
  readonly rel: string;
}

/** What a batch holds for one root. */
export interface RootWork {
  readonly root: DatastoreRoot;
  /** Changes to keys that are not internal at the root level. */
  readonly changes: PlacedChange[];
  /** Changes to namespace markers (`<ns>/.namespace.json`): internal, but they say which folders are namespaces. */
  readonly markers: PlacedChange[];
  readonly rechecks: RecheckRequest[];
  readonly continuations: ContinueRepairRequest[];
  readonly finishes: FinishPublishRequest[];
}

/** HeadObject requests a re-check sends at once: S3 serves thousands a second per prefix. */
const RECHECK_CONCURRENCY = 64;

/** What a re-check expects an index to hold for a key after `change`: its size, or null for no entry. */
function sizeAfter(change: ObjectChange): number | null {
  return change.kind === 'created' ? (change.size ?? 0) : null;
}

/** An empty work list for a root. */
export function rootWork(root: DatastoreRoot): RootWork {
  return { root, changes: [], markers: [], rechecks: [], continuations: [], finishes: [] };
}

/** The summary of a root, updated as the work goes so a failure still logs what was done. */
export interface RootProgress {
  summary: RootSummary;
  /** Changes left out because they are internal inside their namespace (e.g. `<ns>/.datastore-index.json`). */
  internal: number;
}

interface ScopeWork {
  readonly scope: IndexScope;
  readonly events: ObjectChange[];
  readonly recheckKeys: Set<string>;
  /** What the re-checked delta left per key (size, or null for no entry); keys two deltas disagree on are left out. */
  readonly recheckExpected: Map<string, number | null>;
  recheckRound: number;
}

/** Splits a root's changes by scope; namespaces are asked of S3 once per top-level folder. */
async function scopesOf(rt: Runtime, work: RootWork, progress: RootProgress): Promise<ScopeWork[]> {
  const { root } = work;
  const namespaces = new NamespaceResolver(rt.store, root);
  const unlisted = unlistedNamespaces(rt, root);
  for (const [rel, marker] of latestChanges(work.markers.map((m) => m.change))) {
    const ns = namespaceOfMarker(rel.slice(scopeBase({ root }).length));
    if (ns !== undefined && marker.kind === 'created') namespaces.note(ns, true);
  }
  const tops = new Set(work.changes.map((c) => topFolder(c.rel)).filter((t): t is string => t !== undefined));
  await Promise.all([...tops].map((top) => namespaces.isNamespace(top)));

  const scopes = new Map<string, ScopeWork>();
  const scopeFor = (namespace: string | undefined): ScopeWork => {
    const id = namespace ?? '';
    let entry = scopes.get(id);
    if (!entry) {
      entry = {
        scope: namespace ? { root, namespace } : { root },
        events: [],
        recheckKeys: new Set(),
        recheckExpected: new Map(),
        recheckRound: 0,
      };
      scopes.set(id, entry);
    }
    return entry;
  };
  for (const { change, rel } of work.changes) {
    const placed = await namespaces.scopeOf(rel);
    if (isInternalKey(placed.rel)) {
      progress.internal++;
      continue;
    }
    if (placed.namespace !== undefined && unlisted(placed.namespace)) continue;
    scopeFor(placed.namespace).events.push(change);
  }
  for (const recheck of work.rechecks) {
    if (recheck.namespace !== undefined && unlisted(recheck.namespace)) continue;
    const entry = scopeFor(recheck.namespace);
    for (const key of recheck.keys) {
      if (isInternalKey(key)) continue;
      const expected = recheck.expected?.[key];
      const seen = entry.recheckKeys.has(key);
      entry.recheckKeys.add(key);
      if (expected === undefined || (seen && entry.recheckExpected.get(key) !== expected)) entry.recheckExpected.delete(key);
      else if (!seen) entry.recheckExpected.set(key, expected);
    }
    entry.recheckRound = Math.max(entry.recheckRound, recheck.round);
  }
  // The root's own index first, then namespaces by name.
  return [...scopes.entries()].sort(([a], [b]) => (a === b ? 0 : a < b ? -1 : 1)).map(([, entry]) => entry);
}

/** Heals a scope from a listing (resumable); an unfinished listing is continued by a fresh invocation. True when it published the scope. */
async function healFromListing(rt: Runtime, scope: IndexScope, remainingMs: () => number, progress: RootProgress): Promise<boolean> {
  const run = await repairResumable(rt.store, scope.root, {
    mode: 'repair',
    namespace: scope.namespace,
    skipNamespace: unlistedNamespaces(rt, scope.root),
    remainingMs,
    reserveMs: rt.config.repairReserveMs,
    publish: publishOptions(rt),
    memoryBudget: rt.config.memory,
    keys: SAMPLE_KEYS,
  });
  if (run.status === 'complete') {
    progress.summary = addHeal(progress.summary, run.report, 'repair');
    return run.report.scopes.some((s) => s.published && s.namespace === scope.namespace);
  }
  progress.summary = { ...progress.summary, outcome: 'incomplete' };
  count(Metric.RepairsIncomplete, 1);
  if (rt.queue) await rt.queue.sendContinuation(scope, false, run.invocations);
  else logger.warn('repair ran out of time; the next schedule continues it', { scope: describeScope(scope), lastKey: run.lastKey });
  return false;
}

/**
 * Finishes what a killed publish may have left half done: one HeadObject of the scope's publish record, and
 * nothing more when it is gone. A record that outlives a moment the lock is free or stale is healed from a
 * listing under the lock, as `check` reports it pending; a live lock holder (the run still alive, or a client
 * pushing) sends the next round after the delay.
 */
async function finishPublish(
  rt: Runtime,
  root: DatastoreRoot,
  request: FinishPublishRequest,
  remainingMs: () => number,
  progress: RootProgress,
): Promise<void> {
  const { store, config } = rt;
  if (request.namespace !== undefined && !isNamespaceListed(config, root, request.namespace)) return;
  const scope: IndexScope = request.namespace ? { root, namespace: request.namespace } : { root };
  const recordKey = publishRecordKey(scope);
  const record = request.listing ? undefined : await store.head(recordKey);
  if (!request.listing && !record) return;
  // A live lock holder may be the publish that wrote the record, still under way: it ends the record itself,
  // so the finish comes again rather than listing the scope now.
  const holder = await liveLockHolder(store, lockKeyOf(root));
  if (holder !== undefined) {
    logger.info('the lock is held; the finish of the publish comes again', { scope: describeScope(scope), holder, round: request.round });
    return finishAgain(rt, scope, request);
  }
  // A writer holds the lock from before its record until after it is deleted: the same record still there
  // after the lock was seen free is a dead writer's; one gone (or replaced) meanwhile was a publish ending.
  if (record && (await store.head(recordKey))?.etag !== record.etag) return;
  // A message names the namespace: only one that exists is healed.
  if (scope.namespace !== undefined && !(await namespaceExists(store, root, scope.namespace))) {
    logger.warn('a finish names no namespace of the root; nothing written', { scope: describeScope(scope) });
    return;
  }
  try {
    if (await healFromListing(rt, scope, remainingMs, progress)) {
      count(Metric.PublishesFinished, 1);
      logger.info('finished a publish left half done', { scope: describeScope(scope), round: request.round });
    }
  } catch (err) {
    if (!(err instanceof LockBusyError)) throw err;
    await finishAgain(rt, scope, request);
  }
}

/** Sends the next round of a finish after the delay; past the last round the schedule finishes the publish. */
async function finishAgain(rt: Runtime, scope: IndexScope, request: FinishPublishRequest): Promise<void> {
  if (rt.queue && request.round < MAX_FINISH_ROUNDS)
    await rt.queue.sendFinish(scope, request.round + 1, rt.config.finishDelaySeconds, request.listing === true);
  else logger.warn('the lock stayed busy; the schedule finishes the publish', { scope: describeScope(scope), round: request.round });
}

/** One finish per scope of the batch (duplicates and later rounds of the same scope cost nothing more). */
function distinctFinishes(finishes: readonly FinishPublishRequest[]): FinishPublishRequest[] {
  const byScope = new Map<string, FinishPublishRequest>();
  for (const f of finishes) {
    const seen = byScope.get(f.namespace ?? '');
    if (!seen || (f.listing && !seen.listing) || (f.listing === seen.listing && f.round < seen.round)) byScope.set(f.namespace ?? '', f);
  }
  return [...byScope.values()];
}

/**
 * Applies a root's work. Throws when any scope could not be settled (a busy lock, a failed write): the
 * caller then returns every message of the root to the queue, and a replay is harmless.
 */
export async function processRoot(rt: Runtime, work: RootWork, remainingMs: () => number, progress: RootProgress): Promise<void> {
  const { store, config, queue } = rt;
  // First, so a busy lock on the root sends the finish round on rather than failing it with the root's events.
  for (const request of distinctFinishes(work.finishes)) await finishPublish(rt, work.root, request, remainingMs, progress);
  for (const entry of await scopesOf(rt, work, progress)) {
    const { scope } = entry;
    const base = scopeBase(scope);
    // An EventBridge key with two readings: S3 says which object exists. The other reading must lie in
    // this scope (same top folder, so the same namespace) and not be internal.
    const sameScope = (other: string, asSent: string): boolean =>
      other.startsWith(base) &&
      !isInternalKey(other.slice(base.length)) &&
      topFolder(other.slice(base.length)) === topFolder(asSent.slice(base.length));
    const events = entry.events.some((c) => c.otherReading !== undefined)
      ? await settleKeyReadings(store, entry.events, sameScope)
      : entry.events;
    const changes = latestChanges(events, (c) => c.key.slice(base.length));
    const eventKeys = [...changes.keys()];
    if (changes.size === 0 && entry.recheckKeys.size === 0) continue;
    // A re-check asks S3 about keys whose entry no longer says what the delta wrote (a push erased or
    // changed it), and about every key a delta indexed as present: its event may have been a late one
    // (SQS redelivers and reorders) for an object deleted since. What S3 says now is later than any event.
    const delta = entry.recheckKeys.size
      ? recheckChanges(store, scope, changes, entry.recheckKeys, entry.recheckExpected, RECHECK_CONCURRENCY)
      : changes;
    const report = await applyDelta(store, scope, delta, {
      ...publishOptions(rt),
      // With re-checks on, the delayed re-check is what converges; without them, re-read right after the write.
      convergeRounds: queue ? 0 : 2,
      mirrorKeys: [...changes.keys(), ...entry.recheckKeys],
    });
    progress.summary = addDelta(progress.summary, report);
    if (report.status === 'no-index') {
      await healFromListing(rt, scope, remainingMs, progress);
      continue;
    }
    // Only a re-check that S3 contradicted and that wrote can have restored something a push erased.
    const { observed, contradicted } = report;
    const restored = contradicted.size > 0 && report.published;
    if (restored && eventKeys.length === 0) {
      count(Metric.RecheckRestored, report.added + report.removed + report.resized);
      logger.info('re-check restored what a push erased', {
        scope: report.scope,
        round: entry.recheckRound,
        added: report.added,
        removed: report.removed,
        resized: report.resized,
      });
    }
    if (!queue) continue;
    let sent = 0;
    try {
      if (eventKeys.length) {
        // What the write holds for each key: S3's answer where the re-check asked, else the event.
        const written = (key: string): ObjectChange => observed.get(key) ?? changes.get(key)!;
        const expected = new Map(eventKeys.map((key) => [key, sizeAfter(written(key))]));
        sent += await queue.sendRecheck(scope, eventKeys, 1, config.recheckDelaySeconds, expected);
      }
      if (restored && entry.recheckRound < MAX_RECHECK_ROUNDS) {
        // The next round checks the keys it restored, expecting what S3 said.
        const again = [...contradicted];
        const expected = new Map(again.map((key) => [key, sizeAfter(observed.get(key)!)]));
        sent += await queue.sendRecheck(scope, again, entry.recheckRound + 1, config.recheckDelaySeconds, expected);
      }
    } catch (err) {
      // The delta stands; only its convergence check is lost, and the schedule still repairs.
      logger.warn('could not send a re-check', { scope: report.scope, error: err as Error });
    }
    count(Metric.RechecksSent, sent);
  }
  for (const request of work.continuations) {
    if (request.namespace !== undefined && !isNamespaceListed(config, work.root, request.namespace)) continue;
    const scope: IndexScope = request.namespace ? { root: work.root, namespace: request.namespace } : { root: work.root };
    // At least once: a duplicate continuation of a repair that has finished must not start a new one.
    if (!request.start && !(await loadRepairProgress(store, repairProgressKey(scope.root, scope.namespace)))) continue;
    await healFromListing(rt, scope, remainingMs, progress);
  }
}
