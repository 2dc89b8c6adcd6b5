/** The text of a ListObjectsV2 answer: XML references, URL-encoded keys, and ISO times read from bytes. */

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const REFERENCE = /&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]+)?(;)?/g;

/** Thrown inside the reader for an answer it does not know; the caller then leaves the page to the SDK. */
export class Unrecognised extends Error {}

/** The character of a numeric reference; one XML does not allow (`&#0;`, a surrogate, past U+10FFFF) is not ours to read. */
function character(code: number): string {
  const allowed =
    code === 0x9 ||
    code === 0xa ||
    code === 0xd ||
    (code >= 0x20 && code <= 0xd7ff) ||
    (code >= 0xe000 && code <= 0xfffd) ||
    (code >= 0x10000 && code <= 0x10ffff);
  if (!allowed) throw new Unrecognised(`the character reference &#${code};`);
  return String.fromCodePoint(code);
}

/** Decodes XML character and entity references; an unknown or unterminated one means the answer is not what we expect. */
export function decode(text: string): string {
  if (!text.includes('&')) return text;
  return text.replace(REFERENCE, (_, ref: string | undefined, semicolon: string | undefined) => {
    if (!ref || !semicolon) throw new Unrecognised('a bare &');
    if (ref.startsWith('#')) return character(ref.startsWith('#x') ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10));
    const value = NAMED[ref];
    if (value === undefined) throw new Unrecognised(`the entity &${ref};`);
    return value;
  });
}

/**
 * A key as S3 writes it under `encoding-type=url` (UTF-8 percent-encoding, a space as `+`, so a literal
 * `+` arrives as `%2B`), decoded; undefined when it is not valid encoding.
 */
export function decodeUrlKey(text: string): string | undefined {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** The decimal value of `count` ASCII digits at `at` in `b`, or NaN. */
export function digits(b: Uint8Array, at: number, count: number): number {
  if (count < 1) return NaN;
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const c = b[i] - 48;
    if (c < 0 || c > 9) return NaN;
    value = value * 10 + c;
  }
  return value;
}

const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeap = (year: number): boolean => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;

const DASH = 0x2d;
const COLON = 0x3a;
const DOT = 0x2e;
export const LT = 0x3c;
export const GT = 0x3e;
export const SLASH = 0x2f;
export const AMP = 0x26;

/** Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff]Z` at `at` in `b`, read digit by digit; NaN for any other form. */
export function parseIsoTime(b: Uint8Array, at: number, end: number): number {
  const length = end - at;
  if (length !== 20 && length !== 24) return NaN;
  if (
    b[at + 4] !== DASH ||
    b[at + 7] !== DASH ||
    b[at + 10] !== 0x54 ||
    b[at + 13] !== COLON ||
    b[at + 16] !== COLON ||
    b[end - 1] !== 0x5a
  )
    return NaN;
  if (length === 24 && b[at + 19] !== DOT) return NaN;
  const month = digits(b, at + 5, 2);
  const day = digits(b, at + 8, 2);
  const hour = digits(b, at + 11, 2);
  const minute = digits(b, at + 14, 2);
  const second = digits(b, at + 17, 2);
  const year = digits(b, at, 4);
  // Only dates that survive the round trip: Date.UTC reads years below 100 as 19xx and rolls 31 April over.
  const days = MONTH_DAYS[month - 1] - (month === 2 && !isLeap(year) ? 1 : 0);
  if (!(year >= 1000 && month >= 1 && month <= 12 && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59)) return NaN;
  const ms = length === 24 ? digits(b, at + 20, 3) : 0;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms);
}

/**
 * The ISO strings of instants seen lately, one slot per second modulo the size. The reader fills it with
 * the times as S3 wrote them (when in `toISOString`'s form), and `isoTime` serves them: objects of the
 * same instant share one string, and no `toISOString` runs for a time already seen. A lookup allocates
 * nothing (a Map keyed by time would cost more than the strings it saves).
 */
const ISO_SLOTS = 8192;
const isoSlotTimes = new Float64Array(ISO_SLOTS).fill(NaN);
const isoSlotTexts: string[] = new Array<string>(ISO_SLOTS);

const isoSlot = (ms: number): number => Math.abs(Math.floor(ms / 1000)) % ISO_SLOTS;

/** The ISO string of instant `ms` if one was kept lately. */
export function keptIso(ms: number): string | undefined {
  const slot = isoSlot(ms);
  return isoSlotTimes[slot] === ms ? isoSlotTexts[slot] : undefined;
}

/** Keeps `text` as the ISO string of instant `ms` and returns it. */
export function keepIso(ms: number, text: string): string {
  const slot = isoSlot(ms);
  isoSlotTimes[slot] = ms;
  isoSlotTexts[slot] = text;
  return text;
}

/** `date.toISOString()`, shared with other dates of the same instant read lately. */
export function isoTime(date: Date): string {
  const ms = date.getTime();
  return keptIso(ms) ?? keepIso(ms, date.toISOString());
}
