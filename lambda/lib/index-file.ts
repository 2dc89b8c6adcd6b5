/** The index model: parse, validate, build and serialise `.datastore-index.json`. */
import { isFlat, jsonText } from './json-text';

/** One index entry; client fields (`localMtime`, `sha256`, anything unknown) ride along untouched. */
export interface IndexEntry {
  key: string;
  size: number;
  lastModified: string;
  localMtime?: string;
  sha256?: string;
  [field: string]: unknown;
}

/** A parsed index; `extra` keeps top-level fields we do not know so a rewrite loses nothing. */
export interface DatastoreIndex {
  version: 1;
  lastPulled?: string;
  entries: Map<string, IndexEntry>;
  extra: Record<string, unknown>;
}

/** An object seen in a listing, keyed relative to its scope; `etag` only when the lister kept it (`listScopes` does not). */
export interface ListedObject {
  readonly key: string;
  readonly size: number;
  readonly lastModified: string;
  readonly etag?: string;
}

/**
 * Outcome of parsing index bytes: a valid index, or why it is unreadable. `version` is set when the file
 * says a version this indexer does not know (a newer client's format: never rewritten in an older one);
 * `salvaged` holds the sound entries of a file whose entries are mostly sound, so their client fields
 * survive a rebuild of the bad ones.
 */
export type ParsedIndex = { ok: true; index: DatastoreIndex } | { ok: false; reason: string; version?: number; salvaged?: DatastoreIndex };

/** The index format this indexer reads and writes. */
export const INDEX_VERSION = 1;

