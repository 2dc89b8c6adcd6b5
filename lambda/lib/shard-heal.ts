/**
 * The full heal of a shard-first scope, partition by partition: the listing is taken in key order, and each
 * partition is held against its own file once the listing has passed every folder it may hold keys in.
 * Only the differences are kept, and they are committed in chunks, each a short read-merge-write under
 * the lock, so memory holds the largest partition and a window of the listing, not the root.
 */
import { mapLimit } from './concurrency';
import { confirmDoubtful } from './confirm';
import { type ResizedEntry, resizedEntry } from './drift';
import type { HealRun } from './heal-run';
import type { ScopeReport } from './heal-types';
import type { IndexEntry, ListedObject } from './index-file';
import { compareKeys } from './key-space';
import { isRefusedKey, partitionFolder, partitionPlaces } from './keys';
import { type PartitionFile, type ShardBase, readPartitionFile, readShardChunk } from './layouts/shard-chunk';
import { DatastoreLock } from './lock';
import type { MemoryGuard } from './memory';
import { lockKeyOf, scopeBase } from './names';
import { Slots } from './parallel-slices';
import { publishIndex } from './publish';
import type { S3Store } from './s3';
import { type IndexScope, describeScope } from './scope';
import { type PartitionChanges, changeCount, chunkPlanner } from './shard-heal-plan';
import { HealTally, type SavedTally } from './shard-heal-tally';

/** Where the listing stands: a key it has reached, or `null` once it has ended. */
type Position = string | null;

/** True when the listing at `pos` is past every key under `folder` ('' is passed only at the end). */
function passed(folder: string, pos: Position): boolean {
  return pos === null || (compareKeys(pos, folder) > 0 && !pos.startsWith(folder));
}

/** The listing's objects of one partition since it was last held against its file, and that file's read. */
interface Unit {
  readonly partition: string;
  /**
   * Each listed object as the entry `entryFor` makes of it (the entry it gets when its file lacks it), in
   * listing order: a listing names a key once, and only a file with entries needs them found by key.
   */
  readonly listed: IndexEntry[];
  readonly folders: Set<string>;
  /** Where the partition was last held against its file: entries of folders passed there were judged then. */
  readonly from?: Position;
  readonly file: Promise<PartitionFile>;
}

/** A heal by partitions paused between invocations, as JSON (see `PartitionHeal.pause`). */
export interface PausedPartitions {
  /** Where each partition was held against its file (null: at the end). */
  readonly judgedAt: [partition: string, at: Position][];
  readonly revisit: string[];
  /** Partitions the listing had not passed yet: their objects listed so far. */
  readonly open: {
    readonly partition: string;
    readonly from?: Position;
    readonly folders: string[];
    readonly listed: [key: string, size: number, lastModified: string][];
  }[];
  readonly tally: SavedTally;
}

/** Entry changes committed at once, at most, by default (see `HealOptions.chunkEntries`). */
export const CHUNK_ENTRIES = 100_000;

/** Objects of one partition listed between two checks of its memory. */
const GUARD_EVERY = 4096;

/** Partitions held against their file at once (their reads, HeadObject checks and entries). */
const JUDGING = 32;

/** A heal of one shard-first scope fed by a listing in key order (`add`, then `advance` after each page, then `finish`). */
export class PartitionHeal {
  private readonly open = new Map<string, Unit>();
  /** The open unit an object was last added to (see `add`). */
  private last?: Unit;
  /** Names the partition of each listed key, the last one's again while keys stay in its folder. */
  private readonly place = partitionPlaces();
  private readonly judgedAt = new Map<string, Position>();
  private readonly revisit = new Set<string>();
  private readonly judging = new Set<Promise<void>>();
  private failure: unknown;
  private readonly reads = new Slots(16);
  private readonly pending = new Map<string, PartitionChanges>();
  private pendingCount = 0;
  /** Listed objects of partitions open or being judged: a partition grows past a chunk only while nothing commits. */
  private held = 0;
  private readonly forced = new Set<string>();
  private flushing: Promise<void> = Promise.resolve();
  private committing = false;
  /** Set once nothing more will be judged in this run: a commit that then takes every change kept is the last. */
  private judged = false;
  private turning = false;
  /** Listing steps waiting for a commit to end. */
  private waiters: (() => void)[] = [];
  private readonly tally: HealTally;
  /** Stops the heal at a partition too large to hold, before memory runs out. */
  private readonly guard: MemoryGuard;
  private readonly store: S3Store;
  private readonly options: HealRun['options'];

