/** Listing a datastore root: pages streamed from S3 and sorted into the scopes they belong to. */
import type { ListedObject } from './index-file';
import { isSkippedObject, namespaceOfMarker, topFolder } from './keys';
import { NAMESPACE_MARKER, SHARD_DIR, namespaceMarkerKey, partitionOfFile, scopeBase, segmentProblem } from './names';
import type { ListingHint } from './parallel-hint';
import type { ListPage, S3Store } from './s3';
import type { DatastoreRoot, IndexScope } from './scope';

/**
 * Produces every object under a key prefix as a stream of pages, in any order. `hint`, when given, says
 * (once an index is read) where keys lie under the prefix: a lister may cut its work by it, never take
 * its keys from it.
 */
export type Lister = (store: S3Store, prefix: string, hint?: PromiseLike<ListingHint | undefined>) => AsyncIterable<ListPage>;

/** One ListObjectsV2 walk, page after page. */
export const sequentialLister: Lister = (store, prefix) => store.listPages({ prefix });

/** A listing sorted by scope: '' is the root's own index, other names are namespaces. */
export interface ScopedListing {
  /** Data objects by scope, keyed relative to the scope. */
  readonly scopes: Map<string, Map<string, ListedObject>>;
  /** Shard partitions present under each scope's `_index/`. */
  readonly shardPartitions: Map<string, string[]>;
  /** Objects seen in all, internal ones included. */
  readonly objectsSeen: number;
  /** When the listing started (ms since epoch): entries newer than this may be missing from it. */
  readonly startedAt: number;
  readonly listingMs: number;
}

const MARKER_SUFFIX = `/${NAMESPACE_MARKER}`;

/**
 * Lists `base` (empty or ending in `/`) and sorts what it finds into the root scope and its namespaces;
 * `onListed` hears the count of objects listed so far after each page (a long listing's progress).
 * Kept per object: its relative key, size and last-modified time (shared between objects of the same
 * instant), about 200 bytes each with the map entry; the ETag is not kept, nothing reads it.
 */
export async function listScopes(
  store: S3Store,
  base: string,
  lister: Lister = sequentialLister,
  onListed?: (objectsListed: number) => void,
  /** When the listing began, if before this call. */
  startedAt = Date.now(),
): Promise<ScopedListing> {
  const all = new Map<string, ListedObject>();
  const namespaces = new Set<string>();
  // Told apart while the listing waits on the network rather than after it.
  const internal: string[] = [];
  let objectsSeen = 0;
  for await (const page of lister(store, base)) {
    for (const object of page.objects) {
      objectsSeen++;
      const rel = base ? object.key.slice(base.length) : object.key;
      if (rel.endsWith(MARKER_SUFFIX)) {
        const ns = namespaceOfMarker(rel);
        if (ns !== undefined) namespaces.add(ns);
      }
      if (isSkippedObject(rel, object.size)) internal.push(rel);
      all.set(rel, { key: rel, size: object.size, lastModified: object.lastModified });
    }
    onListed?.(objectsSeen);
  }
  const listingMs = Date.now() - startedAt;
  const scopes = new Map<string, Map<string, ListedObject>>([['', all]]);
  const shardPartitions = new Map<string, string[]>();
  if (namespaces.size === 0) {
    // The usual root: only internal keys leave the root scope.
    for (const rel of internal) {
      all.delete(rel);
      notePartition(shardPartitions, '', rel);
    }
    return { scopes, shardPartitions, objectsSeen, startedAt, listingMs };
  }
  for (const ns of namespaces) scopes.set(ns, new Map());
  for (const [rel, object] of all) {
    const top = topFolder(rel);
    const ns = top !== undefined && namespaces.has(top) ? top : '';
    const scopedKey = ns ? rel.slice(ns.length + 1) : rel;
    if (ns) all.delete(rel);
    if (isSkippedObject(scopedKey, object.size)) {
      if (!ns) all.delete(rel);
      notePartition(shardPartitions, ns, scopedKey);
      continue;
    }
    if (ns) scopes.get(ns)!.set(scopedKey, { ...object, key: scopedKey });
  }
  return { scopes, shardPartitions, objectsSeen, startedAt, listingMs };
}

/** True when the root has a namespace of that name: a top-level folder holding `.namespace.json`. */
export async function namespaceExists(store: S3Store, root: DatastoreRoot, namespace: string): Promise<boolean> {
  if (namespace.includes('/') || segmentProblem(namespace)) return false;
  // A listing rather than a HeadObject, so a missing bucket reads as a missing bucket, not a missing namespace.
  const marker = namespaceMarkerKey(root, namespace);
  // The marker sorts first among keys that start with it, so the first page tells.
  for await (const page of store.listPages({ prefix: marker, maxKeys: 1 })) return page.objects.some((o) => o.key === marker);
  return false;
}

/** The partition files under a scope's `_index/`, as clients find them when `_meta.json` is missing. */
export async function listShardPartitions(store: S3Store, scope: IndexScope): Promise<string[]> {
  const base = scopeBase(scope);
  const found = new Map<string, string[]>();
  for await (const page of store.listPages({ prefix: base + SHARD_DIR })) {
    for (const object of page.objects) notePartition(found, '', object.key.slice(base.length));
  }
  return (found.get('') ?? []).sort();
}

/** Notes the shard partition of an internal key `rel` (a partition file under `_index/`) among those seen in scope `ns`. */
export function notePartition(into: Map<string, string[]>, ns: string, rel: string): void {
  const partition = partitionOfFile(rel);
  if (partition === undefined) return;
  const list = into.get(ns) ?? [];
  list.push(partition);
  into.set(ns, list);
}
