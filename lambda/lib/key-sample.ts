/**
 * The first keys of a kind in key order, kept from a stream that comes in any order, with the whole count:
 * a report names a few drifting keys, and a heal by partitions must not hold every key it passed to do so.
 */
import type { Drift, DriftCounts, ResizedEntry } from './drift';

/** Keeps the `limit` smallest items by key of all it is given, and counts them all. */
export class KeySample<T> {
  private items: T[] = [];
  private added = 0;
  /** The largest key kept at the last trim, once `limit` were kept: no later item past it can be kept. */
  private bound?: string;

  constructor(
    private readonly limit: number,
    private readonly keyOf: (item: T) => string,
  ) {}

  /** Items given so far. */
  get count(): number {
    return this.added;
  }

  add(items: readonly T[]): void {
    this.added += items.length;
    if (this.limit <= 0) return;
    for (const item of items) {
      // Keys mostly come in order: most items of a long stream are past the bound and never held.
      if (this.bound !== undefined && this.keyOf(item) > this.bound) continue;
      this.items.push(item);
      // Trimmed in batches, so that each item costs a share of one sort, not a sort each.
      if (this.items.length >= 2 * this.limit + 1024) this.trim();
    }
  }

  /** Takes back a sample saved by an earlier run: its kept items, and how many it was given in all. */
  restore(items: readonly T[], count: number): void {
    this.add(items);
    this.added += count - items.length;
  }

  /** The kept items, sorted by key. */
  sorted(): T[] {
    this.trim();
    return this.items;
  }

  private trim(): void {
    const key = this.keyOf;
    this.items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    if (this.limit > 0 && this.items.length >= this.limit) {
      this.items.length = this.limit;
      this.bound = key(this.items[this.limit - 1]);
    }
  }
}

/** The drift keys of a heal as samples of at most `limit` keys of each kind (all of them when `limit` is undefined). */
export class DriftSample {
  readonly missing: KeySample<string>;
  readonly stale: KeySample<string>;
  readonly resized: KeySample<ResizedEntry>;

  constructor(limit = Number.POSITIVE_INFINITY) {
    this.missing = new KeySample(limit, (key) => key);
    this.stale = new KeySample(limit, (key) => key);
    this.resized = new KeySample(limit, (r) => r.key);
  }

  counts(): DriftCounts {
    return { missing: this.missing.count, stale: this.stale.count, resized: this.resized.count };
  }

  keys(): Drift {
    return { missing: this.missing.sorted(), stale: this.stale.sorted(), resized: this.resized.sorted() };
  }
}

/** The first `limit` keys of each kind of a sorted drift (all of them when `limit` is undefined). */
export function firstDriftKeys(drift: Drift, limit: number | undefined): Drift {
  if (limit === undefined) return drift;
  return { missing: drift.missing.slice(0, limit), stale: drift.stale.slice(0, limit), resized: drift.resized.slice(0, limit) };
}
