/**
 * Every S3 name the indexer reads or writes, per scope, and the one rule for a path's segments. The code,
 * the IAM statements of the stack and the README's permission table all take their names from here.
 */
import { ConfigError } from './errors';
import type { DatastoreRoot, IndexScope } from './scope';

/** The monolithic index, relative to a datastore root or namespace. */
export const INDEX_KEY = '.datastore-index.json';
/** The writers' lock, one per datastore root. */
export const LOCK_KEY = '.datastore.lock';
/** Control records of a scope; clients keep their own here too, so the indexer uses only `INDEXER_DIR`. */
export const CONTROL_DIR = '_control/';
/** The root's folder of everything the indexer itself writes (unreadable copies, repair progress, publish records). */
export const INDEXER_DIR = `${CONTROL_DIR}datastore-indexer/`;
/** Where the partition files of a scope live. */
export const SHARD_DIR = '_index/';
/** The partition manifest (`_meta.json`): version 2 makes a scope shard-first, version 1 dual-write. */
export const SHARD_META_KEY = `${SHARD_DIR}_meta.json`;
/** The marker object that makes a top-level folder a namespace. */
export const NAMESPACE_MARKER = '.namespace.json';

/**
 * What is wrong with the segments of a `/`-separated path, or undefined: an empty segment (`a//b`, a
 * leading or trailing `/`) or a `.`/`..` segment. Such a path means another key to S3 than to a file system.
 */
export function segmentProblem(path: string): string | undefined {
  for (const segment of path.split('/')) {
    if (segment === '') return 'an empty path segment';
    if (segment === '.' || segment === '..') return 'a "." or ".." path segment';
  }
  return undefined;
}

/**
 * Checks a namespace name as a caller gives it (`--namespace`, a direct invoke's `"namespace"`, a heal's
 * `namespace` option) and returns it: one folder name, never `.` or `..`, which would name the root itself
 * or its parent rather than a folder of it.
 */
export function checkNamespaceName(namespace: string, what = 'namespace'): string {
  if (namespace === '' || namespace.includes('/') || segmentProblem(namespace) || /[\u0000-\u001f\u007f]/.test(namespace)) {
    throw new ConfigError(
      `${what} ${JSON.stringify(namespace)} is not a namespace name`,
      'A namespace is one top-level folder of the root that holds .namespace.json, e.g. "team-a"',
    );
  }
  return namespace;
}

/** The key prefix (empty or ending in `/`) of a root. */
export function rootBase(root: DatastoreRoot): string {
  return root.prefix ? `${root.prefix}/` : '';
}

/** The key prefix (empty or ending in `/`) under which a scope's relative keys live. */
export function scopeBase(scope: IndexScope): string {
  return rootBase(scope.root) + (scope.namespace ? `${scope.namespace}/` : '');
}

/** The folder under `INDEXER_DIR` that names a scope: `root` or `ns/<namespace>`. */
export function indexerScopeFolder(namespace: string | undefined): string {
  return namespace ? `ns/${namespace}` : 'root';
}

/** Full key of a scope's monolithic index. */
export function indexKeyOf(scope: IndexScope): string {
  return scopeBase(scope) + INDEX_KEY;
}

/** Full key of a scope's partition manifest. */
export function manifestKeyOf(scope: IndexScope): string {
  return scopeBase(scope) + SHARD_META_KEY;
}

/** Full key of one partition file of a scope. */
export function partitionKeyOf(scope: IndexScope, partition: string): string {
  return `${scopeBase(scope)}${SHARD_DIR}${partition}.json`;
}

/** The partition a scope-relative key names when it is a partition file (`_index/<p>.json`, not the manifest), else undefined. */
export function partitionOfFile(rel: string): string | undefined {
  if (!rel.startsWith(SHARD_DIR) || !rel.endsWith('.json') || rel === SHARD_META_KEY) return undefined;
  const partition = rel.slice(SHARD_DIR.length, -'.json'.length);
  return partition.includes('/') ? undefined : partition;
}

/** Full key of a root's lock (namespaces share it). */
export function lockKeyOf(root: DatastoreRoot): string {
  return rootBase(root) + LOCK_KEY;
}

/** Full key of a namespace's marker. */
export function namespaceMarkerKey(root: DatastoreRoot, namespace: string): string {
  return `${rootBase(root)}${namespace}/${NAMESPACE_MARKER}`;
}

/** The root's folder of everything the indexer writes (namespaces' records included). */
export function indexerDirOf(root: DatastoreRoot): string {
  return rootBase(root) + INDEXER_DIR;
}

/** Full key of the record a publish keeps while a scope's partition files are ahead of its manifest or monolith. */
export function publishRecordKey(scope: IndexScope): string {
  return `${indexerDirOf(scope.root)}publishing/${indexerScopeFolder(scope.namespace)}.json`;
}

/** Full key under which the bytes of an unreadable index object are kept before it is replaced. */
export function unreadableCopyKey(scope: IndexScope, sourceKey: string, now = new Date()): string {
  const folder = `${indexerDirOf(scope.root)}unreadable/${indexerScopeFolder(scope.namespace)}/`;
  return `${folder}${now.toISOString().replace(/[:.]/g, '-')}-${flatName(scope, sourceKey)}`;
}

/** Full key of the one copy kept of a held object's version (named by its ETag), beside the other unreadable copies. */
export function heldCopyKey(scope: IndexScope, sourceKey: string, etag: string): string {
  const folder = `${indexerDirOf(scope.root)}unreadable/${indexerScopeFolder(scope.namespace)}/`;
  return `${folder}held-${etag}-${flatName(scope, sourceKey)}`;
}

function flatName(scope: IndexScope, sourceKey: string): string {
  return sourceKey.slice(scopeBase(scope).length).replace(/\//g, '~');
}

/** Full key of the progress of a repair of the root (or of one namespace): always in the root's indexer folder. */
export function repairProgressKey(root: DatastoreRoot, namespace?: string): string {
  return `${indexerDirOf(root)}repair/${indexerScopeFolder(namespace)}/progress.json`;
}

/** Full key of the folder holding the saved listing parts of a repair of the root (or of one namespace). */
export function repairPartsDir(root: DatastoreRoot, namespace?: string): string {
  return `${indexerDirOf(root)}repair/${indexerScopeFolder(namespace)}/listing/`;
}

/** The folder, relative to a local cache, where hydrate keeps its part files while they download. */
export const CACHE_PARTS_DIR = `${INDEXER_DIR}parts`;
/** The lock file, relative to a local cache, that lets one hydrate at a time write it. */
export const CACHE_LOCK_FILE = `${INDEXER_DIR}hydrate.lock`;
