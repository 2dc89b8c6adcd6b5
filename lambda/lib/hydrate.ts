/** Hydrating a local cache from an index: every entry missing locally or of another size is downloaded. */
import { realpath, rmdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import {
  bufferedBodyMax,
  cachePathOf,
  download,
  fileFolderCollisions,
  holdsOnly,
  localFile,
  madeDir,
  makeFolder,
  numberedPartPath,
  partPathOf,
  removeEmptyControlFolders,
  removePartsFolder,
  writeAtomically,
} from './cache-files';
import { CacheLock } from './cache-lock';
import { CacheWriter, linkRefusal } from './cache-writer';
import { FetchAhead } from './hydrate-ahead';
import { mapLimit } from './concurrency';
import { ArchivedObjectError, CacheError, IndexerError, PublishConflictError, UnexpectedError } from './errors';
import { type HealOptions, type HealReport, type ScopeReport, hasDrift, healRoot } from './heal';
import { type DatastoreIndex, type IndexEntry, serializeIndex } from './index-file';
import { readLiveIndex } from './layouts/read';
import { CACHE_PARTS_DIR, CONTROL_DIR, INDEX_KEY, scopeBase } from './names';
import { type DatastoreRoot, type IndexScope, describeScope } from './scope';
import type { S3Store } from './s3';

/** Parallel downloads unless told otherwise: enough to hide a round trip's latency behind the others (docs/PERFORMANCE.md). */
export const DEFAULT_HYDRATE_CONCURRENCY = 256;

/** How to hydrate. */
export interface HydrateOptions {
  readonly cacheDir: string;
  /** The folder under `cacheDir` the files land in (a namespace's, as current clients keep it); the index copy stays at `cacheDir`. */
  readonly subdir?: string;
  /** Parallel downloads. @default DEFAULT_HYDRATE_CONCURRENCY (256) */
  readonly concurrency?: number;
  /** Called once when another hydrate holds the cache's lock and this one waits its turn. */
  readonly onCacheWait?: (holder: string) => void;
  /** Called after each entry is settled (pulled, present, refused or failed). */
  readonly onProgress?: (done: number, total: number) => void;
}

/** What a hydrate did. */
export interface HydrateReport {
  readonly pulled: number;
  readonly present: number;
  readonly bytes: number;
  /** Keys refused because they would land outside the cache folder. */
  readonly refused: string[];
  /** Keys that could not be downloaded, with why. */
  readonly failed: { key: string; error: string }[];
  /** Keys S3 keeps archived (see `ArchivedObjectError`): indexed, but neither this command nor a client can pull them until restored. */
  readonly archived: ArchivedKey[];
}

/** An indexed object S3 keeps archived. */
export interface ArchivedKey {
  readonly key: string;
  /** The storage class S3 named (`GLACIER`, `DEEP_ARCHIVE`, …), when it did. */
  readonly storageClass?: string;
  /** A restore was asked for and has not ended yet. */
  readonly restoring: boolean;
}

/** A cache folder opened for one hydrate: its real path, held by this process until closed. */
interface OpenCache {
  readonly dir: string;
  /** Releases the cache; folders the opening made are removed again when they were left empty. */
  close(): Promise<void>;
}

/** Refuses an empty cache path: it means the current folder, and an unset shell variable would hydrate wherever the user stands. */
function refuseEmptyCacheDir(cacheDir: string): void {
  if (cacheDir.trim() === '') throw new CacheError('The cache folder is empty', 'Give --cache the path of a folder');
}

/**
 * Opens the cache: makes it, resolves its real path (every write must stay under it), and takes its lock,
 * which also proves it can be written before anything is downloaded.
 */
async function openCache(options: HydrateOptions): Promise<OpenCache> {
  refuseEmptyCacheDir(options.cacheDir);
  const made = await makeFolder(resolve(options.cacheDir));
  const removeMade = async () => {
    for (const folder of [...made].reverse())
      if (
        !(await rmdir(folder).then(
          () => true,
          () => false,
        ))
      )
        break;
  };
  const dir = await realpath(resolve(options.cacheDir));
  let lock: CacheLock;
  try {
    lock = await CacheLock.take(dir, options.onCacheWait);
  } catch (err) {
    await removeMade();
    throw err;
  }
  let closed = false;
  return {
    dir,
    async close() {
      if (closed) return;
      closed = true;
      await removePartsFolder(dir);
      await lock.release();
      await removeEmptyControlFolders(dir);
      await removeMade();
    },
  };
}

/** Downloads what the cache lacks, atomically per file so an interrupted run resumes where it stopped. */
export async function hydrateCache(
  store: S3Store,
  scope: IndexScope,
  index: DatastoreIndex,
  options: HydrateOptions,
): Promise<HydrateReport> {
  const cache = await openCache(options);
  try {
    return await fill(store, scope, index, options, cache.dir);
  } finally {
    await cache.close();
  }
}

/**
 * The downloads of one hydrate into an open cache, in one or more passes over an index's entries (the
 * index a heal planned, then what it published beside it), tallied together.
 */
class Hydration {
  private readonly refused: string[] = [];
  private readonly failed: { key: string; error: string }[] = [];
  private readonly archived: ArchivedKey[] = [];
  private pulled = 0;
  private present = 0;
  private bytes = 0;
  private done = 0;
  private total = 0;
  /** Downloads numbered across passes: each names its own part file. */
  private numbered = 0;
  private stopped = false;
  private passes = 0;
  private readonly dirs: Map<string, Promise<void>>;
  private readonly base: string;
  private readonly writer: CacheWriter;
  private readonly partsDir: string;
  private readonly concurrency: number;
  private readonly bufferedMax: number;
  private startsEmpty?: Promise<boolean>;
  private ahead?: FetchAhead;

  constructor(
    private readonly store: S3Store,
    scope: IndexScope,
    private readonly options: HydrateOptions,
    private readonly cacheDir: string,
  ) {
    this.base = scopeBase(scope);
    this.dirs = new Map([[cacheDir, Promise.resolve()]]);
    this.writer = new CacheWriter([cacheDir]);
    this.partsDir = join(cacheDir, CACHE_PARTS_DIR);
    this.concurrency = options.concurrency ?? DEFAULT_HYDRATE_CONCURRENCY;
    this.bufferedMax = bufferedBodyMax(this.concurrency);
  }

  /**
   * Whether the cache held nothing when first asked: the first hydrate of a laptop or a CI runner skips a
   * stat per file. The control folder, never empty here since it holds our lock, does not count: no indexed
   * key lands in it.
   */
  private empty(): Promise<boolean> {
    const control = CONTROL_DIR.slice(0, -1);
    this.startsEmpty ??= holdsOnly(this.cacheDir, this.options.subdir?.split('/')[0] === control ? [] : [control]);
    return this.startsEmpty;
  }

  /** Fetches ahead, from here on, what `offer` is given, when the cache started empty (see `FetchAhead`). */
  async fetchAhead(): Promise<void> {
    if (!(await this.empty())) return;
    const { cacheDir, concurrency } = this;
    this.ahead = new FetchAhead(this.store, this.writer, {
      cacheDir,
      subdir: this.options.subdir,
      base: this.base,
      partsDir: this.partsDir,
      nextPart: () => this.numbered++,
      concurrency,
      // A few rounds of downloads: what a listing of a few round trips gives time for, and little memory.
      most: 4 * concurrency,
      bufferedMax: this.bufferedMax,
    });
  }

  /** A listing page's objects, fetched ahead if `fetchAhead` found the cache empty. */
  offer(objects: readonly { key: string; size: number }[]): void {
    this.ahead?.offer(objects);
  }

  /** Downloads what the cache lacks of `entries`, keys of `index` (which decides where folders must be). */
  async pull(index: DatastoreIndex, entries: readonly IndexEntry[]): Promise<void> {
    const { options, cacheDir, dirs, writer, partsDir, concurrency, bufferedMax } = this;
    // Only the first pass may trust an empty start: a later one follows the files the first wrote.
    const startedEmpty = this.passes++ === 0 && (await this.empty());
    // The index is planned: what was fetched ahead is placed, or not, and no more is fetched.
    this.ahead?.stop();
    this.total += entries.length;
    const settle = (): void => options.onProgress?.(++this.done, this.total);
    const collisions = fileFolderCollisions(index.entries.keys());
    await mapLimit(entries, concurrency, async (entry) => {
      if (this.stopped) return;
      let path: string;
      try {
        path = cachePathOf(cacheDir, options.subdir ? `${options.subdir}/${entry.key}` : entry.key);
      } catch {
        this.refused.push(entry.key);
        return settle();
      }
      const folderKey = collisions.get(entry.key);
      if (folderKey !== undefined) {
        const error = `it collides with key ${JSON.stringify(folderKey)}, which needs ${path} as a folder; the other keys were pulled. Rename or delete one of the two objects`;
        this.failed.push({ key: entry.key, error });
        return settle();
      }
      try {
        const local = startedEmpty ? undefined : localFile(path);
        if (local?.isSymbolicLink()) throw linkRefusal(path);
        if (local?.isFile() && local.size === entry.size) {
          // Present only if reached through real folders: a linked folder's files lie outside the cache.
          await madeDir(dirs, dirname(path));
          this.present++;
          return settle();
        }
        let size = entry.size;
        if (!(startedEmpty && (await this.ahead?.place(entry, path)))) {
          const part = numberedPartPath(partsDir, this.numbered++);
          size = await download(this.store, this.base + entry.key, path, part, dirs, writer, bufferedMax);
        }
        this.bytes += size;
        this.pulled++;
      } catch (err) {
        if (err instanceof ArchivedObjectError)
          this.archived.push({ key: entry.key, storageClass: err.storageClass, restoring: err.restoring });
        else this.failed.push({ key: entry.key, error: (err as Error).message });
      }
      settle();
    });
  }

  /** Starts no further download; those begun still finish. */
  stop(): void {
    this.stopped = true;
    this.ahead?.stop();
  }

  /** Waits for the fetches ahead still running, then stops the writer's thread. */
  async close(): Promise<void> {
    await this.ahead?.close();
    await this.writer.close();
  }

  /** Keeps `index` beside the files (swamp's own copy) and reports what every pass did. */
  async finish(index: DatastoreIndex): Promise<HydrateReport> {
    // A failure (a full disk) is reported like a file's.
    const indexCopy = join(this.cacheDir, INDEX_KEY);
    await writeAtomically(indexCopy, partPathOf(this.cacheDir, indexCopy), serializeIndex(index), this.dirs).catch((err: Error) =>
      this.failed.push({ key: INDEX_KEY, error: err.message }),
    );
    const { pulled, present, bytes, refused, failed, archived } = this;
    refused.sort();
    failed.sort((a, b) => (a.key < b.key ? -1 : 1));
    archived.sort((a, b) => (a.key < b.key ? -1 : 1));
    return { pulled, present, bytes, refused, failed, archived };
  }
}

async function fill(
  store: S3Store,
  scope: IndexScope,
  index: DatastoreIndex,
  options: HydrateOptions,
  cacheDir: string,
): Promise<HydrateReport> {
  const hydration = new Hydration(store, scope, options, cacheDir);
  try {
    await hydration.pull(index, [...index.entries.values()]);
    return await hydration.finish(index);
  } finally {
    await hydration.close();
  }
}

/** How to heal a root and then hydrate a cache from one of its indexes. */
export interface HealAndHydrateOptions extends HydrateOptions {
  /** Heal only this namespace's index and hydrate from it. @default the root's own index, after healing every index of the root */
  readonly namespace?: string;
  /** How to heal; the mode is always 'repair'. */
  readonly heal?: Omit<HealOptions, 'mode' | 'namespace'>;
  /** Called once the heal is done; downloads of the index it planned may have begun. */
  readonly onHealed?: (report: HealReport) => void;
}

/** What a heal-then-hydrate did. */
export interface HealAndHydrateReport {
  readonly heal: HealReport;
  /** The heal's report for the index the cache was hydrated from. */
  readonly scope: ScopeReport;
  /** Entries of the index the cache was hydrated from. */
  readonly entries: number;
  readonly hydrate: HydrateReport;
}

/**
 * Heals a root's index (absent, unreadable or drifted) and downloads what the cache lacks from it: what a
 * swamp client needs before its first pull from a bucket written by others. Downloads begin once the heal has
 * planned the index, while it publishes; what the index published adds to that plan is pulled after.
 * @example await healAndHydrate(S3Store.connect(config, config.bucket), rootOf(config), { cacheDir: '.swamp/cache' })
 */
export async function healAndHydrate(store: S3Store, root: DatastoreRoot, options: HealAndHydrateOptions): Promise<HealAndHydrateReport> {
  // The cache is opened (made, its lock taken) before the heal publishes anything: a cache that cannot be
  // written stops the run with nothing changed in S3; a folder made for a run that failed is removed again.
  const cache = await openCache(options);
  const scope: IndexScope = options.namespace ? { root, namespace: options.namespace } : { root };
  // Current clients keep a namespace's files under `<cache>/<namespace>/`.
  const hydration = new Hydration(store, scope, { ...options, subdir: options.namespace }, cache.dir);
  try {
    // Downloads begin once the heal has planned the index, while it publishes that index (and heals the
    // root's other indexes): every entry it plans names an object S3 was seen to hold, at the size it held.
    let early: { readonly index: DatastoreIndex; readonly pulls: Promise<void> } | undefined;
    const onPlanned = (healed: IndexScope, index: DatastoreIndex): void => {
      options.heal?.onPlanned?.(healed, index);
      if (early || healed.namespace !== options.namespace) return;
      const pulls = hydration.pull(index, [...index.entries.values()]);
      pulls.catch(() => undefined);
      early = { index, pulls };
    };
    // Into a cache that starts empty, what the listing names is fetched ahead, before the plan (see `FetchAhead`).
    await hydration.fetchAhead();
    const onListedPage = (objects: readonly { key: string; size: number }[]): void => {
      options.heal?.onListedPage?.(objects);
      hydration.offer(objects);
    };
    let heal: HealReport;
    let report: ScopeReport | undefined;
    let index: DatastoreIndex;
    try {
      heal = await healRoot(store, root, { ...options.heal, mode: 'repair', namespace: options.namespace, onPlanned, onListedPage });
      report = heal.scopes.find((s) => s.namespace === options.namespace);
      if (!report)
        throw new UnexpectedError('hydrate', {
          name: 'MissingScopeReport',
          message: `the heal reported no index for ${describeScope({ root, namespace: options.namespace })}`,
        });
      options.onHealed?.(heal);
      // An index found true and left as it was is the one planned; any other not published by this heal is read again.
      const asPlanned = early && !report.published && !hasDrift(report) ? early.index : undefined;
      index = report.index ?? asPlanned ?? (await indexAfterHeal(store, scope, report));
      await early?.pulls;
    } catch (err) {
      // No download starts once the run has failed; those begun finish before the cache is closed.
      hydration.stop();
      await early?.pulls.catch(() => undefined);
      throw err;
    }
    // What the publish changed against the plan (another writer's entries read under the lock) is pulled now.
    const planned = early?.index.entries;
    const rest = planned ? [...index.entries.values()].filter((e) => planned.get(e.key)?.size !== e.size) : [...index.entries.values()];
    if (rest.length > 0 || !early) await hydration.pull(index, rest);
    const hydrate = await hydration.finish(index);
    return { heal, scope: report, entries: index.entries.size, hydrate };
  } finally {
    await hydration.close();
    await cache.close();
  }
}

/** The live index of a scope the heal found true. */
async function indexAfterHeal(store: S3Store, scope: IndexScope, report: ScopeReport): Promise<DatastoreIndex> {
  if (report.held)
    throw new IndexerError(
      `The index of ${describeScope(scope)} was left as it is: ${report.held}`,
      'Nothing was pulled; act on that reason (a newer datastore-indexer for a newer index version; fix or remove a _meta.json that does not parse), then run again',
    );
  const live = await readLiveIndex(store, scope);
  if (live.state !== 'valid') {
    throw new PublishConflictError(
      `The index of ${describeScope(scope)} became ${live.state} right after it was healed`,
      'Another writer is replacing it; run the command again',
    );
  }
  return live.index;
}
