/** Applying a delta of object changes to one index: read, then one conditional write under the datastore lock. */
import { mapLimit } from './concurrency';
import { type ApplyResult, type ObjectChange, applyChanges } from './events';
import type { DatastoreIndex } from './index-file';
import { isRefusedKey, partitionOf } from './keys';
import type { Layout, LiveIndex } from './live-index';
import { type PublishOptions, publishIndex } from './publish';
import { type IndexScope, describeScope, scopeBase } from './root';
import type { S3Store } from './s3';

/** Changes decided against the index as read (e.g. only the keys a re-check doubts); called once per read. */
export type ChangesFor = (index: DatastoreIndex) => Promise<ReadonlyMap<string, ObjectChange>>;

/** What applying a delta did to one index. */
export interface DeltaReport {
  readonly scope: string;
  readonly namespace?: string;
  /** `applied`: the index holds the delta (written, or already true). `no-index`: absent or unreadable, so nothing was written; heal it from a listing. */
  readonly status: 'applied' | 'no-index';
  readonly layout: Layout;
  /** The index's state as first read. */
  readonly indexState: LiveIndex['state'];
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
  /** Entries in the index afterwards. */
  readonly entries: number;
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
  options: PublishOptions = {},
): Promise<DeltaReport> {
  const started = Date.now();
  let missingIndex = false;
  let unshardable = 0;
  let latest: ApplyResult | undefined;
  const planned: ApplyResult[] = [];
  // A key clients refuse is never added; its removal still applies, so an index that held it loses it.
  const isRefusedCreation = ([rel, c]: [string, ObjectChange]): boolean => c.kind === 'created' && isRefusedKey(rel);
  let refusedKeys: string[] = [];
  const indexableOf = (given: ReadonlyMap<string, ObjectChange>): ReadonlyMap<string, ObjectChange> => {
    refusedKeys = [...given]
      .filter(isRefusedCreation)
      .map(([rel]) => rel)
      .sort();
    return refusedKeys.length === 0 ? given : new Map([...given].filter((change) => !isRefusedCreation(change)));
  };
  const indexable = typeof changes === 'function' ? undefined : indexableOf(changes);

  let offered = typeof changes === 'function' ? 0 : changes.size;
  const plan = async (live: LiveIndex) => {
    missingIndex = live.state !== 'valid';
    if (live.state !== 'valid' || live.hold) return undefined;
    let effective = indexable;
    if (!effective) {
      const resolved = await (changes as ChangesFor)(live.index);
      offered = resolved.size;
      effective = indexableOf(resolved);
    }
    if (live.layout === 'shard-first') {
      const shardable = new Map([...effective].filter(([rel]) => partitionOf(rel) !== undefined));
      unshardable = effective.size - shardable.size;
      effective = shardable;
    }
    // An event that would drop or resize an entry may be stale (SQS reorders and redelivers): S3 says what is
    // true now, so a late "created" of an overwritten object cannot strip the client fields of the newer entry.
    const suspects = [...effective].filter(([rel, c]) => {
      const entry = live.index.entries.get(rel);
      return entry !== undefined && (c.kind === 'removed' || entry.size !== c.size);
    });
    if (suspects.length > 0) {
      const observed = await observeKeys(
        store,
        scope,
        suspects.map(([rel]) => rel),
      );
      // Only an object S3 still holds overrides the event; an absent one leaves the event (its removal) to decide.
      effective = new Map(
        [...effective].map(([rel, c]) => {
          const now = observed.get(rel);
          return [rel, now?.kind === 'created' ? now : c];
        }),
      );
    }
    latest = applyChanges(live.index, effective);
    // Entries already true, but a layout left half way (an unfinished shard publish) is finished all the same.
    if (latest.index === live.index) return live.pending ? live.index : undefined;
    planned.push(latest);
    return latest.index;
  };

  const outcome = await publishIndex(store, scope, plan, options);
  // Counts of the write that stands (a re-check round may have re-applied what a push erased), else of the last plan.
  const counts = planned.find((p) => p.index === outcome.index) ?? latest;
  return {
    scope: describeScope(scope),
    namespace: scope.namespace,
    status: missingIndex && !outcome.published ? 'no-index' : 'applied',
    layout: outcome.before.layout,
    indexState: outcome.before.state,
    changes: offered,
    added: outcome.published ? (counts?.added ?? 0) : 0,
    removed: outcome.published ? (counts?.removed ?? 0) : 0,
    resized: outcome.published ? (counts?.resized ?? 0) : 0,
    unshardable,
    refused: refusedKeys.length,
    refusedKeys,
    entries: outcome.index?.entries.size ?? latest?.index.entries.size ?? 0,
    published: outcome.published,
    writes: outcome.writes,
    conflicts: outcome.conflicts,
    lockWaits: outcome.lockWaits,
    conditional: outcome.conditional,
    publishMs: Date.now() - started,
  };
}

/**
 * What S3 says now about some keys of a scope, as changes: a HeadObject per key, `created` with the
 * object's size and LastModified, or `removed` when it is gone. Used to re-check a delta that a client's
 * unconditional push may have erased.
 */
export async function observeKeys(
  store: S3Store,
  scope: IndexScope,
  rels: Iterable<string>,
  concurrency = 16,
): Promise<Map<string, ObjectChange>> {
  const base = scopeBase(scope);
  const observed = new Map<string, ObjectChange>();
  await mapLimit(new Set(rels), concurrency, async (rel) => {
    observed.set(rel, await observeKey(store, base + rel));
  });
  return observed;
}

/** What S3 says of one key now, as a change: `created` with its size and ETag, or `removed`. */
async function observeKey(store: S3Store, key: string): Promise<ObjectChange> {
  const info = await store.head(key);
  return info
    ? { bucket: store.bucket, key, kind: 'created', size: info.size, etag: info.etag, eventTime: info.lastModified.toISOString() }
    : { bucket: store.bucket, key, kind: 'removed', eventTime: new Date().toISOString() };
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
