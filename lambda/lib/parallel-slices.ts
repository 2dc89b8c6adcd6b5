/** The pieces of a parallel listing: slices of the key space, their segments, and the request slots they share. */
import type { ListPage } from './s3';

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

/** At most `free` requests in flight; waiting probes go first (they make work for the rest), then slices in turn. */
export class Slots {
  private readonly waiting: { probe: boolean; resolve: () => void }[] = [];

  constructor(private free: number) {}

  acquire(probe: boolean): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ probe, resolve }));
  }

  release(): void {
    if (this.waiting.length === 0) {
      this.free++;
      return;
    }
    const probe = this.waiting.findIndex((w) => w.probe);
    this.waiting.splice(Math.max(probe, 0), 1)[0].resolve();
  }
}
