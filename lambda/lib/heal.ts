/** The full heal of a datastore root: list once, diff every scope's index, publish where it drifted. */
import { type Drift, type DriftCounts, diffIndex, driftCounts, healIndex, isClean } from './drift';
import type { DatastoreIndex, IndexEntry, ListedObject } from './index-file';
import { EmptyDatastoreError, IndexTooLargeError } from './errors';
import { firstDriftKeys } from './key-sample';
import { isRefusedKey, partitionOf } from './keys';
import { healWhileListing, pagesInKeyOrder } from './heal-stream';
import { readLiveIndex } from './layouts/read';
import { shardBaseFor } from './layouts/shard-chunk';
import { type Layout, type LiveIndex, baseIndexOf } from './layouts/types';
import { type Lister, type ScopedListing, listScopes } from './list';
import { type MemoryBudget, MemoryGuard, memoryBudget } from './memory';
import { checkNamespaceName, rootBase, scopeBase } from './names';
import { parallelLister } from './parallel-list';
import { type Plan, type Planner, type PublishEvent, type PublishOptions, type PublishOutcome, publishIndex } from './publish';
import { type DatastoreRoot, type IndexScope, describeScope } from './scope';
import type { ListPage, S3Store } from './s3';
import { mapLimit } from './concurrency';

/** `check` reports drift and writes nothing; `repair` publishes the healed index. */
export type HealMode = 'check' | 'repair';

/** How to heal. */
export interface HealOptions {
  readonly mode: HealMode;
  /** Heal only this namespace; by default the root's own index and every namespace in it. */
  readonly namespace?: string;
  /** How the root is listed. @default `parallelLister()`: slices of the key space listed 16 requests at a time (a shard-first scope's: with a `window` of `PARTITION_WINDOW` pages; without ETags) */
  readonly lister?: Lister;
  /** A listing made already (of the root, or of `namespace` when given), e.g. one resumed across invocations; `lister` is then unused. */
  readonly listing?: ScopedListing;
  readonly publish?: PublishOptions;
  /** Parallel HeadObject requests when confirming stale entries. @default 16 */
  readonly concurrency?: number;
  /** Entries this much newer than the listing's start, or newer, are confirmed with HeadObject before removal. @default 300000 */
  readonly clockSkewMs?: number;
  readonly onEvent?: (scope: string, event: PublishEvent) => void;
  /** Stop with `EmptyDatastoreError` when the root (or namespace) holds no object at all, rather than create an empty index there (a mistyped prefix). @default false */
  readonly refuseEmpty?: boolean;
  /** Namespaces to leave alone (neither checked nor written) in a heal of the whole root. @default none */
  readonly skipNamespace?: (namespace: string) => boolean;
  /** Hears the count of objects listed so far, after each page of the root's listing. */
  readonly onListed?: (objectsListed: number) => void;
  /**
   * Bytes the heal may hold (its estimate: listing, the index read, the healed copy, the index as written);
   * past them a monolith or dual-write scope stops with `IndexTooLargeError`, having written nothing.
   * @default from the environment: a share of `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` in a Lambda, else of the V8 heap limit
   */
  readonly memoryBudget?: number | MemoryBudget;
  /** Entry changes a shard-first heal commits at once (one lock, one manifest write). @default 10000 */
  readonly chunkEntries?: number;
  /** Drifting keys of each kind a report names, the first in key order (its counts stay whole); a heal by partitions then holds no more. @default all */
  readonly keys?: number;
}

/** What a heal found and did for one index. */
export interface ScopeReport {
  readonly scope: string;
  readonly namespace?: string;
  readonly layout: Layout;
  /** The index's state before the heal. */
  readonly indexState: LiveIndex['state'];
  readonly unreadableReason?: string;
  /** Data objects in the listing, refused keys apart. */
  readonly objects: number;
  readonly drift: DriftCounts;
  /** The drifting keys, sorted (the first `HealOptions.keys` of each kind). */
  readonly driftKeys: Drift;
  /** Keys a shard-first root cannot hold (no partition); left out. */
  readonly unshardable: number;
  /** Keys clients refuse (see `refusedKeyReason`), in the listing or in the index: never indexed, removed from an index that held them. */
  readonly refused: number;
  /** The refused keys, sorted. */
  readonly refusedKeys: string[];
  /** Why the layout needed a write although its entries were true (an unfinished publish, an orphan shard, a manifest to rebuild). */
  readonly pending?: string;
  /** Why the scope was left as it is (a manifest that does not parse and does not say its layout); the heal could not be made. */
  readonly held?: string;
  /** Partitions whose dual-write mirror file differed from the monolith (a scoped pull would have missed or 404ed on entries), sorted. */
  readonly staleMirrors: string[];
  /** Mirror partition files (dual-write) that could not be refreshed. */
  readonly mirrorFailures: number;
  /** Entries in the index after the heal, as last read when another writer healed it first (for `check`, what it would have). */
  readonly entries: number;
  readonly published: boolean;
  readonly conflicts: number;
  readonly lockWaits: number;
  readonly keptCopy?: string;
  readonly conditional: boolean;
  readonly publishMs: number;
  /** The healed index, when it was published. */
  readonly index?: DatastoreIndex;
}

