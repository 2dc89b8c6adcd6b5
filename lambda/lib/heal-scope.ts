/** The heal of one scope's index against its listing, read whole: plan, confirm doubtful findings, publish, report. */
import { nextTurn } from './concurrency';
import { confirmDoubtful } from './confirm';
import { type Drift, type ResizedEntry, diffIndex, driftCounts, healIndex, isClean, recentOrphans } from './drift';
import type { HealRun } from './heal-run';
import type { ScopeReport } from './heal-types';
import type { DatastoreIndex, IndexEntry, ListedObject } from './index-file';
import { firstDriftKeys } from './key-sample';
import { isRefusedKey, partitionOf } from './keys';
import { readLiveIndex } from './layouts/read';
import { type LiveIndex, baseIndexOf } from './layouts/types';
import { scopeBase } from './names';
import { type Plan, type Planner, type PublishOutcome, publishIndex } from './publish';
import { type IndexScope, describeScope } from './scope';

/** What a heal's plan found in one read of the index. */
interface HealFacts {
  /** The drift of that read against the listing. */
  readonly drift: Drift;
  /** Keys a shard-first root cannot hold, set aside. */
  readonly unshardable: number;
  /** Stale entries whose key clients refuse. */
  readonly refusedStale: readonly string[];
}

/** One scope's part of a listing, keyed relative to the scope. */
export interface ScopeListing {
  readonly objects: ReadonlyMap<string, ListedObject>;
  /** Partition files the listing saw under the scope's `_index/`. */
  readonly shardPartitions?: readonly string[];
}

/** A scope's listing with the keys clients refuse set aside: they are no data to index. */
interface Sifted {
  readonly indexable: ReadonlyMap<string, ListedObject>;
  readonly refused: readonly string[];
}

/** What the heal of one scope did: the index it read first, each plan's facts, the entries left, its publish (none for `check`). */
interface Healed {
  readonly live: LiveIndex;
  readonly plans: readonly HealFacts[];
  readonly entries: number;
  readonly outcome?: PublishOutcome<HealFacts>;
  readonly publishMs: number;
}

/**
 * The planner of a scope's heal: the drift of each read against the listing (doubtful findings confirmed
 * with S3, unshardable keys set aside), and the healed index when it drifted.
 */
function healPlanner(run: HealRun, scope: IndexScope, indexable: ReadonlyMap<string, ListedObject>): Planner<HealFacts> {
  const base = scopeBase(scope);
  const recent = (entry: IndexEntry | undefined): boolean => !(Date.parse(entry?.lastModified ?? '') < run.since);
  // The entries of each earlier read of the index during this heal: an index is never changed in place.
  const readBefore: ReadonlyMap<string, IndexEntry>[] = [];
  // The first plan is heard (see `HealOptions.onPlanned`), unless the index it read is held as it is.
  let heard = false;
  const planned = (index: DatastoreIndex, live: LiveIndex): void => {
    if (heard || live.hold) return;
    heard = true;
    run.options.onPlanned?.(scope, index);
  };
  return async (live: LiveIndex, willWrite?: () => void): Promise<Plan<HealFacts>> => {
    const entries = baseIndexOf(live)?.entries ?? new Map<string, IndexEntry>();
    const raw = diffIndex(entries, indexable);
    const refusedStale = raw.stale.filter(isRefusedKey);
    // The listing is no snapshot: an entry absent from it may be an upload that landed after it passed.
    const doubtful = raw.stale.filter((key) => !isRefusedKey(key) && recent(entries.get(key)));
    // ...and a listed key whose entry a client removed since an earlier read may be a delete that followed the listing.
    const unindexed = raw.missing.filter((key) => readBefore.some((earlier) => earlier.has(key)));
    if (!readBefore.includes(entries)) readBefore.push(entries);
    // ...and an entry of another size than the listing's may describe an overwrite that followed the listing:
    // resizing it would drop the client's sha256 and localMtime of the bytes S3 holds now.
    const doubtfulSize = raw.resized.filter(({ key }) => recent(entries.get(key)));
    // Drift no confirmation can take back: the lock is taken while the rest of the plan is made.
    if (willWrite && writesSurely(live, raw, { doubtful, unindexed, doubtfulSize })) {
      willWrite();
      // The lock's request leaves before the CPU of the plan's rest, which then overlaps its round trip.
      await nextTurn();
    }
    // ...and an orphan file's entry the listing never saw may be a lockless client's upload, its manifest write to come.
    const orphaned = recentOrphans(live.shards?.adoptable, entries, indexable, run.since);
    // An entry is never an orphan: the sizes asked about are the index's, or the orphan file's.
    const sizes = new Map<string, number>(doubtfulSize.map(({ key, indexSize }) => [key, indexSize]));
    for (const key of orphaned) sizes.set(key, live.shards!.adoptable.get(key)!.size);
    const confirmed = await confirmDoubtful(run.store, base, { keys: [...doubtful, ...unindexed], sizes }, run.concurrency);
    const gone = new Set(unindexed.filter((k) => !confirmed.there.has(k)));
    let missing = gone.size ? raw.missing.filter((k) => !gone.has(k)) : raw.missing;
    const adopted = orphaned.filter((k) => confirmed.sized.has(k));
    if (adopted.length > 0) missing = [...missing, ...adopted].sort();
    let unshardable = 0;
    if (live.layout === 'shard-first') {
      const shardable = missing.filter((k) => partitionOf(k) !== undefined);
      unshardable = missing.length - shardable.length;
      missing = shardable;
    }
    const resized = confirmed.sized.size ? raw.resized.filter((r) => !confirmed.sized.has(r.key)) : raw.resized;
    const drift: Drift = { missing, stale: raw.stale.filter((k) => !confirmed.there.has(k)), resized };
    const facts = { drift, unshardable, refusedStale };
    // Entries true: nothing to write, or the same index again to finish the layout (the monolith is not rewritten).
    if (live.state === 'valid' && isClean(drift)) {
      planned(live.index, live);
      return { index: live.pending ? live.index : undefined, facts };
    }
    // A whole index is copied and written next, beside the listing: stop here rather than run out of memory.
    if (live.layout !== 'shard-first') run.guard.healing(describeScope(scope), indexable.size, entries.size, run.options.mode === 'repair');
    const index = healIndex(baseIndexOf(live), drift, indexable, live.shards?.adoptable);
    planned(index, live);
    return { index, facts };
  };
}

