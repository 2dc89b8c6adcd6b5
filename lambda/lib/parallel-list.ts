/**
 * Parallel listing: the key space under a prefix is cut into slices that are listed at once, and their
 * pages are merged back, in key order, into exactly what one sequential ListObjectsV2 walk returns.
 *
 * A slice is every key `k` with `after < k <= until` (either bound may be open). Its requests use
 * `StartAfter: after` and it stops at the first key past `until`, which is also the `StartAfter` of the
 * slice that follows it: the bounds are any strings, so no key can fall between two slices, whatever
 * sorts next to a boundary (`a-b`, `a.b`, a key equal to a folder name, a folder marker `a/`).
 *
 * Where to cut comes from the store itself. A delimiter listing (`Delimiter: '/'`) of a folder returns
 * its sub-folders, which are good boundaries: the first one of the root, at the start; later, whenever a
 * slice turns out to hold more than a page and fewer slices are running than requests may be in flight,
 * the folder around the slice's position is probed (after that position; one level deeper next time when
 * it holds nothing to cut at) and the rest of the slice is cut at the sub-folders found, as often as makes
 * slices of a few pages. A slice of a whole folder is probed along with its first page, not after it, and a
 * slice left in a big sub-folder after a cut is probed one level down at once: the listing fans out in
 * fewer rounds one after another. A sub-folder cut at becomes a slice that lists that folder alone (its prefix, so
 * nothing is read past its end), then whatever lies between it and the next cut. A folder holding only
 * objects is cut by extrapolating the page just read: its keys, read as fractions over the characters they
 * use, say how far on another few pages' worth of keys should end.
 */
import { ConfigError, IndexerError } from './errors';
import type { Lister } from './list';
import type { ListPage, S3Store } from './s3';

/** How to list in parallel. */
export interface ParallelListOptions {
  /** ListObjectsV2 requests in flight at once, probes included. @default 16 */
  readonly concurrency?: number;
  /** Keys per ListObjectsV2 page (`MaxKeys`); smaller only to exercise the slicing with few objects. @default 1000 */
  readonly pageSize?: number;
}

/** A slice cut from a folder's sub-folders should hold at least this many pages, or cutting costs more than it saves. */
const MIN_SLICE_PAGES = 3;
/** Failed attempts to cut a slice (nothing found to cut at) before it is left to finish alone. */
const MAX_FAILED_SPLITS = 4;
/** Folder levels probed at once when cutting a slice; one, going a level deeper when it finds nothing (fewer requests than two). */
const LEVELS = 1;

const HIGH_UNITS = /[\uD800-\uFFFF]/;

/** The place of a UTF-16 code unit in code point order: surrogates (code points past U+FFFF) after U+E000–U+FFFF. */
function rank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}

/**
 * Compares keys as S3 orders them, by their UTF-8 bytes (that is, by code point). JavaScript's `<`
 * compares UTF-16 code units, which agrees except between characters past U+FFFF and U+E000–U+FFFF.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  if (!HIGH_UNITS.test(a) || !HIGH_UNITS.test(b)) return a < b ? -1 : 1;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** The longest folder (empty or ending in `/`) both strings start with. */
function commonFolder(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return a.slice(0, a.lastIndexOf('/', i - 1) + 1);
}

/** Digits of a key's suffix read as a fraction; eight digits stay exact in a double for alphabets of up to 90 characters. */
const FRACTION_DIGITS = 8;

/** Keys after `folder` read as fractions in [0, 1), their characters as digits of an alphabet (sorted code units). */
class KeyScale {
  private readonly index = new Map<number, number>();

  constructor(
    private readonly folder: string,
    private readonly alphabet: readonly number[],
  ) {
    alphabet.forEach((unit, i) => {
      this.index.set(unit, i);
    });
  }

  /** The alphabet of the suffixes of `keys` after `folder`. */
  static of(folder: string, keys: readonly string[]): KeyScale {
    const units = new Set<number>();
    for (const key of keys) for (let i = folder.length; i < key.length; i++) units.add(key.charCodeAt(i));
    return new KeyScale(
      folder,
      [...units].sort((a, b) => a - b),
    );
  }

  fraction(key: string): number {
    const base = this.alphabet.length;
    let x = 0;
    let scale = 1;
    for (let i = 0; i < FRACTION_DIGITS; i++) {
      scale /= base;
      const at = this.folder.length + i;
      if (at >= key.length) break;
      const unit = key.charCodeAt(at);
      let digit = this.index.get(unit);
      if (digit === undefined) {
        // A character the alphabet lacks: place it between its neighbours and stop there.
        digit = this.alphabet.filter((u) => u < unit).length;
        return x + (digit - 0.5) * scale;
      }
      x += digit * scale;
    }
    return x;
  }

