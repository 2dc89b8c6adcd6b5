/**
 * One hydrate at a time per cache folder: a lock file in the cache's control folder. Creating it is also
 * the probe that the cache can be written, so an unwritable cache is one error before any download.
 */
import { constants } from 'node:fs';
import { access, open, readFile, unlink } from 'node:fs/promises';
import { unlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { makeFolder } from './cache-files';
import { sleep } from './concurrency';
import { CacheError } from './errors';
import { CACHE_LOCK_FILE, INDEXER_DIR } from './names';

/** What the lock file says about its holder. */
interface CacheLockBody {
  readonly pid: number;
  readonly hostname: string;
  readonly startedAt: string;
}

/** Lock files this process holds, removed when it exits, even through `process.exit` on a signal. */
const held = new Set<string>();
let exitHookSet = false;

/** How long a waiting hydrate pauses between looks at the lock. */
const POLL_MS = 200;

/** Codes that mean the folder will not take a write, whatever we wait for. */
const UNWRITABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT', 'ENOTDIR', 'ELOOP']);

function unwritable(cacheDir: string, err: unknown): CacheError {
  const code = (err as NodeJS.ErrnoException)?.code ?? String(err);
  return new CacheError(
    `The cache folder ${cacheDir} cannot be written (${code}); nothing was downloaded`,
    'Give --cache a folder you can write to',
    { cause: err },
  );
}

/** Any other failure to create the lock file, named with its path and code. */
function lockFailure(path: string, err: unknown): CacheError {
  const code = (err as NodeJS.ErrnoException)?.code ?? String(err);
  return new CacheError(
    `Cannot create the cache lock ${path} (${code}); nothing was downloaded`,
    'Check the cache folder, then run again',
    {
      cause: err,
    },
  );
}

function parseBody(text: string): Partial<CacheLockBody> {
  try {
    const body: unknown = JSON.parse(text);
    return typeof body === 'object' && body !== null ? (body as Partial<CacheLockBody>) : {};
  } catch {
    return {};
  }
}

/** Whether the holder is a process of this machine that no longer runs. */
function isDead(holder: Partial<CacheLockBody>): boolean {
  if (holder.hostname !== hostname() || typeof holder.pid !== 'number') return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** A held cache lock; `release` removes it. */
export class CacheLock {
  private constructor(private readonly path: string) {}

  /**
   * Takes the lock of `cacheDir` (a real path), waiting while another live hydrate holds it; a lock left
   * by a dead process of this machine is taken over. Throws `CacheError` when the cache cannot be written.
   */
  static async take(cacheDir: string, onWait?: (holder: string) => void): Promise<CacheLock> {
    await access(cacheDir, constants.W_OK).catch((err) => {
      throw unwritable(cacheDir, err);
    });
    const path = join(cacheDir, CACHE_LOCK_FILE);
    const body: CacheLockBody = { pid: process.pid, hostname: hostname(), startedAt: new Date().toISOString() };
    let waited = false;
    for (;;) {
      await makeFolder(join(cacheDir, INDEXER_DIR));
      try {
        const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW);
        try {
          await file.writeFile(JSON.stringify(body));
        } finally {
          await file.close();
        }
        hold(path);
        return new CacheLock(path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // The holder finished and removed the control folder between our mkdir and our create: look again.
        if (code === 'ENOENT') continue;
        if (code !== 'EEXIST') throw UNWRITABLE.has(code ?? '') ? unwritable(cacheDir, err) : lockFailure(path, err);
      }
      const text = await readFile(path, 'utf8').catch(() => undefined);
      if (text === undefined) continue;
      const holder = parseBody(text);
      if (isDead(holder)) {
        // Read again just before: another waiter may have taken it over already.
        if ((await readFile(path, 'utf8').catch(() => undefined)) === text) await unlink(path).catch(() => undefined);
        continue;
      }
      if (!waited) onWait?.(`pid ${holder.pid ?? '?'} on ${holder.hostname ?? 'an unknown host'} since ${holder.startedAt ?? '?'}`);
      waited = true;
      await sleep(POLL_MS);
    }
  }

  /** Removes the lock file. */
  async release(): Promise<void> {
    held.delete(this.path);
    await unlink(this.path).catch(() => undefined);
  }
}

function hold(path: string): void {
  held.add(path);
  if (exitHookSet) return;
  exitHookSet = true;
  process.on('exit', () => {
    for (const file of held) {
      try {
        unlinkSync(file);
      } catch {
        // Gone already.
      }
    }
  });
}
