/**
 * The full heal of a shard-first scope, partition by partition: the listing is taken in key order, and each
 * partition is held against its own file once the listing has passed every folder it may hold keys in.
 * Only the differences are kept, and they are committed in chunks, each a short read-merge-write under
 * the lock, so memory holds the largest partition and a window of the listing, not the root.
 */
import { mapLimit } from './concurrency';
import { type ResizedEntry, resizedEntry } from './drift';
import { type DatastoreIndex, type IndexEntry, type ListedObject, cloneIndex, emptyIndex, entryFor } from './index-file';
import { compareKeys } from './key-space';
import { DriftSample } from './key-sample';
import { isRefusedKey, partitionFolder, partitionPlace } from './keys';
import { type PartitionFile, type ShardBase, readPartitionFile, readShardChunk } from './layouts/shard-chunk';
import type { LiveIndex, UnreadablePart } from './layouts/types';
import { baseIndexOf } from './layouts/types';
import { scopeBase } from './names';
import { Slots } from './parallel-slices';
import { type Plan, type PublishEvent, type PublishOptions, publishIndex } from './publish';
import type { S3Store } from './s3';
import { type IndexScope, describeScope } from './scope';
import type { HealMode, ScopeReport } from './heal-types';

/** How a heal by partitions runs (a subset of `HealOptions`). */
export interface PartitionHealOptions {
  readonly mode: HealMode;
  readonly publish?: PublishOptions;
  readonly concurrency?: number;
  readonly clockSkewMs?: number;
  readonly chunkEntries?: number;
  readonly keys?: number;
  readonly onEvent?: (scope: string, event: PublishEvent) => void;
}

/** Where the listing stands: a key it has reached, or `null` once it has ended. */
type Position = string | null;

/** True when the listing at `pos` is past every key under `folder` ('' is passed only at the end). */
function passed(folder: string, pos: Position): boolean {
  return pos === null || (compareKeys(pos, folder) > 0 && !pos.startsWith(folder));
}

/** The listing's objects of one partition since it was last held against its file, and that file's read. */
interface Unit {
  readonly partition: string;
  readonly listed: Map<string, ListedObject>;
  readonly folders: Set<string>;
  /** Where the partition was last held against its file: entries of folders passed there were judged then. */
  readonly from?: Position;
  readonly file: Promise<PartitionFile>;
}

/** One entry's change: what the file held when judged, and what it should hold (undefined: no entry). */
interface Change {
  readonly before?: IndexEntry;
  readonly after?: IndexEntry;
}

/** Entry changes committed at once, at most, by default (see `HealOptions.chunkEntries`). */
export const CHUNK_ENTRIES = 50_000;

/** Partitions held against their file at once (their reads, HeadObject checks and entries). */
const JUDGING = 32;

/** A heal of one shard-first scope fed by a listing in key order (`add`, then `advance` after each page, then `finish`). */
export class PartitionHeal {
  private readonly open = new Map<string, Unit>();
  private readonly judgedAt = new Map<string, Position>();
  private readonly revisit = new Set<string>();
  private readonly judging = new Set<Promise<void>>();
  private failure: unknown;
  private readonly reads = new Slots(16);
  private readonly pending = new Map<string, Map<string, Change>>();
  private pendingCount = 0;
  private readonly forced = new Set<string>();
  private flushing: Promise<void> = Promise.resolve();
  private committing = false;
  /** Listing steps waiting for a commit to end. */
  private waiters: (() => void)[] = [];
  private objects = 0;
  private unshardable = 0;
  private entries = 0;
  private readonly refusedListed: string[] = [];
  private readonly refusedStale: string[] = [];
  private readonly drift: DriftSample;
  private unreadable?: UnreadablePart;
  /** Why a commit left its partitions as they are (see `LiveLayout.hold`). */
  private held?: string;
  private published = false;
  private conflicts = 0;
  private lockWaits = 0;
  private keptCopy?: string;
  private conditional = true;
  private publishMs = 0;

