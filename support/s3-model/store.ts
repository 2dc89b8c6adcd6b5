/**
 * The in-memory object store: per bucket, the keys kept sorted in S3's
 * order, so a listing page is a binary search followed by a walk of at most
 * one page (O(log n + page)), whatever the bucket size. That is the
 * property moto lacks and the benchmark needs.
 */

/** A checksum a client sent with PutObject, kept to echo back like S3 does. */
export interface StoredChecksum {
  /** Upper-case algorithm name as S3 reports it: CRC32, CRC32C, SHA1, SHA256, CRC64NVME. */
  readonly algorithm: string;
  /** Base64 value exactly as the client sent it. */
  readonly value: string;
}

/**
 * One object version. A class rather than object literals so that a million
 * seeded objects share one hidden class and stay compact.
 */
export class StoredObject {
  constructor(
    readonly size: number,
    /** Quoted MD5 hex of the body, as S3 sends it. */
    readonly etag: string,
    /** Whole seconds: S3 keeps Last-Modified at second precision. */
    readonly lastModifiedMs: number,
    readonly contentType: string,
    /** Null for a seeded object: its body is synthesised on read from its size. */
    readonly body: Buffer | null,
    readonly checksum: StoredChecksum | null,
    readonly metadata: Readonly<Record<string, string>> | null,
  ) {}
}

/**
 * Orders keys like S3: by their UTF-8 bytes, which is Unicode code point
 * order. JavaScript's `<` compares UTF-16 code units instead, which puts a
 * character above U+FFFF (a surrogate pair, 0xD800-0xDFFF) before U+E000-U+FFFF;
 * remapping code units at the first difference fixes exactly that case.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let ca = a.charCodeAt(i);
    let cb = b.charCodeAt(i);
    if (ca === cb) continue;
    if (ca >= 0xd800 && cb >= 0xd800) {
      ca = ca >= 0xe000 ? ca - 0x800 : ca + 0x2000;
      cb = cb >= 0xe000 ? cb - 0x800 : cb + 0x2000;
    }
    return ca - cb;
  }
  return a.length - b.length;
}

/** One page of a ListObjectsV2 walk, before XML rendering. */
export interface ListPage {
  readonly contents: ReadonlyArray<{ key: string; object: StoredObject }>;
  readonly commonPrefixes: readonly string[];
  readonly isTruncated: boolean;
  /** Where the next page starts: the last key or common prefix returned. */
  readonly resumeAfter: ResumePoint | null;
}

/** A position in the key space: after `value`, or after every key under the common prefix `value`. */
export interface ResumePoint {
  readonly value: string;
  readonly isCommonPrefix: boolean;
}

export interface ListQuery {
  readonly prefix: string;
  /** Empty string means no delimiter. */
  readonly delimiter: string;
  readonly after: ResumePoint | null;
  readonly maxKeys: number;
}

/**
 * A bucket's objects: keys in S3 order with their objects in a parallel
 * array. No Map: a lookup is a binary search (a few microseconds at a
 * million keys), and leaving the hash table out halves seeding time and
 * saves memory at that size.
 */
export class Bucket {
  private keys: string[] = [];
  private objects: StoredObject[] = [];

  constructor(
    readonly name: string,
    readonly createdMs: number,
  ) {}

  get size(): number {
    return this.keys.length;
  }

  get(key: string): StoredObject | undefined {
    const i = this.lowerBound(key, 0);
    return this.keys[i] === key ? this.objects[i] : undefined;
  }

  /** Inserts or replaces; a new key costs one splice, fine for the bench's write volume. */
  put(key: string, object: StoredObject): void {
    const i = this.lowerBound(key, 0);
    if (this.keys[i] === key) {
      this.objects[i] = object;
    } else {
      this.keys.splice(i, 0, key);
      this.objects.splice(i, 0, object);
    }
  }

  delete(key: string): boolean {
    const i = this.lowerBound(key, 0);
    if (this.keys[i] !== key) return false;
    this.keys.splice(i, 1);
    this.objects.splice(i, 1);
    return true;
  }

