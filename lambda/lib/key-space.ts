/**
 * Key-space arithmetic for slicing a listing: S3's key order, common folders, and where to cut a run of
 * keys so that each slice holds about the same number of pages.
 */

/** A slice cut from a folder's sub-folders should hold at least this many pages, or cutting costs more than it saves. */
export const MIN_SLICE_PAGES = 3;
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

/** How many UTF-16 code units both strings start with. */
export function sharedLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** The longest folder (empty or ending in `/`) both strings start with. */
export function commonFolder(a: string, b: string): string {
  return a.slice(0, a.lastIndexOf('/', sharedLength(a, b) - 1) + 1);
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

  /** The alphabet of the suffixes of `keys` after `folder`, in the digits a fraction reads (a name's suffix past them would only widen it). */
  static of(folder: string, keys: readonly string[]): KeyScale {
    const units = new Set<number>();
    for (const key of keys) {
      const end = Math.min(key.length, folder.length + FRACTION_DIGITS);
      for (let i = folder.length; i < end; i++) units.add(key.charCodeAt(i));
    }
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
 * What `first` and `last` (names or keys under `folder`, in order) share, back to a separator: the stem of a
 * run of names such as `run-<id>.log`, whose id's first characters may have only begun to vary in one page.
 */
export function runStem(folder: string, first: string, last: string): string {
  let stem = first.slice(0, sharedLength(first, last));
  while (stem.length > folder.length && /[0-9A-Za-z]$/.test(stem)) stem = stem.slice(0, -1);
  return stem.length < folder.length ? folder : stem;
}

/**
 * Boundaries past `keys` (consecutive keys of a folder of objects, as a probe returned them): the last of
 * them, then points further on, each as far again as `pages` times the stretch those keys covered, read
 * as fractions over the alphabet their suffixes use after the stem they share (`runStem`), so no
 * boundary falls past the end of their run. Where keys are spread evenly (hashes, counters, timestamps)
 * each new slice then holds about `pages` pages; where they are not, a later cut corrects it.
 */
export function extrapolate(folder: string, keys: readonly string[], pages: number, count: number): string[] {
  const scale = KeyScale.of(runStem(folder, keys[0], keys[keys.length - 1]), keys);
  const first = scale.fraction(keys[0]);
  const last = scale.fraction(keys[keys.length - 1]);
  const step = (last - first) * pages;
  const out = [keys[keys.length - 1]];
  if (!(step > 0)) return out;
  for (let i = 1; i < count && last + i * step < 1; i++) out.push(scale.key(last + i * step));
  return out;
}

/**
 * Bounds that cut what is left of a run of names after `names` (consecutive, as one page listed them, all
 * starting with `stem`) into at most `count` pieces of about as many names each, none smaller than
 * `minPages` such pages: judged by how far along the names after `stem` the page reached, read as fractions.
 * Names past the run's end fall in the last piece; with `end` (a key), the rest stops there when it starts
 * with `stem`. Empty when fewer than two pieces would be cut.
 */
export function cutRest(stem: string, names: readonly string[], minPages: number, count: number, end?: string): string[] {
  const scale = KeyScale.of(stem, names);
  const last = scale.fraction(names[names.length - 1]);
  const page = last - scale.fraction(names[0]);
  if (!(page > 0)) return [];
  const stop = end?.startsWith(stem) ? Math.min(1, scale.fraction(end)) : 1;
  const pieces = Math.min(count, Math.floor((stop - last) / (page * minPages)));
  const out: string[] = [];
  for (let i = 1; i < pieces; i++) out.push(scale.key(last + (i * (stop - last)) / pieces));
  return out;
}

/** The keys of `page` under `folder`, how many of its children they fall in, and the most in one child. */
export function childCounts(folder: string, page: readonly { key: string }[]): { keys: number; children: number; most: number } {
  const counts = new Map<string, number>();
  let keys = 0;
  for (const { key } of page) {
    if (!key.startsWith(folder)) continue;
    const slash = key.indexOf('/', folder.length);
    const child = slash < 0 ? key : key.slice(0, slash + 1);
    counts.set(child, (counts.get(child) ?? 0) + 1);
    keys++;
  }
  return { keys, children: counts.size, most: counts.size === 0 ? 0 : Math.max(...counts.values()) };
}

/**
 * How many slices of at least MIN_SLICE_PAGES pages `children` sibling folders of `folder` make, judged by
 * how many keys each child of `folder` held in a page just listed. When one child fills half a page or
 * more (or the page says nothing), every sibling may be worth a slice of its own.
 */
export function piecesOf(children: number, folder: string, page: readonly { key: string }[], pageSize: number): number {
  const held = childCounts(folder, page);
  if (held.children === 0 || held.most >= pageSize / 2) return children;
  return Math.floor((children * held.keys) / held.children / (MIN_SLICE_PAGES * pageSize));
}

/** `count` items spread evenly over `items` (all of them when there are no more than `count`). */
export function spread<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  const out: T[] = [];
  for (let i = 1; i <= count; i++) out.push(items[Math.round((i * (items.length + 1)) / (count + 1)) - 1]);
  return [...new Set(out)];
}