  constructor(
    private readonly store: S3Store,
    private readonly scope: IndexScope,
    private readonly base: ShardBase,
    private readonly listingStartedAt: number,
    private readonly options: PartitionHealOptions,
  ) {
    this.drift = new DriftSample(options.keys);
  }

  /** Takes one listed object of the scope (relative key, internal keys already left out). */
  add(rel: string, object: ListedObject): void {
    if (isRefusedKey(rel)) {
      this.refusedListed.push(rel);
      return;
    }
    this.objects++;
    const place = partitionPlace(rel);
    if (place === undefined) {
      this.unshardable++;
      return;
    }
    const { partition } = place;
    let unit = this.open.get(partition);
    if (!unit) {
      unit = { partition, listed: new Map(), folders: new Set(), from: this.judgedAt.get(partition), file: this.read(partition) };
      this.open.set(partition, unit);
    }
    unit.listed.set(rel, { key: rel, size: object.size, lastModified: object.lastModified });
    unit.folders.add(place.folder);
  }

  /**
   * The listing has reached `pos`: partitions it has passed are judged, and their changes are committed
   * while the listing goes on, one commit after another, each taking what was kept while the last ran; the
   * listing waits while a full chunk is kept behind a commit.
   */
  async advance(pos: string): Promise<void> {
    for (const unit of [...this.open.values()]) if ([...unit.folders].every((f) => passed(f, pos))) this.close(unit, pos);
    while (this.judging.size >= JUDGING) await Promise.race(this.judging);
    this.rethrow();
    if (this.pendingCount >= this.startAt() && !this.committing) {
      this.committing = true;
      // A failure is kept for `rethrow`.
      void this.flush(false)
        .catch(() => undefined)
        .finally(() => {
          this.committing = false;
          this.wake();
        });
    }
    while (this.pendingCount >= this.chunkEntries() && this.committing) await new Promise<void>((resolve) => this.waiters.push(resolve));
    this.rethrow();
  }

  /** Judges what is left once the listing has ended (and partitions it never reached), commits, and reports. */
  async finish(): Promise<ScopeReport> {
    for (const unit of [...this.open.values()]) this.close(unit, null);
    await Promise.allSettled(this.judging);
    this.rethrow();
    // Partitions the listing never reached (their objects are all gone), and files with entries past where they were judged.
    const rest = [...new Set([...this.base.meta.partitions.filter((p) => !this.judgedAt.has(p)), ...this.revisit])];
    await mapLimit(rest, 16, async (partition) => {
      const unit = {
        partition,
        listed: new Map(),
        folders: new Set<string>(),
        from: this.judgedAt.get(partition),
        file: this.read(partition),
      };
      await this.judge(unit, null);
      if (this.pendingCount >= this.chunkEntries()) await this.flush(false);
    });
    await this.flush(true);
    this.rethrow();
    return this.report();
  }

  private chunkEntries(): number {
    return this.options.chunkEntries ?? CHUNK_ENTRIES;
  }

