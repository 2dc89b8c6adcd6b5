/** Shared setup of the Lambda tests: indexed roots and the index a listing says a scope should have. */
import type { DatastoreRoot, IndexScope } from '../../lambda/lib/scope';
import { INDEX_KEY, scopeBase } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';
import { healRoot } from '../../lambda/lib/heal';
import { isInternalKey } from '../../lambda/lib/keys';
import { type KeySize, connectStore, listObjects, readIndex, seedDatastore, summarize } from '../helpers/s3';

/** What a scope's index must hold according to the bucket itself: every non-internal object, namespaces left out of the root's. */
export async function expectedFromListing(store: S3Store, scope: IndexScope, namespaces: readonly string[] = []): Promise<KeySize[]> {
  const base = scopeBase(scope);
  return (await listObjects(store, base))
    .map((o) => ({ key: o.key.slice(base.length), size: o.size }))
    .filter((o) => !isInternalKey(o.key))
    .filter((o) => scope.namespace !== undefined || !namespaces.some((ns) => o.key.startsWith(`${ns}/`)));
}

/** The `{key, size}` entries of a scope's index (`[]` when absent). */
export async function indexOf(store: S3Store, scope: IndexScope): Promise<KeySize[]> {
  return summarize(await readIndex(store, scopeBase(scope) + INDEX_KEY));
}

/** Seeds a swamp-like root and gives it a true index (healed by the library, not by the handler under test). */
export async function indexedRoot(store: S3Store, prefix: string, objects = 6, namespaces: string[] = []): Promise<DatastoreRoot> {
  const seeded = await seedDatastore(store, { prefix, objects, internal: true, namespaces });
  await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
  return seeded.root;
}
