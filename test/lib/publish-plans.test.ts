/**
 * publishIndex plans once when nothing moves: the plan made before the lock stands when the index read
 * under the lock is the same version, and the re-check after the write does not re-plan (or re-parse)
 * an index that is still exactly its own write. Anything else still re-plans.
 */
import type { GetOptions } from '../../lambda/lib/s3-types';
import type { LiveIndex } from '../../lambda/lib/layouts/types';
import type { Planner } from '../../lambda/lib/publish-types';
import { S3Store } from '../../lambda/lib/s3';
import { emptyIndex } from '../../lambda/lib/index-file';
import { healRoot } from '../../lambda/lib/heal';
import { publishIndex } from '../../lambda/lib/publish';
import { withLock } from '../../lambda/lib/lock';
import { dualWriteRoot, swampObjects } from '../helpers/dual-write';
import { indexEntry } from '../helpers/factories';
import { signal } from '../helpers/signal';
import {
  connectStore,
  hookedStore,
  putIndex,
  putObject,
  readIndex,
  seedDatastore,
  summarize,
  testClient,
  testStore,
  trackRequests,
} from '../helpers/s3';

/**
 * A store that notes the index reads sent, and which of them went out before its lock write (or the lock's
 * delete) was answered. Each read is noted when it is sent and each answer when it arrives, so the notes
 * say in which order the library did them, whatever the latency: no delay is needed.
 */
class WatchingStore extends S3Store {
  readonly indexReads: { ifNoneMatch?: string; beforeLockTaken: boolean; beforeLockReleased: boolean }[] = [];
  private lockTaken = false;
  private lockReleased = false;

  constructor(
    bucket: string,
    private readonly indexKey: string,
    private readonly lockKey: string,
  ) {
    super(testClient(), bucket);
  }

  override async put(...args: Parameters<S3Store['put']>): ReturnType<S3Store['put']> {
    if (args[0] !== this.lockKey) return super.put(...args);
    const result = await super.put(...args);
    this.lockTaken = true;
    return result;
  }

  override async delete(...args: Parameters<S3Store['delete']>): ReturnType<S3Store['delete']> {
    if (args[0] !== this.lockKey) return super.delete(...args);
    const result = await super.delete(...args);
    this.lockReleased = true;
    return result;
  }

  override async get(key: string, options?: GetOptions): ReturnType<S3Store['get']> {
    if (key === this.indexKey) {
      this.indexReads.push({ ifNoneMatch: options?.ifNoneMatch, beforeLockTaken: !this.lockTaken, beforeLockReleased: !this.lockReleased });
    }
    return super.get(key, options);
  }
}

/** A planner that adds `entries` to whatever is live, counting its calls. */
function adding(...keys: string[]): { plan: Planner<undefined>; calls: LiveIndex[] } {
  const calls: LiveIndex[] = [];
  return {
    calls,
    plan: async (live) => {
      calls.push(live);
      const index = live.state === 'valid' ? { ...live.index, entries: new Map(live.index.entries) } : emptyIndex();
      if (keys.every((k) => index.entries.has(k))) return { facts: undefined };
      for (const key of keys) index.entries.set(key, indexEntry(key));
      return { index, facts: undefined };
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
    const plan: Planner<undefined> = async (live) => {
      // A client pushes between the first read and the lock.
      if (planner.calls.length === 0) await putIndex(writer, 'p/.datastore-index.json', [indexEntry('data/client')]);
      return planner.plan(live);
    };

    await publishIndex(connectStore(store.bucket), scope, plan);

    expect(planner.calls.map((live) => live.state)).toEqual(['absent', 'valid']);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/client']);
  });
});

