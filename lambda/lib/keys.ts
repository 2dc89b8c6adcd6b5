/** Key rules of the swamp datastore contract: internal keys, refused keys, namespaces and shard partitions. */
import { CONTROL_DIR, INDEX_KEY, LOCK_KEY, NAMESPACE_MARKER, SHARD_DIR, segmentProblem } from './names';

const INTERNAL_EXACT = new Set([INDEX_KEY, '.push-queue.json', LOCK_KEY, '.datastore-sync-state.json']);
const INTERNAL_LAST_SEGMENT = new Set(['.lock', NAMESPACE_MARKER, '_catalog.db']);
const DOT_OR_UNDERSCORE = new Set(['.'.charCodeAt(0), '_'.charCodeAt(0)]);

/** True when a relative key is never indexed: internal to swamp, or a folder marker (`x/`, or the root itself). */
export function isInternalKey(rel: string): boolean {
  // Consoles create zero-byte "folders"; a client cannot store a file named `data/`, so they are not data.
  if (rel === '' || rel.endsWith('/')) return true;
  // Every other internal key starts, or has its last segment start, with `.` or `_`: the usual key is told at once.
  const last = rel.lastIndexOf('/') + 1;
  if (!DOT_OR_UNDERSCORE.has(rel.charCodeAt(0)) && !DOT_OR_UNDERSCORE.has(rel.charCodeAt(last))) return false;
  if (INTERNAL_EXACT.has(rel)) return true;
  if (rel === '_index' || rel === '_control' || rel.startsWith(SHARD_DIR) || rel.startsWith(CONTROL_DIR)) return true;
  const segment = rel.slice(last);
  return INTERNAL_LAST_SEGMENT.has(segment) || segment.startsWith('_catalog.db-');
}

/**
 * True when a listed object is left out of every count: an internal key, or an empty folder marker. A key
 * ending in `/` that holds bytes is no marker but data no client can store: it is counted as refused.
 */
export function isSkippedObject(rel: string, size: number): boolean {
  return isInternalKey(rel) && !(size > 0 && rel.endsWith('/'));
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

/**
 * The length of the leading segments of `rel` that name its shard partition (the contract's rule): 0 for a
 * one-segment key (`_root`), undefined when the key cannot be sharded. Its partition joins them with `--`,
 * its folder with `/`. Read by scanning, not splitting: it runs for every key a heal lists or reads.
 */
function partitionLength(rel: string): number | undefined {
  const firstSlash = rel.indexOf('/');
  if (firstSlash < 0) return 0;
  const first = rel.slice(0, firstSlash);
  let kept: number;
  if (DEEP_FOLDERS.has(first)) {
    let count = 2;
    for (let i = rel.indexOf('/', firstSlash + 1); i >= 0; i = rel.indexOf('/', i + 1)) count++;
    if (count < 4) return undefined;
    kept = count >= 6 ? count - 3 : count - 1;
  } else if (first === 'workflow-runs') kept = 2;
  else return FLAT_FOLDERS.has(first) ? firstSlash : undefined;
  let end = firstSlash;
  for (let segment = 1; segment < kept && end >= 0; segment++) end = rel.indexOf('/', end + 1);
  return end < 0 ? undefined : end;
}

/** The shard partition of a relative key, or undefined when the key cannot be sharded. */
export function partitionOf(rel: string): string | undefined {
  const length = partitionLength(rel);
  if (length === undefined) return undefined;
  return length === 0 ? '_root' : rel.slice(0, length).replaceAll('/', '--');
}

/**
 * The folder (a key prefix ending in `/`, from the key's own segments) under which every key of `rel`'s
 * partition with `rel`'s shape lies: '' for `_root` (its keys are spread over the whole root), undefined
 * when the key has no partition. Two folders may name one partition (a segment may hold `--`).
 */
export function partitionFolder(rel: string): string | undefined {
  const length = partitionLength(rel);
  if (length === undefined) return undefined;
  return length === 0 ? '' : rel.slice(0, length + 1);
}

/** A key's partition and folder (see `partitionOf`, `partitionFolder`) from one reading of its segments; undefined when it has no partition. */
export function partitionPlace(rel: string): PartitionPlace | undefined {
  const length = partitionLength(rel);
  return length === undefined ? undefined : placeAt(rel, length);
}

/** The place of `rel`, whose partition ends where `partitionLength` says. */
function placeAt(rel: string, length: number): PartitionPlace {
  return length === 0
    ? { partition: '_root', folder: '' }
    : { partition: rel.slice(0, length).replaceAll('/', '--'), folder: rel.slice(0, length + 1) };
}

/** A key's partition and folder (see `partitionPlace`). */
export interface PartitionPlace {
  readonly partition: string;
  readonly folder: string;
}

/**
 * `partitionPlace` for one call or run that reads many keys, most after another of the same folder (a
 * listing, a grouping): the last place is handed back while keys stay in it, rather than named again.
 */
export function partitionPlaces(): (rel: string) => PartitionPlace | undefined {
  let last: PartitionPlace | undefined;
  return (rel) => {
    const length = partitionLength(rel);
    if (length === undefined) return undefined;
    // `length` is where a `/` stands (0 for `_root`, never handed back): the same length and folder is the same partition.
    if (last?.folder.length === length + 1 && rel.startsWith(last.folder)) return last;
    last = placeAt(rel, length);
    return last;
  };
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
  const problem = segmentProblem(rel);
  if (problem) return `it has ${problem}`;
  for (const segment of rel.split('/')) {
    if (segment.split('\\').some((part) => part === '.' || part === '..')) return 'it has a "." or ".." path segment';
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) return `it has a path segment over ${MAX_SEGMENT_BYTES} bytes`;
  }
  return undefined;
}

/** True when a client would refuse the relative key (see `refusedKeyReason`). */
export function isRefusedKey(rel: string): boolean {
  return refusedKeyReason(rel) !== undefined;
}
