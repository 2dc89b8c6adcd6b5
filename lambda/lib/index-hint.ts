/** The listing hint of a heal: the keys of the index it reads anyway, given to a listing begun before the read. */
import type { LiveIndex } from './layouts/types';
import type { ListingHint } from './parallel-hint';

/** Keys sampled from an index's bytes, at most: as many as a hint is sampled down to (see `sampleHint`). */
const SAMPLED_KEYS = 4096;
const KEY_FIELD = Buffer.from('"key":', 'latin1');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** A hint promised to a listing now and given once the index is read (or given as none). */
export class PendingHint {
  readonly promise: Promise<ListingHint | undefined>;
  private give: (hint: ListingHint | undefined) => void = () => undefined;

  constructor() {
    this.promise = new Promise((resolve) => {
      this.give = resolve;
    });
  }

  /** Gives a sample of the keys in an index file's bytes, downloaded and not yet parsed (see `sampledHint`); none when they hold no key. */
  fromBytes(bytes: Uint8Array): void {
    const hint = sampledHint(bytes);
    if (hint) this.give(hint);
  }

  /** Gives the keys of the index `live` resolves to, or none when it cannot be read. */
  from(live: Promise<LiveIndex>): void {
    live.then(
      (read) => this.give(indexHint(read)),
      () => this.give(undefined),
    );
  }

  /** Gives no hint: the listing splits as it would without one. Later calls change nothing. */
  none(): void {
    this.give(undefined);
  }
}

/** The hint an index read gives: its keys when it was read whole, none when it is not trusted (unreadable or held). */
export function indexHint(live: LiveIndex): ListingHint | undefined {
  if (live.state !== 'valid' || live.hold) return undefined;
  const { entries } = live.index;
  return { keys: { [Symbol.iterator]: () => entries.keys() }, count: entries.size };
}

/**
 * A sample of the keys an index file holds, read from its bytes without parsing them: the `"key":` field
 * next after each of evenly spaced offsets, so that each sampled key stands for about as many entries.
 * The bytes may be anything: a hint only places cuts, so a key that is not one costs requests, never a
 * key listed. Keys written with escapes are skipped.
 */
export function sampledHint(bytes: Uint8Array): ListingHint | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const step = Math.max(1, Math.floor(b.length / SAMPLED_KEYS));
  const keys: string[] = [];
  let spacing = 0;
  let spaced = 0;
  for (let offset = 0, from = 0; from < b.length; offset += step) {
    const at = b.indexOf(KEY_FIELD, Math.max(offset, from));
    if (at < 0) break;
    from = at + KEY_FIELD.length;
    const key = stringAt(b, from);
    if (key !== undefined) keys.push(key);
    const next = b.indexOf(KEY_FIELD, from);
    if (next >= 0) {
      spacing += next - at;
      spaced++;
    }
  }
  if (keys.length < 2) return undefined;
  // About one entry per spacing between a `"key":` field and the next.
  const entries = spaced > 0 ? Math.max(keys.length, b.length / (spacing / spaced)) : keys.length;
  return { keys, count: keys.length, weight: entries / keys.length };
}

/** The JSON string starting at `from` (after white space), or undefined when there is none or it holds an escape. */
function stringAt(b: Buffer, from: number): string | undefined {
  let i = from;
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  if (b[i] !== QUOTE) return undefined;
  const start = i + 1;
  const end = b.indexOf(QUOTE, start);
  if (end < 0) return undefined;
  for (let j = start; j < end; j++) if (b[j] === BACKSLASH) return undefined;
  return b.toString('utf8', start, end);
}
