/** Key rules of the swamp datastore contract: internal keys, namespaces and shard partitions. */

/** The monolithic index, relative to a datastore root or namespace. */
export const INDEX_KEY = '.datastore-index.json';
/** The writers' lock, one per datastore root. */
export const LOCK_KEY = '.datastore.lock';
/** Where the indexer keeps copies and progress; clients ignore it. */
export const CONTROL_DIR = '_control/';
/** Where a shard-first root keeps its index. */
export const SHARD_DIR = '_index/';
/** The shard-first manifest. */
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
