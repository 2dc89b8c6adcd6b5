/** Publishing an index safely: under the datastore lock, with conditional writes, re-checked until it holds. */
import { PublishConflictError } from './errors';
import type { DatastoreIndex } from './index-file';
import { INDEXER_DIR, LOCK_KEY, indexerScopeFolder } from './keys';
import { type IndexWriteResult, type KnownIndex, type LiveIndex, type UnreadablePart, readLiveIndex, writeIndex } from './live-index';
import { type LockOptions, withLock } from './lock';
import { type IndexScope, rootBase, scopeBase } from './root';
import { ConditionalWritesUnsupportedError, type S3Store } from './s3';

/** Decides the index a scope should have given what is live; undefined means "nothing to change". */
export type Planner = (live: LiveIndex) => Promise<DatastoreIndex | undefined>;

/** Structured events a caller may log. */
export type PublishEvent =
  | { readonly event: 'conflict'; readonly attempt: number; readonly key: string }
  | { readonly event: 'lock-wait'; readonly holder: string; readonly waitedMs: number }
  | { readonly event: 'conditional-writes-unsupported' }
  | { readonly event: 'kept-unreadable-copy'; readonly copyKey: string; readonly reason: string }
  | { readonly event: 'erased'; readonly round: number }
  | { readonly event: 'mirror-failed'; readonly key: string; readonly error: string }
  | { readonly event: 'held'; readonly reason: string };

/** How to publish. */
export interface PublishOptions {
  readonly lock?: LockOptions;
  /** Conditional write attempts before giving up. @default 6 */
  readonly maxAttempts?: number;
  /** Re-checks after a write, re-applying what a racing writer erased; 0 stops at the write. @default 2 */
  readonly convergeRounds?: number;
  /** Partition files a listing saw under `_index/`: orphans to adopt on a shard-first scope, mirror files beside a monolith. */
  readonly shardPartitions?: readonly string[];
  /** The live index as read already (e.g. while the scope was listed): the first read, not sent again. */
  readonly before?: Promise<LiveIndex>;
  readonly onEvent?: (event: PublishEvent) => void;
}

/** What a publish did. */
export interface PublishOutcome {
  /** True when the index was written at least once. */
  readonly published: boolean;
  /** Index writes made (a conflict is not a write). */
  readonly writes: number;
  /** Conditional writes that lost a race (412). */
  readonly conflicts: number;
  readonly lockWaits: number;
  /** Where the bytes of an unreadable index were kept before it was replaced. */
  readonly keptCopy?: string;
  /** False when the store rejected conditional writes and only the lock protected the write. */
  readonly conditional: boolean;
  /** The live index as it was first read. */
  readonly before: LiveIndex;
  /** The live index as last read: another writer's, when it healed the index first. */
  readonly last: LiveIndex;
  /** The index as written last, when written. */
  readonly index?: DatastoreIndex;
  /** Mirror partition files (or version-1 manifests) that could not be refreshed. */
  readonly mirrorFailures: number;
}

