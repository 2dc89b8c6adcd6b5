/** The local cache's files: where a key lands, folders made one level at a time, downloads written whole through part files. */
import { createHash } from 'node:crypto';
import { lstat, mkdir, open, opendir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { type Stats, closeSync, createWriteStream, lstatSync, openSync, renameSync, writeFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { type CacheWriter, PART_FLAGS, fileInTheWay, linkRefusal } from './cache-writer';
import { DownloadError, IndexerError, UnsafeKeyError } from './errors';
import { CACHE_PARTS_DIR, CONTROL_DIR, INDEXER_DIR, segmentProblem } from './names';
import type { OpenedObject, S3Store } from './s3';

/** The cache path of a relative key, or an `UnsafeKeyError` when it would escape the cache or alias another key. */
export function cachePathOf(cacheDir: string, rel: string): string {
  const root = resolve(cacheDir);
  if (isAbsolute(rel) || rel.includes('\0') || rel.includes('\\') || segmentProblem(rel) !== undefined) {
    throw new UnsafeKeyError(rel);
  }
  // With no empty, `.` or `..` segment, the key appended is already the resolved path where `/` separates.
  const path = sep === '/' && root !== '/' ? `${root}/${rel}` : resolve(root, ...rel.split('/'));
  if (!path.startsWith(root + sep)) throw new UnsafeKeyError(rel);
  return path;
}

/**
 * What stands at `path` itself (a symbolic link is not followed), or undefined when nothing can be read
 * there (absent, or a file stands where a folder should).
 */
export function localFile(path: string): Stats | undefined {
  // Synchronous: a stat costs microseconds, less than a hop to libuv's thread pool.
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/**
 * Whether `path` is a folder whose only entries, if any, are named in `besides`; reads a few entries at
 * most, however large the folder.
 */
export async function holdsOnly(path: string, besides: readonly string[] = []): Promise<boolean> {
  const dir = await opendir(path);
  try {
    for (let entry = await dir.read(); entry !== null; entry = await dir.read()) if (!besides.includes(entry.name)) return false;
    return true;
  } finally {
    await dir.close();
  }
}

/** Bodies of at most this many bytes are read into memory and written in one call; larger ones stream to disk. */
const BUFFERED_BODY_MAX = 1 << 20;

/** Bytes of bodies a run's downloads hold in memory at once, at most, however many run at once. */
const BUFFERED_BYTES = 128 << 20;

/** The largest body each of `concurrency` downloads at once reads into memory: its share of the run's budget, 1 MiB at most. */
export function bufferedBodyMax(concurrency: number): number {
  return Math.min(BUFFERED_BODY_MAX, Math.floor(BUFFERED_BYTES / concurrency));
}

/**
 * Makes a folder and its missing parents one level at a time, failing with the path at fault: Node's
 * recursive mkdir spins forever under /proc, and a file in the way would otherwise surface as a bare ENOTDIR.
 * Returns the folders it made, parents first.
 */
export async function makeFolder(path: string): Promise<string[]> {
  const missing: string[] = [];
  const fail = (at: string, err: unknown): never => {
    const code = (err as NodeJS.ErrnoException)?.code ?? String(err);
    const why = code === 'ENOTDIR' || code === 'EEXIST' ? 'a part of it is a file, not a folder' : code;
    throw new IndexerError(`Cannot make the cache folder ${path}: ${at} (${why})`, 'Give --cache a folder you can write to');
  };
  for (let at = resolve(path); ; at = dirname(at)) {
    const info = await stat(at).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : fail(at, err)));
    if (info) {
      if (!info.isDirectory()) fail(at, { code: 'ENOTDIR' });
      break;
    }
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const dir of missing) await mkdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? undefined : fail(dir, err)));
  return missing;
}

/**
 * Where the download of `path` is written before its rename: under the cache's `_control/`, which no data
 * key reaches (clients never sync it), so no key can be named like a temporary file. The name is fixed per
 * path, so a download an interrupted run left half done is simply replaced.
 */