/** What a plan's confirmations may still take back of a drift (see `healPlanner`). */
interface Doubts {
  readonly doubtful: readonly string[];
  readonly unindexed: readonly string[];
  readonly doubtfulSize: readonly ResizedEntry[];
}

/**
 * True when the plan on `live` returns an index whatever S3 confirms: the index is not whole, or some of
 * its drift is beyond doubt (a missing key it can hold that no earlier read held, an old stale or
 * resized entry, an entry whose key clients refuse).
 */
function writesSurely(live: LiveIndex, raw: Drift, doubts: Doubts): boolean {
  if (live.state !== 'valid') return true;
  if (raw.stale.length > doubts.doubtful.length || raw.resized.length > doubts.doubtfulSize.length) return true;
  if (raw.missing.length === doubts.unindexed.length) return false;
  const unindexed = new Set(doubts.unindexed);
  return raw.missing.some((key) => !unindexed.has(key) && (live.layout !== 'shard-first' || partitionOf(key) !== undefined));
}

/**
 * Heals one scope's index against its part of the run's listing. `read`: the live index as read already
 * (while listing); not used when the listing saw shard files, which change how it is read.
 */
export async function healScope(run: HealRun, scope: IndexScope, listed: ScopeListing, read?: Promise<LiveIndex>): Promise<ScopeReport> {
  const started = Date.now();
  const { store } = run;
  const { shardPartitions } = listed;
  const sifted = sift(listed.objects);
  const plan = healPlanner(run, scope, sifted.indexable);
  // Read early without the mirror: a dual-write scope is read again with it.
  const readAlready = shardPartitions?.length
    ? undefined
    : read?.then((live) => (live.layout === 'dual-write' ? readLiveIndex(store, scope, { mirrors: 'all' }) : live));
  if (run.options.mode === 'check') {
    const live = await (readAlready ?? readLiveIndex(store, scope, { shardPartitions, mirrors: 'all' }));
    const { index, facts } = await plan(live);
    const entries = index ? index.entries.size : live.state === 'valid' ? live.index.entries.size : 0;
    return report(run, scope, sifted, { live, plans: [facts], entries, publishMs: Date.now() - started });
  }
  const outcome = await publishIndex(store, scope, plan, {
    ...run.publishOptions(scope),
    before: readAlready,
    shardPartitions,
    mirrors: 'all',
  });
  // Not written by us: the index as last read (another writer's, if it healed first), not the stale first read.
  const entries = outcome.index?.entries.size ?? (outcome.last.state === 'valid' ? outcome.last.index.entries.size : 0);
  return report(run, scope, sifted, { live: outcome.before, plans: outcome.plans, entries, outcome, publishMs: Date.now() - started });
}

/** A key clients refuse is no data to index: out of the listing, and (as stale) out of any index holding it. */
function sift(objects: ReadonlyMap<string, ListedObject>): Sifted {
  const refused: string[] = [];
  for (const key of objects.keys()) if (isRefusedKey(key)) refused.push(key);
  const indexable = refused.length === 0 ? objects : new Map([...objects].filter(([key]) => !isRefusedKey(key)));
  return { indexable, refused };
}

/** The report of a scope from its plans: the drift the first found, what the last set aside, every refused key. */
function report(run: HealRun, scope: IndexScope, sifted: Sifted, healed: Healed): ScopeReport {
  const { live, plans, outcome } = healed;
  const drift = plans[0].drift;
  const refusedKeys = new Set([...sifted.refused, ...plans.flatMap((p) => p.refusedStale)]);
  return {
    scope: describeScope(scope),
    namespace: scope.namespace,
    layout: live.layout,
    indexState: live.state,
    unreadableReason: live.state === 'unreadable' ? live.reason : undefined,
    objects: sifted.indexable.size,
    drift: driftCounts(drift),
    driftKeys: firstDriftKeys(drift, run.options.keys),
    unshardable: plans[plans.length - 1].unshardable,
    refused: refusedKeys.size,
    refusedKeys: [...refusedKeys].sort(),
    pending: live.pending,
    held: live.hold,
    staleMirrors: [...(live.mirror?.stale ?? [])].sort(),
    mirrorFailures: outcome?.mirrorFailures ?? 0,
    entries: healed.entries,
    published: outcome?.published ?? false,
    conflicts: outcome?.conflicts ?? 0,
    lockWaits: outcome?.lockWaits ?? 0,
    keptCopy: outcome?.keptCopy,
    conditional: outcome?.conditional ?? true,
    publishMs: healed.publishMs,
    index: outcome?.index,
  };
}

/** True when a heal found the index other than true: absent, unreadable, drifted, or its layout unfinished. */
export function hasDrift(scope: ScopeReport): boolean {
  const d = scope.drift;
  return scope.indexState !== 'valid' || d.missing + d.stale + d.resized > 0 || scope.pending !== undefined;
}