  key(x: number): string {
    const base = this.alphabet.length;
    let out = this.folder;
    for (let i = 0; i < FRACTION_DIGITS && x > 0; i++) {
      x *= base;
      const digit = Math.min(base - 1, Math.floor(x));
      out += String.fromCharCode(this.alphabet[digit]);
      x -= digit;
    }
    return out;
  }
}

/**
 * Boundaries past `keys` (consecutive keys of a folder of objects, as a probe returned them): the last of
 * them, then points further on, each as far again as `pages` times the stretch those keys covered, read
 * as fractions over the alphabet their suffixes use. Where keys are spread evenly (hashes, counters,
 * timestamps) each new slice then holds about `pages` pages; where they are not, a later cut corrects it.
 */
function extrapolate(folder: string, keys: readonly string[], pages: number, count: number): string[] {
  const scale = KeyScale.of(folder, keys);
  const first = scale.fraction(keys[0]);
  const last = scale.fraction(keys[keys.length - 1]);
  const step = (last - first) * pages;
  const out = [keys[keys.length - 1]];
  if (!(step > 0)) return out;
  for (let i = 1; i < count && last + i * step < 1; i++) out.push(scale.key(last + i * step));
  return out;
}

/**
 * How many slices of at least MIN_SLICE_PAGES pages `children` sibling folders of `folder` make, judged by
 * how many keys each child of `folder` held in a page just listed. When one child fills half a page or
 * more (or the page says nothing), every sibling may be worth a slice of its own.
 */
function piecesOf(children: number, folder: string, page: readonly { key: string }[], pageSize: number): number {
  const counts = new Map<string, number>();
  let keys = 0;
  for (const { key } of page) {
    if (!key.startsWith(folder)) continue;
    const slash = key.indexOf('/', folder.length);
    const child = slash < 0 ? key : key.slice(0, slash + 1);
    counts.set(child, (counts.get(child) ?? 0) + 1);
    keys++;
  }
  if (counts.size === 0 || Math.max(...counts.values()) >= pageSize / 2) return children;
  return Math.floor((children * keys) / counts.size / (MIN_SLICE_PAGES * pageSize));
}

/** `count` items spread evenly over `items` (all of them when there are no more than `count`). */
function spread<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  const out: T[] = [];
  for (let i = 1; i <= count; i++) out.push(items[Math.round((i * (items.length + 1)) / (count + 1)) - 1]);
  return [...new Set(out)];
}

/**
 * One stretch of a slice, listed with `Prefix: prefix` after the slice's last key (or `after`), up to
 * `until` (inclusive) or `before` (exclusive); with neither, to the end of the prefix.
 */
interface Segment {
  readonly prefix: string;
  readonly until?: string;
  readonly before?: string;
}

/** A run of keys listed in order by one chain of requests, segment after segment; its pages wait in `pages` until their turn. */
interface Slice {
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
}

/** Sub-folders (`children`, sorted) of one folder. */
interface Hints {
  readonly folder: string;
  readonly children: readonly string[];
}

/** The end of a segment as a string: every key it takes sorts at or before it (undefined: open). */
const endOf = (segment: Segment): string | undefined => segment.until ?? segment.before;

/** At most `free` requests in flight; waiting probes go first (they make work for the rest), then slices in turn. */
class Slots {
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

/** One parallel listing of `base`: slices, their runners and the in-order merge of their pages. */
class ParallelListing {
  private readonly slots: Slots;
  /** Slices wanted at once: one per request slot; a slice is cut further only while there are fewer. */
  private readonly target: number;
  private unfinished = 0;
  private failure: unknown;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  private waiters: (() => void)[] = [];

  constructor(
    private readonly store: S3Store,
    private readonly base: string,
    concurrency: number,
    private readonly pageSize: number,
  ) {
    this.slots = new Slots(concurrency);
    this.target = concurrency;
  }

