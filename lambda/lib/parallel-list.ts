/**
 * Parallel listing: the key space under a prefix is cut into slices listed at once, and their pages are
 * merged back, in key order, into exactly what one sequential ListObjectsV2 walk returns. A slice is every
 * key `k` with `after < k <= until`; its requests use `StartAfter: after` and stop at the first key past
 * `until`, the `StartAfter` of the next slice, so no key can fall between two slices. Where to cut comes
 * from the store: a delimiter listing of a folder names its sub-folders; a folder of objects alone is cut
 * by extrapolating a page of its keys (`key-space.ts`). docs/DESIGN.md tells the whole of it.
 */
import { MIN_SLICE_PAGES, compareKeys, extrapolate, piecesOf, spread } from './key-space';
import type { Lister } from './list';
import { folderChain, folderRestCuts, planCut, wideFolderCuts } from './parallel-cuts';
import { HintArrival, type HintSample, type ListingHint, cutByHint, runsLong } from './parallel-hint';
import {
  type Hints,
  type ParallelListOptions,
  type Segment,
  type Slice,
  Slots,
  endOf,
  listingSettings,
  newSlice,
  takePage,
} from './parallel-slices';
import type { ListPage, S3Store } from './s3';

export type { ParallelListOptions } from './parallel-slices';

/** Failed attempts to cut a slice (nothing found to cut at) before it is left to finish alone. */
const MAX_FAILED_SPLITS = 4;
/** The end of a listing, when tail pieces are cut: no more than a third as many slices still listing as are wanted. */
const TAIL_SHARE = 3;
/** Folder levels probed at once when cutting a slice; one, going a level deeper when it finds nothing (fewer requests than two). */
const LEVELS = 1;

/** One parallel listing of `base`: slices, their runners and the in-order merge of their pages. */
class ParallelListing {
  private readonly slots: Slots;
  /** Slices wanted at once: one per request slot; a slice is cut further only while there are fewer. */
  private target: number;
  private unfinished = 0;
  /** Whether as many slices as wanted were listing at once: from then on, fewer means the listing nears its end. */
  private saturated = false;
  private failure: unknown;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  private waiters: (() => void)[] = [];
  /** The slice the consumer reads from: it never waits for the window, or the listing could not move on. */
  private head?: Slice;
  /** Pages listed and not yet taken by the consumer. */
  private buffered = 0;
  /** Slices waiting for the window: they list nothing, so they count as no slice when cutting. */
  private waiting = 0;
  /** The hint given, until it has cut the listing or come to nothing. */
  private arrival?: HintArrival;

  constructor(
    private readonly store: S3Store,
    private readonly base: string,
    concurrency: number,
    private readonly hintedConcurrency: number,
    private readonly pageSize: number,
    private readonly window: () => number,
    private readonly etags: boolean,
    private readonly startAfter: string | undefined,
    private readonly hint?: PromiseLike<ListingHint | undefined>,
  ) {
    this.slots = new Slots(concurrency);
    this.target = concurrency;
  }

