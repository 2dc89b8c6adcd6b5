/** Reads and writes of single index objects: speculative reads, and the condition that replaces only the version read. */
import type { GetOptions, S3Store, StoredObject, WriteCondition } from '../s3';

/** A read started before it is known to be needed: dropped, it is aborted and its failure ignored. */
export interface SpeculativeRead {
  readonly result: Promise<StoredObject | undefined>;
  readonly drop: () => void;
}

/** Starts a read that may be dropped (aborted) once it turns out not to be needed. */
export function speculativeGet(store: S3Store, key: string, options: Omit<GetOptions, 'abortSignal'>): SpeculativeRead {
  const controller = new AbortController();
  const result = store.get(key, { ...options, abortSignal: controller.signal });
  // Handled here so a dropped read never surfaces as an unhandled rejection; a used one is awaited and throws there.
  result.catch(() => undefined);
  return { result, drop: () => controller.abort() };
}

/**
 * The condition that replaces exactly the version we read, or creates when there was none. A write under it
 * that loses (412, or a create that finds the object) is a lost race: the caller reads again and merges,
 * since clients write index files without the lock too, and a version not read may hold their entries.
 */
export function conditionFor(etag: string | undefined): WriteCondition {
  return etag ? { ifMatch: etag } : { ifNoneMatch: '*' };
}
