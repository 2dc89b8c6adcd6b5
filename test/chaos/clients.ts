/**
 * swamp-style writers for the chaos run, one kind per index layout, pushing as the contract says:
 * take the lock (If-None-Match: *, stale by the holder's own ttlMs), read the index, upload, write the
 * index unconditionally (dual-write: also the touched partition files and the version-1 manifest;
 * shard-first: the touched partition files, then a version-2 manifest with commitSeq + 1), release by nonce.
 * A current client (`kind` 'current') writes under the lock by compare-and-swap merges instead, and a
 * lockless one ('lockless', swamp's serve handler) makes those merges without taking the lock at all.
 * Plus an out-of-band writer that puts, overwrites and deletes odd names without touching any index.
 */
import { createHash, randomUUID } from 'node:crypto';
import { INDEX_KEY, LOCK_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';
import { partitionOf } from '../../lambda/lib/keys';
import type { Rng } from './rng';
import { sleep } from '../../support/sleep';
import { locklessPush } from '../helpers/lockless';

export type ChaosLayout = 'monolith' | 'dual-write' | 'shard-first';

/**
 * How a client writes the index: 'older' under the lock, unconditionally; 'current' under the lock, each
 * index file by compare-and-swap merge; 'lockless' by those merges without the lock.
 */
export type ClientKind = 'older' | 'current' | 'lockless';
export const CHAOS_LAYOUTS: readonly ChaosLayout[] = ['monolith', 'dual-write', 'shard-first'];

/** An entry as a client writes it, with the client fields (and one unknown field) the indexer must keep. */
export interface ClientEntry {
  key: string;
  size: number;
  lastModified: string;
  localMtime: string;
  sha256: string;
  simTag: string;
  [field: string]: unknown;
}

/** What a client published and nobody has deleted since: the entry it wrote, and when its index write landed. */
export interface Published {
  readonly root: string;
  readonly layout: ChaosLayout;
  readonly rel: string;
  readonly entry: ClientEntry;
  readonly at: number;
}

/** Shared counters of the run. */
export interface ClientStats {
  pushes: number;
  uploads: number;
  deletes: number;
  lockWaitsMs: number[];
  /** When each lock wait started, beside its length. */
  lockWaitStarts: number[];
  lockTimeouts: number;
  /** Each client lock wait past `LONG_WAIT_MS`: when, and who held the lock meanwhile, how often taken and for how long. */
  longLockWaits: { readonly root: string; readonly from: number; readonly to: number; readonly text: string }[];
  oobOps: number;
  errors: string[];
}

/** Counters of a run that has not started. */
export function emptyClientStats(): ClientStats {
  return {
    pushes: 0,
    uploads: 0,
    deletes: 0,
    lockWaitsMs: [],
    lockWaitStarts: [],
    lockTimeouts: 0,
    longLockWaits: [],
    oobOps: 0,
    errors: [],
  };
}

const CLIENT_TTL_MS = 30_000;
const LOCK_GIVE_UP_MS = 60_000;
const CLIENT_RETRY_MS = 1_000;
/** A wait this long is described holder by holder: the client gives up at `LOCK_GIVE_UP_MS`. */
const LONG_WAIT_MS = 30_000;

/** The fields of a lock body a waiting client reads. */
interface HeldLock {
  readonly holder?: string;
  readonly pid?: number;
  readonly ttlMs?: number;
  readonly nonce?: string;
}

/** Who held a lock during one client's wait: per holder, the takes seen and the time between polls that found it held. */
class LockWaitLog {
  private readonly holders = new Map<string, { takes: Set<string>; ms: number }>();
  private last = Date.now();

  constructor(private readonly started: number) {}

  /** Notes the lock found held, as its body parsed (undefined when it does not parse). */
  saw(held: HeldLock | undefined): void {
    const now = Date.now();
    const name = held ? `${held.holder} pid ${held.pid}` : 'an unreadable lock';
    // One nonce per take: a renewal rewrites the body (swamp's clients with a new acquiredAt) but keeps it.
    const take = String(held?.nonce);
    const h = this.holders.get(name) ?? { takes: new Set<string>(), ms: 0 };
    h.takes.add(take);
    h.ms += now - this.last;
    this.holders.set(name, h);
    this.last = now;
  }

  polled(): void {
    this.last = Date.now();
  }

  describe(who: string): string {
    const parts = [...this.holders].map(([name, h]) => `${name}: ${h.takes.size} takes, about ${(h.ms / 1000).toFixed(1)} s`);
    return `${who} waited ${((Date.now() - this.started) / 1000).toFixed(1)} s from ${new Date(this.started).toISOString()}; held by ${parts.join('; ')}`;
  }
}

/** The truth clients read for a root: entries by relative key (undefined when a part is missing or unreadable). */
export async function readTruth(
  store: S3Store,
  base: string,
  layout: ChaosLayout,
): Promise<{ entries: Map<string, ClientEntry>; problem?: string }> {
  const entries = new Map<string, ClientEntry>();
  if (layout !== 'shard-first') {
    const got = await store.get(base + INDEX_KEY);
    if (!got) return { entries };
    try {
      const json = JSON.parse(got.body.toString('utf8')) as { entries?: Record<string, ClientEntry> };
      for (const [k, v] of Object.entries(json.entries ?? {})) entries.set(k, v);
      return { entries };
    } catch {
      return { entries, problem: `${base + INDEX_KEY} does not parse` };
    }
  }
  const metaObj = await store.get(base + SHARD_META_KEY);
  if (!metaObj) return { entries, problem: `${base + SHARD_META_KEY} is missing` };
  let meta: { version?: number; partitions?: string[]; commitSeq?: number };
  try {
    meta = JSON.parse(metaObj.body.toString('utf8'));
  } catch {
    return { entries, problem: `${base + SHARD_META_KEY} does not parse` };
  }
  if (meta.version !== 2) return { entries, problem: `${base + SHARD_META_KEY} is version ${meta.version}, not 2` };
  for (const p of meta.partitions ?? []) {
    const part = await store.get(`${base}_index/${p}.json`);
    if (!part) return { entries, problem: `listed partition ${base}_index/${p}.json is missing` };
    try {
      const json = JSON.parse(part.body.toString('utf8')) as { entries?: Record<string, ClientEntry> };
      for (const [k, v] of Object.entries(json.entries ?? {})) entries.set(k, v);
    } catch {
      return { entries, problem: `${base}_index/${p}.json does not parse` };
    }
  }
  return { entries };
}

/** A simulated swamp client pushing to one root in one layout. */
export class SwampClient {
  private readonly mine = new Map<string, ClientEntry>();
  private n = 0;

  constructor(
    private readonly store: S3Store,
    readonly root: string,
    readonly layout: ChaosLayout,
    readonly id: string,
    private readonly rng: Rng,
    private readonly stats: ClientStats,
    private readonly published: Map<string, Published>,
    readonly kind: ClientKind = 'older',
  ) {}

  private get base(): string {
    return this.root ? `${this.root}/` : '';
  }

  private newKey(): string {
    this.n++;
    switch (this.rng.int(3)) {
      case 0:
        return `data/sim/${this.id}/item-${this.n}/1/raw`;
      case 1:
        return `workflow-runs/wf-${this.id}/run-${this.n}.yaml`;
      default:
        return `logs/${this.id}-${this.n}.log`;
    }
  }

  /** Takes the lock as clients do; the time waited, or undefined after 60 s (a client lock timeout). */
  private async lock(nonce: string): Promise<number | undefined> {
    const started = Date.now();
    const key = this.base + LOCK_KEY;
    const log = new LockWaitLog(started);
    const done = <T>(value: T): T => {
      if (Date.now() - started > LONG_WAIT_MS)
        this.stats.longLockWaits.push({ root: this.root, from: started, to: Date.now(), text: log.describe(`${this.root} ${this.id}`) });
      return value;
    };
    for (;;) {
      const body = JSON.stringify({
        holder: `swamp-sim-${this.id}`,
        hostname: 'chaos',
        pid: process.pid,
        acquiredAt: new Date().toISOString(),
        ttlMs: CLIENT_TTL_MS,
        nonce,
      });
      const put = await this.store.put(key, body, { ifNoneMatch: '*' });
      if (put.status === 'written') return done(Date.now() - started);
      const current = await this.store.get(key);
      if (current) {
        let held: HeldLock | undefined;
        try {
          held = JSON.parse(current.body.toString('utf8')) as HeldLock;
        } catch {
          // unreadable: the default ttl
        }
        log.saw(held);
        if (held?.nonce === nonce) return done(Date.now() - started); // our own take, its answer lost
        const ttl = typeof held?.ttlMs === 'number' && held.ttlMs > 0 ? held.ttlMs : CLIENT_TTL_MS;
        if (Date.now() - current.lastModified.getTime() > ttl) {
          await this.store.delete(key, current.etag);
          continue;
        }
      } else log.polled();
      if (Date.now() - started > LOCK_GIVE_UP_MS) return done(undefined);
      // swamp's clients try a busy lock again after a second.
      await sleep(CLIENT_RETRY_MS);
    }
  }

  private async release(nonce: string): Promise<void> {
    const key = this.base + LOCK_KEY;
    const current = await this.store.get(key);
    if (!current) return;
    try {
      if ((JSON.parse(current.body.toString('utf8')) as { nonce?: string }).nonce !== nonce) return;
    } catch {
      return;
    }
    await this.store.delete(key, current.etag);
  }

  /** One push: 1-3 new files, sometimes an overwrite or a delete of one of ours. */
  async push(): Promise<void> {
    if (this.kind === 'lockless') return this.pushLockless();
    const nonce = randomUUID();
    const startedAt = Date.now();
    const waited = await this.lock(nonce);
    if (waited === undefined) {
      this.stats.lockTimeouts++;
      return;
    }
    this.stats.lockWaitsMs.push(waited);
    this.stats.lockWaitStarts.push(startedAt);
    try {
      const truth = await readTruth(this.store, this.base, this.layout);
      if (truth.problem) {
        this.stats.errors.push(`client ${this.id}: ${truth.problem}`);
        return;
      }
      const entries = truth.entries;
      const touched = new Set<string>();
      const { writes, removed } = await this.upload();
      for (const rel of removed) {
        entries.delete(rel);
        touched.add(partitionOf(rel) ?? '');
      }
      for (const entry of writes) {
        entries.set(entry.key, entry);
        touched.add(partitionOf(entry.key) ?? '');
      }
      if (this.kind === 'current') await locklessPush(this.store, { base: this.base, layout: this.layout, entries: writes, removed });
      else await this.writeIndex(entries, touched);
      this.publish(writes);
    } finally {
      await this.release(nonce);
    }
  }

  /** A push without the lock: the uploads, then each touched index file merged by compare-and-swap. */
  private async pushLockless(): Promise<void> {
    const { writes, removed } = await this.upload();
    await locklessPush(this.store, { base: this.base, layout: this.layout, entries: writes, removed });
    this.publish(writes);
  }

  /** Chooses this push's changes and makes them in S3: 1-3 new files, sometimes an overwrite or a delete of one of ours. */
  private async upload(): Promise<{ writes: ClientEntry[]; removed: string[] }> {
    const writes: ClientEntry[] = [];
    const removed: string[] = [];
    for (let i = 1 + this.rng.int(3); i > 0; i--) writes.push(this.entryFor(this.newKey()));
    const own = [...this.mine.keys()];
    if (own.length && this.rng.chance(0.3)) writes.push(this.entryFor(this.rng.pick(own)));
    if (own.length > 3 && this.rng.chance(0.2)) {
      const gone = this.rng.pick(own);
      if (!writes.some((w) => w.key === gone)) removed.push(gone);
    }
    for (const rel of removed) {
      // Deleted by its owner from here on: no longer expected anywhere.
      this.published.delete(this.base + rel);
      this.mine.delete(rel);
      await this.store.delete(this.base + rel);
      this.stats.deletes++;
    }
    for (const entry of writes) {
      this.published.delete(this.base + entry.key); // being overwritten: its old entry may change
      await this.store.put(this.base + entry.key, bodyOf(entry), undefined, 'application/octet-stream');
      entry.lastModified = new Date().toISOString(); // as clients do: the time of their upload
      this.stats.uploads++;
    }
    return { writes, removed };
  }

  /** Records the entries of a push whose index writes have landed: from now on they must never vanish. */
  private publish(writes: readonly ClientEntry[]): void {
    const at = Date.now();
    for (const entry of writes) {
      this.mine.set(entry.key, entry);
      this.published.set(this.base + entry.key, { root: this.root, layout: this.layout, rel: entry.key, entry, at });
    }
    this.stats.pushes++;
  }

  private entryFor(rel: string): ClientEntry {
    const size = 1 + this.rng.int(400);
    const seed = `${this.id}-${rel}-${size}-${this.rng.next()}`;
    const body = Buffer.alloc(size, seed);
    const now = new Date().toISOString();
    return { key: rel, size, lastModified: now, localMtime: now, sha256: createHash('sha256').update(body).digest('hex'), simTag: seed };
  }

  private async writeIndex(entries: Map<string, ClientEntry>, touched: Set<string>): Promise<void> {
    const byPartition = new Map<string, Record<string, ClientEntry>>();
    for (const [rel, entry] of entries) {
      const p = partitionOf(rel);
      if (p === undefined) continue;
      if (!byPartition.has(p)) byPartition.set(p, {});
      byPartition.get(p)![rel] = entry;
    }
    if (this.layout !== 'shard-first') {
      const index = {
        version: 1,
        lastPulled: new Date().toISOString(),
        entries: Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : 1))),
      };
      await this.store.put(this.base + INDEX_KEY, JSON.stringify(index, null, 2));
    }
    if (this.layout === 'monolith') return;
    let previous = { partitions: [] as string[], commitSeq: 0 };
    if (this.layout === 'shard-first') {
      const meta = await this.store.get(this.base + SHARD_META_KEY);
      if (meta) previous = JSON.parse(meta.body.toString('utf8'));
    }
    const partitions = [...new Set([...previous.partitions, ...byPartition.keys()])].sort();
    for (const p of touched) {
      if (!p) continue;
      await this.store.put(`${this.base}_index/${p}.json`, JSON.stringify({ version: 1, entries: byPartition.get(p) ?? {} }));
    }
    const meta = this.layout === 'shard-first' ? { version: 2, partitions, commitSeq: previous.commitSeq + 1 } : { version: 1, partitions };
    await this.store.put(this.base + SHARD_META_KEY, JSON.stringify(meta));
  }
}