export function partPathOf(cacheDir: string, path: string): string {
  return join(resolve(cacheDir), CACHE_PARTS_DIR, `${createHash('sha256').update(path).digest('hex').slice(0, 40)}.part`);
}

/** The part file of the `n`th download of a run, in `partsDir` (the real `CACHE_PARTS_DIR` of the cache): named without hashing, as one run has one download per number. */
export function numberedPartPath(partsDir: string, n: number): string {
  return `${partsDir}${sep}${n}.part`;
}

/** Removes the folder of temporary files (while the cache lock is held: another hydrate's parts are never touched). */
export async function removePartsFolder(cacheDir: string): Promise<void> {
  await rm(join(resolve(cacheDir), CACHE_PARTS_DIR), { recursive: true, force: true }).catch(() => undefined);
}

/** Removes the cache's control folders when nothing is left in them (once the cache lock is released). */
export async function removeEmptyControlFolders(cacheDir: string): Promise<void> {
  for (const dir of [join(resolve(cacheDir), INDEXER_DIR), join(resolve(cacheDir), CONTROL_DIR)]) {
    const removed = await rmdir(dir).then(
      () => true,
      () => false,
    );
    if (!removed) break;
  }
}

/** An fs error as a message naming the file (ENOSPC alone names nothing). */
export function fileError(err: unknown, path: string): Error {
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
 * Downloads an object to its part file (a part path such as `numberedPartPath`'s), then renames it to
 * `path`: a run killed midway leaves at most a part file, which never counts as present. A body of at most
 * `bufferedMax` bytes (see `bufferedBodyMax`) is read whole and written by `writer`'s thread; a larger one
 * streams to disk from this one.
 */
export async function download(
  store: S3Store,
  key: string,
  path: string,
  part: string,
  dirs: Map<string, Promise<void>>,
  writer: CacheWriter,
  bufferedMax: number,
): Promise<number> {
  const object = await store.open(key, bufferedMax);
  if (!object)
    throw new DownloadError(
      `object s3://${store.bucket}/${key} is gone (404)`,
      'It was deleted after the index was read; run hydrate again, which heals the index first',
    );
  const expected = object.info.size;
  const { stream } = object;
  try {
    let size: number;
    const whole = await bodyInMemory(object, bufferedMax);
    if (whole) {
      size = whole.length;
      // The HTTP layer fails a body cut short of its Content-Length; this also catches a body longer than announced.
      if (size !== expected)
        throw new DownloadError(
          `object s3://${store.bucket}/${key} sent ${size} bytes of the ${expected} announced`,
          'The connection or the store cut it; run the same command again to resume',
        );
      await writer.write([dirname(path), dirname(part)], part, path, whole);
    } else {
      await Promise.all([madeDir(dirs, dirname(path)), madeDir(dirs, dirname(part))]);
      await pipeline(stream!, createWriteStream('', { fd: await open(part, PART_FLAGS) }));
      size = (await stat(part)).size;
      await rename(part, path);
    }
    return size;
  } catch (err) {
    stream?.destroy();
    await rm(part, { force: true });
    throw fileError(err, path);
  }
}

/**
 * Downloads an object of at most `bufferedMax` bytes to the part file `part` and leaves it there (see
 * `FetchAhead`); resolves with its size, or undefined when it is larger, or gone.
 */
export async function downloadPart(
  store: S3Store,
  key: string,
  part: string,
  writer: CacheWriter,
  bufferedMax: number,
): Promise<number | undefined> {
  const object = await store.open(key, bufferedMax);
  const whole = object && (await bodyInMemory(object, bufferedMax));
  if (!whole) {
    object?.stream?.destroy();
    return undefined;
  }
  // Read before the write: the bytes are handed to the writer's thread, which leaves `whole` empty here.
  const size = whole.length;
  if (size !== object.info.size) return undefined;
  await writer.write([dirname(part)], part, undefined, whole);
  return size;
}

/**
 * Makes a folder under the cache once per run, its missing parents first, so each new folder costs one
 * `mkdir` (a recursive one retries from the top); the files of a folder share it. `dirs` starts with the
 * cache's real path: every folder below it that already existed is checked to be a real folder, so no
 * write goes through a symbolic link out of the cache.
 */
export function madeDir(dirs: Map<string, Promise<void>>, dir: string): Promise<void> {
  let made = dirs.get(dir);
  if (!made) {
    const parent = dirname(dir);
    made = (parent === dir ? Promise.resolve() : madeDir(dirs, parent)).then(() =>
      mkdir(dir).then(
        () => undefined,
        async (err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
          const info = await lstat(dir);
          if (info.isSymbolicLink()) throw linkRefusal(dir);
          if (!info.isDirectory()) throw fileInTheWay(dir);
        },
      ),
    );
    dirs.set(dir, made);
  }
  return made;
}

/** The chunks of a body, once it has ended; rejects if it fails or closes first. */
export function readBody(stream: Readable): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => {
      ended = true;
      resolve(chunks);
    });
    stream.once('error', reject);
    stream.once(
      'close',
      () => ended || reject(new DownloadError('the connection closed before the body ended', 'Run the same command again to resume')),
    );
  });
}