/** True when two reads found the same index version: both absent, or the same single object with the same ETag. */
function sameVersion(a: LiveIndex, b: LiveIndex): boolean {
  if (a.layout !== 'monolith' || b.layout !== 'monolith' || a.state !== b.state) return false;
  if (a.state === 'absent') return true;
  return a.state === 'valid' && b.state === 'valid' && a.etag !== undefined && a.etag === b.etag;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function jitter(attempt: number): number {
  const cap = Math.min(2000, 50 * 2 ** attempt);
  return cap / 2 + Math.random() * (cap / 2);
}

/** Reads a scope's monolith again, conditionally on the version `live` holds; a failure surfaces only where the read is used. */
function rereadAlongside(store: S3Store, scope: IndexScope, live: LiveIndex, shardPartitions?: readonly string[]): Promise<LiveIndex> {
  const known = live.state === 'valid' && live.etag ? { etag: live.etag, index: live.index } : undefined;
  const read = readLiveIndex(store, scope, shardPartitions, known);
  read.catch(() => undefined);
  return read;
}

/** Key in the root's `_control/datastore-indexer/unreadable/<root | ns/<ns>>/` where an unreadable index object is kept before it is replaced. */
export function unreadableCopyKey(scope: IndexScope, sourceKey: string, now = new Date()): string {
  const name = sourceKey.slice(scopeBase(scope).length).replace(/\//g, '~');
  const folder = `${rootBase(scope.root)}${INDEXER_DIR}unreadable/${indexerScopeFolder(scope.namespace)}/`;
  return `${folder}${now.toISOString().replace(/[:.]/g, '-')}-${name}`;
}

/** Key of the one copy kept of a held object's version (see `LiveIndex.hold`), beside the other unreadable copies. */
export function heldCopyKey(scope: IndexScope, part: UnreadablePart): string {
  return unreadableCopyKey(scope, part.key).replace(
    /[^/]*$/,
    `held-${part.etag}-${part.key.slice(scopeBase(scope).length).replace(/\//g, '~')}`,
  );
}

/** The objects of a live index that do not parse and of which a copy is kept before anything replaces them. */
function unreadablePartsOf(live: LiveIndex): UnreadablePart[] {
  const parts = live.state === 'unreadable' ? [...live.parts] : [];
  if (live.badManifest && !parts.some((p) => p.etag === live.badManifest!.etag && p.key === live.badManifest!.key))
    parts.unshift(live.badManifest);
  return parts;
}

/**
 * Publishes what `plan` decides: reads the live index, and only when something must change takes the
 * root's lock, re-reads, re-plans and writes with `If-Match`/`If-None-Match`, retrying lost races;
 * afterwards re-reads and re-applies whatever a client's unconditional push erased.
 */
export async function publishIndex(
  store: S3Store,
  scope: IndexScope,
  plan: Planner,
  options: PublishOptions = {},
): Promise<PublishOutcome> {
  const maxAttempts = options.maxAttempts ?? 6;
  const rounds = options.convergeRounds ?? 2;
  const emit = options.onEvent ?? (() => undefined);
  const before = await (options.before ?? readLiveIndex(store, scope, options.shardPartitions));
  let live = before;
  let next = await plan(live);
  let keptCopy: string | undefined;
  const keptEtags = new Set<string>();
  const keepCopies = async (of: LiveIndex): Promise<void> => {
    for (const part of unreadablePartsOf(of)) {
      if (keptEtags.has(part.etag)) continue;
      // What is held stays in place and every run meets it again: one copy per version, named by its ETag.
      const copyKey = of.hold ? heldCopyKey(scope, part) : unreadableCopyKey(scope, part.key);
      await store.put(copyKey, part.bytes, of.hold ? { ifNoneMatch: '*' } : undefined, 'application/octet-stream').catch((err: unknown) => {
        if (!(err instanceof ConditionalWritesUnsupportedError)) throw err;
        return store.put(copyKey, part.bytes, undefined, 'application/octet-stream');
      });
      keptEtags.add(part.etag);
      keptCopy ??= copyKey;
      emit({ event: 'kept-unreadable-copy', copyKey, reason: part.reason });
    }
  };
  let mirrorFailures = 0;
  if (before.hold) {
    // Unsure what the scope was: a copy of what does not parse (when a write was wanted), a report, nothing rewritten.
    if (next) await keepCopies(before);
    emit({ event: 'held', reason: before.hold });
    return { published: false, writes: 0, conflicts: 0, lockWaits: 0, keptCopy, conditional: true, before, last: before, mirrorFailures };
  }
  // The last plan and the index version it was made for: re-read unchanged under the lock, it stands.
  let planned: { readonly live: LiveIndex; readonly next: DatastoreIndex | undefined } | undefined = { live, next };
  let known: KnownIndex | undefined;
  let writes = 0;
  let conflicts = 0;
  let lockWaits = 0;
  let conditional = true;
  let written: DatastoreIndex | undefined;
  const lockOptions: LockOptions = {
    ...options.lock,
    onWait: (holder, waitedMs) => {
      lockWaits++;
      emit({ event: 'lock-wait', holder, waitedMs });
      options.lock?.onWait?.(holder, waitedMs);
    },
    onUnsupported: () => {
      conditional = false;
      emit({ event: 'conditional-writes-unsupported' });
    },
  };

  for (let round = 0; next && round <= rounds; round++) {
    if (round > 0) emit({ event: 'erased', round });
    // With conditional writes a monolith is re-read while the lock is taken, not after: the write's condition
    // refuses any version but the one read, and an unchanged one is not downloaded again (If-None-Match).
    let recheck: Promise<LiveIndex> | undefined;
    let early =
      conditional && planned?.live.layout === 'monolith' ? rereadAlongside(store, scope, planned.live, options.shardPartitions) : undefined;
    await withLock(store, rootBase(scope.root) + LOCK_KEY, lockOptions, async (lock) => {
      for (let attempt = 0; ; attempt++) {
        // Re-read under the lock: what was read before it may already be out of date. The read made while
        // taking it stands unless the lock had to be waited for or turned out to be the only protection.
        const alongside = early;
        early = undefined;
        const reread = alongside && conditional && lock.waits === 0 ? await alongside : undefined;
        live = reread?.layout === 'monolith' ? reread : await readLiveIndex(store, scope, options.shardPartitions);
        next = planned && sameVersion(planned.live, live) ? planned.next : await plan(live);
        planned = undefined;
        if (!next) return;
        if (live.hold) {
          await keepCopies(live);
          emit({ event: 'held', reason: live.hold });
          next = undefined;
          return;
        }
        if (lock.lost) throw new PublishConflictError(`Lost the datastore lock ${lock.key} while publishing`, 'Retry the run');
        await keepCopies(live);
        const index = next;
        const hooks = {
          onMonolithWritten: (etag: string): void => {
            known = { etag, index };
          },
          onMirrorFailed: ({ key, error }: { key: string; error: string }): void => {
            mirrorFailures++;
            emit({ event: 'mirror-failed', key, error });
          },
        };
        let result: IndexWriteResult;
        try {
          result = await writeIndex(store, scope, live, index, conditional, hooks);
        } catch (err) {
          if (!(err instanceof ConditionalWritesUnsupportedError)) throw err;
          conditional = false;
          emit({ event: 'conditional-writes-unsupported' });
          result = await writeIndex(store, scope, live, index, false, hooks);
        }
        if (result.status === 'written') {
          writes++;
          written = next;
          // The re-check's read goes out with the lock's release, not after it.
          if (round < rounds) {
            recheck = readLiveIndex(store, scope, options.shardPartitions, known);
            recheck.catch(() => undefined);
          }
          return;
        }
        conflicts++;
        emit({ event: 'conflict', attempt, key: result.key });
        if (attempt + 1 >= maxAttempts) {
          throw new PublishConflictError(
            `The index object s3://${store.bucket}/${result.key} kept changing under the datastore lock: ${conflicts} conditional writes lost their race`,
            'A writer that does not take the datastore lock is rewriting it; find it (S3 server access logs name it) and retry later',
          );
        }
        await sleep(jitter(attempt));
      }
    });
    // With no re-check rounds left (or none asked for, e.g. when a delayed re-check follows), stop at the write.
    if (!written || round >= rounds) break;
    // Re-check: a client's push is unconditional and may have erased our write; re-plan on what is there now.
    // Still exactly our write (same ETag), it is not parsed again and needs no new plan.
    live = await (recheck ?? readLiveIndex(store, scope, options.shardPartitions, known));
    next = live.state === 'valid' && known && live.index === known.index ? undefined : await plan(live);
    planned = { live, next };
    known = undefined;
  }
  return { published: writes > 0, writes, conflicts, lockWaits, keptCopy, conditional, before, last: live, index: written, mirrorFailures };
}