/** The bytes of a client's file: its size, filled so the sha256 matches the entry. */
function bodyOf(entry: ClientEntry): Buffer {
  return Buffer.alloc(entry.size, entry.simTag);
}

/** Odd names the out-of-band writer uses: spaces, unicode, `+`, `%`. */
export const ODD_NAMES = ['with space', 'ünïcødé', 'plus+sign', 'per%cent', 'a+b c%20d', '日本語', 'tilde~and=equals'];

/** An out-of-band writer (another tool, a human with the console): no lock, no index. */
export class OutOfBandWriter {
  private readonly keys = new Set<string>();

  constructor(
    private readonly store: S3Store,
    private readonly roots: readonly string[],
    private readonly rng: Rng,
    private readonly stats: ClientStats,
  ) {}

  async step(): Promise<void> {
    const root = this.rng.pick(this.roots);
    const base = root ? `${root}/` : '';
    const name = this.rng.pick(ODD_NAMES);
    const rel = this.rng.chance(0.5) ? `data/oob/${name}/x/1/raw` : `files/oob ${name} ${this.rng.int(5)}.txt`;
    const key = base + rel;
    if (this.keys.has(key) && this.rng.chance(0.35)) {
      await this.store.delete(key);
      this.keys.delete(key);
    } else {
      await this.store.put(key, Buffer.alloc(1 + this.rng.int(300), name), undefined, 'application/octet-stream');
      this.keys.add(key);
    }
    this.stats.oobOps++;
  }
}