  /**
   * Adds many objects at once (seeding). Sorting a million strings costs
   * seconds in V8, so callers that already produce keys in S3 order (the
   * seeder does) pay only a linear check; otherwise the batch is sorted.
   * Then one linear merge with the existing keys; a batch key that already
   * exists replaces the old object, and within the batch the last one wins.
   */
  putMany(keys: readonly string[], objects: readonly StoredObject[]): void {
    let inOrder = true;
    for (let i = 1; i < keys.length && inOrder; i++) inOrder = compareKeys(keys[i - 1], keys[i]) < 0;
    if (inOrder && this.keys.length === 0) {
      this.keys = keys.slice();
      this.objects = objects.slice();
      return;
    }
    let order = keys.map((_, i) => i);
    if (!inOrder) {
      order.sort((a, b) => compareKeys(keys[a], keys[b]) || a - b);
      // Of equal keys, keep the last.
      order = order.filter((idx, j) => j === order.length - 1 || keys[order[j + 1]] !== keys[idx]);
    }
    const mergedKeys: string[] = [];
    const mergedObjects: StoredObject[] = [];
    let i = 0;
    let j = 0;
    while (i < this.keys.length || j < order.length) {
      const c = i === this.keys.length ? 1 : j === order.length ? -1 : compareKeys(this.keys[i], keys[order[j]]);
      if (c < 0) {
        mergedKeys.push(this.keys[i]);
        mergedObjects.push(this.objects[i++]);
      } else {
        if (c === 0) i++;
        mergedKeys.push(keys[order[j]]);
        mergedObjects.push(objects[order[j++]]);
      }
    }
    this.keys = mergedKeys;
    this.objects = mergedObjects;
  }

  /** One ListObjectsV2 page. */
  list(query: ListQuery): ListPage {
    const { prefix, delimiter, after, maxKeys } = query;
    const keys = this.keys;
    let i = this.lowerBound(prefix, 0);
    if (after) {
      const resume = after.isCommonPrefix ? this.endOfPrefixBlock(after.value, 0) : this.upperBound(after.value, 0);
      if (resume > i) i = resume;
    }
    const contents: Array<{ key: string; object: StoredObject }> = [];
    const commonPrefixes: string[] = [];
    let last: ResumePoint | null = null;
    while (i < keys.length && contents.length + commonPrefixes.length < maxKeys) {
      const key = keys[i];
      if (!key.startsWith(prefix)) break;
      const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
      if (cut >= 0) {
        // Every key under this common prefix is skipped with one binary search,
        // so a page of prefixes stays O(page * log n) however many keys they hide.
        const common = key.slice(0, cut + delimiter.length);
        commonPrefixes.push(common);
        last = { value: common, isCommonPrefix: true };
        i = this.endOfPrefixBlock(common, i);
      } else {
        contents.push({ key, object: this.objects[i] });
        last = { value: key, isCommonPrefix: false };
        i++;
      }
    }
    // Truncated only if something would really follow: S3 does not send a
    // token that leads to an empty page when a page ends exactly at the end.
    const isTruncated = maxKeys > 0 && i < keys.length && keys[i].startsWith(prefix);
    return { contents, commonPrefixes, isTruncated, resumeAfter: isTruncated ? last : null };
  }

  /** First index >= from whose key is >= `key`. */
  private lowerBound(key: string, from: number): number {
    let lo = from;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.keys[mid], key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** First index >= from whose key is > `key`. */
  private upperBound(key: string, from: number): number {
    let lo = from;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.keys[mid], key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * First index >= from past every key that starts with `prefix`. Keys with the
   * prefix are contiguous in sorted order and sort at or after the prefix itself,
   * so "below the prefix or starting with it" is true then false along the array.
   */
  private endOfPrefixBlock(prefix: string, from: number): number {
    let lo = from;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const k = this.keys[mid];
      if (k.startsWith(prefix) || compareKeys(k, prefix) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** All buckets of one model server. */
export class Store {
  private readonly buckets = new Map<string, Bucket>();

  bucket(name: string): Bucket | undefined {
    return this.buckets.get(name);
  }

  /** Returns the existing bucket when there is one, like S3 in us-east-1. */
  createBucket(name: string, nowMs: number): Bucket {
    let bucket = this.buckets.get(name);
    if (!bucket) {
      bucket = new Bucket(name, nowMs);
      this.buckets.set(name, bucket);
    }
    return bucket;
  }

  deleteBucket(name: string): void {
    this.buckets.delete(name);
  }
}
