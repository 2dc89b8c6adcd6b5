/**
 * An indexed root with drift, for the heal of an indexed root: its true index is kept once, then each run
 * writes it back with a share of its entries taken out (missing) and as many entries of objects that do
 * not exist put in (stale), spread over the key space as drift from many pushes would be.
 */
import { type DatastoreIndex, parseIndex, serializeIndex } from '../lambda/lib/index-file';
import { indexKeyOf } from '../lambda/lib/names';
import { S3Store } from '../lambda/lib/s3';
import { createS3Client } from '../lambda/lib/s3-client';
import type { Lister } from '../lambda/lib/list';
import { type Target, type Timing, heal } from './rows';

/** An old time: stale entries are not confirmed with HeadObject (only recent ones are), as with drift from long ago. */
const STALE_TIME = '2026-01-01T00:00:00.000Z';

/** Reads the root's index, as a heal just published it. */
export async function readTrueIndex(target: Target): Promise<DatastoreIndex> {
  const store = new S3Store(createS3Client({ endpoint: target.endpoint, forcePathStyle: true }), target.bucket);
  try {
    const object = await store.get(indexKeyOf({ root: { bucket: target.bucket, prefix: target.prefix } }));
    const parsed = object ? parseIndex(object.body) : undefined;
    if (!parsed?.ok) throw new Error(`s3://${target.bucket}/${target.prefix} has no readable index to drift`);
    return parsed.index;
  } finally {
    store.client.destroy();
  }
}

/**
 * Writes `index` back with `share` of its entries drifted, half missing and half stale, every n-th entry
 * in key order; returns how many of each.
 */
export async function writeDrifted(target: Target, index: DatastoreIndex, share: number): Promise<{ missing: number; stale: number }> {
  const every = Math.max(2, Math.round(2 / share));
  const entries = new Map(index.entries);
  let missing = 0;
  let stale = 0;
  let i = 0;
  for (const [key, entry] of index.entries) {
    if (i % every === 0) {
      entries.delete(key);
      missing++;
    } else if (i % every === every >> 1) {
      const gone = `${key}.gone`;
      entries.set(gone, { ...entry, key: gone, lastModified: STALE_TIME });
      stale++;
    }
    i++;
  }
  const store = new S3Store(createS3Client({ endpoint: target.endpoint, forcePathStyle: true }), target.bucket);
  try {
    await store.put(indexKeyOf({ root: { bucket: target.bucket, prefix: target.prefix } }), serializeIndex({ ...index, entries }));
  } finally {
    store.client.destroy();
  }
  return { missing, stale };
}

/** Entries of the indexed root drifted before each heal of it: half missing, half stale. */
export const DRIFT_SHARE = 0.01;

/**
 * The measure of a heal of the root once indexed, its index drifted by `share` before each run (the index
 * is built by a first heal, outside the measure): as a scheduled heal finds a root most days.
 */
export function indexedHealMeasure(target: Target, lister: () => Lister, share = DRIFT_SHARE): () => Promise<Timing> {
  let index: DatastoreIndex | undefined;
  return async () => {
    if (!index) {
      await heal(target, lister(), { keep: true });
      index = await readTrueIndex(target);
    }
    const drift = await writeDrifted(target, index, share);
    const timing = await heal(target, lister(), { indexed: true });
    if (timing.detail?.entries !== index.entries.size)
      throw new Error(`the heal of the drifted index left ${timing.detail?.entries} entries`);
    return { ...timing, detail: { ...timing.detail, missing: drift.missing, stale: drift.stale } };
  };
}
