/**
 * A full repair that may outlive one invocation: the listing stops when time runs short, what was listed
 * is saved under the root's `_control/datastore-indexer/repair/`, and a later run resumes after the last key. Nothing is published until the
 * listing is complete: a partial listing is never published as a complete index.
 */
import { mapLimit } from './concurrency';
import { heal } from './heal';
import { HealRun } from './heal-run';
import type { IndexEntry, ListedObject } from './index-file';
import { readLiveIndex } from './layouts/read';
import { baseIndexOf } from './layouts/types';
import { type Lister, type ScopedListing, listScopes } from './list';
import { isoTime } from './list-xml';
import { MemoryGuard, memoryBudget } from './memory';
import { checkNamespaceName, repairPartsDir, repairProgressKey, rootBase } from './names';
import { repairByPartitions } from './repair-partitions';
import type { RepairProgress, ResumableRepairOptions, ResumableRepairResult } from './repair-types';
import type { ListPage, S3Store } from './s3';
import { type DatastoreRoot, type IndexScope, describeScope } from './scope';

export type { RepairProgress, ResumableRepairOptions, ResumableRepairResult } from './repair-types';

type Listed = ListPage['objects'][number];
type PartRow = [key: string, size: number, lastModified: string, etag: string];

function isProgress(value: unknown): value is RepairProgress {
  const p = value as Partial<RepairProgress>;
  return (
    typeof value === 'object' &&
    value !== null &&
    p.version === 1 &&
    typeof p.startedAt === 'string' &&
    typeof p.lastKey === 'string' &&
    Array.isArray(p.parts) &&
    p.parts.every((k) => typeof k === 'string')
  );
}

/** The saved progress at `progressKey` (see `repairProgressKey`), or undefined when there is none (or it is unusable or too old). */
export async function loadRepairProgress(store: S3Store, progressKey: string, maxAgeMs = 86_400_000): Promise<RepairProgress | undefined> {
  const object = await store.get(progressKey);
  if (!object) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(object.body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isProgress(parsed) || !(Date.now() - Date.parse(parsed.startedAt) < maxAgeMs)) return undefined;
  return parsed;
}

async function loadParts(store: S3Store, parts: readonly string[]): Promise<Listed[] | undefined> {
  const objects: Listed[] = [];
  for (const key of parts) {
    const part = await store.get(key);
    if (!part) return undefined;
    try {
      const rows = JSON.parse(part.body.toString('utf8')) as PartRow[];
      // Times were written by toISOString; one that does not read back (a RangeError) makes the part unusable too.
      for (const [k, size, lastModified, etag] of rows) objects.push({ key: k, size, lastModified: isoTime(new Date(lastModified)), etag });
    } catch {
      return undefined;
    }
  }
  return objects;
}

const memoryLister =
  (objects: Listed[]): Lister =>
  () =>
    (async function* () {
      yield { objects, prefixes: [] };
    })();

/**
 * Lists a root (or one namespace) until done or until time runs short. When short, `repair` saves what it
 * listed under the root's `_control/datastore-indexer/repair/` and returns `incomplete`; the next run resumes after the last key. Once the
 * listing is complete it heals exactly like `healRoot` (stale entries confirmed with HeadObject), after
 * confirming with HeadObject the drift of objects listed in earlier runs, which may have changed since, and
 * then removes the saved progress.
 *
 * @example
 * const run = await repairResumable(store, root, { mode: 'repair', remainingMs: () => context.getRemainingTimeInMillis() });
 * if (run.status === 'incomplete') await enqueueContinuation(root); // or let the next schedule resume it
 */