describe('publishIndex round trips', () => {
  it('re-reads the index while it takes the lock, conditionally, so an unchanged index is not downloaded again', async () => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const etag = await putIndex(store, 'p/.datastore-index.json', [indexEntry('data/old')]);
    const watching = new WatchingStore(store.bucket, 'p/.datastore-index.json', 'p/.datastore.lock');
    const planner = adding('data/a');

    const outcome = await publishIndex(watching, scope, planner.plan, { convergeRounds: 0 });

    expect(outcome).toMatchObject({ writes: 1, conflicts: 0 });
    expect(planner.calls).toHaveLength(1);
    expect(watching.indexReads.map(({ ifNoneMatch, beforeLockTaken }) => ({ ifNoneMatch, beforeLockTaken }))).toEqual([
      { ifNoneMatch: undefined, beforeLockTaken: true },
      { ifNoneMatch: etag, beforeLockTaken: true },
    ]);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/old']);
  });

  it('sends the re-check after the write along with the release of the lock, and re-plans nothing when the write stands', async () => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const watching = new WatchingStore(store.bucket, 'p/.datastore-index.json', 'p/.datastore.lock');
    const planner = adding('data/a');

    const outcome = await publishIndex(watching, scope, planner.plan);

    expect(outcome).toMatchObject({ writes: 1, conflicts: 0 });
    expect(planner.calls).toHaveLength(1);
    const written = (await store.head('p/.datastore-index.json'))!.etag;
    const recheck = watching.indexReads[watching.indexReads.length - 1];
    expect(watching.indexReads).toHaveLength(3);
    expect(recheck).toEqual({ ifNoneMatch: written, beforeLockTaken: false, beforeLockReleased: true });
    expect(await store.head('p/.datastore.lock')).toBeUndefined();
  });

  it('lists the root and reads the index from its first requests, then reads it only alongside the lock and for the re-check', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'early', objects: 8 });
    await putIndex(store, seeded.indexKey(), [indexEntry(seeded.expectedEntries()[0].key, { size: seeded.expectedEntries()[0].size })]);
    const healer = connectStore(store.bucket);
    const sent = trackRequests(healer);

    // Pages of two keys, one after another: a listing of several round trips.
    const report = await healRoot(healer, seeded.root, { mode: 'repair', lister: (s, prefix) => s.listPages({ prefix, maxKeys: 2 }) });

    expect(report.scopes[0]).toMatchObject({ published: true, conflicts: 0 });
    const indexReads = sent.flatMap((r, i) => (r.op === 'GetObject' && r.key === seeded.indexKey() ? [i] : []));
    const lastList = sent.map((r) => r.op).lastIndexOf('ListObjectsV2');
    const lockTake = sent.findIndex((r) => r.op === 'PutObject' && r.key === 'early/.datastore.lock');
    // The listing and the index's read go out with the layout's read (the manifest), not after it.
    expect(
      sent
        .slice(0, 3)
        .map((r) => r.op)
        .sort(),
    ).toEqual(['GetObject', 'GetObject', 'ListObjectsV2']);
    // Sent before the manifest's answer could be known; the manifest is read once by the heal, and again alongside the lock.
    const manifestReads = sent.flatMap((r, i) => (r.op === 'GetObject' && r.key === 'early/_index/_meta.json' ? [i] : []));
    expect(indexReads[0]).toBeLessThan(manifestReads[0]);
    expect(manifestReads.filter((i) => i < lockTake)).toHaveLength(2);
    expect(indexReads).toHaveLength(3);
    // sent before the listing's last page; the next one just before the lock is asked for (so answered alongside it)
    expect(indexReads[0]).toBeLessThan(lastList);
    expect(indexReads[1]).toBeGreaterThan(lastList);
    expect(indexReads[1]).toBeLessThan(lockTake);
    expect(sent[indexReads[1]].ifNoneMatch).toBeDefined();
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });

  it('re-reads the index after the lock when it had to wait for it, and keeps what the holder wrote meanwhile', async () => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const holder = connectStore(store.bucket);
    await putIndex(store, 'p/.datastore-index.json', [indexEntry('data/old')]);
    const watching = new WatchingStore(store.bucket, 'p/.datastore-index.json', 'p/.datastore.lock');
    const planner = adding('data/a');
    // A client holds the lock, and pushes and lets go once the publish has found it held and waited.
    const holderIn = signal();
    const publishWaited = signal();
    const client = withLock(holder, 'p/.datastore.lock', { holder: 'swamp-cli' }, async () => {
      holderIn.fire();
      await publishWaited.promise;
      await putIndex(holder, 'p/.datastore-index.json', [indexEntry('data/old'), indexEntry('data/client')]);
    });
    await holderIn.promise;

    const outcome = await publishIndex(watching, scope, planner.plan, { convergeRounds: 0, lock: { onWait: publishWaited.fire } });
    await client;

    expect(outcome).toMatchObject({ writes: 1, conflicts: 0 });
    expect(outcome.lockWaits).toBeGreaterThan(0);
    expect(watching.indexReads.filter((r) => !r.beforeLockTaken)).toHaveLength(1);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/client', 'data/old']);
  });
});

