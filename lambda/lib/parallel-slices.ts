/** The pieces of a parallel listing: its settings, slices of the key space, their segments, and the request slots they share. */
import { ConfigError, IndexerError } from './errors';
import { compareKeys } from './key-space';
import type { ListPage } from './s3';

/** How to list in parallel. */
export interface ParallelListOptions {
  /** ListObjectsV2 requests in flight at once, probes included. @default 16 */
  readonly concurrency?: number;
  /**
   * Requests in flight once a hint has cut the key space: its slices need no probe to be found, so every
   * slot lists pages of the root. @default `HINTED_SLOTS` times `concurrency`
   */
  readonly hintedConcurrency?: number;
  /** Keys per ListObjectsV2 page (`MaxKeys`); smaller only to exercise the slicing with few objects. @default 1000 */
  readonly pageSize?: number;
  /**
   * Pages listed ahead of the consumer: a slice lists only while fewer wait before it, so the slices nearest
   * the consumer list first and a slow consumer holds a window of the root, not the root. A function is
   * asked at each request, for a caller that learns what it needs once the listing has begun. @default unbounded
   */
  readonly window?: number | (() => number);
  /** Whether listed objects carry their ETags (see `ListOptions.etags`). @default true */
  readonly etags?: boolean;
  /** List only keys after this one (a full key), as `StartAfter` does: a listing resumed. @default from the start */
  readonly startAfter?: string;
}

/**
 * Request slots once a hint has cut the key space, per slot before: its slices are found without probes,
 * so more of them list at once, each fewer pages deep.
 */
export const HINTED_SLOTS = 4;

/** A parallel listing's settings, checked, with their defaults. */
export interface ListingSettings {
  readonly concurrency: number;
  readonly hintedConcurrency: number;
  readonly pageSize: number;
  readonly window: () => number;
  readonly etags: boolean;
}

/** Checks the options of a parallel listing, with a `ConfigError` naming the one out of range. */
export function listingSettings(options: ParallelListOptions): ListingSettings {
  const concurrency = options.concurrency ?? 16;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new ConfigError(`The listing concurrency must be a whole number of at least 1, got ${concurrency}`);
  }
  const hintedConcurrency = options.hintedConcurrency ?? HINTED_SLOTS * concurrency;
  if (!Number.isInteger(hintedConcurrency) || hintedConcurrency < concurrency) {
    throw new ConfigError(
      `The listing concurrency once hinted must be a whole number no smaller than the concurrency (${concurrency}), got ${hintedConcurrency}`,
    );
  }
  const pageSize = options.pageSize ?? 1000;
  if (!Number.isInteger(pageSize) || pageSize < 2 || pageSize > 1000) {
    throw new ConfigError(`The listing page size must be a whole number from 2 to 1000, got ${pageSize}`);
  }
  const given = options.window ?? Number.POSITIVE_INFINITY;
  if (typeof given === 'number' && (!(Number.isInteger(given) || given === Number.POSITIVE_INFINITY) || given < 1))
    throw new ConfigError(`The listing window must be a whole number of at least 1, got ${given}`);
  const window = typeof given === 'number' ? () => given : given;
  return { concurrency, hintedConcurrency, pageSize, window, etags: options.etags ?? true };
}

/**
 * One stretch of a slice, listed with `Prefix: prefix` after the slice's last key (or `after`), up to
 * `until` (inclusive) or `before` (exclusive); with neither, to the end of the prefix.
 */
export interface Segment {
  readonly prefix: string;
  readonly until?: string;
  readonly before?: string;
}

