/** The datastore lock of the swamp contract: one lock object per root, shared with swamp clients. */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ConditionalWritesUnsupportedError, LockBusyError, LockReleasedError } from './errors';
import { type HeldLocks, processLocks } from './held-locks';
import { type LockClock, systemClock } from './lock-clock';
import type { S3Store } from './s3';

/** The lock object's body, as swamp clients write it. */
export interface LockBody {
  readonly holder: string;
  readonly hostname: string;
  readonly pid: number;
  readonly acquiredAt: string;
  readonly ttlMs: number;
  readonly nonce: string;
}

/** How to take the lock. */
export interface LockOptions {
  /**
   * Lifetime without a heartbeat before others may take the lock over. Clients judge staleness by the
   * ttlMs written in the lock, and the indexer holds it only for a read-merge-write, so a short one means
   * a killed indexer blocks clients for seconds. @default 10000
   */
  readonly ttlMs?: number;
  /** How long to wait for a live holder before failing with `LockBusyError`. @default 60000 */
  readonly waitMs?: number;
  /** Who we are, as written into the lock. @default "s3-datastore-indexer" */
  readonly holder?: string;
  /** Called each time we find the lock held and wait. */
  readonly onWait?: (holder: string, waitedMs: number) => void;
  /** Called once when the store turns out not to implement conditional writes. */
  readonly onUnsupported?: () => void;
  /** The time the lock runs on: its waits, heartbeats and judgement of staleness. @default the system's */
  readonly clock?: LockClock;
  /** Where the lock is registered while held, for `HeldLocks.releaseAll`. @default this process's (`releaseHeldLocks`) */
  readonly registry?: HeldLocks;
  /**
   * Leaves clients a turn at the lock: once this program has held it with no gap for `afterMs`, it waits
   * `ms` from its last release before taking it again (see `CLIENT_TURN`). @default none
   */
  readonly clientTurn?: ClientTurn;
}

/** When the indexer leaves waiting clients a turn at a lock it keeps taking back. */
export interface ClientTurn {
  /** How long holds taken back at once may run before a turn is given. */
  readonly afterMs: number;
  /** How long the lock is left free for a turn. */
  readonly ms: number;
}

/**
 * The turn a heal leaves clients between commits. swamp clients try a busy lock again once a second and
 * give up after 60 s, so an indexer that takes the lock back at once, commit after commit, would meet their
 * tries only by luck. A gap longer than their interval always meets the next try; given every 10 s of
 * holds, it bounds what a heal adds to a client's wait and costs a heal little.
 */
export const CLIENT_TURN: ClientTurn = { afterMs: 10_000, ms: 1_500 };

/** Where `HeldLocks.released` keeps a lock's last release: a test's other bucket may use the same key. */
function releasedKey(store: S3Store, key: string): string {
  return `s3://${store.bucket}/${key}`;
}

/** The indexer's own lock lifetime (heartbeat at a third of it). */
export const INDEXER_TTL_MS = 10_000;
/** What a lock whose body does not say its ttlMs is taken to have: what clients write. */
const CLIENT_TTL_MS = 30_000;

/** Releases every lock this process holds (each by nonce), waiting at most `timeoutMs`; for signal handlers. */
export function releaseHeldLocks(timeoutMs = 5_000): Promise<number> {
  return processLocks.releaseAll(timeoutMs);
}

function parseLock(body: Buffer): Partial<LockBody> {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as Partial<LockBody>) : {};
  } catch {
    return {};
  }
}

/** True when the lock's holder has not renewed it within its ttl (the one it wrote, else the clients'): anyone may take it over. */
function isStale(holder: Partial<LockBody>, lastModified: Date, now: number): boolean {
  const ttlMs = typeof holder.ttlMs === 'number' && holder.ttlMs > 0 ? holder.ttlMs : CLIENT_TTL_MS;
  return now - lastModified.getTime() > ttlMs;
}

/**
 * Who holds the lock `key` now, when a holder does and has renewed it within its ttl; undefined when it
 * is free or stale. One GetObject; nothing is taken.
 *
 * @param store the bucket's S3 seam
 * @param key the lock object (`lockKeyOf(root)`)
 * @param clock the time staleness is judged at
 * @example
 * const holder = await liveLockHolder(store, lockKeyOf(root));
 * if (holder) console.log(`a publish is under way: ${holder}`);
 */