  async *pages(): AsyncGenerator<ListPage> {
    // No reference to the first slice is kept: slices link to the next, and a listing read is let go.
    let slice: Slice | undefined = this.slice(this.startAfter, [{ prefix: this.base }]);
    this.track(this.split(slice));
    // Untracked: the end waits for no hint.
    if (this.hint)
      this.arrival = new HintArrival(
        this.hint,
        this.base,
        (sample) => this.hinted(sample),
        (err) => this.fail(err),
      );
    try {
      for (; slice; slice = slice.next) {
        this.head = slice;
        this.notify();
        for (;;) {
          if (this.failure !== undefined) throw this.failure;
          const page = slice.pages.shift();
          if (page) {
            this.buffered--;
            this.notify();
            yield page;
          } else if (slice.done) {
            slice.recent = [];
            break;
          } else await new Promise<void>((resolve) => this.waiters.push(resolve));
        }
      }
      if (this.failure !== undefined) throw this.failure;
    } finally {
      // Slices waiting for the window or the consumer wake to see the listing stopped.
      this.stopped = true;
      this.notify();
      await Promise.allSettled([...this.running]);
    }
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  private fail(err: unknown): void {
    this.failure ??= err;
    this.notify();
  }

  private track(work: Promise<void>): void {
    const tracked: Promise<void> = work.catch((err: unknown) => this.fail(err)).finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }

  /** Creates a slice and starts listing it. */
  private slice(after: string | undefined, segments: Segment[], hints?: Hints): Slice {
    const slice = newSlice(after, segments, hints);
    this.unfinished++;
    if (this.unfinished >= this.target) this.saturated = true;
    this.track(this.run(slice));
    return slice;
  }

  private async run(slice: Slice): Promise<void> {
    try {
      while (slice.segments.length > 0 && !this.stopped && this.failure === undefined) {
        const segment = slice.segments[0];
        await this.list(slice, segment);
        // Done with it, whether or not it was cut (cut to a shorter copy) meanwhile.
        slice.segments.shift();
        // A folder that turned out empty: what follows it starts after its name.
        if (slice.last === undefined && (slice.after === undefined || compareKeys(segment.prefix, slice.after) > 0))
          slice.after = segment.prefix;
      }
    } finally {
      slice.done = true;
      this.unfinished--;
      this.notify();
    }
  }

  /** Lists one segment of a slice, page by page, cutting the slice further while it goes. */
  private async list(slice: Slice, segment: Segment): Promise<void> {
    const from = slice.last ?? slice.after;
    const startAfter = from !== undefined && compareKeys(from, segment.prefix) > 0 ? from : undefined;
    const pages = this.store.listPages({ prefix: segment.prefix, startAfter, maxKeys: this.pageSize, etags: this.etags });
    try {
      for (;;) {
        // The consumer's slice waits only while pages of its own wait to be taken, so the consumer never starves.
        if (this.ahead(slice)) {
          this.waiting++;
          try {
            while (this.ahead(slice) && !this.stopped && this.failure === undefined) {
              await new Promise<void>((resolve) => this.waiters.push(resolve));
            }
          } finally {
            this.waiting--;
          }
        }
        const next = await this.slots.run(
          async () => (this.stopped || this.failure !== undefined ? undefined : pages.next()),
          slice === this.head ? 'head' : 'slice',
        );
        if (next === undefined) return;
        // The segment may have been cut while the request was out: read its end now.
        const current = slice.segments[0];
        if (next.done || this.take(slice, current, next.value) || next.value.truncated === false) return;
        if (runsLong(slice) && !slice.splitting && slice.failedSplits < MAX_FAILED_SPLITS && this.listing() < this.target)
          this.track(this.split(slice));
      }
    } finally {
      await pages.return(undefined);
    }
  }

  /**
   * True when `slice` should wait before its next request: the window is full up to it, counting the pages
   * of the slices before it in key order (the consumer takes them first); the consumer's own only for its own.
   */
  private ahead(slice: Slice): boolean {
    const window = this.window();
    if (this.buffered < window) return false;
    let pages = slice.pages.length;
    for (let s = this.head; s && s !== slice && pages < window; s = s.next) pages += s.pages.length;
    return slice === this.head ? pages > 0 && pages >= window : pages >= window;
  }

  /** Slices listing now: those not done, less those waiting for the window. */
  private listing(): number {
    return this.unfinished - this.waiting;
  }

  /** Takes a page's keys up to the segment's end (see `takePage`); true when the segment is complete. */
  private take(slice: Slice, segment: Segment, page: ListPage): boolean {
    const { kept, complete } = takePage(slice, segment, page);
    if (kept) {
      slice.pages.push(kept);
      this.buffered++;
      this.notify();
    }
    return complete;
  }

  /** A delimiter listing of `folder` after `from`: one page of its sub-folders (and objects). */
  private probe(folder: string, from: string | undefined): Promise<ListPage> {
    return this.slots.run(async () => {
      if (this.stopped) return { objects: [], prefixes: [] };
      const startAfter = from !== undefined && compareKeys(from, folder) > 0 ? from : undefined;
      // A probe's objects only tell where to cut.
      const pages = this.store.listPages({ prefix: folder, delimiter: '/', startAfter, maxKeys: this.pageSize, etags: false });
      const first = await pages.next();
      await pages.return(undefined);
      return first.done ? { objects: [], prefixes: [] } : first.value;
    }, 'probe');
  }

  /**
   * Cuts the rest of a slice into new slices: at sub-folders it already knows of, or found by probing around
   * its position. `descending`: the slice is a full page into a folder whose siblings it just cut at, so
   * its rest is big: it may be cut in up to half as many pieces as slices are wanted, however many run.
   * Under a window, a wide folder's rest is cut in as many pieces as slices are wanted, however many run:
   * only the slices within the window list, so long pieces would leave request slots idle.
   */
  private async split(slice: Slice, descending = false): Promise<void> {
    const segment = slice.segments[0];
    if (segment === undefined) return;
    const inside = (bound: string): boolean => {
      const lo = slice.last ?? slice.after;
      const hi = endOf(slice.segments[0]);
      return (lo === undefined || compareKeys(bound, lo) > 0) && (hi === undefined || compareKeys(bound, hi) < 0);
    };
    const want = (): number => Math.max(descending ? Math.ceil(this.target / 2) : 1, this.target - this.listing());
    const restPieces = (): number => (Number.isFinite(this.window()) ? this.target : want());
    const known = slice.hints?.children.filter(inside) ?? [];
    if (known.length > 0) {
      const fine = spread(known, Math.min(want(), piecesOf(known.length, slice.hints!.folder, slice.recent, this.pageSize)));
      if (fine.length > 0) this.cut(slice, fine, [], slice.hints!);
      else slice.failedSplits = MAX_FAILED_SPLITS; // what is left is small
      return;
    }
    const tail = this.tailCuts(slice, want(), inside);
    if (tail.length > 0) {
      this.cut(slice, tail, [], slice.hints ?? { folder: '', children: [] });
      return;
    }
    const chain = folderChain(slice);
    const folders = chain.slice(slice.depth, slice.depth + LEVELS);
    if (folders.length === 0) {
      slice.failedSplits = MAX_FAILED_SPLITS;
      return;
    }
    // A folder of objects only, as the page just listed shows, is cut by extrapolating that page: no probe.
    const deepest = chain[chain.length - 1];
    const recent = slice.recent.map((o) => o.key);
    const flat =
      folders.includes(deepest) &&
      recent.length > 1 &&
      recent.every((key) => key.startsWith(deepest) && key.indexOf('/', deepest.length) < 0);
    const targets = flat ? folders.filter((folder) => folder !== deepest) : folders;
    slice.splitting = true;
    let descend = false;
    try {
      const from = slice.last ?? slice.after;
      const sent = Date.now();
      const found = await Promise.all(targets.map((folder) => this.probe(folder, from)));
      await this.arrival?.wait(Date.now() - sent);
      // A probe sent along with the slice's first page: that page too says how big the sub-folders are.
      while (slice.recent.length === 0 && !slice.done && !this.stopped && this.failure === undefined) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
      }
      // Cut only the segment that was probed, from where the slice has got to by now.
      if (slice.done || this.stopped || slice.segments[0] !== segment) return;
      const probed = (folder?: string): ListPage | undefined => (folder === undefined ? undefined : found[targets.indexOf(folder)]);
      const top = probed(folders[0]);
      const sub = probed(folders[1]);
      // Sibling folders are cut at only as often as makes slices of a few pages each.
      const siblings = top?.prefixes.filter(inside) ?? [];
      const coarse = spread(siblings, Math.min(want(), piecesOf(siblings.length, folders[0], slice.recent, this.pageSize)));
      const children = sub?.prefixes.filter(inside) ?? [];
      let fine: string[] = [];
      if (coarse.length < want()) {
        const room = want() - coarse.length;
        if (flat) fine = extrapolate(deepest, recent, MIN_SLICE_PAGES, room).filter(inside);
        else fine = spread(children, Math.min(room, piecesOf(children.length, folders[1], slice.recent, this.pageSize)));
      }
      // A wide folder's rest, judged from the probe: its pieces are cut again only once they run long.
      const rest =
        coarse.length === 0 && fine.length === 0 && top ? folderRestCuts(slice, folders[0], top, this.pageSize, restPieces(), inside) : [];
      if (rest.length > 0) fine = rest;
      if (coarse.length === 0 && fine.length === 0) {
        // Nothing to cut at these levels: look deeper next time, or, in a folder of objects only, extrapolate.
        if (slice.depth + LEVELS < chain.length) {
          slice.depth += LEVELS;
          return;
        }
        const bottom = found[found.length - 1];
        if (bottom && bottom.prefixes.length === 0 && bottom.truncated && bottom.objects.length > 1) {
          const sample = bottom.objects.map((o) => o.key);
          fine = extrapolate(folders[folders.length - 1], sample, MIN_SLICE_PAGES, want()).filter(inside);
        }
      }
      // Cut or not, the next probe starts at the top: the slice will have moved on, and fewer slices may list.
      slice.depth = 0;
      if (coarse.length === 0 && fine.length === 0) {
        slice.failedSplits++;
        return;
      }
      const bounds = (list: string[]): string[] => [...new Set(list)].sort(compareKeys);
      const expected = rest.length > 0 ? 2 * MIN_SLICE_PAGES : undefined;
      this.cut(slice, bounds(fine), bounds(coarse), { folder: folders[folders.length - 1], children }, top, expected);
      // The probe saw every sub-folder of that folder left in the slice, and none is: the next probe goes a
      // level deeper, at once when the slice's last page was full (its rest is big; waiting costs rounds).
      if (top && !top.truncated && folderChain(slice)[0] === folders[0] && !top.prefixes.some(inside)) {
        slice.depth = 1;
        descend = slice.recent.length >= this.pageSize;
      }
    } finally {
      slice.splitting = false;
      if (descend && !slice.done) this.track(this.split(slice, true));
    }
  }

