/** Reads and writes of single index objects: speculative reads, write conditions, and writes that adopt what they find. */
import type { GetOptions, S3Store, StoredObject, WriteCondition, WriteResult } from '../s3';

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

/** The condition that replaces exactly the version we read, or creates when there was none. */
export function conditionFor(etag: string | undefined): WriteCondition {
  return etag ? { ifMatch: etag } : { ifNoneMatch: '*' };
}

/**
 * A conditional write that adopts what it finds: a create (`If-None-Match`) that loses because the object
 * exists (an orphan left by a writer that died) is retried as a replace of exactly that version.
 */
export async function putAdopting(store: S3Store, key: string, body: Buffer, condition: WriteCondition | undefined): Promise<WriteResult> {
  const result = await store.put(key, body, condition);
  if (result.status === 'written' || !condition || !('ifNoneMatch' in condition)) return result;
  const existing = await store.head(key);
  if (!existing) return result;
  return store.put(key, body, { ifMatch: existing.etag });
}
