/**
 * A resumable repair of a shard-first scope, partition by partition: each run lists on from where the last
 * stopped, commits the partitions it passes, and saves only what the next run needs (partitions not passed
 * yet with their objects listed so far, and the tally), so no run holds more than a window of the root.
 */
import { mapLimit } from './concurrency';
import { PARTITION_WINDOW, healGathered, healRoot } from './heal';
import { HealRun } from './heal-run';
import { feedListing } from './heal-stream';
import type { HealReport, ScopeReport } from './heal-types';
import { type ShardBase, shardBaseFor } from './layouts/shard-chunk';
import { holdHeapGrowth } from './memory';
import { repairPartsDir, repairProgressKey } from './names';
import { parallelLister } from './parallel-list';
import type { RepairProgress, ResumableRepairOptions, ResumableRepairResult } from './repair-types';
import type { S3Store } from './s3';
import type { DatastoreRoot } from './scope';
import { type PausedPartitions, PartitionHeal } from './shard-heal';

/** What a paused repair by partitions saves beside its progress, as JSON. */
interface SavedRun {
  readonly heal: PausedPartitions;
  /** Top-level folders asked about, and whether each is a namespace. */
  readonly folders: [folder: string, namespace: boolean][];
  readonly objectsSeen: number;
}

function isSavedRun(value: unknown): value is SavedRun {
  const run = value as Partial<SavedRun> | null;
  return (
    typeof run === 'object' &&
    run !== null &&
    typeof run.heal === 'object' &&
    Array.isArray(run.folders) &&
    typeof run.objectsSeen === 'number'
  );
}

/** The run saved under `progress.parts[0]`, or undefined when it is gone or does not read (the repair then starts over). */
async function loadRun(store: S3Store, progress: RepairProgress): Promise<SavedRun | undefined> {
  const key = progress.parts[0];
  const object = key === undefined ? undefined : await store.get(key);
  if (!object) return undefined;
  try {
    const parsed: unknown = JSON.parse(object.body.toString('utf8'));
    return isSavedRun(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One run of a resumable repair (see `repairResumable`) of a scope whose layout is whole shard-first (see
 * `shardBaseFor`): listed in parallel after the last run's last key, healed by partitions as it goes, and,
 * when time runs short, paused with its progress saved. Namespaces inside the root found in an earlier run
 * are healed at the end from a listing of their own, as their objects listed then were not kept.
 * Undefined, having written nothing, when the scope's layout is not whole shard-first.
 */
export async function repairByPartitions(
  store: S3Store,
  root: DatastoreRoot,
  options: ResumableRepairOptions,
  progress: RepairProgress | undefined,
): Promise<ResumableRepairResult | undefined> {
  const shards = await shardBaseFor(store, options.namespace ? { root, namespace: options.namespace } : { root });
  if (!shards) return undefined;
  const release = holdHeapGrowth();
  try {
    return await repairShards(store, root, options, progress, shards);
  } finally {
    release();
  }
}

/** `repairByPartitions` of a scope found whole shard-first (`shards`). */
async function repairShards(
  store: S3Store,
  root: DatastoreRoot,
  options: ResumableRepairOptions,
  progress: RepairProgress | undefined,
  shards: ShardBase,
): Promise<ResumableRepairResult> {
  const saving = options.mode === 'repair';
  const saved = progress?.byPartitions ? await loadRun(store, progress) : undefined;
  const earlier = saved ? progress : undefined;
  const run = new HealRun(store, root, options, earlier ? Date.parse(earlier.startedAt) : Date.now());
  const { base } = run;
  const runStarted = Date.now();
  const reserveMs = options.reserveMs ?? 60_000;
  const heal = new PartitionHeal(run, run.target, shards, saved?.heal);
  const lister = parallelLister({ window: PARTITION_WINDOW, etags: false, startAfter: earlier?.lastKey, pageSize: options.pageSize });
  const source = { base, pages: lister(store, base), namespaces: !options.namespace, stopWhen: () => options.remainingMs() < reserveMs };
  const carried = saved ? { folders: new Map(saved.folders), objectsSeen: saved.objectsSeen } : undefined;
  const fed = await feedListing(run, heal, source, carried);
  const invocations = (earlier?.invocations ?? 0) + 1;
  const oldParts = earlier?.parts ?? [];
  const progressKey = repairProgressKey(root, options.namespace);

  if (fed.stoppedAfter !== undefined) {
    const listingMs = Date.now() - runStarted;
    const result = { status: 'incomplete', objectsListed: fed.objectsSeen, lastKey: fed.stoppedAfter, invocations, listingMs } as const;
    if (!saving) return result;
    const paused: SavedRun = { heal: await heal.pause(), folders: [...fed.folders], objectsSeen: fed.objectsSeen };
    const partKey = `${repairPartsDir(root, options.namespace)}${String(invocations).padStart(5, '0')}-${runStarted}.json`;
    await store.put(partKey, JSON.stringify(paused));
    const next: RepairProgress = {
      version: 1,
      startedAt: new Date(run.listingStartedAt).toISOString(),
      lastKey: fed.stoppedAfter,
      objectsListed: fed.objectsSeen,
      invocations,
      parts: [partKey],
      updatedAt: new Date().toISOString(),
      byPartitions: true,
    };
    await store.put(progressKey, JSON.stringify(next));
    // The run before is now carried by this one.
    await mapLimit(oldParts, 8, (key) => store.delete(key));
    return { ...result, progressKey };
  }

  const listingMs = Date.now() - runStarted;
  const scopes: ScopeReport[] = [await heal.finish(), ...(await healGathered(run, fed))];
  const found = new Set(fed.namespaces.keys());
  const before = [...(carried?.folders ?? [])].filter(([ns, isNamespace]) => isNamespace && !found.has(ns) && !options.skipNamespace?.(ns));
  for (const [ns] of before.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    scopes.push(...(await healRoot(store, root, { ...options, namespace: ns })).scopes);
  }
  if (saving && earlier) {
    // Progress first: parts without progress are ignored, progress without parts is dropped.
    await store.delete(progressKey);
    await mapLimit(oldParts, 8, (key) => store.delete(key));
  }
  const report: HealReport = { root, scopes, objectsSeen: fed.objectsSeen, listingMs };
  return { status: 'complete', report, invocations, confirmed: 0 };
}
