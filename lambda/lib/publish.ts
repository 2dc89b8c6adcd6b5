/** Publishing an index safely: under the datastore lock, with conditional writes, re-checked until it holds. */
import { sleep } from './concurrency';
import { ConditionalWritesUnsupportedError, PublishConflictError } from './errors';
import { type DatastoreIndex, EarlyBody } from './index-file';
import { readLiveIndex } from './layouts/read';
import type { IndexWriteResult, KnownIndex, LiveIndex, WriteOptions } from './layouts/types';
import { writeIndex } from './layouts/write';
import { CLIENT_TURN, DatastoreLock, type LockOptions, withLock } from './lock';
import type { Plan, Planner, PublishEvent, PublishOutcome, PublishRunOptions } from './publish-types';
import { heldCopyKey, lockKeyOf, manifestKeyOf, publishRecordKey, unreadableCopyKey } from './names';
import type { S3Store } from './s3';
import type { IndexScope } from './scope';
import { knownOf, monolithIndexed, sameVersion, standsBeforeLock, unreadablePartsOf } from './publish-versions';

export type { Plan, Planner, PublishEvent, PublishOptions, PublishOutcome, PublishRunOptions } from './publish-types';

/** A plan and the version of the index it was made for: re-read unchanged under the lock, it stands. */
interface Planned<F> {
  readonly live: LiveIndex;
  readonly plan: Plan<F>;
}

/** Reads of a version planned on, sent as the lock is taken: they are answered with it. */
interface LockReads {
  readonly alongside?: Promise<LiveIndex>;
  readonly record?: Promise<boolean>;
}

/** The first try of an attempt: the plan it was given, and reads sent as the lock is taken. */
interface Opening<F> extends LockReads {
  readonly planned: Planned<F>;
  /** The planned monolith's bytes, made while the lock is taken rather than after it. */
  readonly body?: EarlyBody;
}

/** The lock taken while the first plan was still being made (see `Planner`), and the reads sent with it. */
interface Ahead {
  readonly live: LiveIndex;
  readonly lock: Promise<DatastoreLock>;
  readonly reads: LockReads;
}

/** How one attempt under the lock ended. */
type Attempt<F> =
  | {
      readonly status: 'written';
      readonly live: LiveIndex;
      readonly plan: Plan<F>;
      readonly known?: KnownIndex;
      readonly recheck?: Promise<LiveIndex>;
    }
  | { readonly status: 'settled'; readonly live: LiveIndex };

function jitter(attempt: number): number {
  const cap = Math.min(2000, 50 * 2 ** attempt);
  return cap / 2 + Math.random() * (cap / 2);
}

/**
 * One publish of one scope: the counters and settings its attempts share (whether conditional writes
 * work, the copies kept, the plans made). Each attempt returns what it did.
 */
class Publication<F> {
  writes = 0;
  conflicts = 0;
  lockWaits = 0;
  mirrorFailures = 0;
  conditional = true;
  keptCopy?: string;
  readonly plans: F[] = [];
  /** Set after a lost race: what was planned on a part of the index is planned again on the whole. */
  private whole = false;
  /** The publish record this publication wrote, left behind by a lost race until a later attempt ends it. */
  private ownRecord?: string;
  private readonly keptEtags = new Set<string>();
  private ahead?: Ahead;
  private readonly emit: (event: PublishEvent) => void;
  private readonly lockOptions: LockOptions;

  constructor(
    private readonly store: S3Store,
    private readonly scope: IndexScope,
    private readonly planner: Planner<F>,
    private readonly options: PublishRunOptions,
  ) {
    this.emit = options.onEvent ?? (() => undefined);
    this.lockOptions = {
      ...options.lock,
      onWait: (holder, waitedMs) => {
        this.lockWaits++;
        this.emit({ event: 'lock-wait', holder, waitedMs });
        options.lock?.onWait?.(holder, waitedMs);
      },
      onUnsupported: () => this.noConditionalWrites(),
    };
  }

  read(known?: KnownIndex): Promise<LiveIndex> {
    if (this.options.read) return this.options.read(known);
    const { shardPartitions, mirrors, monolithBytes } = this.options;
    const partitions = this.whole ? undefined : this.options.partitions;
    return readLiveIndex(this.store, this.scope, { shardPartitions, mirrors, known, partitions, monolithBytes });
  }

  /** A read sent now and used later; a failure surfaces only where it is awaited. */
  readAhead(known?: KnownIndex): Promise<LiveIndex> {
    const read = this.read(known);
    read.catch(() => undefined);
    return read;
  }