/** A run of keys listed in order by one chain of requests, segment after segment; its pages wait in `pages` until their turn. */
export interface Slice {
  /** Where the slice starts: keys after this one (exclusive); undefined for the start of its first segment. */
  after?: string;
  /** What is left to list; the first is being listed. */
  segments: Segment[];
  /** The last key taken so far. */
  last?: string;
  /** The keys of the last page taken, to estimate how many keys a sub-folder holds. */
  recent: readonly { key: string }[];
  readonly pages: ListPage[];
  done: boolean;
  next?: Slice;
  splitting: boolean;
  /** Folder levels below the common folder the next probe starts at; grows when probes find nothing. */
  depth: number;
  failedSplits: number;
  /** Sub-folders of `hints.folder` a probe already found inside the slice: cut at them without probing again. */
  hints?: Hints;
  /** Pages a listing hint says the slice holds: it is cut further only once it has listed more. */
  expected?: number;
  /** Pages listed so far. */
  taken: number;
}

/** A slice not yet listed. */
export function newSlice(after: string | undefined, segments: Segment[], hints?: Hints): Slice {
  return { after, segments, pages: [], recent: [], done: false, splitting: false, depth: 0, failedSplits: 0, hints, taken: 0 };
}

/** Sub-folders (`children`, sorted) of one folder. */
export interface Hints {
  readonly folder: string;
  readonly children: readonly string[];
}

/** The end of a segment as a string: every key it takes sorts at or before it (undefined: open). */
export const endOf = (segment: Segment): string | undefined => segment.until ?? segment.before;

/**
 * Reads a page of a slice's segment: its keys up to the segment's end are `kept`, and the slice's `last`,
 * `recent` and `taken` move on; `complete` when the page reached the end. Keys out of order are refused.
 */
export function takePage(slice: Slice, segment: Segment, page: ListPage): { kept?: ListPage; complete: boolean } {
  const { objects } = page;
  const { until, before } = segment;
  let last = slice.last ?? slice.after;
  let end = objects.length;
  for (let i = 0; i < objects.length; i++) {
    const key = objects[i].key;
    if (last !== undefined && compareKeys(key, last) <= 0) {
      throw new IndexerError(
        `The store listed ${JSON.stringify(key)} after ${JSON.stringify(last)}: its keys are not in UTF-8 byte order`,
        'List this root sequentially',
      );
    }
    if ((until !== undefined && compareKeys(key, until) > 0) || (before !== undefined && compareKeys(key, before) >= 0)) {
      end = i;
      break;
    }
    last = key;
  }
  slice.last = last;
  slice.recent = objects;
  slice.taken++;
  const kept = end > 0 ? { objects: end === objects.length ? objects : objects.slice(0, end), prefixes: [] } : undefined;
  return { kept, complete: end < objects.length || (until !== undefined && last === until) };
}

/** Who asks for a request slot, first served first: the slice the consumer reads from, then probes (they make work for the rest), then slices in turn. */
export type SlotTurn = 'head' | 'probe' | 'slice';

const TURNS: readonly SlotTurn[] = ['head', 'probe', 'slice'];

/** At most `free` requests in flight; those waiting are served by turn (see `SlotTurn`), in order within one. */
export class Slots {
  /** A queue per turn, in `TURNS` order; each served from `heads[i]` on, so no release walks or shifts the waiting. */
  private readonly queues: (() => void)[][] = TURNS.map(() => []);
  private readonly heads: number[] = TURNS.map(() => 0);

  constructor(private free: number) {}

  acquire(turn: SlotTurn = 'slice'): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.queues[TURNS.indexOf(turn)].push(resolve));
  }

  /** Runs `work` in a slot, given back when it settles. */
  async run<T>(work: () => Promise<T>, turn: SlotTurn = 'slice'): Promise<T> {
    await this.acquire(turn);
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  /** Adds `count` slots, each given to the first waiting, if any. */
  add(count: number): void {
    for (let i = 0; i < count; i++) this.release();
  }

  release(): void {
    for (let i = 0; i < TURNS.length; i++) {
      const queue = this.queues[i];
      if (this.heads[i] === queue.length) continue;
      const resolve = queue[this.heads[i]++];
      if (this.heads[i] === queue.length) {
        queue.length = 0;
        this.heads[i] = 0;
      }
      resolve();
      return;
    }
    this.free++;
  }
}
