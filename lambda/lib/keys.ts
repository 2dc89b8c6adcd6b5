/** Key rules of the swamp datastore contract: internal keys, namespaces and shard partitions. */

/** The monolithic index, relative to a datastore root or namespace. */
export const INDEX_KEY = '.datastore-index.json';
/** The writers' lock, one per datastore root. */
export const LOCK_KEY = '.datastore.lock';
/** Control records of a scope; clients keep their own here too, so the indexer uses only `INDEXER_DIR`. */
export const CONTROL_DIR = '_control/';
/** The root's folder of everything the indexer itself writes (unreadable copies, repair progress, publish intents). */
export const INDEXER_DIR = `${CONTROL_DIR}datastore-indexer/`;
/** Where a shard-first root keeps its index. */
export const SHARD_DIR = '_index/';
/** The partition manifest (`_meta.json`): version 2 makes a scope shard-first, version 1 dual-write. */
export const SHARD_META_KEY = `${SHARD_DIR}_meta.json`;
/** The marker object that makes a top-level folder a namespace. */
export const NAMESPACE_MARKER = '.namespace.json';

const INTERNAL_EXACT = new Set([INDEX_KEY, '.push-queue.json', LOCK_KEY, '.datastore-sync-state.json']);
const INTERNAL_LAST_SEGMENT = new Set(['.lock', NAMESPACE_MARKER, '_catalog.db']);

/** True when a relative key is never indexed: internal to swamp, or a folder marker (`x/`, or the root itself). */
export function isInternalKey(rel: string): boolean {
  // Consoles create zero-byte "folders"; a client cannot store a file named `data/`, so they are not data.
  if (rel === '' || rel.endsWith('/')) return true;
  if (INTERNAL_EXACT.has(rel)) return true;
  if (rel === '_index' || rel === '_control' || rel.startsWith(SHARD_DIR) || rel.startsWith(CONTROL_DIR)) return true;
  const last = rel.slice(rel.lastIndexOf('/') + 1);
  return INTERNAL_LAST_SEGMENT.has(last) || last.startsWith('_catalog.db-');
}

/** The namespace a key's marker declares (`<ns>/.namespace.json`), or undefined. */
export function namespaceOfMarker(rel: string): string | undefined {
  const slash = rel.indexOf('/');
  if (slash <= 0 || rel.slice(slash + 1) !== NAMESPACE_MARKER) return undefined;
  return rel.slice(0, slash);
}

/** The top-level folder of a relative key, or undefined for a key at the top. */
export function topFolder(rel: string): string | undefined {
  const slash = rel.indexOf('/');
  return slash > 0 ? rel.slice(0, slash) : undefined;
}

const DEEP_FOLDERS = new Set(['data', 'outputs', 'definitions-evaluated']);
const FLAT_FOLDERS = new Set(['workflows-evaluated', 'auto-definitions', 'audit', 'telemetry', 'logs', 'files']);

/** The shard partition of a relative key, or undefined when the key cannot be sharded. */
export function partitionOf(rel: string): string | undefined {
  const segments = rel.split('/');
  const count = segments.length;
  if (count === 1) return '_root';
  const first = segments[0];
  if (DEEP_FOLDERS.has(first)) {
    if (count < 4) return undefined;
    return segments.slice(0, count >= 6 ? count - 3 : count - 1).join('--');
  }
  if (first === 'workflow-runs') return count < 3 ? undefined : `workflow-runs--${segments[1]}`;
  if (FLAT_FOLDERS.has(first)) return first;
  return undefined;
}

/** A path segment longer than this many UTF-8 bytes cannot be a file name on any common file system. */
export const MAX_SEGMENT_BYTES = 255;

const SUSPECT = /(^|\/)\.{1,2}(\/|$)|\/\/|^\/|\/$|^$|\\|\0/;

/**
 * Why a client would refuse a relative key (or could not store it), or undefined when it is fine: a `.` or
 * `..` segment, an empty segment, a leading `/` or `\`, a NUL, a `.`/`..` between backslashes (a path on
 * Windows), or a segment over 255 bytes. Such a key in an index stops every pull ("Path traversal
 * detected") or fails on every pull, so it never enters an index.
 */
export function refusedKeyReason(rel: string): string | undefined {
  // The usual key: nothing suspect, and too short (3 UTF-8 bytes at most per UTF-16 unit) for a long segment.
  if (rel.length <= MAX_SEGMENT_BYTES / 3 && !SUSPECT.test(rel)) return undefined;
  if (rel.startsWith('/') || rel.startsWith('\\')) return 'it starts with a slash';
  if (rel.includes('\0')) return 'it holds a NUL character';
  for (const segment of rel.split('/')) {
    if (segment === '') return 'it has an empty path segment';
    if (segment.split('\\').some((part) => part === '.' || part === '..')) return 'it has a "." or ".." path segment';
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) return `it has a path segment over ${MAX_SEGMENT_BYTES} bytes`;
  }
  return undefined;
}

/** True when a client would refuse the relative key (see `refusedKeyReason`). */
export function isRefusedKey(rel: string): boolean {
  return refusedKeyReason(rel) !== undefined;
}

/** The folder under `INDEXER_DIR` that names a scope: `root` or `ns/<namespace>`. */
export function indexerScopeFolder(namespace: string | undefined): string {
  return namespace ? `ns/${namespace}` : 'root';
}