  /** Plans on `live`; `first`: the publish's first plan, whose planner may have the lock taken before it ends. */
  async plan(live: LiveIndex, first = false): Promise<Planned<F>> {
    const willWrite = first && !live.hold ? () => this.takeAhead(live) : undefined;
    const plan = await this.planner(live, willWrite);
    this.plans.push(plan.facts);
    return { live, plan };
  }

  /** Sends the take of the lock, and the reads that go with it, before the first plan ends. */
  private takeAhead(live: LiveIndex): void {
    if (this.ahead) return;
    const lock = DatastoreLock.acquire(this.store, lockKeyOf(this.scope.root), this.lockOptions);
    lock.catch(() => undefined);
    this.ahead = { live, lock, reads: this.lockReads(live) };
  }

  /** Gives back a lock taken ahead that no write will use: the plan failed, or has nothing to write. */
  async dropAhead(): Promise<void> {
    const lock = this.ahead?.lock;
    this.ahead = undefined;
    await lock?.then((held) => held.release()).catch(() => undefined);
  }

  /** Keeps a copy of every unreadable object of `live` not kept yet in this publish. */
  async keepCopies(live: LiveIndex): Promise<void> {
    for (const part of unreadablePartsOf(live)) {
      if (this.keptEtags.has(part.etag)) continue;
      // What is held stays in place and every run meets it again: one copy per version, named by its ETag.
      const copyKey = live.hold ? heldCopyKey(this.scope, part.key, part.etag) : unreadableCopyKey(this.scope, part.key);
      const body = part.bytes;
      await this.store
        .put(copyKey, body, live.hold ? { ifNoneMatch: '*' } : undefined, 'application/octet-stream')
        .catch((err: unknown) => {
          if (!(err instanceof ConditionalWritesUnsupportedError)) throw err;
          return this.store.put(copyKey, body, undefined, 'application/octet-stream');
        });
      this.keptEtags.add(part.etag);
      this.keptCopy ??= copyKey;
      this.emit({ event: 'kept-unreadable-copy', copyKey, reason: part.reason });
    }
  }

  /** Reports a hold, nothing rewritten; `keepCopy` when a write was wanted: a copy of what does not parse is kept first. */
  async hold(live: LiveIndex, keepCopy: boolean): Promise<void> {
    if (keepCopy) await this.keepCopies(live);
    this.emit({ event: 'held', reason: live.hold ?? '' });
  }

  noConditionalWrites(): void {
    this.conditional = false;
    this.emit({ event: 'conditional-writes-unsupported' });
  }

  /**
   * Takes the lock, re-reads, re-plans (unless the version planned for is still there) and writes with a
   * condition on what was read; a lost race is tried again under a lock taken anew. `readAgain` asks for
   * the re-check's read to go out with the lock's release.
   */
  async attempt(first: Planned<F>, readAgain: boolean): Promise<Attempt<F>> {
    let planned = first;
    let opening: Opening<F> | undefined = this.opening(planned);
    for (let attempt = 0; ; attempt++) {
      const taken = this.ahead?.lock;
      this.ahead = undefined;
      // Each try holds the lock for itself alone: the race was lost to a writer that does not take the lock,
      // so waiting out the next try under it would only keep out the clients that do.
      const tried = await withLock(
        this.store,
        lockKeyOf(this.scope.root),
        this.lockOptions,
        (lock) => this.tryOnce(lock, opening, readAgain),
        taken,
      );
      opening = undefined;
      if (tried.status !== 'conflict') return tried;
      this.conflicts++;
      this.whole = true;
      this.emit({ event: 'conflict', attempt, key: tried.key });
      if (attempt + 1 >= (this.options.maxAttempts ?? 6)) {
        throw new PublishConflictError(
          `The index object s3://${this.store.bucket}/${tried.key} kept changing under the datastore lock: ${this.conflicts} conditional writes lost their race`,
          'Other writers keep changing it (current swamp clients push without the lock through the serve handler, each write merging theirs): retry later; if it persists, S3 server access logs name the writer',
        );
      }
      // A client waiting for the lock takes its turn meanwhile; what is read after the wait is then as
      // fresh as it can be when the lock is taken again.
      await sleep(Math.max(jitter(attempt), CLIENT_TURN.ms));
      // Where a read before the lock stands (see `rereadUnderLock`), the next try reads and plans before it
      // takes the lock, as the first did: the write is conditioned on that read, so the lock is held for
      // the write, not for a whole read and plan.
      if (!this.retryStandsBeforeLock(planned.live)) continue;
      const live = await this.read();
      planned = await this.plan(live);
      if (!planned.plan.index || live.hold) return this.settle(live, planned.plan.index !== undefined);
      opening = this.opening(planned);
    }
  }

