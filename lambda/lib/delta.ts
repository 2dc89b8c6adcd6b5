/** Applying a delta of object changes to one index: read, then one conditional write under the datastore lock. */
import { mapLimit } from './concurrency';
import { type ApplyResult, type ObjectChange, applyChanges } from './events';
import { resizedEntry } from './drift';
import { type DatastoreIndex, type IndexEntry, cloneIndex } from './index-file';
import { isInternalKey, isRefusedKey, partitionOf } from './keys';
import type { Layout, LiveIndex } from './layouts/types';
import { type MemoryBudget, MemoryGuard, memoryBudget } from './memory';
import { observeKey, observeKeys } from './observe';
import { type Plan, type PublishOptions, type PublishRunOptions, publishIndex } from './publish';
import type { S3Store } from './s3';
import { type IndexScope, describeScope } from './scope';

/** Changes decided against an index as read, with what S3 was asked on the way (a re-check). */
export interface ResolvedChanges {
  readonly changes: ReadonlyMap<string, ObjectChange>;
  /** What S3 says now of the keys it was asked about. */
  readonly observed?: ReadonlyMap<string, ObjectChange>;
  /** The keys whose entry in that index S3 contradicted. */
  readonly contradicted?: ReadonlySet<string>;
}

/** Changes decided against the index as read (e.g. only the keys a re-check doubts); called once per read. */
export type ChangesFor = (index: DatastoreIndex) => Promise<ResolvedChanges>;

/** How to apply a delta. */
export interface DeltaOptions extends PublishOptions {
  /**
   * Keys the delta is about: their partitions' dual-write mirror files are checked and refreshed, and on a
   * shard-first scope only their partition files are read (a change outside them has the whole index read).
   * @default the keys of `changes`, when a map; with a function and none given, a shard-first scope is read whole
   */
  readonly mirrorKeys?: Iterable<string>;
  /**
   * What reading a monolith whole may hold: a larger one stops the delta with `IndexTooLargeError` before
   * it is downloaded, and nothing is written.
   * @default `memoryBudget()`: a share of the function's memory in a Lambda, else of the V8 heap
   */
  readonly memoryBudget?: number | MemoryBudget;
}

/** What a delta's plan found in one read of the index. */
interface DeltaFacts {
  /** The index was absent or unreadable (or held), so nothing was planned. */
  readonly noIndex: boolean;
  /** Changes offered for this read (one per key). */
  readonly offered: number;
  readonly unshardable: number;
  readonly refusedKeys: readonly string[];
  /** The changes as applied to this read, when it was valid. */
  readonly applied?: ApplyResult;
  readonly resolved?: ResolvedChanges;
  /** A change fell outside the partitions read, so nothing was planned: the whole index must be read. */
  readonly outsideRead?: boolean;
}

/** What applying a delta did to one index. */
export interface DeltaReport {
  readonly scope: string;
  readonly namespace?: string;
  /** `applied`: the index holds the delta (written, or already true). `no-index`: absent or unreadable, so nothing was written; heal it from a listing. */
  readonly status: 'applied' | 'no-index';
  readonly layout: Layout;
  /** The index's state as first read (`LiveIndex.state`, spelled out so the event entry need not export the read's types). */
  readonly indexState: 'absent' | 'unreadable' | 'valid';
  /** Changes offered (one per key). */
  readonly changes: number;
  readonly added: number;
  readonly removed: number;
  readonly resized: number;
  /** Changes left out because a shard-first root cannot hold their key (no partition). */
  readonly unshardable: number;
  /** Creations left out because clients refuse their key (see `refusedKeyReason`). */
  readonly refused: number;
  /** The refused keys, sorted. */
  readonly refusedKeys: string[];
  /** Entries in the index afterwards; with `partial`, in the partitions read. */
  readonly entries: number;
  /** Only the partition files of the delta's keys were read (shard-first), so `entries` is not the whole index's. */
  readonly partial: boolean;
  /** What S3 said of the keys a re-check asked about, for the plan that counts (see `ResolvedChanges`). */
  readonly observed: ReadonlyMap<string, ObjectChange>;
  /** Partitions whose dual-write mirror file differed from the monolith when first read (refreshed when published). */
  readonly staleMirrors: string[];
  /** Keys whose entry S3 contradicted, for the plan that counts. */
  readonly contradicted: ReadonlySet<string>;
  readonly published: boolean;
  readonly writes: number;
  readonly conflicts: number;
  readonly lockWaits: number;
  readonly conditional: boolean;
  readonly publishMs: number;
}

/**
 * Applies object changes (keyed by scope-relative key, one change per key, see `latestChanges`) to a
 * scope's index with `publishIndex`: nothing is written, and the lock is not taken, when the delta changes
 * nothing (duplicates, replays). An absent or unreadable index is left alone and reported as `no-index`:
 * a delta cannot make a complete index, a listing must (`healRoot`).
 *
 * @example
 * const changes = latestChanges(events, (c) => c.key.slice(scopeBase(scope).length));
 * const report = await applyDelta(store, scope, changes, { lock: { waitMs: 10_000 }, convergeRounds: 0 });
 * if (report.status === 'no-index') await healRoot(store, scope.root, { mode: 'repair', namespace: scope.namespace });
 */