/** An empty index. */
export function emptyIndex(): DatastoreIndex {
  return { version: 1, entries: new Map(), extra: {} };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Validates one entry's shape; returns a reason when it is wrong. */
function entryProblem(mapKey: string, value: unknown): string | undefined {
  if (!isRecord(value)) return `entry "${mapKey}" is not an object`;
  if (value.key === undefined) return `entry "${mapKey}" has no key`;
  if (value.key !== mapKey) return `entry "${mapKey}" has key ${JSON.stringify(value.key)}`;
  if (typeof value.size !== 'number' || !Number.isInteger(value.size) || value.size < 0) {
    return `entry "${mapKey}" has no valid size`;
  }
  if (typeof value.lastModified !== 'string') return `entry "${mapKey}" has no lastModified`;
  return undefined;
}

/** Parses index bytes, telling a valid index from bad JSON, a wrong version or a wrong shape. */
export function parseIndex(bytes: Uint8Array | string, validateEntry = entryProblem): ParsedIndex {
  let json: unknown;
  try {
    json = JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (err) {
    // An engine whose parser recurses gives up on deep nesting: that index is unreadable, not an error of ours.
    if (err instanceof RangeError) return { ok: false, reason: `nested too deeply to parse here (${err.message})` };
    return { ok: false, reason: `not JSON (${(err as Error).message})` };
  }
  if (!isRecord(json)) return { ok: false, reason: 'not a JSON object' };
  const { entries, ...head } = json;
  return indexOfJson(head, entries, validateEntry);
}

/**
 * The index a parsed file holds: `head`, its top-level fields but `entries`; `entries`, that field's value.
 * Where the file was parsed in steps it is a map of the members in file order, which becomes the index's
 * own: its bad entries are taken out of it, rather than the good ones copied into another.
 */
export function indexOfJson(head: Record<string, unknown>, parsed: unknown, validateEntry = entryProblem): ParsedIndex {
  if (head.version === undefined) return { ok: false, reason: `no "version" (clients write ${INDEX_VERSION})` };
  if (typeof head.version === 'number' && head.version !== INDEX_VERSION) {
    const reason = `version ${head.version}, a format this indexer does not know (it knows ${INDEX_VERSION})`;
    return { ok: false, reason, version: head.version };
  }
  if (head.version !== INDEX_VERSION)
    return { ok: false, reason: `"version" is ${JSON.stringify(head.version)}, not the number ${INDEX_VERSION}` };
  if (!(parsed instanceof Map) && !isRecord(parsed)) return { ok: false, reason: 'no "entries" object' };
  if (head.lastPulled !== undefined && typeof head.lastPulled !== 'string') {
    return { ok: false, reason: '"lastPulled" is not a string' };
  }
  let first: string | undefined;
  let bad = 0;
  const sound = (key: string, value: unknown): boolean => {
    const problem = validateEntry(key, value);
    if (problem === undefined) return true;
    first ??= problem;
    bad++;
    return false;
  };
  let entries: Map<string, IndexEntry>;
  if (parsed instanceof Map) {
    entries = parsed as Map<string, IndexEntry>;
    for (const [key, value] of entries) if (!sound(key, value)) entries.delete(key);
  } else {
    entries = new Map();
    // `for…in` rather than `Object.entries`: no pair array per entry. A key named `__proto__` is an own
    // property of what JSON.parse makes, and reading it gives that property.
    for (const key in parsed) {
      if (!Object.hasOwn(parsed, key)) continue;
      const value = parsed[key];
      if (sound(key, value)) entries.set(key, value as IndexEntry);
    }
  }
  const { version: _v, lastPulled, ...extra } = head;
  const index: DatastoreIndex = { version: 1, lastPulled: lastPulled as string | undefined, entries, extra };
  if (first === undefined) return { ok: true, index };
  const reason = bad > 1 ? `${first} (and ${bad - 1} more bad entries)` : first;
  // A file mostly sound is a client's slip in a few entries, not another format: its sound entries are kept.
  return entries.size > bad ? { ok: false, reason, salvaged: index } : { ok: false, reason };
}

/** The entry a listed object gets in a fresh index. */
export function entryFor(object: ListedObject): IndexEntry {
  return { key: object.key, size: object.size, lastModified: object.lastModified };
}

/**
 * About how many bytes `serializeIndex` will write, erring high for plain ASCII entries, so that its buffer
 * is allocated once: twice the key, the fields of the contract and the JSON around them.
 */
function estimatedLength(index: { readonly entries: ReadonlyMap<string, IndexEntry>; readonly extra: Record<string, unknown> }): number {
  let bytes = 1024 + (jsonText(index.extra)?.length ?? 0);
  for (const [key, entry] of index.entries) {
    bytes += key.length * 2 + 56;
    if (typeof entry.lastModified === 'string') bytes += entry.lastModified.length;
    if (typeof entry.localMtime === 'string') bytes += entry.localMtime.length + 16;
    if (typeof entry.sha256 === 'string') bytes += entry.sha256.length + 12;
  }
  return bytes;
}

const PLAIN_FIELDS = ['key', 'size', 'lastModified'];

/** True when `JSON.stringify(entry)` would write exactly `{"key":…,"size":…,"lastModified":…}`, in that order. */
function isPlainEntry(key: string, entry: IndexEntry): boolean {
  if (entry.key !== key || typeof entry.size !== 'number' || !Number.isFinite(entry.size) || typeof entry.lastModified !== 'string')
    return false;
  if (entry.toJSON !== undefined) return false;
  let n = 0;
  for (const field in entry) if (field !== PLAIN_FIELDS[n++]) return false;
  return n === 3;
}

/**
 * `"key":{entry}` as JSON; the usual entry is written by hand, its key quoted once (stringifying it twice
 * costs more). A client field holding objects or arrays may be nested deeper than `JSON.stringify` can
 * recurse, so such an entry is written without recursion.
 */
function entryJson(key: string, entry: IndexEntry): string {
  const quoted = JSON.stringify(key);
  if (isPlainEntry(key, entry))
    return `${quoted}:{"key":${quoted},"size":${entry.size},"lastModified":${JSON.stringify(entry.lastModified)}}`;
  return `${quoted}:${isFlat(entry) ? JSON.stringify(entry) : jsonText(entry)}`;
}

/**
 * Serialises an index as compact JSON, entry by entry, straight into one buffer: no giant string and no
 * list of chunks copied again at the end, so a million entries need little more
 * than the bytes themselves. The buffer is sized from an estimate and grown if that falls short.
 */
export function serializeIndex(
  index: Readonly<Omit<DatastoreIndex, 'entries'>> & { readonly entries: ReadonlyMap<string, IndexEntry> },
): Buffer {
  const lastPulled = index.lastPulled ?? new Date().toISOString();
  return serializeEntries({ version: 1, ...index.extra, lastPulled }, index);
}

/**
 * The bytes of an index made as soon as the requests sent so far have gone out, so that the CPU it takes
 * overlaps their round trip (the lock taken before its write); `take` returns them, made now if not yet.
 */
export class EarlyBody {
  private bytes: Buffer | undefined;
  private taken = false;

  constructor(readonly index: DatastoreIndex) {
    setImmediate(() => {
      if (!this.taken) this.bytes = serializeIndex(index);
    });
  }

  /** The index's bytes; those made early are handed out once (a body is written once), then let go. */
  take(): Buffer {
    const bytes = this.bytes ?? serializeIndex(this.index);
    this.taken = true;
    this.bytes = undefined;
    return bytes;
  }
}

/**
 * A partition file as clients write it beside a monolith (`{"version":1,"entries":{…}}`, no `lastPulled`),
 * written as the index is, so entries of any depth fit.
 */
export function serializePartitionFile(entries: ReadonlyMap<string, IndexEntry>): Buffer {
  return serializeEntries({ version: 1 }, { entries, extra: {} });
}

/** A string JSON writes as itself between quotes, in ASCII: no quote, backslash, control or non-ASCII character. */
const PLAIN_TEXT = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** Characters of plain entries gathered before they are copied into the buffer. */
const RUN_LENGTH = 16384;

/** `head` with an `entries` object after its fields, into one buffer (see `serializeIndex`). */
function serializeEntries(
  head: Record<string, unknown>,
  index: { readonly entries: ReadonlyMap<string, IndexEntry>; readonly extra: Record<string, unknown> },
): Buffer {
  let out = Buffer.allocUnsafe(estimatedLength(index));
  let used = 0;
  let written = 0;
  const total = index.entries.size;
  /** Makes room for `length` more bytes; the buffer is regrown for all entries at the length per entry seen so far, with a little room. */
  const room = (length: number): void => {
    if (used + length <= out.length) return;
    const perEntry = (used + length) / Math.max(1, written);
    const size = Math.max(used + length + 1024, Math.ceil(perEntry * Math.max(total, written) * 1.03) + 1024);
    const grown = Buffer.allocUnsafe(size);
    out.copy(grown, 0, 0, used);
    out = grown;
  };
  const text = (value: string): void => {
    room(Buffer.byteLength(value, 'utf8'));
    used += out.write(value, used, 'utf8');
  };
  // Plain entries are gathered as text and copied in runs: one copy per run costs less than several per entry.
  let run = '';
  const flush = (): void => {
    room(run.length);
    used += out.write(run, used, 'latin1');
    run = '';
  };
  text(`${jsonText(head)!.slice(0, -1)},"entries":{`);
  let comma = '';
  for (const [key, entry] of index.entries) {
    // The usual entry is written by hand, without JSON.stringify: its texts need no escaping.
    if (isPlainEntry(key, entry) && PLAIN_TEXT.test(key) && PLAIN_TEXT.test(entry.lastModified)) {
      run += `${comma}"${key}":{"key":"${key}","size":${entry.size},"lastModified":"${entry.lastModified}"}`;
      if (run.length >= RUN_LENGTH) flush();
    } else {
      flush();
      text(`${comma}${entryJson(key, entry)}`);
    }
    comma = ',';
    written++;
  }
  flush();
  text('}}');
  // A buffer much larger than its content is cut to size; a little slack is not worth a copy.
  return used < out.length * 0.8 ? Buffer.from(out.subarray(0, used)) : out.subarray(0, used);
}

/** A copy of an index whose entry map can be changed without touching the original. */
export function cloneIndex(index: DatastoreIndex): DatastoreIndex {
  return { ...index, entries: new Map(index.entries), extra: { ...index.extra } };
}
