/**
 * publishIndex plans once when nothing moves: the plan made before the lock stands when the index read
 * under the lock is the same version, and the re-check after the write does not re-plan (or re-parse)
 * an index that is still exactly its own write. Anything else still re-plans.
 */
import { type DatastoreIndex, type LiveIndex, emptyIndex, publishIndex } from '../../lambda/lib/internal';
import { indexEntry } from '../helpers/factories';
import { connectStore, putIndex, putObject, readIndex, summarize, testStore } from '../helpers/s3';

/** A planner that adds `entries` to whatever is live, counting its calls. */
function adding(...keys: string[]): { plan: (live: LiveIndex) => Promise<DatastoreIndex | undefined>; calls: LiveIndex[] } {
  const calls: LiveIndex[] = [];
  return {
    calls,
    plan: async (live) => {
      calls.push(live);
      const index = live.state === 'valid' ? { ...live.index, entries: new Map(live.index.entries) } : emptyIndex();
      if (keys.every((k) => index.entries.has(k))) return undefined;
      for (const key of keys) index.entries.set(key, indexEntry(key));
      return index;
    },
  };
}

describe('publishIndex plans', () => {
  it('once, when the index does not change while it publishes', async () => {
    // GIVEN a root without an index
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const planner = adding('data/a', 'data/b');

    // WHEN an index is published
    const outcome = await publishIndex(connectStore(store.bucket), scope, planner.plan);

    // THEN it is written once, from one plan, and read back without a second plan
    expect(outcome.writes).toBe(1);
    expect(planner.calls).toHaveLength(1);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/b']);
  });

  it('again under the lock when another writer changed the index since the first read', async () => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const writer = connectStore(store.bucket);
    const planner = adding('data/a');
    const plan = async (live: LiveIndex): Promise<DatastoreIndex | undefined> => {
      // A client pushes between the first read and the lock.
      if (planner.calls.length === 0) await putIndex(writer, 'p/.datastore-index.json', [indexEntry('data/client')]);
      return planner.plan(live);
    };

    await publishIndex(connectStore(store.bucket), scope, plan);

    expect(planner.calls.map((live) => live.state)).toEqual(['absent', 'valid']);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/client']);
  });
});

describe('S3Store.get with ifNoneMatch', () => {
  it('answers notModified without the bytes while the object keeps that ETag, and the object once it changed', async () => {
    const store = await testStore();
    const etag = await putObject(store, 'k', 'first');
    expect(await store.get('k', { ifNoneMatch: etag })).toMatchObject({ notModified: true, etag, size: 0 });
    await putObject(store, 'k', 'second');
    const changed = await store.get('k', { ifNoneMatch: etag });
    expect(changed?.notModified).toBeUndefined();
    expect(changed?.body.toString()).toBe('second');
    expect(await store.get('missing', { ifNoneMatch: etag })).toBeUndefined();
  });
});
