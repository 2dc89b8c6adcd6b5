/** Where a parallel listing cuts a slice: pure reckoning on the slice's position and the keys it has seen, no request. */
import { MIN_SLICE_PAGES, childCounts, commonFolder, compareKeys, cutRest, runStem, sharedLength } from './key-space';
import { type Hints, type Segment, type Slice, endOf } from './parallel-slices';
import type { ListPage } from './s3-types';

/** A page whose keys fall in at least this share as many sub-folders of one folder as it holds keys spans a wide folder. */
const WIDE_SHARE = 8;
/** Pages a tail piece holds at least. */
const TAIL_PIECE_PAGES = 0.5;

/** A slice to make: where it starts, what it lists, and the sub-folders known inside it. */
export type PlannedSlice = [after: string | undefined, segments: Segment[], hints: Hints | undefined];

/** A range segment from `after` to `end` under the deepest folder holding both (or `base`). */
export function rangeSegment(base: string, after: string | undefined, end: { until?: string; before?: string }): Segment {
  const bound = end.until ?? end.before;
  const common = after !== undefined && bound !== undefined ? commonFolder(after, bound) : base;
  return { prefix: common.length > base.length ? common : base, ...end };
}

/** The folders around a slice's position, coarsest first: from the deepest one holding both its position and its end. */
export function folderChain(slice: Slice): string[] {
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

/**
 * Cuts for a slice whose last page was full and spread over many sub-folders of one folder: by the names
 * of those sub-folders read as fractions, into pieces of what is left of them (down to half a page each:
 * a piece misjudged by half still takes one request). Near the end of a listing this beats a probe's
 * round trip, and a rest of a few pages listed by one slice, a round trip each.
 */
export function wideFolderCuts(slice: Slice, pageSize: number, count: number, inside: (bound: string) => boolean): string[] {
  const keys = slice.recent;
  const folder = commonFolder(keys[0].key, keys[keys.length - 1].key);
  if (folder.length < slice.segments[0].prefix.length) return [];
  // The sub-folders' names without their slash, read after what the page's first and last share.
  const names: string[] = [];
  for (const { key } of keys) {
    const slash = key.indexOf('/', folder.length);
    const name = slash < 0 ? key : key.slice(0, slash);
    if (names[names.length - 1] !== name) names.push(name);
  }
  if (names.length < 2 || names.length * WIDE_SHARE < pageSize) return [];
  const stem = names[0].slice(0, sharedLength(names[0], names[names.length - 1]));
  return [...new Set(cutRest(stem, names, TAIL_PIECE_PAGES, count))].filter(inside);
}

/**
 * Cuts for the rest of a folder whose probe was cut short: its page of sub-folders, read as fractions after
 * what their names share back to a separator (an id's first characters have only begun to vary in one
 * page), says how far into the folder that page reached, and the page just listed how many keys each
 * sub-folder holds; the rest, up to the slice's end, is cut into pieces of at least MIN_SLICE_PAGES pages. A
 * folder that ends sooner than judged leaves pieces that list nothing, a request each; a piece judged too
 * small is cut again as it lists.
 */
export function folderRestCuts(
  slice: Slice,
  folder: string,
  probe: ListPage,
  pageSize: number,
  count: number,
  inside: (bound: string) => boolean,
): string[] {
  const names = probe.prefixes.filter(inside).map((prefix) => prefix.slice(0, -1));
  if (!probe.truncated || names.length < 2) return [];
  const held = childCounts(folder, slice.recent);
  if (held.children === 0) return [];
  const pages = (names.length * held.keys) / held.children / pageSize;
  const stem = runStem(folder, names[0], names[names.length - 1]);
  return [...new Set(cutRest(stem, names, MIN_SLICE_PAGES / pages, count, endOf(slice.segments[0])))].filter(inside);
}

/**
 * Ends the slice's current segment at the first bound and returns the slices that list the rest, in key
 * order. `fine` bounds (inside the sub-folder the slice is in) start range slices that end at the next
 * bound, inclusive. `coarse` bounds are sibling folders: each starts a slice that lists that folder alone
 * (no key read past its end), then, when the probe saw anything between it and the next bound, the keys
 * in between.
 */
export function planCut(base: string, slice: Slice, fine: string[], coarse: string[], hints: Hints, probed?: ListPage): PlannedSlice[] {
  const segment = slice.segments[0];
  const rest = slice.segments.slice(1);
  const end = { until: segment.until, before: segment.before };
  const made: PlannedSlice[] = [];
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
      : [rangeSegment(base, fine[i], last ? { before: coarse[0] } : { until: fine[i + 1] })];
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
    made.push([undefined, gap ? [folder, rangeSegment(base, coarse[i], { before: next })] : [folder], undefined]);
  }
  return made;
}