/** What a heal of a root did. */
export interface HealReport {
  readonly root: DatastoreRoot;
  readonly scopes: ScopeReport[];
  readonly objectsSeen: number;
  readonly listingMs: number;
  /** Set when the root (or namespace) holds no object at all, not even an index (most likely a mistyped prefix): what to do. */
  readonly empty?: string;
}

/** Pages the default lister of a heal by partitions buffers ahead of it. */
export const PARTITION_WINDOW = 32;

/** What to do about a prefix that holds no object at all, said alike by every command. */
const EMPTY_HINT = 'Check the bucket and --prefix; pass --allow-empty to create an empty index anyway';

/**
 * Heals (or checks) every index of a root from one listing. A shard-first scope whose layout is whole (see
 * `shardBaseFor`) is healed partition by partition while it is listed (`healWhileListing`); any other
 * scope, and a shard-first one with an unfinished publish, orphans, missing files or a bad manifest, is
 * read whole and healed after the listing.
 */
export async function healRoot(store: S3Store, root: DatastoreRoot, options: HealOptions): Promise<HealReport> {
  const base = rootBase(root) + (options.namespace ? `${checkNamespaceName(options.namespace)}/` : '');
  const target: IndexScope = options.namespace ? { root, namespace: options.namespace } : { root };
  if (options.listing) {
    const guard = new MemoryGuard(memoryBudget(options.memoryBudget));
    guard.listing(describeScope(target), options.listing.objectsSeen);
    return healListed(store, root, target, base, options.listing, options, guard);
  }
  // The listing starts while the layout is read, a round trip sooner; a heal by partitions then narrows
  // the default lister's window, before it can have buffered more than a round of pages.
  let window = Number.POSITIVE_INFINITY;
  // A heal keeps no listed ETag: they are not read.
  const listing = startListing(options.lister ?? parallelLister({ window: () => window, etags: false }), store, base);
  try {
    const shards = await shardBaseFor(store, target);
    if (!shards) return await healWhole(store, root, target, base, listing, options);
    window = PARTITION_WINDOW;
    const listed = await healWhileListing(
      store,
      target,
      shards,
      { base, pages: listing.pages, startedAt: listing.startedAt, namespaces: !options.namespace },
      options,
    );
    const scopes = [listed.report];
    for (const [ns, objects] of [...listed.namespaces].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      scopes.push(await healScope(store, { root, namespace: ns }, objects, listed.shardPartitions.get(ns), listed.startedAt, options));
    }
    return { root, scopes, objectsSeen: listed.objectsSeen, listingMs: listed.listingMs };
  } finally {
    await listing.stop();
  }
}

/** A listing begun now, its first page asked at once. */
interface StartedListing {
  readonly pages: AsyncIterable<ListPage>;
  readonly startedAt: number;
  /** Ends the listing, if its pages were not all taken; waits for its requests in flight. */
  stop(): Promise<void>;
}

function startListing(lister: Lister, store: S3Store, base: string): StartedListing {
  const startedAt = Date.now();
  const iterator = lister(store, base)[Symbol.asyncIterator]();
  const first = iterator.next();
  first.catch(() => undefined);
  return {
    startedAt,
    pages: {
      async *[Symbol.asyncIterator]() {
        for (let next = await first; !next.done; next = await iterator.next()) yield next.value;
      },
    },
    stop: async () => {
      await iterator.return?.(undefined);
    },
  };
}

