/** Hydrating a local cache from an index: every entry missing locally or of another size is downloaded. */
import { createHash } from 'node:crypto';
import { mkdir, opendir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { type Stats, createWriteStream, renameSync, statSync, writeFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { mapLimit } from './concurrency';
import { IndexerError, PublishConflictError, UnsafeKeyError } from './errors';
import { type HealOptions, type HealReport, type ScopeReport, healRoot } from './heal';
import { type DatastoreIndex, serializeIndex } from './index-file';
import { CONTROL_DIR, INDEXER_DIR, INDEX_KEY } from './keys';
import { readLiveIndex } from './live-index';
import { type DatastoreRoot, type IndexScope, describeScope, scopeBase } from './root';
import type { S3Store } from './s3';

/**
 * Parallel downloads unless told otherwise: on the bench's S3 model (30 ms per request, 5,000 files) 64 took
 * half the time of 16 and no more CPU per file (README, Performance); swamp's own pull runs 50.
 */
export const DEFAULT_HYDRATE_CONCURRENCY = 64;

/** How to hydrate. */
export interface HydrateOptions {
  readonly cacheDir: string;
  /** The folder under `cacheDir` the files land in (a namespace's, as current clients keep it); the index copy stays at `cacheDir`. */
  readonly subdir?: string;
  /** Parallel downloads. @default DEFAULT_HYDRATE_CONCURRENCY (64) */
  readonly concurrency?: number;
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
}

/** The cache path of a relative key, or an `UnsafeKeyError` when it would escape the cache or alias another key. */
export function cachePathOf(cacheDir: string, rel: string): string {
  const root = resolve(cacheDir);
  const segments = rel.split('/');
  if (
    rel.length === 0 ||
    isAbsolute(rel) ||
    rel.includes('\0') ||
    rel.includes('\\') ||
    segments.some((s) => s === '' || s === '.' || s === '..')
  ) {
    throw new UnsafeKeyError(rel);
  }
  const path = resolve(root, ...segments);
  if (!path.startsWith(root + sep)) throw new UnsafeKeyError(rel);
  return path;
}

/** Downloads what the cache lacks, atomically per file so an interrupted run resumes where it stopped. */
export async function hydrateCache(
  store: S3Store,
  scope: IndexScope,
  index: DatastoreIndex,
  options: HydrateOptions,
): Promise<HydrateReport> {
  const cacheDir = resolve(options.cacheDir);
  await makeFolder(cacheDir);
  // A folder that starts empty has nothing present: the first hydrate of a laptop or a CI runner skips a stat per file.
  const startedEmpty = await isEmptyFolder(cacheDir);
  const base = scopeBase(scope);
  const refused: string[] = [];
  const failed: { key: string; error: string }[] = [];
  const total = index.entries.size;
  let pulled = 0;
  let present = 0;
  let bytes = 0;
  let done = 0;
  const settle = (): void => options.onProgress?.(++done, total);
  const dirs = new Map([[cacheDir, Promise.resolve()]]);

  await mapLimit(index.entries.values(), options.concurrency ?? DEFAULT_HYDRATE_CONCURRENCY, async (entry) => {
    let path: string;
    try {
      path = cachePathOf(cacheDir, options.subdir ? `${options.subdir}/${entry.key}` : entry.key);
    } catch {
      refused.push(entry.key);
      return settle();
    }
    const local = startedEmpty ? undefined : localFile(path);
    if (local?.isFile() && local.size === entry.size) {
      present++;
      return settle();
    }
    try {
      const size = await download(store, base + entry.key, path, partPathOf(cacheDir, path), dirs);
      bytes += size;
      pulled++;
    } catch (err) {
      failed.push({ key: entry.key, error: (err as Error).message });
    }
    settle();
  });

  // swamp keeps its own copy of the index beside the files it describes; a failure (a full disk) is reported like a file's.
  const indexCopy = join(cacheDir, INDEX_KEY);
  await writeAtomically(indexCopy, partPathOf(cacheDir, indexCopy), serializeIndex(index), dirs).catch((err: Error) =>
    failed.push({ key: INDEX_KEY, error: err.message }),
  );
  await removePartsFolder(cacheDir);
  refused.sort();
  failed.sort((a, b) => (a.key < b.key ? -1 : 1));
  return { pulled, present, bytes, refused, failed };
}

/** How to heal a root and then hydrate a cache from one of its indexes. */
export interface HealAndHydrateOptions extends HydrateOptions {
  /** Heal only this namespace's index and hydrate from it. @default the root's own index, after healing every index of the root */
  readonly namespace?: string;
  /** How to heal; the mode is always 'repair'. */
  readonly heal?: Omit<HealOptions, 'mode' | 'namespace'>;
  /** Called once the heal is done, before the first download. */
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
 * Heals a root's index (absent, unreadable or drifted) and then downloads what the cache lacks from it:
 * what a swamp client needs before its first pull from a bucket written by others.
 * @example await healAndHydrate(S3Store.connect(config, config.bucket), rootOf(config), { cacheDir: '.swamp/cache' })
 */
export async function healAndHydrate(store: S3Store, root: DatastoreRoot, options: HealAndHydrateOptions): Promise<HealAndHydrateReport> {
  const heal = await healRoot(store, root, { ...options.heal, mode: 'repair', namespace: options.namespace });
  const report = heal.scopes.find((s) => s.namespace === options.namespace);
  if (!report) throw new Error(`healRoot reported no index for ${describeScope({ root, namespace: options.namespace })}`);
  options.onHealed?.(heal);
  const scope: IndexScope = options.namespace ? { root, namespace: options.namespace } : { root };
  const index = report.index ?? (await indexAfterHeal(store, scope, report));
  // Current clients keep a namespace's files under `<cache>/<namespace>/`.
  const hydrate = await hydrateCache(store, scope, index, { ...options, subdir: options.namespace });
  return { heal, scope: report, entries: index.entries.size, hydrate };
}

/** The live index of a scope the heal found true. */
async function indexAfterHeal(store: S3Store, scope: IndexScope, report: ScopeReport): Promise<DatastoreIndex> {
  if (report.held)
    throw new IndexerError(
      `The index of ${describeScope(scope)} cannot be read: ${report.held}`,
      'Fix or remove _index/_meta.json, then run again',
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

/** The file at `path`, or undefined when none can be read there (absent, or a file stands where a folder should). */
function localFile(path: string): Stats | undefined {
  // Synchronous: a stat costs microseconds, less than a hop to libuv's thread pool.
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** Whether `path` is a folder without entries; reads one entry at most, however large the folder. */
async function isEmptyFolder(path: string): Promise<boolean> {
  const dir = await opendir(path);
  try {
    return (await dir.read()) === null;
  } finally {
    await dir.close();
  }
}

/** Bodies of at most this many bytes are read into memory and written in one call; larger ones stream to disk. */
const BUFFERED_BODY_MAX = 1 << 20;

/**
 * Makes a folder and its missing parents one level at a time, failing with the path at fault: Node's
 * recursive mkdir spins forever under /proc, and a file in the way would otherwise surface as a bare ENOTDIR.
 */
export async function makeFolder(path: string): Promise<void> {
  const missing: string[] = [];
  const fail = (at: string, err: unknown): never => {
    const code = (err as NodeJS.ErrnoException)?.code ?? String(err);
    const why = code === 'ENOTDIR' || code === 'EEXIST' ? 'a part of it is a file, not a folder' : code;
    throw new IndexerError(`Cannot make the cache folder ${path}: ${at} (${why})`, 'Give --cache a folder you can write to');
  };
  for (let at = resolve(path); ; at = dirname(at)) {
    const info = await stat(at).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : fail(at, err)));
    if (info) {
      if (!info.isDirectory()) fail(at, Object.assign(new Error(), { code: 'ENOTDIR' }));
      break;
    }
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const dir of missing) await mkdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? undefined : fail(dir, err)));
}

/**
 * Where the download of `path` is written before its rename: under the cache's `_control/`, which no data
 * key reaches (clients never sync it), so no key can be named like a temporary file. The name is fixed per
 * path, so a download an interrupted run left half done is simply replaced.
 */
export function partPathOf(cacheDir: string, path: string): string {
  return join(resolve(cacheDir), INDEXER_DIR, 'parts', `${createHash('sha256').update(path).digest('hex').slice(0, 40)}.part`);
}

/** Removes the folder of temporary files, and its parents if they are left empty. */
async function removePartsFolder(cacheDir: string): Promise<void> {
  const parts = join(resolve(cacheDir), INDEXER_DIR, 'parts');
  await rm(parts, { recursive: true, force: true }).catch(() => undefined);
  for (const dir of [join(resolve(cacheDir), INDEXER_DIR), join(resolve(cacheDir), CONTROL_DIR)]) {
    const removed = await rmdir(dir).then(
      () => true,
      () => false,
    );
    if (!removed) break;
  }
}

/** An fs error as a message naming the file (ENOSPC alone names nothing). */
function fileError(err: unknown, path: string): Error {
  const e = err as NodeJS.ErrnoException;
  if (e?.code === undefined || e.message.includes(path)) return err as Error;
  const why = e.code === 'ENOSPC' ? 'no space left on device' : e.message;
  return new IndexerError(
    `Cannot write ${path}: ${why}`,
    e.code === 'ENOSPC' ? 'Free disk space, then run the same command again to resume' : undefined,
    { cause: err },
  );
}

/**
 * Downloads an object to its part file (see `partPathOf`), then renames it to `path`: a run killed midway
 * leaves at most a part file, which never counts as present.
 */
async function download(store: S3Store, key: string, path: string, part: string, dirs: Map<string, Promise<void>>): Promise<number> {
  const object = await store.open(key);
  if (!object) throw new Error(`object s3://${store.bucket}/${key} is gone (404)`);
  const expected = object.info.size;
  // Read from the start, so that an error of the body is always heard, even while the folder is being made.
  const body = expected > 0 && expected <= BUFFERED_BODY_MAX ? readBody(object.stream) : undefined;
  body?.catch(() => undefined); // awaited below
  try {
    await Promise.all([madeDir(dirs, dirname(path)), madeDir(dirs, dirname(part))]);
    let size: number;
    if (body) {
      const chunks = await body;
      size = chunks.reduce((n, c) => n + c.length, 0);
      // The HTTP layer fails a body cut short of its Content-Length; this also catches a body longer than announced.
      if (size !== expected) throw new Error(`object s3://${store.bucket}/${key} sent ${size} bytes of the ${expected} announced`);
      writeWhole(path, part, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    } else {
      await pipeline(object.stream, createWriteStream(part));
      size = (await stat(part)).size;
      await rename(part, path);
    }
    return size;
  } catch (err) {
    object.stream.destroy();
    await rm(part, { force: true });
    throw fileError(err, path);
  }
}

/**
 * Makes a folder under the cache once per run, its missing parents first, so each new folder costs one
 * `mkdir` (a recursive one retries from the top); the files of a folder share it.
 */
function madeDir(dirs: Map<string, Promise<void>>, dir: string): Promise<void> {
  let made = dirs.get(dir);
  if (!made) {
    const parent = dirname(dir);
    made = (parent === dir ? Promise.resolve() : madeDir(dirs, parent)).then(() =>
      mkdir(dir).then(
        () => undefined,
        (err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        },
      ),
    );
    dirs.set(dir, made);
  }
  return made;
}

/** The chunks of a body, once it has ended; rejects if it fails or closes first. */
function readBody(stream: Readable): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => {
      ended = true;
      resolve(chunks);
    });
    stream.once('error', reject);
    stream.once('close', () => ended || reject(new Error('the connection closed before the body ended')));
  });
}

/**
 * Writes `body` to `part`, then renames it to `path`, so `path` only ever holds a whole file. Synchronous on
 * purpose: a small file is written in microseconds, and each asynchronous call (open, write, close, rename)
 * would cost two thread-pool handoffs of kernel time.
 */
function writeWhole(path: string, part: string, body: Buffer): void {
  writeFileSync(part, body);
  renameSync(part, path);
}

/** `writeWhole` for a file outside the downloads (the index copy), its part folder made first; a failure names `path`. */
async function writeAtomically(path: string, part: string, body: Buffer, dirs: Map<string, Promise<void>>): Promise<void> {
  try {
    await madeDir(dirs, dirname(part));
    writeWhole(path, part, body);
  } catch (err) {
    await rm(part, { force: true });
    throw fileError(err, path);
  }
}