export async function liveLockHolder(store: S3Store, key: string, clock: LockClock = systemClock): Promise<string | undefined> {
  const current = await store.get(key);
  if (!current) return undefined;
  const holder = parseLock(current.body);
  return isStale(holder, current.lastModified, clock.now()) ? undefined : describeHolder(holder);
}

function describeHolder(lock: Partial<LockBody>): string {
  const who = [lock.holder ?? 'an unknown writer', lock.hostname ? `on ${lock.hostname}` : '', lock.pid ? `pid ${lock.pid}` : '']
    .filter(Boolean)
    .join(' ');
  return lock.acquiredAt ? `${who} since ${lock.acquiredAt}` : who;
}

/** A held datastore lock; heartbeats every ttl/3 until released. */
export class DatastoreLock {
  private etag: string;
  /** When our last write of the lock (taking it, or a heartbeat) was sent: nobody may find it stale for ttlMs after. */
  private confirmedAt: number;
  private stopBeating: (() => void) | undefined;
  private lostFlag = false;
  /** The renewal in flight, if any: a release waits for it, or its write would outlive the delete. */
  private beat: Promise<void> = Promise.resolve();
  /** When the run of holds this one continues began (see `HeldLocks.released`). */
  private readonly streakFrom: number;

  private constructor(
    private readonly store: S3Store,
    readonly key: string,
    private readonly body: LockBody,
    etag: string,
    /** How many times we found the lock held before taking it. */
    readonly waits: number,
    /** False when the store ignored conditions and we relied on a read-back. */
    readonly conditional: boolean,
    private readonly clock: LockClock,
    private readonly registry: HeldLocks,
    streakFrom: number,
  ) {
    // A take that had to wait came after someone else's hold: a new run of holds begins with it.
    this.streakFrom = waits > 0 ? clock.now() : streakFrom;
    this.etag = etag;
    this.confirmedAt = clock.now();
    registry.held.add(this);
    if (conditional) {
      this.stopBeating = clock.every(Math.max(1000, Math.floor(body.ttlMs / 3)), () => {
        this.beat = this.heartbeat();
        return this.beat;
      });
    }
  }

  /** Takes the lock at `key`, waiting for a live holder up to `waitMs`; stale locks are taken over. */
  static async acquire(store: S3Store, key: string, options: LockOptions = {}): Promise<DatastoreLock> {
    const registry = options.registry ?? processLocks;
    const lock = await registry.track(DatastoreLock.take(store, key, options, registry));
    if (registry.closing) {
      // Taken while the process was already releasing its locks to exit: give it back now.
      await lock.release().catch(() => undefined);
      throw new LockReleasedError(key);
    }
    return lock;
  }

  /**
   * Waits out the client's turn a take of `key` with these options would wait for first, if one is owed,
   * so that work the take would hold meanwhile can be gathered after it.
   */
  static async giveTurn(store: S3Store, key: string, options: LockOptions = {}): Promise<void> {
    await DatastoreLock.turn(store, key, options, options.registry ?? processLocks);
  }

  /**
   * Waits out a client's turn when this program has held the lock, taken back each time at once, for the
   * turn's `afterMs`; returns when the run of holds the coming take continues began.
   */
  private static async turn(store: S3Store, key: string, options: LockOptions, registry: HeldLocks): Promise<number> {
    const clock = options.clock ?? systemClock;
    const last = registry.released.get(releasedKey(store, key));
    const turn = options.clientTurn;
    if (!turn || !last || clock.now() - last.at >= turn.ms) return clock.now();
    if (clock.now() - last.streakFrom < turn.afterMs) return last.streakFrom;
    await clock.sleep(last.at + turn.ms - clock.now());
    return clock.now();
  }