/** The heal of a root whose own scope is not healed by partitions: the listing is held whole, then every scope is healed. */
async function healWhole(
  store: S3Store,
  root: DatastoreRoot,
  target: IndexScope,
  base: string,
  listing: StartedListing,
  options: HealOptions,
): Promise<HealReport> {
  // The index of the scope known up front is read while the listing runs, not after it: a round trip less.
  const early = readLiveIndex(store, target);
  early.catch(() => undefined);
  // The listing is held whole until every scope is healed: stop as soon as it could not fit.
  const guard = new MemoryGuard(memoryBudget(options.memoryBudget));
  const listedName = describeScope(target);
  const guarded: Lister = async function* () {
    for await (const page of listing.pages) {
      guard.page(listedName, base, page.objects);
      yield page;
    }
  };
  const listed = await listScopes(store, base, guarded, options.onListed, listing.startedAt);
  return healListed(store, root, target, base, listed, options, guard, early);
}

/** Heals every scope of a listing of the root (or of the namespace healed) as a whole index. */
async function healListed(
  store: S3Store,
  root: DatastoreRoot,
  target: IndexScope,
  base: string,
  listing: ScopedListing,
  options: HealOptions,
  guard: MemoryGuard,
  early?: Promise<LiveIndex>,
): Promise<HealReport> {
  // A prefix without a single object is most likely mistyped: check and repair give the same advice.
  const empty = listing.objectsSeen === 0 && (await holdsNothing(store, base));
  if (empty && options.refuseEmpty && options.mode === 'repair') {
    throw new EmptyDatastoreError(`s3://${store.bucket}/${base} holds no object at all; no index was created there`, EMPTY_HINT);
  }
  const advice = empty ? `s3://${store.bucket}/${base} holds no object at all. ${EMPTY_HINT}` : undefined;
  const scopes: ScopeReport[] = [];
  if (options.namespace) {
    // Listed from inside the namespace, so its objects sit in the listing's root scope.
    scopes.push(await healListedScope(store, target, listing, '', options, early, guard));
  } else {
    // A scope too large to heal is skipped for the others' sake, then reported.
    let tooLarge: IndexTooLargeError | undefined;
    for (const ns of [...listing.scopes.keys()].sort()) {
      if (ns && options.skipNamespace?.(ns)) continue;
      const scope: IndexScope = ns ? { root, namespace: ns } : { root };
      try {
        scopes.push(await healListedScope(store, scope, listing, ns, options, ns ? undefined : early, guard));
      } catch (err) {
        if (!(err instanceof IndexTooLargeError)) throw err;
        tooLarge ??= err;
      }
    }
    if (tooLarge) throw tooLarge;
  }
  return { root, scopes, objectsSeen: listing.objectsSeen, listingMs: listing.listingMs, ...(advice ? { empty: advice } : {}) };
}

/** Heals one scope of a listing made already: by partitions when it is a whole shard-first scope (see `healRoot`). */
async function healListedScope(
  store: S3Store,
  scope: IndexScope,
  listing: ScopedListing,
  ns: string,
  options: HealOptions,
  early: Promise<LiveIndex> | undefined,
  guard: MemoryGuard,
): Promise<ScopeReport> {
  const objects = listing.scopes.get(ns)!;
  const shards = options.listing ? await shardBaseFor(store, scope) : undefined;
  if (!shards) return healScope(store, scope, objects, listing.shardPartitions.get(ns), listing.startedAt, options, early, guard);
  const source = { base: '', pages: pagesInKeyOrder(objects), startedAt: listing.startedAt, namespaces: false };
  return (await healWhileListing(store, scope, shards, source, options)).report;
}

/** Confirms with one plain ListObjectsV2 request that `base` holds nothing (a missing bucket throws `BucketNotFoundError` here). */
async function holdsNothing(store: S3Store, base: string): Promise<boolean> {
  for await (const page of store.listPages({ prefix: base, maxKeys: 1 })) return page.objects.length === 0;
  return true;
}

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
    const stillThere = new Set<string>();
    const sizeConfirmed = new Set<string>();
    await mapLimit([...doubtful, ...unindexed], concurrency, async (key) => {
      if (await store.head(base + key)) stillThere.add(key);
    });
    await mapLimit(doubtfulSize, concurrency, async ({ key, indexSize }) => {
      if ((await store.head(base + key))?.size === indexSize) sizeConfirmed.add(key);
    });
    const gone = new Set(unindexed.filter((k) => !stillThere.has(k)));
    let missing = gone.size ? raw.missing.filter((k) => !gone.has(k)) : raw.missing;
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