export async function applyDelta(
  store: S3Store,
  scope: IndexScope,
  changes: ReadonlyMap<string, ObjectChange> | ChangesFor,
  options: DeltaOptions = {},
): Promise<DeltaReport> {
  const started = Date.now();
  // The mirror files of the partitions the delta touches are held against the monolith, even when it already holds the delta.
  const { mirrorKeys = typeof changes === 'function' ? [] : changes.keys(), memoryBudget: budget, ...rest } = options;
  const guard = new MemoryGuard(memoryBudget(budget));
  const publish: PublishRunOptions = { ...rest, monolithBytes: (bytes) => guard.indexRead(describeScope(scope), bytes) };
  const mirrors = new Set([...mirrorKeys].map(partitionOf).filter((p): p is string => p !== undefined));
  const partitions = typeof changes === 'function' && options.mirrorKeys === undefined ? undefined : mirrors;
  const given = typeof changes === 'function' ? undefined : changes;
  const resolve: ChangesFor = typeof changes === 'function' ? changes : async () => ({ changes });
  const noPlan = (live: LiveIndex): DeltaFacts => ({
    noIndex: live.state !== 'valid',
    offered: given?.size ?? 0,
    unshardable: 0,
    refusedKeys: given ? refusedCreations(given) : [],
  });
  const plan = async (live: LiveIndex): Promise<Plan<DeltaFacts>> => {
    if (live.state !== 'valid' || live.hold) return { facts: noPlan(live) };
    const resolved = await resolve(live.index);
    const refusedKeys = refusedCreations(resolved.changes);
    let effective =
      refusedKeys.length === 0 ? resolved.changes : new Map([...resolved.changes].filter(([rel]) => !refusedKeys.includes(rel)));
    let unshardable = 0;
    if (live.layout === 'shard-first') {
      const shardable = new Map([...effective].filter(([rel]) => partitionOf(rel) !== undefined));
      unshardable = effective.size - shardable.size;
      effective = shardable;
      const read = live.shards?.partial;
      if (read && [...effective.keys()].some((rel) => !read.has(partitionOf(rel)!)))
        return { facts: { ...noPlan(live), outsideRead: true } };
    }
    // An orphan file is listed by this write: what it held is read back in, as a heal adopts it, not overwritten.
    const base = await withOrphansAdopted(store, scope, live.index, live.shards?.adoptable, effective);
    effective = await withStaleEventsChecked(store, scope, base, effective, resolved.observed);
    const applied = applyChanges(base, effective);
    const facts: DeltaFacts = { noIndex: false, offered: resolved.changes.size, unshardable, refusedKeys, applied, resolved };
    // Entries already true, but a layout left half way (an unfinished shard publish) is finished all the same.
    if (applied.index === live.index) return { index: live.pending ? live.index : undefined, facts };
    return { index: applied.index, facts };
  };

  let outcome = await publishIndex(store, scope, plan, { ...publish, mirrors, partitions });
  const first = outcome;
  if (outcome.plans.some((f) => f.outsideRead)) {
    const whole = await publishIndex(store, scope, plan, { ...publish, mirrors });
    outcome = {
      ...whole,
      published: first.published || whole.published,
      writes: first.writes + whole.writes,
      conflicts: first.conflicts + whole.conflicts,
      lockWaits: first.lockWaits + whole.lockWaits,
      before: first.before,
    };
  }
  const last = outcome.plans[outcome.plans.length - 1];
  // Counts of the write that stands (a re-check round may have re-applied what a push erased), else of the last plan that applied.
  const counted = outcome.writtenFacts ?? [...outcome.plans].reverse().find((f) => f.applied) ?? last;
  const counts = outcome.published ? counted.applied : undefined;
  const offered = given?.size ?? [...outcome.plans].reverse().find((f) => f.resolved)?.offered ?? 0;
  return {
    scope: describeScope(scope),
    namespace: scope.namespace,
    status: last.noIndex && !outcome.published ? 'no-index' : 'applied',
    layout: outcome.before.layout,
    indexState: outcome.before.state,
    changes: offered,
    added: counts?.added ?? 0,
    removed: counts?.removed ?? 0,
    resized: counts?.resized ?? 0,
    unshardable: counted.unshardable,
    refused: counted.refusedKeys.length,
    refusedKeys: [...counted.refusedKeys],
    entries: outcome.index?.entries.size ?? counted.applied?.index.entries.size ?? 0,
    partial: outcome.last.shards?.partial !== undefined,
    staleMirrors: [...(outcome.before.mirror?.stale ?? [])].sort(),
    observed: counted.resolved?.observed ?? new Map(),
    contradicted: counted.resolved?.contradicted ?? new Set(),
    published: outcome.published,
    writes: outcome.writes,
    conflicts: outcome.conflicts,
    lockWaits: outcome.lockWaits,
    conditional: outcome.conditional,
    publishMs: Date.now() - started,
  };
}

