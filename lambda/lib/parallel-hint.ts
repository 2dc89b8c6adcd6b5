/**
 * Where an index says the keys lie: a parallel listing told this before it has listed much cuts the key
 * space into slices of about as many keys each, where blind splitting would find the same cuts a probe
 * at a time. A hint only places cuts: what is listed still comes from the store alone, and a hint that is
 * wrong costs requests, never a key.
 */
import { sleep } from './concurrency';
import { compareKeys } from './key-space';
import { type Slice, endOf } from './parallel-slices';

/** What a lister may be told before it lists: the keys an index holds under the listing's base. */
export interface ListingHint {
  /** Keys relative to the listing's base, in any order. */
  readonly keys: Iterable<string>;
  /** How many keys `keys` yields (an estimate is enough: it only sets how often a key is sampled). */
  readonly count: number;
  /** How many keys of the index each of `keys` stands for, when they are a sample of it. @default 1 */
  readonly weight?: number;
}

/** Keys sampled from a hint at most: cut points among a few dozen slices need no more. */
const SAMPLE_KEYS = 4096;

/**
 * How long a blind cut waits for a hint on its way, as a share of the round trip its probe took: a hint
 * that lands within a round trip still cuts sooner than a blind round, whose slices are only known a
 * round trip later.
 */
const HINT_WAIT = 1;

/** Some of a hint's keys, made full keys and sorted as S3 sorts them, each standing for `weight` keys. */
export interface HintSample {
  readonly keys: readonly string[];
  readonly weight: number;
}

/** Every n-th key of `hint` under `base`, sorted; undefined when there is no hint or it holds no key. */
export function sampleHint(base: string, hint: ListingHint | undefined): HintSample | undefined {
  if (!hint) return undefined;
  const step = Math.max(1, Math.ceil((Number.isFinite(hint.count) ? hint.count : 0) / SAMPLE_KEYS));
  const keys: string[] = [];
  let seen = 0;
  for (const key of hint.keys) {
    if (seen++ % step === 0) keys.push(base + key);
  }
  if (keys.length === 0) return undefined;
  keys.sort(compareKeys);
  return { keys, weight: (hint.weight ?? 1) * (seen / keys.length) };
}

/**
 * A hint on its way to a listing. Once it comes, its sample is handed to `cut`; until then, a blind cut may
 * wait for it a little: a hint cuts every slice at once, and landing a moment later it saves a round of
 * blind cuts.
 */
export class HintArrival {
  private pending = true;
  private readonly settled: Promise<void>;

  constructor(hint: PromiseLike<ListingHint | undefined>, base: string, cut: (sample: HintSample) => void, fail: (err: unknown) => void) {
    this.settled = Promise.resolve(hint)
      .catch(() => undefined)
      .then((given) => {
        const sample = sampleHint(base, given);
        if (sample) cut(sample);
      })
      .catch(fail)
      .finally(() => {
        this.pending = false;
      });
  }

  /** Waits while the hint is on its way, for at most a share of `roundTripMs`, the round trip a blind cut's probe took. */
  async wait(roundTripMs: number): Promise<void> {
    if (this.pending) await Promise.race([this.settled, sleep(roundTripMs * HINT_WAIT)]);
  }
}

/** What is left of a slice's current segment: keys under `prefix` after `after` and up to `end`. */
export interface Rest {
  readonly prefix: string;
  readonly after?: string;
  /** The rest's end: no key past it (a cut at it would make an empty slice). */
  readonly end?: string;
}

/** What is left of the segment `slice` lists now. */
export function restOf(slice: Slice): Rest {
  return { prefix: slice.segments[0].prefix, after: slice.last ?? slice.after, end: endOf(slice.segments[0]) };
}

/** Where to cut one rest, and the pages each of its pieces should take (the first piece is the slice itself). */
export interface RestCut {
  readonly bounds: string[];
  readonly pages: number[];
}

/** The share of a page a hinted piece stays under its whole pages by: room for drift since the index was written. */
const PAGE_MARGIN = 0.05;

/**
 * Cuts for the rests of the slices listing now, in key order, into at most `pieces` slices that take as
 * few requests each as the slots allow: every slice stays just under the same whole number of pages, so
 * that none lists a last page mostly of keys past its end.
 */
export function cutRests(sample: HintSample, rests: readonly Rest[], pieces: number, pageSize: number): RestCut[] {
  const inside = rests.map((rest) => sample.keys.filter((key) => holds(rest, key)));
  const restPages = inside.map((keys) => (keys.length * sample.weight) / pageSize);
  const total = restPages.reduce((n, pages) => n + pages, 0);
  const slots = Math.max(1, pieces);
  // The fewest requests per slice with which every rest, cut into slices of that many pages, fits the slots.
  let counts: number[] = [];
  for (let perSlice = Math.max(1, Math.ceil(total / slots)); ; perSlice++) {
    const room = perSlice * (1 - PAGE_MARGIN);
    counts = inside.map((keys, i) => (keys.length === 0 ? 1 : Math.max(1, Math.ceil(restPages[i] / room))));
    const made = counts.reduce((n, count) => n + count, 0);
    if (made <= slots || counts.every((count) => count === 1)) break;
  }
  return inside.map((keys, r) => {
    const count = Math.min(counts[r], keys.length);
    // Where each piece ends, by sampled keys taken: a piece ends at its last sampled key, inclusive.
    const ends: number[] = [];
    for (let i = 1; i < count; i++) {
      const to = Math.round((i * keys.length) / count);
      if (to > (ends[ends.length - 1] ?? 0) && to < keys.length) ends.push(to);
    }
    const edges = [0, ...ends, keys.length];
    const pages = edges.slice(1).map((to, i) => ((to - edges[i]) * sample.weight) / pageSize);
    return { bounds: ends.map((to) => keys[to - 1]), pages };
  });
}

function holds(rest: Rest, key: string): boolean {
  if (!key.startsWith(rest.prefix)) return false;
  if (rest.after !== undefined && compareKeys(key, rest.after) <= 0) return false;
  if (rest.end === undefined) return true;
  return compareKeys(key, rest.end) < 0;
}

/** Whether a slice may be cut further: it has no hint, or has listed more pages than its hint said it holds. */
export function runsLong(slice: Slice): boolean {
  return slice.expected === undefined || slice.taken > Math.ceil(slice.expected);
}

/**
 * Cuts what is left of every slice listing from `head` on (in key order) at the sample's keys into about `pieces` slices
 * of as many sampled keys each, by `cut` (which links the slices it makes after the slice), and sets the
 * pages each slice is expected to list.
 */
export function cutByHint(
  sample: HintSample,
  head: Slice | undefined,
  pieces: number,
  pageSize: number,
  cut: (slice: Slice, bounds: string[]) => void,
): void {
  const open: Slice[] = [];
  for (let slice = head; slice; slice = slice.next) if (!slice.done && slice.segments.length > 0) open.push(slice);
  const cuts = cutRests(sample, open.map(restOf), pieces, pageSize);
  open.forEach((slice, i) => {
    const { bounds, pages } = cuts[i];
    // Pages already taken count towards what the slice was expected to list.
    slice.expected = slice.taken + pages[0];
    if (bounds.length === 0) return;
    cut(slice, bounds);
    // A cut at range bounds links one slice per bound right after the slice cut.
    let made = slice.next;
    for (let j = 1; j < pages.length && made; j++, made = made.next) made.expected = pages[j];
  });
}
