/**
 * A large index parsed a step at a time. One `JSON.parse` of a large index holds the thread for as long
 * as it takes, and a heal's listing, whose pages arrive meanwhile, waits on it. Parsed here in pieces of
 * its entries, the pages are read between them.
 *
 * What it gives is what `parseIndex` gives, always: the file is cut only where a plain scan is sure of
 * its structure, each piece is checked by `JSON.parse` itself, and any doubt parses the file whole.
 */
import { nextTurn } from './concurrency';
import { type ParsedIndex, indexOfJson, parseIndex } from './index-file';
import { BACKSLASH, CLOSE, COMMA, OPEN, QUOTE, scanEntries } from './index-scan';

/** About how many bytes of entries are parsed in one step. */
const STEP_BYTES = 512 * 1024;

const OPEN_LIST = 0x5b;
const CLOSE_LIST = 0x5d;
const ENTRIES = Buffer.from('entries', 'latin1');

/** A canonical array index: an object lists such a property before the others, whatever its place in the file. */
const ARRAY_INDEX = /^(?:0|[1-9][0-9]*)$/;

/** Where a file's `entries` object lies (`open`, `close`: its braces) and the commas between its members where it is cut. */
interface Cuts {
  readonly open: number;
  readonly close: number;
  readonly commas: readonly number[];
}

/** The index of the quote closing the string whose text starts at `from`; -1 when it does not close. */
function stringEnd(b: Buffer, from: number): number {
  for (let at = from; ; ) {
    const quote = b.indexOf(QUOTE, at);
    if (quote < 0) return -1;
    let before = quote - 1;
    while (before >= from && b[before] === BACKSLASH) before--;
    // An even run of backslashes escapes itself, not the quote.
    if ((quote - 1 - before) % 2 === 0) return quote;
    at = quote + 1;
  }
}

/**
 * Finds the top-level `entries` object and commas between its members about `step` bytes apart. Undefined
 * when the file has no such object, or a top-level name written with escapes or twice (those are left to
 * `JSON.parse`, whose reading of them this scan does not repeat). Nothing is checked here: the pieces are.
 */
function cutsOf(b: Buffer, step: number): Cuts | undefined {
  let depth = 0;
  // At the top level: the next string is a name, and the last name was `entries`.
  let name = false;
  let entries = false;
  let open = -1;
  let close = -1;
  let from = 0;
  const commas: number[] = [];
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) {
      const end = stringEnd(b, i + 1);
      if (end < 0) return undefined;
      if (depth === 1 && name) {
        for (let j = i + 1; j < end; j++) if (b[j] === BACKSLASH) return undefined;
        entries = end - i - 1 === ENTRIES.length && b.compare(ENTRIES, 0, ENTRIES.length, i + 1, end) === 0;
        if (entries && open >= 0) return undefined;
        name = false;
      }
      i = end;
    } else if (c === OPEN || c === OPEN_LIST) {
      depth++;
      if (depth === 1) name = true;
      else if (depth === 2 && entries && c === OPEN) {
        open = i;
        from = i;
      }
    } else if (c === CLOSE || c === CLOSE_LIST) {
      if (depth === 2 && i > open && open >= 0 && close < 0) close = i;
      depth--;
    } else if (c === COMMA) {
      if (depth === 1) {
        name = true;
        entries = false;
      } else if (depth === 2 && open >= 0 && close < 0 && i - from >= step) {
        commas.push(i);
        from = i;
      }
    }
  }
  return open >= 0 && close > open ? { open, close, commas } : undefined;
}

/** The check of entries all read by `scanEntries`, which reads only sound ones. */
const scannedSound = (): undefined => undefined;

/**
 * Parses index bytes as `parseIndex` does, letting the event loop run between steps of at most about
 * `step` bytes of entries.
 * @param bytes - The index file's bytes.
 * @param step - About how many bytes of entries to parse in one step.
 * @example
 * const parsed = await parseIndexInSteps(object.body);
 * if (parsed.ok) console.log(parsed.index.entries.size);
 */
export async function parseIndexInSteps(bytes: Uint8Array, step = STEP_BYTES): Promise<ParsedIndex> {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const cuts = b.length > 2 * step ? cutsOf(b, step) : undefined;
  if (!cuts) return parseIndex(bytes);
  try {
    const { open, close, commas } = cuts;
    // The file with its entries' members taken out: everything but them, checked and parsed as it is.
    const head: unknown = JSON.parse(`${b.toString('utf8', 0, open + 1)}${b.toString('utf8', close)}`);
    if (typeof head !== 'object' || head === null || Array.isArray(head)) return parseIndex(bytes);
    const { entries: _e, ...fields } = head as Record<string, unknown>;
    const entries = new Map<string, unknown>();
    const bounds = [open, ...commas, close];
    // Entries the scan reads are sound by its own rules; any piece `JSON.parse` read has each entry checked.
    let parsedPieces = 0;
    for (let i = 1; i < bounds.length; i++) {
      await nextTurn();
      if (scanEntries(b, bounds[i - 1] + 1, bounds[i], entries) !== undefined) continue;
      parsedPieces++;
      const piece = JSON.parse(`{${b.toString('utf8', bounds[i - 1] + 1, bounds[i])}}`) as Record<string, unknown>;
      let members = 0;
      for (const key in piece) {
        // Keys an object would list first, and a piece that holds no member (a cut between two commas), are left to the whole parse.
        if (members++ === 0 && ARRAY_INDEX.test(key)) return parseIndex(bytes);
        entries.set(key, piece[key]);
      }
      if (members === 0 && bounds.length > 2) return parseIndex(bytes);
    }
    return indexOfJson(fields, entries, parsedPieces > 0 ? undefined : scannedSound);
  } catch {
    // Not JSON, or nested deeper than the engine parses: the whole parse says which, as it always has.
    return parseIndex(bytes);
  }
}
