/** The full heal of a datastore root: list once, diff every scope's index, publish where it drifted. */
import { emptyHint, holdsNothing } from './empty-root';
import { EmptyDatastoreError, IndexTooLargeError } from './errors';
import { HealRun } from './heal-run';
import { type ScopeListing, healScope } from './heal-scope';
import { type FedListing, healWhileListing, pagesInKeyOrder } from './heal-stream';
import type { HealOptions, HealReport, ScopeReport } from './heal-types';
import { PendingHint } from './index-hint';
import { type ReadOptions, readLiveIndex, readMonolithAhead } from './layouts/read';
import { shardBaseFor } from './layouts/shard-chunk';
import type { LiveIndex } from './layouts/types';
import { type Lister, type ScopedListing, listScopes } from './list';
import { parallelLister } from './parallel-list';
import type { ListPage, S3Store, StoredObject } from './s3';
import { type DatastoreRoot, type IndexScope, describeScope } from './scope';

export type { HealMode, HealOptions, HealReport, ScopeReport } from './heal-types';
export { hasDrift, healScope } from './heal-scope';

/** Pages the default lister of a heal by partitions buffers ahead of it. */
export const PARTITION_WINDOW = 64;

/**
 * Heals (or checks) every index of a root from one listing. A shard-first scope whose layout is whole (see
 * `shardBaseFor`) is healed partition by partition while it is listed (`healWhileListing`); any other
 * scope, and a shard-first one with an unfinished publish, orphans, missing files or a bad manifest, is
 * read whole and healed after the listing.
 */
export async function healRoot(store: S3Store, root: DatastoreRoot, options: HealOptions): Promise<HealReport> {
  return heal(new HealRun(store, root, options));
}

/** The heal `run` stands for (see `healRoot`). */
export async function heal(run: HealRun): Promise<HealReport> {
  const { options, target } = run;
  if (options.listing) {
    run.guard.listing(describeScope(target), options.listing.objectsSeen);
    return healListed(run, options.listing);
  }
  // The listing starts while the layout is read, a round trip sooner; a heal by partitions then narrows
  // the default lister's window, before it can have buffered more than a round of pages.
  let window = Number.POSITIVE_INFINITY;
  // A heal keeps no listed ETag: they are not read.
  // The index a heal reads anyway tells the listing where to cut, once read (see `parallel-hint.ts`).
  const hint = new PendingHint();
  const listing = startListing(run, options.lister ?? parallelLister({ window: () => window, etags: false }), hint);
  // The monolith too is read while the layout is, a round trip before its keys can cut the listing; a
  // manifest that says shard-first stops that read at once.
  let monolith = readMonolithAhead(run.store, target);
  const dropMonolith = (): void => {
    monolith?.drop();
    monolith = undefined;
  };
  try {
    let manifest: { readonly object: StoredObject | undefined } | undefined;
    const manifestRead = (object: StoredObject | undefined, shardFirst: boolean): void => {
      manifest = { object };
      if (shardFirst) dropMonolith();
    };
    const shards = await shardBaseFor(run.store, target, manifestRead).catch((err: unknown) => {
      dropMonolith();
      throw err;
    });
    if (!shards) return await healWhole(run, listing, hint, { monolithAhead: monolith, manifest });
    dropMonolith();
    hint.none();
    window = PARTITION_WINDOW;
    const listed = await healWhileListing(run, target, shards, { base: run.base, pages: listing.pages, namespaces: !options.namespace });
    const scopes = [listed.report, ...(await healGathered(run, listed))];
    return { root: run.root, scopes, objectsSeen: listed.objectsSeen, listingMs: listed.listingMs };
  } finally {
    hint.none();
    await listing.stop();
  }
}