describe('publishIndex with the lock taken while the plan is finished', () => {
  /** A store whose take of the root's lock is noted as it is sent. */
  function noting(bucket: string): { store: S3Store; taking: () => boolean } {
    let taking = false;
    const store = hookedStore(bucket, {
      beforePut(key) {
        if (key === 'p/.datastore.lock') taking = true;
      },
    });
    return { store, taking: () => taking };
  }

  /** Calls `willWrite`, sees its take of the lock sent within a few turns of the event loop, and waits until the lock stands. */
  async function takenAhead(store: S3Store, taking: () => boolean, willWrite?: () => void): Promise<void> {
    willWrite?.();
    for (let turn = 0; turn < 20 && !taking(); turn++) await new Promise((resolve) => setImmediate(resolve));
    if (!taking()) throw new Error('willWrite sent no take of the lock');
    while (!(await store.head('p/.datastore.lock'))) await new Promise((resolve) => setImmediate(resolve));
  }

  it('takes the lock once the planner says it will write, and writes under it', async () => {
    // GIVEN an index, and a planner that says it will write, then finishes its plan only once the lock stands
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    await putIndex(store, 'p/.datastore-index.json', [indexEntry('data/old')]);
    const planner = adding('data/a');
    const publisher = noting(store.bucket);
    const plan: Planner<undefined> = async (live, willWrite) => {
      if (planner.calls.length === 0) await takenAhead(store, publisher.taking, willWrite);
      return planner.plan(live);
    };

    // WHEN an entry is published
    const outcome = await publishIndex(publisher.store, scope, plan);

    // THEN it is written once, from the one plan, and the lock is gone
    expect(outcome).toMatchObject({ writes: 1, conflicts: 0, lockWaits: 0 });
    expect(planner.calls).toHaveLength(1);
    expect(summarize(await readIndex(store, 'p/.datastore-index.json')).map((e) => e.key)).toEqual(['data/a', 'data/old']);
    expect(await store.head('p/.datastore.lock')).toBeUndefined();
  });

  it.each([
    ['finds nothing to write after all', async () => ({ facts: undefined })],
    [
      'fails',
      async () => {
        throw new Error('the plan failed');
      },
    ],
  ] as const)('gives the lock back, nothing written, when a planner that said it will write %s', async (_, finish) => {
    const store = await testStore();
    const scope = { root: { bucket: store.bucket, prefix: 'p' } };
    const etag = await putIndex(store, 'p/.datastore-index.json', [indexEntry('data/old')]);
    const publisher = noting(store.bucket);
    const plan: Planner<undefined> = async (_live, willWrite) => {
      await takenAhead(store, publisher.taking, willWrite);
      return finish();
    };

    const published = publishIndex(publisher.store, scope, plan);

    if (_ === 'fails') await expect(published).rejects.toThrow('the plan failed');
    else expect(await published).toMatchObject({ writes: 0, published: false });
    expect(await store.head('p/.datastore.lock')).toBeUndefined();
    expect((await store.head('p/.datastore-index.json'))!.etag).toBe(etag);
  });
});

describe('publishIndex after a lost race', () => {
  it.each(['monolith', 'dual-write'] as const)(
    'reads and plans a %s root again before it takes the lock anew, so the lock is held only to write',
    async (layout) => {
      // GIVEN a root of that layout, and a lockless client that pushes its entry just before our first write
      const store = await testStore();
      const scope = { root: { bucket: store.bucket, prefix: 'p' } };
      const indexKey = 'p/.datastore-index.json';
      if (layout === 'dual-write') await dualWriteRoot(store, 'p', swampObjects(1));
      else await putIndex(store, indexKey, [indexEntry('data/old')]);
      const client = connectStore(store.bucket);
      const push = async (): Promise<void> => {
        const now = await readIndex(client, indexKey);
        await putIndex(client, indexKey, [...now!.entries.values(), indexEntry('data/client')]);
      };
      let raced = false;
      const racing = hookedStore(store.bucket, {
        async beforePut(key) {
          if (raced || key !== indexKey) return;
          raced = true;
          await push();
        },
      });
      const planner = adding('data/a');
      // Whether the root's lock object stood while each plan was made (no one else takes it in this test).
      const heldWhilePlanning: boolean[] = [];
      const plan: Planner<undefined> = async (live) => {
        heldWhilePlanning.push((await store.head('p/.datastore.lock')) !== undefined);
        return planner.plan(live);
      };

      // WHEN an entry is published
      const outcome = await publishIndex(racing, scope, plan, { convergeRounds: 0 });

      // THEN the first write lost, the second stands, and neither plan was made under the lock
      expect(outcome).toMatchObject({ writes: 1, conflicts: 1 });
      expect(heldWhilePlanning).toEqual([false, false]);
      const keys = summarize(await readIndex(store, indexKey)).map((e) => e.key);
      expect(keys).toEqual(expect.arrayContaining(['data/a', 'data/client']));
      expect(await store.head('p/.datastore.lock')).toBeUndefined();
    },
  );
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
