/**
 * Fetching ahead: while the heal before a hydrate still lists the root, the small objects its pages name are
 * downloaded into part files, which stay under the cache's control folder. Only once the heal has planned
 * its index is a part moved into place, and only for an entry of that index of the size fetched; every other
 * part is removed with the parts folder. So nothing the index does not hold ever lands in the cache, and
 * the downloads of a first hydrate begin a listing sooner.
 */
import { dirname } from 'node:path';
import { cachePathOf, downloadPart, fileError, numberedPartPath } from './cache-files';
import type { CacheWriter } from './cache-writer';
import type { IndexEntry } from './index-file';
import { isRefusedKey, isSkippedObject } from './keys';
import type { S3Store } from './s3';

/** A part fetched ahead (or being fetched): where it is, and the bytes it holds (undefined when the fetch failed). */
interface Fetched {
  readonly part: string;
  readonly size: Promise<number | undefined>;
}

/** Where a fetch ahead writes and how many it runs at once. */
export interface AheadOptions {
  readonly cacheDir: string;
  /** The folder under `cacheDir` the files land in (a namespace's). */
  readonly subdir?: string;
  /** The scope's prefix in the bucket: listed keys outside it are not fetched. */
  readonly base: string;
  readonly partsDir: string;
  /** Names the next part file. */
  readonly nextPart: () => number;
  readonly concurrency: number;
  /** Objects fetched ahead at most, however long the listing: the rest is downloaded after the plan. */
  readonly most: number;
  /** Bodies larger than this are not fetched ahead. */
  readonly bufferedMax: number;
}

/** The fetches ahead of one hydrate into a cache that started empty. */
export class FetchAhead {
  private readonly fetched = new Map<string, Fetched>();
  private readonly waiting: (() => void)[] = [];
  private running = 0;
  private offered = 0;
  private closed = false;

  constructor(
    private readonly store: S3Store,
    private readonly writer: CacheWriter,
    private readonly options: AheadOptions,
  ) {}

  /** Fetches the objects of a listing page that could be entries of the scope's index. */
  offer(objects: readonly { readonly key: string; readonly size: number }[]): void {
    const { base, bufferedMax, cacheDir, subdir } = this.options;
    for (const { key, size } of objects) {
      if (this.closed || this.offered >= this.options.most) return;
      if (!key.startsWith(base)) continue;
      const rel = key.slice(base.length);
      if (size > bufferedMax || isSkippedObject(rel, size) || isRefusedKey(rel) || this.fetched.has(rel)) continue;
      try {
        cachePathOf(cacheDir, subdir ? `${subdir}/${rel}` : rel);
      } catch {
        continue;
      }
      this.offered++;
      const part = numberedPartPath(this.options.partsDir, this.options.nextPart());
      const fetching = this.slot().then((go) => (go ? this.fetch(key, part) : undefined));
      fetching.catch(() => undefined);
      this.fetched.set(rel, { part, size: fetching });
    }
  }

  /** Starts no further fetch. */
  stop(): void {
    this.closed = true;
    for (const wake of this.waiting.splice(0)) wake();
  }

  /** Starts no further fetch and waits for those begun. */
  async close(): Promise<void> {
    this.stop();
    await Promise.all([...this.fetched.values()].map((f) => f.size.catch(() => undefined)));
  }

  /**
   * Moves the part fetched for `entry` to `path` when it holds the entry's size of bytes; false when there is
   * none (never fetched, failed, or of another size), and the entry is downloaded as any other. A failed
   * move names `path`, as a failed download does.
   */
  async place(entry: IndexEntry, path: string): Promise<boolean> {
    const fetched = this.fetched.get(entry.key);
    if (!fetched) return false;
    this.fetched.delete(entry.key);
    const size = await fetched.size.catch(() => undefined);
    if (size !== entry.size) return false;
    try {
      await this.writer.write([dirname(path)], fetched.part, path, undefined);
    } catch (err) {
      throw fileError(err, path);
    }
    return true;
  }

  /** Waits for a free slot; false when closed meanwhile. */
  private async slot(): Promise<boolean> {
    if (this.running >= this.options.concurrency) await new Promise<void>((wake) => this.waiting.push(wake));
    if (this.closed) return false;
    this.running++;
    return true;
  }

  private async fetch(key: string, part: string): Promise<number | undefined> {
    try {
      return await downloadPart(this.store, key, part, this.writer, this.options.bufferedMax);
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}