  constructor(
    private readonly run: HealRun,
    private readonly scope: IndexScope,
    private readonly base: ShardBase,
    paused?: PausedPartitions,
  ) {
    this.store = run.store;
    this.options = run.options;
    this.guard = run.guard;
    this.tally = new HealTally(this.options.keys, paused?.tally);
    if (!paused) return;
    for (const [partition, at] of paused.judgedAt) this.judgedAt.set(partition, at);
    for (const partition of paused.revisit) this.revisit.add(partition);
    for (const unit of paused.open) {
      const listed = unit.listed.map(([key, size, lastModified]) => ({ key, size, lastModified }));
      const { partition, from } = unit;
      this.open.set(partition, { partition, listed, folders: new Set(unit.folders), from, file: this.read(partition) });
      this.held += listed.length;
    }
  }

  /** Takes one listed object of the scope (relative key, internal keys already left out). */
  add(rel: string, object: ListedObject): void {
    if (isRefusedKey(rel)) {
      this.tally.refused.add(rel);
      return;
    }
    this.tally.objects++;
    const place = this.place(rel);
    if (place === undefined) {
      this.tally.unshardable++;
      return;
    }
    const { partition } = place;
    // Objects come a partition at a time: the unit of the last one is the usual one.
    let unit = this.last;
    if (unit === undefined || unit.partition !== partition) {
      unit = this.open.get(partition);
      if (!unit) {
        unit = { partition, listed: [], folders: new Set(), from: this.judgedAt.get(partition), file: this.read(partition) };
        this.open.set(partition, unit);
      }
      this.last = unit;
    }
    unit.listed.push({ key: rel, size: object.size, lastModified: object.lastModified });
    this.held++;
    unit.folders.add(place.folder);
    if (unit.listed.length % GUARD_EVERY === 0)
      this.guard.partition(describeScope(this.scope), partition, unit.listed.length, 0, this.chunkEntries());
  }

  /**
   * The listing has reached `pos`: partitions it has passed are judged, and their changes are committed
   * while the listing goes on, one commit after another, each taking what was kept while the last ran. The
   * listing waits while a commit runs beside a chunk of changes or of listed objects, so a partition larger
   * than a chunk is never held beside another one's commit (see `MemoryGuard.partition`).
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
    while (this.committing && (this.pendingCount >= (this.turning ? 2 : 1) * this.chunkEntries() || this.held >= this.chunkEntries()))
      await new Promise<void>((resolve) => this.waiters.push(resolve));
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
        listed: [],
        folders: new Set<string>(),
        from: this.judgedAt.get(partition),
        file: this.read(partition),
      };
      await this.judge(unit, null);
      if (this.pendingCount >= this.chunkEntries()) await this.flush(false);
    });
    this.judged = true;
    await this.flush(true);
    this.rethrow();
    return this.tally.report(this.scope);
  }

  /**
   * Stops before the listing has ended: what was judged is committed, and what a later run needs to go
   * on (partitions not passed yet with their objects listed so far, and the tally) is returned as JSON.
   * That run lists on after the last key this one took.
   */
  async pause(): Promise<PausedPartitions> {
    await Promise.allSettled(this.judging);
    this.rethrow();
    this.judged = true;
    await this.flush(true);
    this.rethrow();
    return {
      judgedAt: [...this.judgedAt],
      revisit: [...this.revisit],
      open: [...this.open.values()].map((unit) => ({
        partition: unit.partition,
        ...(unit.from !== undefined ? { from: unit.from } : {}),
        folders: [...unit.folders],
        listed: unit.listed.map((o) => [o.key, o.size, o.lastModified] as [string, number, string]),
      })),
      tally: this.tally.save(),
    };
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
    const read = this.reads.run(() => readPartitionFile(this.store, this.scope, partition));
    read.catch(() => undefined);
    return read;
  }

  private close(unit: Unit, pos: Position): void {
    this.open.delete(unit.partition);
    if (this.last === unit) this.last = undefined;
    this.judgedAt.set(unit.partition, pos);
    const work: Promise<void> = this.judge(unit, pos)
      .catch((err: unknown) => {
        this.failure ??= err;
      })
      .finally(() => {
        this.held -= unit.listed.length;
        this.judging.delete(work);
      });
    this.judging.add(work);
  }

