/** The heal of one scope's index against its listing, read whole: plan, confirm doubtful findings, publish, report. */
import { mapLimit } from './concurrency';
import { type Drift, diffIndex, driftCounts, healIndex, isClean, recentOrphans } from './drift';
import type { HealOptions, ScopeReport } from './heal-types';
import type { IndexEntry, ListedObject } from './index-file';
import { firstDriftKeys } from './key-sample';
import { isRefusedKey, partitionOf } from './keys';
import { readLiveIndex } from './layouts/read';
import { type LiveIndex, baseIndexOf } from './layouts/types';
import { MemoryGuard, memoryBudget } from './memory';
import { scopeBase } from './names';
import { type Plan, type Planner, type PublishOutcome, publishIndex } from './publish';
import type { S3Store } from './s3';
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

/**
 * The planner of a scope's heal: the drift of each read against the listing (stale entries confirmed
 * gone, unshardable keys set aside), and the healed index when it drifted.
 */
function healPlanner(
  store: S3Store,
  scope: IndexScope,
  indexable: ReadonlyMap<string, ListedObject>,
  listingStartedAt: number,
  options: HealOptions,
  guard: MemoryGuard | undefined,
): Planner<HealFacts> {
  const skew = options.clockSkewMs ?? 300_000;
  const concurrency = options.concurrency ?? 16;
  const base = scopeBase(scope);
  // Keys some earlier read of the index held during this heal.
  const indexedBefore = new Set<string>();
  return async (live: LiveIndex): Promise<Plan<HealFacts>> => {
    const entries = baseIndexOf(live)?.entries ?? new Map<string, IndexEntry>();
    const raw = diffIndex(entries, indexable);
    const refusedStale = raw.stale.filter(isRefusedKey);
    // The listing is no snapshot: an entry absent from it may be an upload that landed after it passed.
    const doubtful = raw.stale.filter((key) => {
      if (isRefusedKey(key)) return false;
      const t = Date.parse(entries.get(key)?.lastModified ?? '');
      return !(t < listingStartedAt - skew);
    });
    // ...and a listed key whose entry a client removed since an earlier read may be a delete that followed the listing.
    const unindexed = raw.missing.filter((key) => indexedBefore.has(key));
    for (const key of entries.keys()) indexedBefore.add(key);
    // ...and an entry of another size than the listing's may describe an overwrite that followed the listing:
    // resizing it would drop the client's sha256 and localMtime of the bytes S3 holds now.
    const doubtfulSize = raw.resized.filter(({ key }) => !(Date.parse(entries.get(key)?.lastModified ?? '') < listingStartedAt - skew));
    // ...and an orphan file's entry the listing never saw may be a lockless client's upload, its manifest write to come.
    const orphaned = recentOrphans(live.shards?.adoptable, entries, indexable, listingStartedAt - skew);
    const stillThere = new Set<string>();
    const sizeConfirmed = new Set<string>();
    await mapLimit([...doubtful, ...unindexed], concurrency, async (key) => {
      if (await store.head(base + key)) stillThere.add(key);
    });
    const orphansThere = new Set<string>();
    await mapLimit(orphaned, concurrency, async (key) => {
      if ((await store.head(base + key))?.size === live.shards?.adoptable.get(key)?.size) orphansThere.add(key);
    });
    await mapLimit(doubtfulSize, concurrency, async ({ key, indexSize }) => {
      if ((await store.head(base + key))?.size === indexSize) sizeConfirmed.add(key);
    });
    const gone = new Set(unindexed.filter((k) => !stillThere.has(k)));
    let missing = gone.size ? raw.missing.filter((k) => !gone.has(k)) : raw.missing;
    const adopted = orphaned.filter((k) => orphansThere.has(k));
    if (adopted.length > 0) missing = [...missing, ...adopted].sort();
    let unshardable = 0;
    if (live.layout === 'shard-first') {
      const shardable = missing.filter((k) => partitionOf(k) !== undefined);
      unshardable = missing.length - shardable.length;
      missing = shardable;
    }
    const resized = sizeConfirmed.size ? raw.resized.filter((r) => !sizeConfirmed.has(r.key)) : raw.resized;
    const drift: Drift = { missing, stale: raw.stale.filter((k) => !stillThere.has(k)), resized };
    const facts = { drift, unshardable, refusedStale };
    // Entries true: nothing to write, or the same index again to finish the layout (the monolith is not rewritten).
    if (live.state === 'valid' && isClean(drift)) return { index: live.pending ? live.index : undefined, facts };
    // A whole index is copied and written next, beside the listing: stop here rather than run out of memory.
    if (live.layout !== 'shard-first') guard?.healing(describeScope(scope), indexable.size, entries.size, options.mode === 'repair');
    return { index: healIndex(baseIndexOf(live), drift, indexable, live.shards?.adoptable), facts };
  };
}