/** Heals, in name order, the namespaces a listing by partitions gathered inside the root (see `feedListing`). */
export async function healGathered(run: HealRun, gathered: Pick<FedListing, 'namespaces' | 'shardPartitions'>): Promise<ScopeReport[]> {
  const scopes: ScopeReport[] = [];
  for (const [ns, objects] of [...gathered.namespaces].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    scopes.push(await healScope(run, { root: run.root, namespace: ns }, { objects, shardPartitions: gathered.shardPartitions.get(ns) }));
  }
  return scopes;
}

/** A listing of the run's base begun now (when the run's listing started), its first page asked at once. */
interface StartedListing {
  readonly pages: AsyncIterable<ListPage>;
  /** Ends the listing, if its pages were not all taken; waits for its requests in flight. */
  stop(): Promise<void>;
}

function startListing(run: HealRun, lister: Lister, hint: PendingHint): StartedListing {
  const iterator = lister(run.store, run.base, hint.promise)[Symbol.asyncIterator]();
  const first = iterator.next();
  first.catch(() => undefined);
  return {
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
  run: HealRun,
  listing: StartedListing,
  hint: PendingHint,
  ahead: Pick<ReadOptions, 'monolithAhead' | 'manifest'>,
): Promise<HealReport> {
  const { store, target, base, guard } = run;
  // The index of the scope known up front is read while the listing runs, not after it: a round trip less.
  // Its bytes cut the listing before they are parsed.
  const early = readLiveIndex(store, target, { ...ahead, monolithBody: (bytes) => hint.fromBytes(bytes) });
  early.catch(() => undefined);
  hint.from(early);
  // The listing is held whole until every scope is healed: stop as soon as it could not fit.
  const listedName = describeScope(target);
  const guarded: Lister = async function* () {
    for await (const page of listing.pages) {
      guard.page(listedName, base, page.objects);
      run.options.onListedPage?.(page.objects);
      yield page;
    }
  };
  const listed = await listScopes(store, base, guarded, run.options.onListed, run.listingStartedAt);
  return healListed(run, listed, early);
}

/** Heals every scope of a listing of the root (or of the namespace healed) as a whole index. */
async function healListed(run: HealRun, listing: ScopedListing, early?: Promise<LiveIndex>): Promise<HealReport> {
  const { store, root, base, options } = run;
  // A prefix without a single object is most likely mistyped: check and repair give the same advice.
  const empty = listing.objectsSeen === 0 && (await holdsNothing(store, base));
  const hint = empty ? await emptyHint(store, base) : undefined;
  if (empty && options.refuseEmpty && options.mode === 'repair') {
    throw new EmptyDatastoreError(`s3://${store.bucket}/${base} holds no object at all; no index was created there`, hint);
  }
  const advice = empty ? `s3://${store.bucket}/${base} holds no object at all. ${hint}` : undefined;
  const scopeListing = (ns: string): ScopeListing => ({
    objects: listing.scopes.get(ns)!,
    shardPartitions: listing.shardPartitions.get(ns),
  });
  const scopes: ScopeReport[] = [];
  if (options.namespace) {
    // Listed from inside the namespace, so its objects sit in the listing's root scope.
    scopes.push(await healListedScope(run, run.target, scopeListing(''), early));
  } else {
    // A scope too large to heal is skipped for the others' sake, then reported.
    let tooLarge: IndexTooLargeError | undefined;
    for (const ns of [...listing.scopes.keys()].sort()) {
      if (ns && options.skipNamespace?.(ns)) continue;
      const scope: IndexScope = ns ? { root, namespace: ns } : { root };
      try {
        scopes.push(await healListedScope(run, scope, scopeListing(ns), ns ? undefined : early));
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
async function healListedScope(run: HealRun, scope: IndexScope, listed: ScopeListing, early?: Promise<LiveIndex>): Promise<ScopeReport> {
  const shards = run.options.listing ? await shardBaseFor(run.store, scope) : undefined;
  if (!shards) return healScope(run, scope, listed, early);
  const source = { base: '', pages: pagesInKeyOrder(listed.objects), namespaces: false };
  return (await healWhileListing(run, scope, shards, source)).report;
}