/** Creations of keys clients refuse, sorted: never added (their removal still applies, so an index that held one loses it). */
function refusedCreations(changes: ReadonlyMap<string, ObjectChange>): string[] {
  return [...changes]
    .filter(([rel, c]) => c.kind === 'created' && isRefusedKey(rel))
    .map(([rel]) => rel)
    .sort();
}

/**
 * The index with the entries of orphan partition files (see `ShardState.adoptable`) whose object S3 holds:
 * of the same size, as they were (client fields kept); of another size, resized (`resizedEntry`). A key the
 * delta changes is left to its change, which applies to the orphan's entry as to any other.
 */
async function withOrphansAdopted(
  store: S3Store,
  scope: IndexScope,
  index: DatastoreIndex,
  adoptable: ReadonlyMap<string, IndexEntry> | undefined,
  changes: ReadonlyMap<string, ObjectChange>,
): Promise<DatastoreIndex> {
  // Only keys a heal would index: a file is no authority on what may be an entry.
  const orphaned = [...(adoptable ?? [])].filter(
    ([rel]) => !index.entries.has(rel) && partitionOf(rel) !== undefined && !isInternalKey(rel) && !isRefusedKey(rel),
  );
  if (orphaned.length === 0) return index;
  const observed = await observeKeys(
    store,
    scope,
    orphaned.filter(([rel]) => !changes.has(rel)).map(([rel]) => rel),
  );
  const adopted = cloneIndex(index);
  for (const [rel, entry] of orphaned) {
    if (changes.has(rel)) {
      adopted.entries.set(rel, entry);
      continue;
    }
    const now = observed.get(rel);
    if (now?.kind !== 'created') continue;
    const size = now.size ?? 0;
    adopted.entries.set(rel, entry.size === size ? entry : resizedEntry(entry, { size, lastModified: now.eventTime }));
  }
  return adopted;
}

/**
 * An event that would drop or resize an entry may be stale (SQS reorders and redelivers): S3 says what is
 * true now, so a late "created" of an overwritten object cannot strip the client fields of the newer entry.
 * Only an object S3 still holds overrides the event; an absent one leaves the event (its removal) to decide.
 */
async function withStaleEventsChecked(
  store: S3Store,
  scope: IndexScope,
  index: DatastoreIndex,
  changes: ReadonlyMap<string, ObjectChange>,
  asked?: ReadonlyMap<string, ObjectChange>,
): Promise<ReadonlyMap<string, ObjectChange>> {
  const suspects = [...changes].filter(([rel, c]) => {
    // What a re-check just asked S3 is not asked again.
    if (asked?.get(rel) === c) return false;
    const entry = index.entries.get(rel);
    return entry !== undefined && (c.kind === 'removed' || entry.size !== c.size);
  });
  if (suspects.length === 0) return changes;
  const observed = await observeKeys(
    store,
    scope,
    suspects.map(([rel]) => rel),
  );
  return new Map(
    [...changes].map(([rel, c]) => {
      const now = observed.get(rel);
      return [rel, now?.kind === 'created' ? now : c];
    }),
  );
}

/**
 * Changes for a delta that re-checks keys with S3 (see `applyDelta`): each read of the index asks S3 about
 * the keys whose entry may not say what an earlier delta wrote (`expected`: size, or null for no entry;
 * a key without an expectation is always asked), and what S3 says now overrides the events.
 */
export function recheckChanges(
  store: S3Store,
  scope: IndexScope,
  changes: ReadonlyMap<string, ObjectChange>,
  keys: ReadonlySet<string>,
  expected: ReadonlyMap<string, number | null>,
  concurrency = 16,
): ChangesFor {
  return async (index) => {
    const doubtful = [...keys].filter((key) => {
      const wanted = expected.get(key);
      return wanted === undefined || wanted !== null || index.entries.get(key) !== undefined;
    });
    const observed = await observeKeys(store, scope, doubtful, concurrency);
    const contradicted = new Set<string>();
    for (const [key, o] of observed) {
      const now = index.entries.get(key);
      if (o.kind === 'created' ? now?.size !== o.size : now !== undefined) contradicted.add(key);
    }
    return { changes: new Map([...changes, ...observed]), observed, contradicted };
  };
}

/**
 * Settles changes whose key has two readings (`otherReading`: an EventBridge key taken as sent, and its
 * URL-decoded reading). One HeadObject of the key as sent decides when that object exists; only when it
 * does not is the other reading asked (if `accept` takes it). Each settled change says what S3 says now,
 * so no entry is ever made for a key that does not exist. Changes with one reading pass through.
 */
export async function settleKeyReadings(
  store: S3Store,
  changes: readonly ObjectChange[],
  accept: (otherReading: string, asSent: string) => boolean = () => true,
  concurrency = 16,
): Promise<ObjectChange[]> {
  const settled: ObjectChange[] = changes.filter((c) => c.otherReading === undefined);
  await mapLimit(
    changes.filter((c) => c.otherReading !== undefined),
    concurrency,
    async (change) => {
      const asSent = await observeKey(store, change.key);
      settled.push(asSent);
      if (asSent.kind === 'removed' && accept(change.otherReading!, change.key))
        settled.push(await observeKey(store, change.otherReading!));
    },
  );
  return settled;
}
