/**
 * The memory a full heal may hold, and the guard that stops it, with `IndexTooLargeError`, before a root
 * whose index must be held whole runs the process out of memory. The guard estimates what the heal holds
 * from measured costs per object rather than sampling the process, so the same root trips at the same
 * count every time.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { IndexTooLargeError } from './errors';
import { INDEX_KEY } from './names';

/** The variable the Lambda runtime sets to the function's memory, in MiB. */
export const LAMBDA_MEMORY_ENV = 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE';

/** How far V8 lets its heap grow past what a full collection leaves live while a heal by partitions runs, in percent (see `holdHeapGrowth`). */
export const PARTITION_HEAP_GROWTH = 75;

/**
 * The V8 heap limit from which V8 lets the heap grow to as much as four times what is live. It grows a
 * smaller heap (a Lambda function's of 1024 MiB, say) by less than `PARTITION_HEAP_GROWTH` already, and
 * `holdHeapGrowth` leaves it so.
 */
const FREE_GROWTH_LIMIT = 2048 * 1024 * 1024;

/** Holds of `holdHeapGrowth` not yet released: the growth is set by the first and given back by the last. */
let growthHolds = 0;

/**
 * Keeps V8's heap from growing more than `PARTITION_HEAP_GROWTH` percent past what a full collection
 * leaves live, until the returned function is called. A heal by partitions keeps little live and lets go
 * of much (every listed object, every partition file written): under V8's own growth, as much as four
 * times what is live, the process would hold that garbage rather than the bound the heal keeps.
 * Collecting sooner costs some CPU. A smaller heap's growth, or one given on the command line, is kept.
 */
export function holdHeapGrowth(): () => void {
  const given = process.execArgv.some((flag) => /^--heap[-_]growing[-_]percent\b/.test(flag));
  if (given || getHeapStatistics().heap_size_limit < FREE_GROWTH_LIMIT) return () => undefined;
  if (growthHolds++ === 0) setFlagsFromString(`--heap-growing-percent=${PARTITION_HEAP_GROWTH}`);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    // Zero is V8's own: the growth it works out from how fast it collects.
    if (--growthHolds === 0) setFlagsFromString('--heap-growing-percent=0');
  };
}

/** What a heal may hold, and the memory the process has, said as a user reads it. */
export interface MemoryBudget {
  /** Bytes the heal's estimate may reach: its listing, the index read, the healed copy and the index as written. */
  readonly bytes: number;
  /** The memory the process has, e.g. "1024 MiB of function memory". */
  readonly memory: string;
}

const MiB = 1024 * 1024;

/**
 * Bytes per object, fitted to the peak resident memory of the Lambda's scheduled repair (with the Lambda
 * runtime's heap flags, on swamp-shaped keys; `bench/memory-reach.ts`) so that the estimate includes the garbage and young
 * generation a real process carries: an object kept by `listScopes` (a resumable repair holds its objects
 * as listed instead, until they are sorted into scopes: no more than the heal after it); per byte of an
 * index read whole (its bytes, their text and the parsed entries at once); per entry of an index held after
 * reading; and per entry of the healed copy plus the index as written.
 */
export const MEMORY_COST = { listed: 240, readPerIndexByte: 4, indexHeld: 450, written: 300 } as const;

/**
 * What a partition held by a heal by partitions costs at its peak, against the estimate of the same entries
 * held by a whole-index heal: fitted to the peak resident memory of the largest partition the bench's
 * handler row heals (`npm run bench -- --heal-10m-only`, figures in docs/PERFORMANCE.md).
 */
const PARTITION_PEAK = 1.15;

/**
 * Share of the function's memory the estimate may fill. The Lambda runtime gives V8 most of the function's
 * memory as old space, and resident memory also holds the runtime and the index's bytes outside the heap.
 */
const LAMBDA_SHARE = 0.55;
/** Share of the V8 heap limit the estimate may fill elsewhere (the index's bytes live outside the heap). */
const HEAP_SHARE = 0.6;

/**
 * The budget of a heal: the one given (a budget, or a number of bytes); in a Lambda, a share of the
 * function's memory (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`); elsewhere, a share of the V8 heap limit.
 */
