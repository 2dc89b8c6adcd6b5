/**
 * Index entries read straight from the file's bytes, for the stepped parse. `JSON.parse` of a piece of
 * entries builds an object of its members, each key made twice and interned, which is then copied into
 * the index's map; the usual entry is read here into the map directly.
 *
 * It reads only what it is sure of: texts of printable ASCII without escapes, `key`, `size` (a plain
 * integer) and `lastModified` first and in that order, then client fields holding such texts. Anything
 * else in a piece makes it answer undefined, and the caller parses that piece with `JSON.parse`.
 */

/** Bytes of JSON's syntax, shared with the stepped parse's scan. */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const OPEN = 0x7b;
export const CLOSE = 0x7d;
const COLON = 0x3a;
const ZERO = 0x30;
const NINE = 0x39;
const KEY = Buffer.from('key', 'latin1');
const SIZE = Buffer.from('size', 'latin1');
const LAST_MODIFIED = Buffer.from('lastModified', 'latin1');

/** Longest run of digits read as a size: every such integer is exact in a double. */
const MAX_DIGITS = 15;

/** Names an object lists before the others, or whose assignment sets its prototype: left to `JSON.parse`. */
const SPECIAL_NAME = /^(?:[0-9]+|__proto__)$/;

/** True when bytes `a`.. and `b`.. of `bytes` are the same for `length` bytes; a loop costs less than a native call on texts this short. */
function sameBytes(bytes: Buffer, a: number, b: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (bytes[a + i] !== bytes[b + i]) return false;
  return true;
}

/** A reader over bytes `from`..`to` of an index file, which hold members of its entries only. */
class EntryScanner {
  private at: number;
  /** Where the text of the last string read starts and ends (its closing quote). */
  private start = 0;
  private end = 0;
  /** The last `lastModified` made and where its bytes lie: entries of one instant share one string. */
  private time = '';
  private timeStart = 0;
  private timeEnd = 0;

  constructor(
    private readonly b: Buffer,
    from: number,
    private readonly to: number,
  ) {
    this.at = from;
  }

  /** Skips JSON whitespace; the byte after it, or -1 at the end. */
  private peek(): number {
    const { b, to } = this;
    let at = this.at;
    for (; at < to; at++) {
      const c = b[at];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    }
    this.at = at;
    return at < to ? b[at] : -1;
  }

  /** Consumes `byte` after whitespace; false when something else is there. */
  private expect(byte: number): boolean {
    if (this.peek() !== byte) return false;
    this.at++;
    return true;
  }

  /** Consumes a string of printable ASCII without escapes, its text then at `start`..`end`; false for any other. */
  private plainString(): boolean {
    if (!this.expect(QUOTE)) return false;
    const { b, to } = this;
    for (let at = this.at; at < to; at++) {
      const c = b[at];
      if (c === QUOTE) {
        this.start = this.at;
        this.end = at;
        this.at = at + 1;
        return true;
      }
      if (c === BACKSLASH || c < 0x20 || c > 0x7e) return false;
    }
    return false;
  }

  /** Consumes a member's name and its colon when the name is `name`. */
  private named(name: Buffer): boolean {
    if (!this.plainString()) return false;
    const { b, start, end } = this;
    if (end - start !== name.length) return false;
    for (let i = 0; i < name.length; i++) if (b[start + i] !== name[i]) return false;
    return this.expect(COLON);
  }

  /** Consumes a plain non-negative integer after whitespace; NaN for any other number (its sign, fraction or exponent). */
  private size(): number {
    const { b, to } = this;
    this.peek();
    const from = this.at;
    let at = from;
    let value = 0;
    if (at < to && b[at] === ZERO) at++;
    else for (; at < to && b[at] >= ZERO && b[at] <= NINE; at++) value = value * 10 + (b[at] - ZERO);
    if (at === from || at - from > MAX_DIGITS) return Number.NaN;
    this.at = at;
    const next = this.peek();
    return next === COMMA || next === CLOSE ? value : Number.NaN;
  }

  /** The text of the string just read, shared with the last `lastModified` when its bytes are the same. */
  private sharedTime(): string {
    const { b, start, end } = this;
    if (end - start !== this.timeEnd - this.timeStart || !sameBytes(b, this.timeStart, start, end - start)) {
      this.time = b.toString('latin1', start, end);
      this.timeStart = start;
      this.timeEnd = end;
    }
    return this.time;
  }

  /** Reads one `"key":{entry}` member into `into`; false when it is not of the plain form. */
  private member(into: Map<string, unknown>): boolean {
    const { b } = this;
    if (!this.plainString()) return false;
    const keyStart = this.start;
    const keyLength = this.end - keyStart;
    if (!this.expect(COLON) || !this.expect(OPEN) || !this.named(KEY) || !this.plainString()) return false;
    // The entry's `key` repeats the member's name; a key that differs is left to the checks of the parse.
    if (this.end - this.start !== keyLength || !sameBytes(b, keyStart, this.start, keyLength)) return false;
    if (!this.expect(COMMA) || !this.named(SIZE)) return false;
    const size = this.size();
    if (Number.isNaN(size) || !this.expect(COMMA) || !this.named(LAST_MODIFIED) || !this.plainString()) return false;
    const lastModified = this.sharedTime();
    const key = b.toString('latin1', keyStart, keyStart + keyLength);
    if (SPECIAL_NAME.test(key)) return false;
    const entry: Record<string, unknown> = { key, size, lastModified };
    while (this.expect(COMMA)) {
      if (!this.plainString()) return false;
      const field = b.toString('latin1', this.start, this.end);
      if (SPECIAL_NAME.test(field) || Object.hasOwn(entry, field) || !this.expect(COLON) || !this.plainString()) return false;
      entry[field] = b.toString('latin1', this.start, this.end);
    }
    if (!this.expect(CLOSE)) return false;
    into.set(key, entry);
    return true;
  }

  /** Reads every member up to the end into `into`; their count, or undefined at the first that is not plain. */
  members(into: Map<string, unknown>): number | undefined {
    let count = 0;
    do {
      if (!this.member(into)) return undefined;
      count++;
    } while (this.expect(COMMA));
    return this.peek() === -1 ? count : undefined;
  }
}

/**
 * Reads the members of an `entries` object in bytes `from`..`to` of an index file (between its braces or
 * the commas it is cut at) into `into`, in file order, as `JSON.parse` of them would give them. The count
 * read, or undefined when any member is not of the plain form: then some may be in `into` already, and
 * parsing the piece anyway sets them again, to the same values in the same places.
 * @param bytes - The index file's bytes.
 * @param from - Where the members start.
 * @param to - Where they end (exclusive).
 * @param into - The entries read so far, in file order.
 * @example
 * const entries = new Map<string, unknown>();
 * if (scanEntries(bytes, open + 1, close, entries) === undefined) console.log('not all plain: JSON.parse the piece');
 */
export function scanEntries(bytes: Buffer, from: number, to: number, into: Map<string, unknown>): number | undefined {
  return new EntryScanner(bytes, from, to).members(into);
}