  /**
   * Whether a retry's read, made whole (see `whole`), stands before the lock: on a monolith, or where the
   * caller's own read (a heal's chunk) stays partial.
   */
  private retryStandsBeforeLock(last: LiveIndex): boolean {
    return monolithIndexed(last) || (this.options.read !== undefined && last.shards?.partial !== undefined);
  }

  /** Ends an attempt that has nothing to write: an index that needs nothing, or one held (a copy kept of what does not parse). */
  private async settle(live: LiveIndex, wanted: boolean): Promise<Attempt<F>> {
    if (wanted && live.hold) await this.hold(live, true);
    return { status: 'settled', live };
  }

  /** What the first try under the lock starts from: the plan made, and the reads sent while the lock is taken. */
  private opening(planned: Planned<F>): Opening<F> {
    const reads = this.ahead?.live === planned.live ? this.ahead.reads : this.lockReads(planned.live);
    const index = planned.plan.index;
    const body = index && planned.live.layout !== 'shard-first' ? new EarlyBody(index) : undefined;
    return { planned, ...reads, body };
  }

  /** The reads sent with the take of the lock, for a plan made on `live`. */
  private lockReads(live: LiveIndex): LockReads {
    // With conditional writes a monolith is re-read while the lock is taken, not after: the write's condition
    // refuses any version but the one read, and an unchanged one is not downloaded again (If-None-Match).
    const monolith = this.conditional && monolithIndexed(live) ? this.readAhead(knownOf(live)) : undefined;
    // A partial shard-first read stands: its write is conditioned on every ETag read, the manifest's too.
    const alongside = this.conditional && live.shards?.partial ? Promise.resolve(live) : monolith;
    // The publish record a partial read left unasked is asked while the lock is taken: only a write needs it.
    const record = live.shards?.recordUnread ? this.askRecord() : undefined;
    return { alongside, record };
  }

  /** One read-plan-write under the lock; after a lost race (`conflict`) the caller tries again with no opening. */
  private async tryOnce(
    lock: DatastoreLock,
    opening: Opening<F> | undefined,
    readAgain: boolean,
  ): Promise<Attempt<F> | { readonly status: 'conflict'; readonly key: string }> {
    const reread = await this.rereadUnderLock(lock, opening?.alongside);
    const live = reread.shards?.recordUnread ? await this.withRecordAsked(reread, opening) : reread;
    const current = opening && sameVersion(opening.planned.live, live) ? { live, plan: opening.planned.plan } : await this.plan(live);
    if (!current.plan.index || live.hold) return this.settle(live, current.plan.index !== undefined);
    if (lock.lost) throw new PublishConflictError(`Lost the datastore lock ${lock.key} while publishing`, 'Retry the run');
    await this.keepCopies(live);
    const written = await this.write(live, current.plan.index, opening?.body);
    if (written.status === 'conflict') return written;
    this.writes++;
    return {
      status: 'written',
      live,
      plan: current.plan,
      known: written.known,
      recheck: readAgain ? this.readAhead(written.known) : undefined,
    };
  }

  /** A partial read whose publish record was not asked: it stands when there is none; an earlier publish's needs a read of every file. */
  private async withRecordAsked(live: LiveIndex, opening: Opening<F> | undefined): Promise<LiveIndex> {
    const found = await ((live === opening?.planned.live ? opening.record : undefined) ?? this.askRecord());
    if (!found) return live;
    this.whole = true;
    return this.read();
  }

  /** Whether the scope's publish record exists, asked now and awaited later; a failure surfaces only where it is awaited. */
  private askRecord(): Promise<boolean> {
    const asked = this.store.head(publishRecordKey(this.scope)).then((found) => found !== undefined);
    asked.catch(() => undefined);
    return asked;
  }

  /** The read made while the lock was taken stands unless the lock had to be waited for or turned out to be the only protection. */
  private async rereadUnderLock(lock: DatastoreLock, alongside: Promise<LiveIndex> | undefined): Promise<LiveIndex> {
    const reread = alongside && this.conditional && lock.waits === 0 ? await alongside : undefined;
    return reread && standsBeforeLock(reread) ? reread : this.read();
  }