  async *pages(): AsyncGenerator<ListPage> {
    const first = this.slice(undefined, [{ prefix: this.base }]);
    this.track(this.split(first));
    try {
      for (let slice: Slice | undefined = first; slice; slice = slice.next) {
        for (;;) {
          if (this.failure !== undefined) throw this.failure;
          const page = slice.pages.shift();
          if (page) yield page;
          else if (slice.done) break;
          else await new Promise<void>((resolve) => this.waiters.push(resolve));
        }
      }
      if (this.failure !== undefined) throw this.failure;
    } finally {
      this.stopped = true;
      await Promise.allSettled([...this.running]);
    }
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  private track(work: Promise<void>): void {
    const tracked: Promise<void> = work
      .catch((err: unknown) => {
        this.failure ??= err;
        this.notify();
      })
      .finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }

  /** Creates a slice and starts listing it. */
  private slice(after: string | undefined, segments: Segment[], hints?: Hints): Slice {
    const slice: Slice = { after, segments, pages: [], recent: [], done: false, splitting: false, depth: 0, failedSplits: 0, hints };
    this.unfinished++;
    this.track(this.run(slice));
    return slice;
  }

  /** A range segment from `after` to `end` under the deepest folder holding both (or `base`). */
  private range(after: string | undefined, end: { until?: string; before?: string }): Segment {
    const bound = end.until ?? end.before;
    const common = after !== undefined && bound !== undefined ? commonFolder(after, bound) : this.base;
    return { prefix: common.length > this.base.length ? common : this.base, ...end };
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
    const pages = this.store.listPages({ prefix: segment.prefix, startAfter, maxKeys: this.pageSize });
    try {
      for (;;) {
        await this.slots.acquire(false);
        let next: IteratorResult<ListPage>;
        try {
          if (this.stopped || this.failure !== undefined) return;
          next = await pages.next();
        } finally {
          this.slots.release();
        }
        // The segment may have been cut while the request was out: read its end now.
        const current = slice.segments[0];
        if (next.done || this.take(slice, current, next.value) || next.value.truncated === false) return;
        if (!slice.splitting && slice.failedSplits < MAX_FAILED_SPLITS && this.unfinished < this.target) this.track(this.split(slice));
      }
    } finally {
      await pages.return(undefined);
    }
  }

  /** Takes a page's keys up to the segment's end; true when the segment is complete. */
  private take(slice: Slice, segment: Segment, page: ListPage): boolean {
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
    if (end > 0) {
      slice.pages.push({ objects: end === objects.length ? objects : objects.slice(0, end), prefixes: [] });
      this.notify();
    }
    return end < objects.length || (until !== undefined && last === until);
  }

  /** The folders around a slice's position, coarsest first: from the deepest one holding both its position and its end. */
  private folderChain(slice: Slice): string[] {
    const segment = slice.segments[0];
    const from = slice.last ?? slice.after;
    const end = endOf(segment);
    if (from === undefined || compareKeys(from, segment.prefix) < 0) return [segment.prefix];
    const common = end === undefined ? segment.prefix : commonFolder(from, end);
    const chain = [common.length >= segment.prefix.length ? common : segment.prefix];
    for (let slash = from.indexOf('/', chain[0].length); slash >= 0; slash = from.indexOf('/', slash + 1))
      chain.push(from.slice(0, slash + 1));
    return chain;
  }

  /** A delimiter listing of `folder` after `from`: one page of its sub-folders (and objects). */
  private async probe(folder: string, from: string | undefined): Promise<ListPage> {
    await this.slots.acquire(true);
    try {
      if (this.stopped) return { objects: [], prefixes: [] };
      const startAfter = from !== undefined && compareKeys(from, folder) > 0 ? from : undefined;
      const pages = this.store.listPages({ prefix: folder, delimiter: '/', startAfter, maxKeys: this.pageSize });
      const first = await pages.next();
      await pages.return(undefined);
      return first.done ? { objects: [], prefixes: [] } : first.value;
    } finally {
      this.slots.release();
    }
  }

  /**
   * Cuts the rest of a slice into new slices: at sub-folders it already knows of, or found by probing around
   * its position. `descending`: the slice is a full page into a folder whose siblings it just cut at, so
   * its rest is big: it may be cut in up to half as many pieces as slices are wanted, however many run.
   */
  private async split(slice: Slice, descending = false): Promise<void> {
    const segment = slice.segments[0];
    if (segment === undefined) return;
    const inside = (bound: string): boolean => {
      const lo = slice.last ?? slice.after;
      const hi = endOf(slice.segments[0]);
      return (lo === undefined || compareKeys(bound, lo) > 0) && (hi === undefined || compareKeys(bound, hi) < 0);
    };
    const want = (): number => Math.max(descending ? Math.ceil(this.target / 2) : 1, this.target - this.unfinished);
    const known = slice.hints?.children.filter(inside) ?? [];
    if (known.length > 0) {
      const fine = spread(known, Math.min(want(), piecesOf(known.length, slice.hints!.folder, slice.recent, this.pageSize)));
      if (fine.length > 0) this.cut(slice, fine, [], slice.hints!);
      else slice.failedSplits = MAX_FAILED_SPLITS; // what is left is small
      return;
    }
    const chain = this.folderChain(slice);
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
      const found = await Promise.all(targets.map((folder) => this.probe(folder, from)));
      // A probe sent along with the slice's first page: that page too says how big the sub-folders are.
      while (slice.recent.length === 0 && !slice.done && !this.stopped && this.failure === undefined) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
      }
      // Cut only the segment that was probed, from where the slice has got to by now.
      if (slice.done || this.stopped || slice.segments[0] !== segment) return;
      const probed = (folder: string | undefined): ListPage | undefined =>
        folder === undefined ? undefined : found[targets.indexOf(folder)];
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
      if (coarse.length === 0 && fine.length === 0) {
        slice.failedSplits++;
        return;
      }
      slice.depth = 0;
      const bounds = (list: string[]): string[] => [...new Set(list)].sort(compareKeys);
      this.cut(slice, bounds(fine), bounds(coarse), { folder: folders[folders.length - 1], children }, top);
      // The probe saw every sub-folder of that folder left in the slice, and none is: the next probe goes a
      // level deeper, at once when the slice's last page was full (its rest is big; waiting costs rounds).
      if (top && !top.truncated && this.folderChain(slice)[0] === folders[0] && !top.prefixes.some(inside)) {
        slice.depth = 1;
        descend = slice.recent.length >= this.pageSize;
      }
    } finally {
      slice.splitting = false;
      if (descend && !slice.done) this.track(this.split(slice, true));
    }
  }