  /** Holds the file's entries of the folders passed since `unit.from` against the listed objects; keeps the differences. */
  private async judge(unit: Unit, pos: Position): Promise<void> {
    const { partition, listed, from } = unit;
    const file = await unit.file;
    this.guard.partition(describeScope(this.scope), partition, listed.length, file.entries.size, this.chunkEntries());
    const byKey = file.entries.size > 0 ? new Map(listed.map((object) => [object.key, object])) : undefined;
    if (file.bad) this.tally.unreadable ??= file.bad;
    const since = this.run.since;
    const recent = (entry: IndexEntry): boolean => !(Date.parse(entry.lastModified) < since);
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
      const object = byKey?.get(key);
      if (isRefusedKey(key)) {
        this.tally.refused.add(key);
        stale.push(key);
      } else if (!object) (recent(entry) ? doubtful : stale).push(key);
      else if (object.size !== entry.size) {
        const r = { key, indexSize: entry.size, objectSize: object.size };
        (recent(entry) ? doubtfulSize : resized).push(r);
      }
    }
    const missing: string[] = [];
    const added: IndexEntry[] = [];
    for (const object of listed) {
      if (file.entries.has(object.key)) continue;
      missing.push(object.key);
      // Made by `add` (or a restore) as `entryFor` makes it, and held nowhere else.
      added.push(object);
    }
    // The listing is no snapshot: an entry absent from it, or of another size, may follow an upload after it passed.
    const sizes = new Map(doubtfulSize.map((r) => [r.key, r.indexSize]));
    const confirmed = await confirmDoubtful(this.store, scopeBase(this.scope), { keys: doubtful, sizes }, this.run.concurrency);
    for (const key of doubtful) if (!confirmed.there.has(key)) stale.push(key);
    for (const r of doubtfulSize) if (!confirmed.sized.has(r.key)) resized.push(r);
    this.tally.drift.missing.add(missing);
    this.tally.drift.stale.add(stale);
    this.tally.drift.resized.add(resized);
    this.tally.entries += judged - stale.length + missing.length;
    if (this.options.mode === 'check') return;
    // An unreadable file is replaced (its copy kept first) in the same commit as its changes, even with none.
    if (file.bad) this.forced.add(partition);
    let changes = this.pending.get(partition);
    // Keys are listed once, and a file's entries judged once: no key comes twice.
    if (!changes) {
      changes = { added, changed: new Map() };
      this.pending.set(partition, changes);
    } else for (const entry of added) changes.added.push(entry);
    for (const key of stale) changes.changed.set(key, { before: file.entries.get(key) });
    for (const { key } of resized) {
      const entry = file.entries.get(key)!;
      changes.changed.set(key, { before: entry, after: resizedEntry(entry, byKey!.get(key)!) });
    }
    this.pendingCount += missing.length + stale.length + resized.length;
    if (changeCount(changes) === 0) this.pending.delete(partition);
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
      // A turn owed to clients is given before the chunk is taken, not at its lock, so the chunk takes what
      // was judged meanwhile. None is given before the last commit: once it is released, the lock stays free.
      if (!this.judged || this.pendingCount > limit) await this.giveTurn();
      const chunk = new Map<string, PartitionChanges>();
      let count = 0;
      for (const [partition, changes] of this.pending) {
        const size = changeCount(changes);
        if (count > 0 && count + size > limit) break;
        chunk.set(partition, changes);
        count += size;
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

  /** Waits out a turn owed to clients at the lock; no commit holds a chunk meanwhile, so the listing may keep two. */
  private async giveTurn(): Promise<void> {
    this.turning = true;
    this.wake();
    try {
      await DatastoreLock.giveTurn(this.store, lockKeyOf(this.scope.root), this.run.publishOptions(this.scope).lock);
    } finally {
      this.turning = false;
    }
  }

  /** One publish of the partitions a chunk touches (see `readShardChunk`); its lock waits for no turn, given before the chunk if owed (see `commitKept`). */
  private async commit(changes: ReadonlyMap<string, PartitionChanges>, touched: ReadonlySet<string>): Promise<void> {
    const started = Date.now();
    const planner = chunkPlanner(this.store, this.scope, changes, this.run.concurrency);
    const options = this.run.publishOptions(this.scope);
    const outcome = await publishIndex(this.store, this.scope, planner, {
      ...options,
      lock: { ...options.lock, clientTurn: undefined },
      read: (known) => readShardChunk(this.store, this.scope, touched, known),
    });
    this.tally.committed(outcome, Date.now() - started);
  }
}