export function memoryBudget(bytes?: number | MemoryBudget, env: Readonly<Record<string, string | undefined>> = process.env): MemoryBudget {
  if (typeof bytes === 'object') return bytes;
  if (bytes !== undefined) return { bytes, memory: `a memory budget of ${mib(bytes)} MiB` };
  const functionMiB = Number(env[LAMBDA_MEMORY_ENV]);
  if (Number.isFinite(functionMiB) && functionMiB > 0) {
    return { bytes: functionMiB * MiB * LAMBDA_SHARE, memory: `${functionMiB} MiB of function memory` };
  }
  const heap = getHeapStatistics().heap_size_limit;
  return { bytes: heap * HEAP_SHARE, memory: `a ${mib(heap)} MiB V8 heap` };
}

function mib(bytes: number): string {
  return bytes >= 10 * MiB ? String(Math.round(bytes / MiB)) : (bytes / MiB).toFixed(1);
}

/** True for the key, relative to the listed base, of the root's index or of a namespace's. */
function isIndexKey(rel: string): boolean {
  if (!rel.endsWith(INDEX_KEY)) return false;
  const folder = rel.slice(0, -INDEX_KEY.length);
  return folder === '' || (folder.indexOf('/') === folder.length - 1 && folder.length > 1);
}

/**
 * Checks a heal's estimate against its budget: asked after each page of the listing, and before a whole
 * index is healed and written. The listing is held until every scope is healed, and each scope's index is
 * read, copied and written beside it, one scope at a time.
 */
export class MemoryGuard {
  private objects = 0;
  /** The largest index in the listing, in bytes: the one whose read costs most. */
  private indexBytes = 0;

  constructor(readonly budget: MemoryBudget) {}

  /** A page of the listing of `base` (named `scope`). */
  page(scope: string, base: string, objects: readonly { readonly key: string; readonly size: number }[]): void {
    this.objects += objects.length;
    for (const object of objects) {
      if (object.size > this.indexBytes && isIndexKey(object.key.slice(base.length))) this.indexBytes = object.size;
    }
    this.check(scope, this.objects, this.listingBytes() + this.indexBytes * MEMORY_COST.readPerIndexByte);
  }

  /** A listing of `objects` objects made already (its pages were checked as they came, if at all). */
  listing(scope: string, objects: number): void {
    this.objects = objects;
    this.check(scope, objects, this.listingBytes());
  }

  /** Before a whole index of `entries` entries, for a scope of `objects` objects, is healed (and written, when `writing`). */
  healing(scope: string, objects: number, entries: number, writing: boolean): void {
    const bytes = this.objects * MEMORY_COST.listed + entries * MEMORY_COST.indexHeld + (writing ? objects * MEMORY_COST.written : 0);
    this.check(scope, Math.max(objects, entries), bytes);
  }

  /**
   * A partition of a heal by partitions, as it is listed and before it is judged: its objects and its file's
   * entries, held once (a partition grows past a chunk only while nothing commits), beside two chunks of
   * changes (those kept, and a commit's).
   */
  partition(scope: string, partition: string, objects: number, entries: number, chunkEntries: number): void {
    const held = objects * MEMORY_COST.listed + entries * MEMORY_COST.indexHeld + Math.max(objects, entries) * MEMORY_COST.written;
    if (PARTITION_PEAK * held + 2 * chunkEntries * MEMORY_COST.written > this.budget.bytes) {
      throw new IndexTooLargeError(scope, Math.max(objects, entries), this.budget.memory, undefined, partition);
    }
  }

  /** Before an index of `bytes` bytes is read whole with no listing beside it (an event's delta on a monolith). */
  indexRead(scope: string, bytes: number): void {
    if (bytes * MEMORY_COST.readPerIndexByte > this.budget.bytes) throw new IndexTooLargeError(scope, 0, this.budget.memory, bytes);
  }

  /** The listing, and an index of as many entries built and written from it: what any heal of it holds. */
  private listingBytes(): number {
    return this.objects * (MEMORY_COST.listed + MEMORY_COST.written);
  }

  private check(scope: string, objects: number, bytes: number): void {
    if (bytes > this.budget.bytes) {
      throw new IndexTooLargeError(scope, objects, this.budget.memory);
    }
  }
}