  /**
   * Ends the slice's current segment at the first bound and lists the rest as new slices, linked after it
   * in key order. `fine` bounds (inside the sub-folder the slice is in) start range slices that end at the
   * next bound, inclusive. `coarse` bounds are sibling folders: each starts a slice that lists that folder
   * alone (no key read past its end), then, when the probe saw anything between it and the next bound, the
   * keys in between.
   */
  private cut(slice: Slice, fine: string[], coarse: string[], hints: Hints, probed?: ListPage): void {
    const segment = slice.segments[0];
    const rest = slice.segments.slice(1);
    const end = { until: segment.until, before: segment.before };
    const following = slice.next;
    const made: [string | undefined, Segment[], Hints | undefined][] = [];
    const hintsUpTo = (lo: string | undefined, hi: string | undefined): Hints => ({
      folder: hints.folder,
      children: hints.children.filter((c) => (lo === undefined || compareKeys(c, lo) > 0) && (hi === undefined || compareKeys(c, hi) < 0)),
    });
    slice.hints = hintsUpTo(undefined, fine[0] ?? coarse[0]);
    const first = fine[0] ?? coarse[0];
    slice.segments = [fine.length > 0 ? { prefix: segment.prefix, until: first } : { prefix: segment.prefix, before: first }];
    for (let i = 0; i < fine.length; i++) {
      const last = i + 1 === fine.length;
      const tail = last && coarse.length === 0;
      const segments = tail
        ? [{ prefix: segment.prefix, ...end }, ...rest]
        : [this.range(fine[i], last ? { before: coarse[0] } : { until: fine[i + 1] })];
      made.push([fine[i], segments, hintsUpTo(fine[i], last ? coarse[0] : fine[i + 1])]);
    }
    for (let i = 0; i < coarse.length; i++) {
      const folder: Segment = { prefix: coarse[i] };
      if (i + 1 === coarse.length) {
        made.push([undefined, [folder, { prefix: segment.prefix, ...end }, ...rest], undefined]);
        continue;
      }
      const next = coarse[i + 1];
      const between = (key: string): boolean => compareKeys(key, coarse[i]) > 0 && compareKeys(key, next) < 0;
      const gap = !probed || probed.prefixes.some(between) || probed.objects.some((o) => between(o.key));
      made.push([undefined, gap ? [folder, this.range(coarse[i], { before: next })] : [folder], undefined]);
    }
    let previous = slice;
    for (const [after, segments, known] of made) {
      const next = this.slice(after, segments, known);
      // A slice of a whole folder is probed at once, along with its first page, while slices are wanted.
      if (after === undefined && !known && this.unfinished < this.target) this.track(this.split(next));
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
  const concurrency = options.concurrency ?? 16;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new ConfigError(`The listing concurrency must be a whole number of at least 1, got ${concurrency}`);
  }
  const pageSize = options.pageSize ?? 1000;
  if (!Number.isInteger(pageSize) || pageSize < 2 || pageSize > 1000) {
    throw new ConfigError(`The listing page size must be a whole number from 2 to 1000, got ${pageSize}`);
  }
  return (store, prefix) => new ParallelListing(store, prefix, concurrency, pageSize).pages();
}
