/**
 * The cache's downloaded files written on a thread of their own. Creating a file is mostly kernel time
 * (mkdir, open, write, close, rename), which on the main thread would sit between the answers it reads; on
 * libuv's pool each of those calls costs two hand-offs. Here a file costs the main thread one message,
 * sent with others in a batch, and the thread makes each file with synchronous calls.
 */
import { Worker } from 'node:worker_threads';
import { constants } from 'node:fs';
import { CacheError } from './errors';

/** How a part file is opened: a symbolic link planted in its place is refused (ELOOP), never written through. */
export const PART_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** Why hydrate will not write at or under `path`: a symbolic link stands there; it is never written through. */
export function linkRefusal(path: string): CacheError {
  return new CacheError(`${path} is a symbolic link, and hydrate never writes through one`, 'Remove it, then run again');
}

/** Why hydrate cannot make the folder `dir`: a file stands there. */
export function fileInTheWay(dir: string): CacheError {
  return new CacheError(`${dir} is a file where a folder should be (a key the index no longer holds?)`, 'Remove it, then run again');
}

/** What the thread says of a file it could not write. */
interface Failure {
  readonly kind: 'link' | 'file' | 'fs';
  readonly at: string;
  readonly code?: string;
  readonly message: string;
}

/** One file for the thread: its folders made, `body` (if any) written to `part`, then `part` renamed to `path` (if any). */
interface Job {
  readonly id: number;
  readonly dirs: readonly string[];
  readonly part: string;
  readonly path?: string;
  readonly body?: Uint8Array;
}

/**
 * The thread's code, plain JavaScript run with `eval`, so that it needs no file of its own in the bundle,
 * the package or a test run. Folders are made one level at a time from the cache down, as `madeDir` makes
 * them: a folder that already stood must be a real folder, never a link.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { dirname } = require('node:path');
const made = new Set(workerData.made);
const flags = workerData.flags;
const makeDir = (dir) => {
  if (made.has(dir)) return;
  const parent = dirname(dir);
  if (parent !== dir) makeDir(parent);
  try {
    fs.mkdirSync(dir);
  } catch (err) {
    if (err.code !== 'EEXIST') throw Object.assign(err, { at: dir });
    const info = fs.lstatSync(dir);
    if (info.isSymbolicLink()) throw { kind: 'link', at: dir, message: '' };
    if (!info.isDirectory()) throw { kind: 'file', at: dir, message: '' };
  }
  made.add(dir);
};
// writeFileSync, not writeSync: it writes again after a short write (a disk filling up) until ENOSPC says why.
const writeOne = (job) => {
  for (const dir of job.dirs) makeDir(dir);
  if (job.body) {
    const fd = fs.openSync(job.part, flags);
    try {
      fs.writeFileSync(fd, job.body);
    } finally {
      fs.closeSync(fd);
    }
  }
  if (job.path) fs.renameSync(job.part, job.path);
};
parentPort.on('message', (jobs) => {
  const answers = [];
  for (const job of jobs) {
    try {
      writeOne(job);
      answers.push([job.id]);
    } catch (err) {
      if (job.body) {
        try {
          fs.unlinkSync(job.part);
        } catch {}
      }
      const failure = err.kind ? err : { kind: 'fs', at: err.at ?? job.path ?? job.part, code: err.code, message: String(err.message) };
      answers.push([job.id, failure]);
    }
  }
  parentPort.postMessage(answers);
});
`;

/** The error a failure of the thread stands for, shaped as the same failure on the main thread would be. */
function errorOf(failure: Failure): Error {
  if (failure.kind === 'link') return linkRefusal(failure.at);
  if (failure.kind === 'file') return fileInTheWay(failure.at);
  return Object.assign(new Error(failure.message), { code: failure.code, path: failure.at });
}

/**
 * Writes whole files into one cache from a thread of its own, started on the first write. One thread: a
 * second one cost more kernel time than it saved, as each file's rename across folders takes a lock of the
 * whole file system.
 */
export class CacheWriter {
  private worker?: Worker;
  private queue: Job[] = [];
  private readonly waiting = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  private nextId = 0;
  private flushing = false;
  private stopped?: Error;

  /** `made`: folders known to be real folders of the cache (its real path first). */
  constructor(private readonly made: readonly string[]) {}

  /**
   * Makes `dirs` (each below one already made, parents first), writes `body` to `part`, and renames it to
   * `path`; `body`'s bytes are handed to the thread, so it must not be used afterwards. Without `path` the
   * part file stays; without `body`, a part file written before is renamed.
   */
  write(dirs: readonly string[], part: string, path: string | undefined, body: Uint8Array | undefined): Promise<void> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.queue.push({ id, dirs, part, path, body });
      if (!this.flushing) {
        this.flushing = true;
        // Every answer read in this turn of the loop joins one message.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushing = false;
    const jobs = this.queue;
    this.queue = [];
    if (jobs.length === 0) return;
    const worker = this.start();
    worker.postMessage(
      jobs,
      jobs.flatMap((j) => (j.body ? [j.body.buffer as ArrayBuffer] : [])),
    );
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { made: this.made, flags: PART_FLAGS } });
    worker.on('message', (answers: [number, Failure?][]) => {
      for (const [id, failure] of answers) {
        const waiter = this.waiting.get(id);
        this.waiting.delete(id);
        if (failure) waiter?.reject(errorOf(failure));
        else waiter?.resolve();
      }
    });
    const stop = (why: string): void => {
      this.stopped ??= new CacheError(`The thread that writes the cache's files stopped (${why})`, 'Run the same command again to resume');
      for (const waiter of this.waiting.values()) waiter.reject(this.stopped);
      this.waiting.clear();
    };
    worker.on('error', (err) => stop(err.message));
    worker.on('exit', (code) => stop(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  /** Stops the thread once every write has been answered. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.stopped ??= new CacheError('The cache writer was closed', 'This is a bug: report it');
    if (worker) await worker.terminate();
  }
}