  /** Writes `index` in the scope's layout, conditionally unless the store turns out not to support it. */
  private async write(
    live: LiveIndex,
    index: DatastoreIndex,
    body?: EarlyBody,
  ): Promise<{ readonly status: 'written'; readonly known?: KnownIndex } | { readonly status: 'conflict'; readonly key: string }> {
    const beforeRecord = this.options.beforeRecord;
    const options: WriteOptions = {
      beforeRecord: beforeRecord && ((earlier?: boolean) => beforeRecord(this.scope, earlier)),
      ownRecord: this.ownRecord,
      body,
    };
    let result: IndexWriteResult;
    try {
      result = await writeIndex(this.store, this.scope, live, index, this.conditional, options);
    } catch (err) {
      if (!(err instanceof ConditionalWritesUnsupportedError)) throw err;
      this.noConditionalWrites();
      // Read before the lock was taken: only a read under the lock may be written without conditions.
      if (live.shards?.partial) return { status: 'conflict', key: manifestKeyOf(this.scope) };
      result = await writeIndex(this.store, this.scope, live, index, false, options);
    }
    this.ownRecord = result.record ?? this.ownRecord;
    for (const { key, error } of result.mirrorFailures) {
      this.mirrorFailures++;
      this.emit({ event: 'mirror-failed', key, error });
    }
    if (result.status === 'conflict') return result;
    // The version written, so that a re-check finding it unchanged neither downloads nor plans it again.
    if (result.shardEtags) {
      return { status: 'written', known: { index, shardEtags: result.shardEtags, shardEntries: result.shardEntries } };
    }
    return { status: 'written', known: result.monolithEtag ? { etag: result.monolithEtag, index } : undefined };
  }

  erased(round: number): void {
    this.emit({ event: 'erased', round });
  }
}

/**
 * Publishes what `planner` decides: reads the live index, and only when something must change takes the
 * root's lock, re-reads, re-plans and writes with `If-Match`/`If-None-Match`, retrying lost races;
 * afterwards re-reads and re-applies whatever a client's unconditional push erased.
 *
 * @param store the bucket's S3 seam
 * @param scope the index to publish
 * @param planner decides the index from what is live, and returns what it found
 * @param options lock, attempts, re-check rounds and events
 * @example
 * const outcome = await publishIndex(store, { root }, async (live) => ({ index: healed(live), facts: {} }));
 * if (outcome.published) console.log(`written ${outcome.writes} time(s)`);
 */
export async function publishIndex<F>(
  store: S3Store,
  scope: IndexScope,
  planner: Planner<F>,
  options: PublishRunOptions = {},
): Promise<PublishOutcome<F>> {
  const rounds = options.convergeRounds ?? 2;
  const run = new Publication(store, scope, planner, options);
  const before = await (options.before ?? run.read());
  let planned: Planned<F> | undefined;
  try {
    planned = await run.plan(before, true);
  } finally {
    // A lock taken while planning is kept only for the write it was taken for (a held index takes none).
    if (!planned?.plan.index) await run.dropAhead();
  }
  let last = before;
  let written: Planned<F> | undefined;
  if (before.hold) {
    // Unsure what the scope was: a copy of what does not parse (when a write was wanted), a report, nothing rewritten.
    await run.hold(before, planned.plan.index !== undefined);
  } else {
    for (let round = 0; planned.plan.index && round <= rounds; round++) {
      if (round > 0) run.erased(round);
      const attempt = await run.attempt(planned, round < rounds);
      last = attempt.live;
      if (attempt.status === 'written') written = attempt;
      // With no re-check rounds left (or none asked for, e.g. when a delayed re-check follows), stop at the write.
      if (!written || round >= rounds) break;
      // Re-check: a client's push is unconditional and may have erased our write; re-plan on what is there now.
      // Still exactly our write (same ETag), it is not parsed again and needs no new plan.
      const known = attempt.status === 'written' ? attempt.known : undefined;
      last = await ((attempt.status === 'written' ? attempt.recheck : undefined) ?? run.read(known));
      planned =
        last.state === 'valid' && known && last.index === known.index
          ? { live: last, plan: { facts: planned.plan.facts } }
          : await run.plan(last);
    }
  }
  return {
    published: run.writes > 0,
    writes: run.writes,
    conflicts: run.conflicts,
    lockWaits: run.lockWaits,
    keptCopy: run.keptCopy,
    conditional: run.conditional,
    before,
    last,
    index: written?.plan.index,
    mirrorFailures: run.mirrorFailures,
    plans: run.plans,
    writtenFacts: written?.plan.facts,
  };
}