/** Heals one scope's index against its listing. */
export async function healScope(
  store: S3Store,
  scope: IndexScope,
  listing: ReadonlyMap<string, ListedObject>,
  shardPartitions: readonly string[] | undefined,
  listingStartedAt: number,
  options: HealOptions,
  /** The live index as read already (while listing); not used when the listing saw shard files, which change how it is read. */
  read?: Promise<LiveIndex>,
  /** The heal's memory guard, which knows what its listing holds. @default one for this listing alone */
  guard: MemoryGuard = new MemoryGuard(memoryBudget(options.memoryBudget)),
): Promise<ScopeReport> {
  const started = Date.now();
  // A key clients refuse is no data to index: out of the listing, and (as stale) out of any index holding it.
  const refusedListed: string[] = [];
  for (const key of listing.keys()) if (isRefusedKey(key)) refusedListed.push(key);
  const indexable = refusedListed.length === 0 ? listing : new Map([...listing].filter(([key]) => !isRefusedKey(key)));
  const plan = healPlanner(store, scope, indexable, listingStartedAt, options, guard);
  // Read early without the mirror: a dual-write scope is read again with it.
  const readAlready = shardPartitions?.length
    ? undefined
    : read?.then((live) => (live.layout === 'dual-write' ? readLiveIndex(store, scope, { mirrors: 'all' }) : live));
  const name = describeScope(scope);
  if (options.mode === 'check') {
    const live = await (readAlready ?? readLiveIndex(store, scope, { shardPartitions, mirrors: 'all' }));
    const { index, facts } = await plan(live);
    const entries = index ? index.entries.size : live.state === 'valid' ? live.index.entries.size : 0;
    return report(scope, live, [facts], refusedListed, indexable.size, entries, undefined, Date.now() - started, options.keys);
  }
  const outcome = await publishIndex(store, scope, plan, {
    ...options.publish,
    before: readAlready,
    shardPartitions,
    mirrors: 'all',
    onEvent: (event) => {
      options.onEvent?.(name, event);
      options.publish?.onEvent?.(event);
    },
  });
  // Not written by us: the index as last read (another writer's, if it healed first), not the stale first read.
  const entries = outcome.index?.entries.size ?? (outcome.last.state === 'valid' ? outcome.last.index.entries.size : 0);
  return report(scope, outcome.before, outcome.plans, refusedListed, indexable.size, entries, outcome, Date.now() - started, options.keys);
}

/** The report of a scope from its plans: the drift the first found, what the last set aside, every refused key. */
function report(
  scope: IndexScope,
  live: LiveIndex,
  plans: readonly HealFacts[],
  refusedListed: readonly string[],
  objects: number,
  entries: number,
  outcome: PublishOutcome<HealFacts> | undefined,
  publishMs: number,
  keys: number | undefined,
): ScopeReport {
  const drift = plans[0].drift;
  const refusedKeys = new Set([...refusedListed, ...plans.flatMap((p) => p.refusedStale)]);
  return {
    scope: describeScope(scope),
    namespace: scope.namespace,
    layout: live.layout,
    indexState: live.state,
    unreadableReason: live.state === 'unreadable' ? live.reason : undefined,
    objects,
    drift: driftCounts(drift),
    driftKeys: firstDriftKeys(drift, keys),
    unshardable: plans[plans.length - 1].unshardable,
    refused: refusedKeys.size,
    refusedKeys: [...refusedKeys].sort(),
    pending: live.pending,
    held: live.hold,
    staleMirrors: [...(live.mirror?.stale ?? [])].sort(),
    mirrorFailures: outcome?.mirrorFailures ?? 0,
    entries,
    published: outcome?.published ?? false,
    conflicts: outcome?.conflicts ?? 0,
    lockWaits: outcome?.lockWaits ?? 0,
    keptCopy: outcome?.keptCopy,
    conditional: outcome?.conditional ?? true,
    publishMs,
    index: outcome?.index,
  };
}