/**
 * An opened object's body in memory of its own, when it is at most `bufferedMax` bytes: read whole already
 * (the direct path), or read here from its stream (the SDK, a test's own transport); undefined for a larger one.
 */
async function bodyInMemory(object: OpenedObject, bufferedMax: number): Promise<Uint8Array | undefined> {
  if (object.stream === undefined) return owned(object.body);
  return object.info.size <= bufferedMax ? wholeCopy(await readBody(object.stream)) : undefined;
}

/** The chunks as one array of their own, which can be handed to another thread without copying again. */
function wholeCopy(chunks: readonly Buffer[], size = chunks.reduce((n, c) => n + c.length, 0)): Uint8Array {
  const whole = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.length;
  }
  return whole;
}

/** `body` if it alone holds its memory (then it can be handed to another thread), else a copy that does. */
function owned(body: Uint8Array): Uint8Array {
  return body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : wholeCopy([body as Buffer]);
}

/**
 * Writes `body` to `part`, then renames it to `path`, so `path` only ever holds a whole file. Synchronous on
 * purpose: a small file is written in microseconds, and each asynchronous call (open, write, close, rename)
 * would cost two thread-pool handoffs of kernel time.
 */
export function writeWhole(path: string, part: string, body: Buffer): void {
  const fd = openSync(part, PART_FLAGS);
  try {
    writeFileSync(fd, body);
  } finally {
    closeSync(fd);
  }
  renameSync(part, path);
}

/** `writeWhole` for a file outside the downloads (the index copy), its part folder made first; a failure names `path`. */
export async function writeAtomically(path: string, part: string, body: Buffer, dirs: Map<string, Promise<void>>): Promise<void> {
  try {
    await madeDir(dirs, dirname(part));
    writeWhole(path, part, body);
  } catch (err) {
    await rm(part, { force: true });
    throw fileError(err, path);
  }
}

/** Each key that would be a file where another key needs a folder, with one such other key. */
export function fileFolderCollisions(keys: Iterable<string>): Map<string, string> {
  const under = new Map<string, string>();
  const all: string[] = [];
  for (const key of keys) {
    all.push(key);
    for (let at = key.indexOf('/'); at > 0; at = key.indexOf('/', at + 1)) {
      const folder = key.slice(0, at);
      if (!under.has(folder)) under.set(folder, key);
    }
  }
  const collisions = new Map<string, string>();
  for (const key of all) {
    const other = under.get(key);
    if (other !== undefined) collisions.set(key, other);
  }
  return collisions;
}