export async function repairResumable(
  store: S3Store,
  root: DatastoreRoot,
  options: ResumableRepairOptions,
): Promise<ResumableRepairResult> {
  const base = rootBase(root) + (options.namespace ? `${checkNamespaceName(options.namespace)}/` : '');
  const reserveMs = options.reserveMs ?? 60_000;
  const saving = options.mode === 'repair';
  const progressKey = repairProgressKey(root, options.namespace);
  let progress = saving ? await loadRepairProgress(store, progressKey, options.maxProgressAgeMs) : undefined;
  // A whole shard-first scope is healed by partitions across runs; one that stopped being so starts over.
  if (!progress || progress.byPartitions) {
    const byPartitions = await repairByPartitions(store, root, options, progress);
    if (byPartitions) return byPartitions;
    progress = undefined;
  }
  let earlier: Listed[] = [];
  if (progress) {
    const loaded = await loadParts(store, progress.parts);
    if (loaded) earlier = loaded;
    else progress = undefined; // a part went missing or does not read: start over rather than heal from half a listing
  }
  const startedAt = progress ? Date.parse(progress.startedAt) : Date.now();
  const runStarted = Date.now();
  const fresh: Listed[] = [];
  let lastKey = progress?.lastKey;
  let stopped = false;
  // Held as listed until the listing is complete: stop as soon as it could not fit (see `healRoot`).
  const guard = new MemoryGuard(memoryBudget(options.memoryBudget));
  const name = describeScope(options.namespace ? { root, namespace: options.namespace } : { root });
  guard.page(name, base, earlier);
  for await (const page of store.listPages({ prefix: base, startAfter: lastKey, maxKeys: options.pageSize })) {
    fresh.push(...page.objects);
    guard.page(name, base, page.objects);
    if (page.objects.length) lastKey = page.objects[page.objects.length - 1].key;
    if (page.truncated !== false && options.remainingMs() < reserveMs) {
      stopped = true;
      break;
    }
  }
  const invocations = (progress?.invocations ?? 0) + 1;

  if (stopped) {
    const objectsListed = earlier.length + fresh.length;
    if (!saving) return { status: 'incomplete', objectsListed, lastKey: lastKey ?? '', invocations, listingMs: Date.now() - runStarted };
    const partKey = `${repairPartsDir(root, options.namespace)}${String(invocations).padStart(5, '0')}-${runStarted}.json`;
    const rows: PartRow[] = fresh.map((o) => [o.key, o.size, o.lastModified, o.etag]);
    await store.put(partKey, JSON.stringify(rows));
    const next: RepairProgress = {
      version: 1,
      startedAt: new Date(startedAt).toISOString(),
      lastKey: lastKey ?? '',
      objectsListed,
      invocations,
      parts: [...(progress?.parts ?? []), partKey],
      updatedAt: new Date().toISOString(),
    };
    await store.put(progressKey, JSON.stringify(next));
    return { status: 'incomplete', progressKey, objectsListed, lastKey: next.lastKey, invocations, listingMs: Date.now() - runStarted };
  }

  const earlierKeys = new Set(earlier.map((o) => o.key));
  const partsDir = repairPartsDir(root, options.namespace);
  const leftovers = [...earlier, ...fresh].filter((o) => o.key.startsWith(partsDir)).map((o) => o.key);
  // Sorted into scopes, the objects as listed are let go: the heal holds the listing once, not twice.
  const listed = await listScopes(store, base, memoryLister(earlier.concat(fresh.splice(0))));
  earlier = [];
  const listing = { ...listed, startedAt, listingMs: Date.now() - runStarted };
  const run = new HealRun(store, root, { ...options, listing });
  const confirmed = earlierKeys.size ? await confirmEarlier(run, listing, earlierKeys) : 0;
  const report = await heal(run);
  if (saving) {
    // Progress first: parts without progress are ignored, progress without parts is dropped.
    if (progress) await store.delete(progressKey);
    await mapLimit(new Set([...(progress?.parts ?? []), ...leftovers]), 8, (key) => store.delete(key));
  }
  return { status: 'complete', report, invocations, confirmed };
}

/**
 * Objects listed in an earlier run may have been deleted or rewritten since. Where such an object disagrees
 * with the live index (missing from it, or of another size), ask S3 again and list what is there now.
 */
async function confirmEarlier(run: HealRun, listing: ScopedListing, earlierKeys: ReadonlySet<string>): Promise<number> {
  const { store, root, base } = run;
  const { namespace } = run.options;
  let confirmed = 0;
  for (const [ns, objects] of listing.scopes) {
    const scope: IndexScope = namespace ? { root, namespace } : ns ? { root, namespace: ns } : { root };
    const prefix = base + (namespace || !ns ? '' : `${ns}/`);
    const live = await readLiveIndex(store, scope, { shardPartitions: listing.shardPartitions.get(ns) });
    const entries = baseIndexOf(live)?.entries ?? new Map<string, IndexEntry>();
    const doubtful = [...objects.values()].filter((o) => earlierKeys.has(prefix + o.key) && entries.get(o.key)?.size !== o.size);
    await mapLimit(doubtful, run.concurrency, async (object: ListedObject) => {
      confirmed++;
      const info = await store.head(prefix + object.key);
      if (!info) objects.delete(object.key);
      else objects.set(object.key, { key: object.key, size: info.size, lastModified: info.lastModified.toISOString(), etag: info.etag });
    });
  }
  return confirmed;
}
