/** A root (or namespace) that holds no object at all, most likely a mistyped prefix: how to tell, and what to say. */
import type { S3Store } from './s3';

/** What to do about a prefix that holds no object at all, said alike by every command. */
const EMPTY_HINT = 'Check the bucket and --prefix; pass --allow-empty to create an empty index anyway';

/** Confirms with one plain ListObjectsV2 request that `base` holds nothing (a missing bucket throws `BucketNotFoundError` here). */
export async function holdsNothing(store: S3Store, base: string): Promise<boolean> {
  for await (const page of store.listPages({ prefix: base, maxKeys: 1 })) return page.objects.length === 0;
  return true;
}

/**
 * The advice for an empty `base`. S3 compares keys byte for byte, so a name typed in one Unicode
 * normalisation (a macOS file name is NFD, most keyboards type NFC) misses keys written in the other: when
 * the other spelling holds objects, the advice names it.
 */
export async function emptyHint(store: S3Store, base: string): Promise<string> {
  if (/^[\x00-\x7f]*$/.test(base)) return EMPTY_HINT;
  const [form, other] = base.normalize('NFC') !== base ? ['NFC', base.normalize('NFC')] : ['NFD', base.normalize('NFD')];
  if (other !== base && !(await holdsNothing(store, other)))
    return `s3://${store.bucket}/${other} holds objects: the same name in Unicode normalisation ${form} (S3 compares bytes); give --prefix in that form`;
  return `${EMPTY_HINT}; S3 compares keys byte for byte, so a prefix in another Unicode normalisation (NFC or NFD) than its keys finds none`;
}