  /** Near the end of the listing, the wide folder a slice's last full page spans, cut at once (see `wideFolderCuts`). */
  private tailCuts(slice: Slice, count: number, inside: (bound: string) => boolean): string[] {
    if (!this.saturated || this.unfinished * TAIL_SHARE > this.target || slice.recent.length < this.pageSize) return [];
    return wideFolderCuts(slice, this.pageSize, count, inside);
  }

  /** Once the hint comes, cuts what every slice has left by it (`cutByHint`); with none, splitting goes on as it would. */
  private hinted(sample: HintSample): void {
    if (this.stopped) return;
    if (this.hintedConcurrency > this.target) {
      this.slots.add(this.hintedConcurrency - this.target);
      this.target = this.hintedConcurrency;
    }
    cutByHint(sample, this.head, this.target, this.pageSize, (slice, bounds) =>
      this.cut(slice, bounds, [], slice.hints ?? { folder: '', children: [] }),
    );
  }

  /** Cuts the rest of a slice's current segment at the bounds given (see `planCut`) into new slices, linked after it in key order. */
  private cut(slice: Slice, fine: string[], coarse: string[], hints: Hints, probed?: ListPage, expected?: number): void {
    const following = slice.next;
    const made = planCut(this.base, slice, fine, coarse, hints, probed);
    if (expected !== undefined) slice.expected = slice.taken + expected;
    let previous = slice;
    for (const [after, segments, known] of made) {
      const next = this.slice(after, segments, known);
      next.expected = expected;
      // A slice of a whole folder is probed at once, along with its first page, while slices are wanted.
      if (after === undefined && !known && this.listing() < this.target) this.track(this.split(next));
      previous.next = next;
      previous = next;
    }
    previous.next = following;
  }
}

/**
 * A lister that lists slices of the key space at once and merges them into exactly the pages'
 * contents of a sequential listing, in the same order.
 *
 * @example
 * const report = await healRoot(store, root, { mode: 'repair', lister: parallelLister({ concurrency: 32 }) });
 */
export function parallelLister(options: ParallelListOptions = {}): Lister {
  const { concurrency, hintedConcurrency, pageSize, window, etags } = listingSettings(options);
  return (store, prefix, hint) =>
    new ParallelListing(store, prefix, concurrency, hintedConcurrency, pageSize, window, etags, options.startAfter, hint).pages();
}