  /** Changes kept before a commit starts while the listing goes on: a few drifting entries wait for the end. */
  private startAt(): number {
    return Math.max(1, Math.floor(this.chunkEntries() / 5));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  private read(partition: string): Promise<PartitionFile> {
    const read = (async () => {
      await this.reads.acquire(false);
      try {
        return await readPartitionFile(this.store, this.scope, partition);
      } finally {
        this.reads.release();
      }
    })();
    read.catch(() => undefined);
    return read;
  }

  private close(unit: Unit, pos: Position): void {
    this.open.delete(unit.partition);
    this.judgedAt.set(unit.partition, pos);
    const work: Promise<void> = this.judge(unit, pos)
      .catch((err: unknown) => {
        this.failure ??= err;
      })
      .finally(() => this.judging.delete(work));
    this.judging.add(work);
  }

  /** Holds the file's entries of the folders passed since `unit.from` against the listed objects; keeps the differences. */
  private async judge(unit: Unit, pos: Position): Promise<void> {
    const { partition, listed, from } = unit;
    const file = await unit.file;
    if (file.bad) this.unreadable ??= file.bad;
    const skew = this.options.clockSkewMs ?? 300_000;
    const recent = (entry: IndexEntry): boolean => !(Date.parse(entry.lastModified) < this.listingStartedAt - skew);
    const stale: string[] = [];
    const doubtful: string[] = [];
    const resized: ResizedEntry[] = [];
    const doubtfulSize: ResizedEntry[] = [];
    let judged = 0;
    for (const [key, entry] of file.entries) {
      const folder = partitionFolder(key)!;
      if (from !== undefined && passed(folder, from)) continue;
      if (!passed(folder, pos)) {
        // A folder of the same partition name still ahead (a segment holding `--`): judged when passed, or at the end.
        this.revisit.add(partition);
        continue;
      }
      judged++;
      const object = listed.get(key);
      if (isRefusedKey(key)) {
        this.refusedStale.push(key);
        stale.push(key);
      } else if (!object) (recent(entry) ? doubtful : stale).push(key);
      else if (object.size !== entry.size) {
        const r = { key, indexSize: entry.size, objectSize: object.size };
        (recent(entry) ? doubtfulSize : resized).push(r);
      }
    }
    const missing = [...listed.keys()].filter((key) => !file.entries.has(key));
    // The listing is no snapshot: an entry absent from it, or of another size, may follow an upload after it passed.
    const base = scopeBase(this.scope);
    const concurrency = this.options.concurrency ?? 16;
    await mapLimit(doubtful, concurrency, async (key) => {
      if (!(await this.store.head(base + key))) stale.push(key);
    });
    await mapLimit(doubtfulSize, concurrency, async (r) => {
      if ((await this.store.head(base + r.key))?.size !== r.indexSize) resized.push(r);
    });
    this.drift.missing.add(missing);
    this.drift.stale.add(stale);
    this.drift.resized.add(resized);
    this.entries += judged - stale.length + missing.length;
    if (this.options.mode === 'check') return;
    // An unreadable file is replaced (its copy kept first) in the same commit as its changes, even with none.
    if (file.bad) this.forced.add(partition);
    let changes = this.pending.get(partition);
    if (!changes) {
      changes = new Map();
      this.pending.set(partition, changes);
    }
    for (const key of missing) changes.set(key, { after: entryFor(listed.get(key)!) });
    for (const key of stale) changes.set(key, { before: file.entries.get(key) });
    for (const { key } of resized) {
      const entry = file.entries.get(key)!;
      changes.set(key, { before: entry, after: resizedEntry(entry, listed.get(key)!) });
    }
    this.pendingCount += missing.length + stale.length + resized.length;
    if (changes.size === 0) this.pending.delete(partition);
  }

  /** Commits the changes kept so far a chunk at a time, all of them or (not `all`) while a commit is worth starting; commits never overlap. */
  private flush(all: boolean): Promise<void> {
    const run = this.flushing.then(() => {
      // After a failed commit nothing more is committed: the heal fails with that commit's error.
      this.rethrow();
      return this.commitKept(all);
    });
    this.flushing = run.catch((err: unknown) => {
      this.failure ??= err;
    });
    return run;
  }

  private async commitKept(all: boolean): Promise<void> {
    if (this.options.mode === 'check') return;
    const limit = this.chunkEntries();
    while (all ? this.pending.size > 0 || this.forced.size > 0 : this.pendingCount >= this.startAt()) {
      const chunk = new Map<string, Map<string, Change>>();
      let count = 0;
      for (const [partition, changes] of this.pending) {
        if (count > 0 && count + changes.size > limit) break;
        chunk.set(partition, changes);
        count += changes.size;
      }
      for (const partition of chunk.keys()) this.pending.delete(partition);
      this.pendingCount -= count;
      const forced = [...this.forced].filter((p) => chunk.has(p) || !this.pending.has(p));
      for (const partition of forced) this.forced.delete(partition);
      try {
        await this.commit(chunk, new Set([...chunk.keys(), ...forced]));
      } finally {
        this.wake();
      }
    }
  }

  /** One publish of the partitions a chunk touches (see `readShardChunk`). */
  private async commit(changes: ReadonlyMap<string, ReadonlyMap<string, Change>>, touched: ReadonlySet<string>): Promise<void> {
    const started = Date.now();
    const name = describeScope(this.scope);
    const outcome = await publishIndex(this.store, this.scope, this.planner(changes), {
      ...this.options.publish,
      read: (known) => readShardChunk(this.store, this.scope, touched, known),
      onEvent: (event) => {
        this.options.onEvent?.(name, event);
        this.options.publish?.onEvent?.(event);
      },
    });
    this.publishMs += Date.now() - started;
    this.published ||= outcome.published;
    this.conflicts += outcome.conflicts;
    this.lockWaits += outcome.lockWaits;
    this.keptCopy ??= outcome.keptCopy;
    this.held ??= outcome.before.hold ?? outcome.last.hold;
    this.conditional &&= outcome.conditional;
  }

  /**
   * Applies the kept changes to a read of their partitions: an entry still as judged takes its change; one
   * another writer changed since (or one already changed so) is settled by what S3 says now.
   */
  private planner(changes: ReadonlyMap<string, ReadonlyMap<string, Change>>): (live: LiveIndex) => Promise<Plan<null>> {
    return async (live) => {
      const current = baseIndexOf(live) ?? emptyIndex();
      const next: DatastoreIndex = cloneIndex(current);
      let changed = false;
      const doubtful: string[] = [];
      for (const partitionChanges of changes.values()) {
        for (const [key, change] of partitionChanges) {
          const now = current.entries.get(key);
          if (sameEntry(now, change.after)) continue;
          if (!sameEntry(now, change.before)) {
            doubtful.push(key);
            continue;
          }
          if (change.after) next.entries.set(key, change.after);
          else next.entries.delete(key);
          changed = true;
        }
      }
      const base = scopeBase(this.scope);
      await mapLimit(doubtful, this.options.concurrency ?? 16, async (key) => {
        const info = await this.store.head(base + key);
        const now = current.entries.get(key);
        if (info && now?.size === info.size) return;
        const object = info ? { key, size: info.size, lastModified: info.lastModified.toISOString() } : undefined;
        if (object) next.entries.set(key, now ? resizedEntry(now, object) : entryFor(object));
        else if (now) next.entries.delete(key);
        else return;
        changed = true;
      });
      if (!changed && live.state === 'valid' && !live.pending) return { facts: null };
      return { index: next, facts: null };
    };
  }

  private report(): ScopeReport {
    const refused = [...new Set([...this.refusedListed, ...this.refusedStale])].sort();
    return {
      scope: describeScope(this.scope),
      namespace: this.scope.namespace,
      layout: 'shard-first',
      indexState: this.unreadable ? 'unreadable' : 'valid',
      unreadableReason: this.unreadable?.reason,
      objects: this.objects,
      drift: this.drift.counts(),
      driftKeys: this.drift.keys(),
      unshardable: this.unshardable,
      refused: refused.length,
      refusedKeys: refused,
      held: this.held,
      staleMirrors: [],
      mirrorFailures: 0,
      entries: this.entries,
      published: this.published,
      conflicts: this.conflicts,
      lockWaits: this.lockWaits,
      keptCopy: this.keptCopy,
      conditional: this.conditional,
      publishMs: this.publishMs,
    };
  }
}

/** True when two entries say the same (both absent, or the same fields a heal reads or keeps). */
function sameEntry(a: IndexEntry | undefined, b: IndexEntry | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return (
    a.size === b.size &&
    a.lastModified === b.lastModified &&
    a.sha256 === b.sha256 &&
    a.localMtime === b.localMtime &&
    Object.keys(a).length === Object.keys(b).length
  );
}
