/** The index model: parse, validate, build and serialise `.datastore-index.json`. */

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

/** An object seen in a listing, keyed relative to its scope. */
export interface ListedObject {
  readonly key: string;
  readonly size: number;
  readonly lastModified: string;
  readonly etag: string;
}

/** Outcome of parsing index bytes: a valid index, or why it is unreadable. */
export type ParsedIndex = { ok: true; index: DatastoreIndex } | { ok: false; reason: string };

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
    json = JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    return { ok: false, reason: `not JSON (${(err as Error).message})` };
  }
  if (!isRecord(json)) return { ok: false, reason: 'not a JSON object' };
  if (json.version !== 1) return { ok: false, reason: `unsupported version ${JSON.stringify(json.version)}` };
  if (!isRecord(json.entries)) return { ok: false, reason: 'no "entries" object' };
  if (json.lastPulled !== undefined && typeof json.lastPulled !== 'string') {
    return { ok: false, reason: '"lastPulled" is not a string' };
  }
  const entries = new Map<string, IndexEntry>();
  for (const [key, value] of Object.entries(json.entries)) {
    const problem = validateEntry(key, value);
    if (problem) return { ok: false, reason: problem };
    entries.set(key, value as IndexEntry);
  }
  const { version: _v, lastPulled, entries: _e, ...extra } = json;
  return { ok: true, index: { version: 1, lastPulled: lastPulled as string | undefined, entries, extra } };
}

/** The entry a listed object gets in a fresh index. */
export function entryFor(object: ListedObject): IndexEntry {
  return { key: object.key, size: object.size, lastModified: object.lastModified };
}

/** Serialises an index as compact JSON, entry by entry, so a huge index never needs one giant string. */
export function serializeIndex(index: DatastoreIndex): Buffer {
  const lastPulled = index.lastPulled ?? new Date().toISOString();
  const chunks: Buffer[] = [];
  let pending: string[] = [];
  let pendingLength = 0;
  const flush = (): void => {
    chunks.push(Buffer.from(pending.join(''), 'utf8'));
    pending = [];
    pendingLength = 0;
  };
  const push = (text: string): void => {
    pending.push(text);
    pendingLength += text.length;
    if (pendingLength > 1 << 20) flush();
  };
  const head: Record<string, unknown> = { version: 1, ...index.extra, lastPulled };
  push(JSON.stringify(head).slice(0, -1));
  push(',"entries":{');
  let first = true;
  for (const [key, entry] of index.entries) {
    push(`${first ? '' : ','}${JSON.stringify(key)}:${JSON.stringify(entry)}`);
    first = false;
  }
  push('}}');
  flush();
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}

/** A copy of an index whose entry map can be changed without touching the original. */
export function cloneIndex(index: DatastoreIndex): DatastoreIndex {
  return { ...index, entries: new Map(index.entries), extra: { ...index.extra } };
}
