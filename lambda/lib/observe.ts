/**
 * What S3 says now of some keys: a HeadObject per key, or, where many keys share a folder, one listing of
 * that folder bounded to their key range, which tells the same (size, ETag, LastModified; a key it does not
 * show is gone, as a HEAD's 404 would say) for fewer billed requests.
 */
import { mapLimit } from './concurrency';
import type { ObjectChange } from './events';
import { compareKeys } from './key-space';
import { scopeBase } from './names';
import type { S3Store } from './s3';
import type { IndexScope } from './scope';

/**
 * S3 bills a LIST as a PUT, 12.5 times a GET or HEAD: a listing page pays off only where it answers at
 * least this many keys that would otherwise each cost a HeadObject. Folders with fewer keys are HEADed.
 */
export const MIN_KEYS_PER_LISTING = 13;

/** What S3 says of a key found by a HeadObject or in a listing: created, with its size, ETag and time. */
function created(store: S3Store, key: string, size: number, etag: string, lastModified: string): ObjectChange {
  return { bucket: store.bucket, key, kind: 'created', size, etag, eventTime: lastModified };
}

function removed(store: S3Store, key: string): ObjectChange {
  return { bucket: store.bucket, key, kind: 'removed', eventTime: new Date().toISOString() };
}

/** What S3 says of one key now, as a change: `created` with its size and ETag, or `removed`. */
export async function observeKey(store: S3Store, key: string): Promise<ObjectChange> {
  const info = await store.head(key);
  return info ? created(store, key, info.size, info.etag, info.lastModified.toISOString()) : removed(store, key);
}

/** A string that sorts just before `key` and after `prefix`, for StartAfter; undefined to list from the prefix on. */
function justBefore(key: string, prefix: string): string | undefined {
  // Whole code points only: half a surrogate pair is no key S3 can compare.
  const unit = key.charCodeAt(key.length - 1);
  const shorter = key.slice(0, key.length - (unit >= 0xdc00 && unit <= 0xdfff && key.length > 1 ? 2 : 1));
  return shorter.length > prefix.length ? shorter : undefined;
}

/**
 * Lists `keys` (full keys, sorted as S3 sorts, all directly in `folder`) and notes what it finds. The
 * listing starts just before the first key and stops once past the last; a page that answered fewer than
 * `MIN_KEYS_PER_LISTING` keys (the folder holds many others between them) ends it, and so do fewer keys
 * left than that. Returns the keys left for HeadObject.
 */
async function listFolder(store: S3Store, folder: string, keys: readonly string[], into: Map<string, ObjectChange>): Promise<string[]> {
  const wanted = new Set(keys);
  let next = 0;
  for await (const page of store.listPages({ prefix: folder, delimiter: '/', startAfter: justBefore(keys[0], folder) })) {
    let lastListed: string | undefined;
    for (const o of page.objects) {
      if (wanted.has(o.key) && !into.has(o.key)) into.set(o.key, created(store, o.key, o.size, o.etag, o.lastModified));
      if (lastListed === undefined || compareKeys(o.key, lastListed) > 0) lastListed = o.key;
    }
    for (const p of page.prefixes) if (lastListed === undefined || compareKeys(p, lastListed) > 0) lastListed = p;
    // Every key up to the last one listed has been shown if it exists; a key not shown is gone.
    const answeredFrom = next;
    while (next < keys.length && (!page.truncated || (lastListed !== undefined && compareKeys(keys[next], lastListed) <= 0))) {
      if (!into.has(keys[next])) into.set(keys[next], removed(store, keys[next]));
      next++;
    }
    const left = keys.length - next;
    if (left === 0) return [];
    if (next - answeredFrom < MIN_KEYS_PER_LISTING || left < MIN_KEYS_PER_LISTING) return keys.slice(next);
  }
  return keys.slice(next);
}

/**
 * What S3 says now about some keys of a scope, as changes: `created` with the object's size, ETag and
 * LastModified, or `removed` when it is gone. A folder holding at least `MIN_KEYS_PER_LISTING` of the keys
 * is listed over their range; other keys get a HeadObject each, `concurrency` requests at a time. Used to
 * re-check a delta that a client's unconditional push may have erased, and to check doubtful events.
 */
export async function observeKeys(
  store: S3Store,
  scope: IndexScope,
  rels: Iterable<string>,
  concurrency = 16,
): Promise<Map<string, ObjectChange>> {
  const base = scopeBase(scope);
  const byFolder = new Map<string, string[]>();
  for (const rel of new Set(rels)) {
    const key = base + rel;
    const folder = key.slice(0, key.lastIndexOf('/') + 1);
    const list = byFolder.get(folder) ?? [];
    list.push(key);
    byFolder.set(folder, list);
  }
  const found = new Map<string, ObjectChange>();
  const heads: string[] = [];
  const listings: [string, string[]][] = [];
  for (const [folder, keys] of byFolder) {
    if (keys.length >= MIN_KEYS_PER_LISTING) listings.push([folder, keys.sort(compareKeys)]);
    else heads.push(...keys);
  }
  type Task = { readonly head: string } | { readonly folder: string; readonly keys: string[] };
  const tasks: Task[] = [...listings.map(([folder, keys]) => ({ folder, keys })), ...heads.map((head) => ({ head }))];
  const headKey = async (key: string): Promise<void> => {
    found.set(key, await observeKey(store, key));
  };
  const leftOver = await mapLimit(tasks, concurrency, async (task) => {
    if ('head' in task) return void (await headKey(task.head));
    return listFolder(store, task.folder, task.keys, found);
  });
  await mapLimit(
    leftOver.flatMap((keys) => keys ?? []),
    concurrency,
    headKey,
  );
  return new Map([...found].map(([key, change]) => [key.slice(base.length), change]));
}