  private static async take(store: S3Store, key: string, options: LockOptions, registry: HeldLocks): Promise<DatastoreLock> {
    const clock = options.clock ?? systemClock;
    const ttlMs = options.ttlMs ?? INDEXER_TTL_MS;
    const waitMs = options.waitMs ?? 60_000;
    const streakFrom = await DatastoreLock.turn(store, key, options, registry);
    const started = clock.now();
    let waits = 0;
    let conditional = true;
    for (let attempt = 0; ; attempt++) {
      const body: LockBody = {
        holder: options.holder ?? 's3-datastore-indexer',
        hostname: hostname(),
        pid: process.pid,
        acquiredAt: new Date(clock.now()).toISOString(),
        ttlMs,
        nonce: randomUUID(),
      };
      const text = JSON.stringify(body);
      if (conditional) {
        try {
          const sent = clock.now();
          const result = await store.put(key, text, { ifNoneMatch: '*' });
          if (result.status === 'written') {
            const lock = new DatastoreLock(store, key, body, result.etag, waits, true, clock, registry, streakFrom);
            lock.confirmedAt = sent;
            return lock;
          }
        } catch (err) {
          if (!(err instanceof ConditionalWritesUnsupportedError)) throw err;
          conditional = false;
          options.onUnsupported?.();
        }
      }
      const current = await store.get(key);
      if (!current) {
        if (conditional) continue;
        // Without conditions: write, then read back; the last writer wins and the others see its nonce.
        const written = await store.put(key, text);
        await clock.sleep(50);
        const check = await store.get(key);
        if (written.status === 'written' && check && parseLock(check.body).nonce === body.nonce) {
          return new DatastoreLock(store, key, body, check.etag, waits, false, clock, registry, streakFrom);
        }
        continue;
      }
      const holder = parseLock(current.body);
      // Our own take whose answer was lost (the retry then met our own lock): it is ours.
      if (conditional && holder.nonce === body.nonce)
        return new DatastoreLock(store, key, body, current.etag, waits, true, clock, registry, streakFrom);
      if (isStale(holder, current.lastModified, clock.now())) {
        // Stale: delete exactly that version, so a holder that just renewed keeps its lock.
        await store.delete(key, current.etag);
        continue;
      }
      const waited = clock.now() - started;
      // A slow first look is no wait: a live holder is waited for once before giving up (unless told not to wait).
      if (waited >= waitMs && (waits > 0 || waitMs === 0)) throw new LockBusyError(key, describeHolder(holder), waited);
      waits++;
      options.onWait?.(describeHolder(holder), waited);
      const backoff = Math.min(2000, 100 * 2 ** Math.min(attempt, 5));
      await clock.sleep(Math.min(backoff / 2 + Math.random() * (backoff / 2), Math.max(0, waitMs - waited) + 10));
    }
  }

  /** True when a heartbeat found the lock taken over by someone else. */
  get lost(): boolean {
    return this.lostFlag;
  }

  private async heartbeat(): Promise<void> {
    try {
      const text = JSON.stringify(this.body);
      const sent = this.clock.now();
      const result = await this.store.put(this.key, text, { ifMatch: this.etag });
      if (result.status === 'written') {
        this.etag = result.etag;
        this.confirmedAt = sent;
      } else this.lostFlag = true;
    } catch {
      // A failed renewal is retried at the next beat; the TTL is three beats long.
    }
  }

  /**
   * Releases the lock if it is still ours. While its last write is recent (well inside its ttl, so nobody
   * may have taken it over) it is deleted at once with `If-Match` on that write's ETag: one round trip, and
   * a lock that is someone else's by now has another ETag and stays. Otherwise, when that delete loses (the
   * lock has another version, maybe a renewal of ours whose answer was lost) or the store does not take
   * the condition, it is read back, its nonce checked, and the exact version deleted.
   */
  release(): Promise<void> {
    const released = this.releaseOnce().finally(() =>
      this.registry.released.set(releasedKey(this.store, this.key), { at: this.clock.now(), streakFrom: this.streakFrom }),
    );
    return this.registry.track(released);
  }

  private async releaseOnce(): Promise<void> {
    this.stopBeating?.();
    this.stopBeating = undefined;
    this.registry.held.delete(this);
    await this.beat;
    if (this.conditional && !this.lostFlag && this.clock.now() - this.confirmedAt < this.body.ttlMs / 2) {
      try {
        if ((await this.store.delete(this.key, this.etag, true)) === 'deleted') return;
      } catch {
        // Not settled (no conditional deletes, or an error): fall back to reading it back.
      }
    }
    const current = await this.store.get(this.key);
    if (!current || parseLock(current.body).nonce !== this.body.nonce) return;
    await this.store.delete(this.key, this.conditional ? current.etag : undefined);
  }
}

/** Runs `work` while holding the lock at `key` (`taken`: its take, sent already), releasing it whatever happens. */
export async function withLock<T>(
  store: S3Store,
  key: string,
  options: LockOptions,
  work: (lock: DatastoreLock) => Promise<T>,
  taken?: Promise<DatastoreLock>,
): Promise<T> {
  const lock = await (taken ?? DatastoreLock.acquire(store, key, options));
  try {
    return await work(lock);
  } finally {
    await lock.release().catch(() => undefined);
  }
}
