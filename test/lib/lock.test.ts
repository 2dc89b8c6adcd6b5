/** The datastore lock shared with swamp clients, against moto: taking, waiting, failing, taking over, releasing. */
import { HeldLocks } from '../../lambda/lib/held-locks';
import { CLIENT_TURN, type ClientTurn, DatastoreLock, type LockBody, withLock } from '../../lambda/lib/lock';
import { LockBusyError } from '../../lambda/lib/errors';
import { S3Store } from '../../lambda/lib/s3';
import { healRoot } from '../../lambda/lib/heal';
import { lockBody } from '../helpers/factories';
import { ManualClock } from '../helpers/manual-clock';
import { signal } from '../helpers/signal';
import { sleep } from '../../support/sleep';
import {
  connectStore,
  faultyClient,
  listObjects,
  putObject,
  readIndex,
  readJson,
  readObject,
  seedDatastore,
  summarize,
  testStore,
  trackRequests,
} from '../helpers/s3';

describe('DatastoreLock', () => {
  it('writes the contract body while held and deletes it on release', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'root/.datastore.lock', { holder: 'indexer-test', ttlMs: 30_000 });
    try {
      const body = await readJson<LockBody>(store, 'root/.datastore.lock');
      expect(body).toEqual({
        holder: 'indexer-test',
        hostname: expect.any(String),
        pid: process.pid,
        acquiredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        ttlMs: 30_000,
        nonce: expect.any(String),
      });
      expect(lock.conditional).toBe(true);
    } finally {
      await lock.release();
    }
    expect(await readObject(store, 'root/.datastore.lock')).toBeUndefined();
  });

  it('serialises two writers: the second waits until the first releases', async () => {
    const store = await testStore();
    const order: string[] = [];
    const waits: string[] = [];
    const firstIn = signal();
    const secondWaited = signal();
    // The first holds the lock until the second has seen it held and waited.
    const first = withLock(store, 'L', { holder: 'first' }, async () => {
      order.push('first in');
      firstIn.fire();
      await secondWaited.promise;
      order.push('first out');
    });
    await firstIn.promise;
    const onWait = (holder: string) => {
      waits.push(holder);
      secondWaited.fire();
    };
    const second = withLock(connectStore(store.bucket), 'L', { holder: 'second', onWait }, async () => {
      order.push('second in');
    });
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second in']);
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]).toMatch(/^first on .+ pid \d+ since /);
  });

  it('heartbeats renew the lock every third of its ttl, conditionally, and a takeover is noticed as lost', async () => {
    const store = await testStore();
    const clock = new ManualClock();
    const lock = await DatastoreLock.acquire(store, 'L', { ttlMs: 3000, clock });
    try {
      const sent = trackRequests(store);
      await clock.advance(3300);
      // Three renewals, each on the version the one before wrote: without them the lock would be stale by now.
      const renewals = sent.filter((r) => r.op === 'PutObject');
      expect(renewals).toHaveLength(3);
      expect(renewals.every((r) => r.ifMatch !== undefined)).toBe(true);
      const error = await DatastoreLock.acquire(connectStore(store.bucket), 'L', { waitMs: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBusyError);
      expect(lock.lost).toBe(false);
      await putObject(store, 'L', JSON.stringify(lockBody({ nonce: 'usurper' })));
      // The next heartbeat notices the takeover.
      await clock.advance(1000);
      expect(lock.lost).toBe(true);
    } finally {
      await lock.release();
    }
    expect(JSON.parse((await readObject(store, 'L'))!.toString()).nonce).toBe('usurper');
  });

  it('a first look slower than waitMs still waits once for a live holder before it gives up', async () => {
    const store = await testStore();
    await putObject(store, 'L', JSON.stringify(lockBody({ holder: 'swamp-cli', nonce: 'theirs', ttlMs: 60_000 })));
    // A loaded machine: each look at the clock finds 400 ms gone, so the first look alone outlasts the wait.
    const clock = new ManualClock((await store.head('L'))!.lastModified.getTime());
    const read = clock.now.bind(clock);
    clock.now = () => {
      const at = read();
      void clock.sleep(400);
      return at;
    };
    const waited: number[] = [];
    const error = await DatastoreLock.acquire(store, 'L', { waitMs: 300, clock, onWait: (_holder, ms) => waited.push(ms) }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockBusyError);
    expect(waited).toHaveLength(1);
  });

  it('judges a lock stale by its ttl against the clock: live just inside it, taken over past it', async () => {
    const store = await testStore();
    await putObject(store, 'L', JSON.stringify(lockBody({ holder: 'swamp-cli', nonce: 'theirs', ttlMs: 3000 })));
    const modified = (await store.head('L'))!.lastModified.getTime();
    const inside = await DatastoreLock.acquire(store, 'L', { waitMs: 0, clock: new ManualClock(modified + 2000) }).catch((e: unknown) => e);
    expect(inside).toBeInstanceOf(LockBusyError);
    const lock = await DatastoreLock.acquire(store, 'L', { waitMs: 0, clock: new ManualClock(modified + 4000) });
    expect(lock.waits).toBe(0);
    await lock.release();
    expect(await readObject(store, 'L')).toBeUndefined();
  });

  it('does not delete a lock someone else has taken over', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'L');
    const theirs = JSON.stringify(lockBody({ nonce: 'theirs' }));
    await putObject(store, 'L', theirs);
    await lock.release();
    expect((await readObject(store, 'L'))!.toString()).toBe(theirs);
  });

  it('releases a freshly written lock with one If-Match delete of its own version, without reading it back', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'L');
    const etag = (await listObjects(store, 'L'))[0].etag;
    const sent = trackRequests(store);
    await lock.release();
    expect(sent.map((r) => [r.op, r.ifMatch])).toEqual([['DeleteObject', `"${etag}"`]]);
    expect(await readObject(store, 'L')).toBeUndefined();
  });

  it('a one-step release never deletes a lock someone else holds now: its If-Match loses, the read-back shows their nonce', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'L');
    // Someone else's lock in its place: deleted and retaken, so another version (ETag) of the key.
    const theirs = JSON.stringify(lockBody({ holder: 'swamp-cli', nonce: 'theirs' }));
    await putObject(store, 'L', theirs);
    const sent = trackRequests(store);
    await lock.release();
    expect(sent.map((r) => r.op)).toEqual(['DeleteObject', 'GetObject']);
    expect((await readObject(store, 'L'))!.toString()).toBe(theirs);
  });

  it('reads the lock back when its one-step delete loses to another version of its own lock, and releases it', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'L');
    // Our own lock rewritten (a renewal whose answer never came back): same nonce, another ETag.
    const ours = await readJson<LockBody>(store, 'L');
    await putObject(store, 'L', JSON.stringify(ours, null, 1));
    const sent = trackRequests(store);
    await lock.release();
    expect(sent.map((r) => r.op)).toEqual(['DeleteObject', 'GetObject', 'DeleteObject']);
    expect(await readObject(store, 'L')).toBeUndefined();
  });

  it('reads the lock back before deleting it when the store rejects conditional deletes, and still releases it', async () => {
    const bucket = (await testStore()).bucket;
    const rejected: string[] = [];
    const client = faultyClient((request) => {
      if (request.method !== 'DELETE' || !request.headers['if-match']) return undefined;
      rejected.push(request.path);
      return { status: 501, code: 'NotImplemented' };
    });
    const store = new S3Store(client, bucket);
    const lock = await DatastoreLock.acquire(store, 'L');
    await lock.release();
    expect(rejected).toHaveLength(2); // the one-step release, then the read-back path's conditional delete
    expect(store.requests.GetObject).toBe(1);
    expect(await readObject(connectStore(bucket), 'L')).toBeUndefined();
  });

  it('reads the lock back before deleting it once its last write is older than half its ttl', async () => {
    const store = await testStore();
    const clock = new ManualClock();
    const lock = await DatastoreLock.acquire(store, 'L', { ttlMs: 600, clock });
    await clock.advance(400);
    const sent = trackRequests(store);
    await lock.release();
    expect(sent.map((r) => r.op)).toEqual(['GetObject', 'DeleteObject']);
    expect(await readObject(store, 'L')).toBeUndefined();
  });
});

describe('publishing against a held lock', () => {
  it('waits up to lock.waitMs for a live holder, then fails with LockBusyError naming it, writing nothing', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'live', objects: 3 });
    const held = JSON.stringify(lockBody({ holder: 'swamp-cli', hostname: 'build-host-7', pid: 31337, ttlMs: 30_000 }));
    const lockEtag = await putObject(store, 'live/.datastore.lock', held);

    // Virtual time: the waits pass at once, and the clock says how long the lock was waited for.
    const clock = new ManualClock();
    const started = clock.now();
    const error = await healRoot(connectStore(store.bucket), seeded.root, {
      mode: 'repair',
      publish: { lock: { waitMs: 1500, clock } },
    }).catch((e: unknown) => e);
    const elapsed = clock.now() - started;

    expect(error).toBeInstanceOf(LockBusyError);
    const busy = error as LockBusyError;
    expect(busy.lockKey).toBe('live/.datastore.lock');
    expect(busy.holder).toMatch(/swamp-cli on build-host-7 pid 31337 since /);
    expect(busy.message).toContain('swamp-cli on build-host-7');
    // It waited the whole waitMs.
    expect(elapsed).toBeGreaterThanOrEqual(1500);
    // the holder's lock is untouched and no index was written
    expect((await listObjects(store, 'live/.datastore.lock'))[0].etag).toBe(lockEtag);
    expect(await readObject(store, seeded.indexKey())).toBeUndefined();
  });

  it('takes over a stale lock (ttl expired) and publishes', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'stale', objects: 3 });
    await putObject(
      store,
      'stale/.datastore.lock',
      JSON.stringify(lockBody({ holder: 'crashed-client', ttlMs: 1, acquiredAt: '2026-01-01T00:00:00.000Z' })),
    );

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair', publish: { lock: { waitMs: 1500 } } });

    // Taken over at once: not one wait.
    expect(report.scopes[0]).toMatchObject({ published: true, lockWaits: 0 });
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(await readObject(store, 'stale/.datastore.lock')).toBeUndefined();
  });

  it('publishes once a live holder releases within waitMs, counting the waits', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'busy', objects: 2 });
    const holder = await DatastoreLock.acquire(connectStore(store.bucket), 'busy/.datastore.lock', { holder: 'swamp-cli' });
    // The holder lets go once the healer has found the lock held and waited.
    let released: Promise<void> | undefined;
    const onWait = (): void => {
      released ??= holder.release();
    };

    const report = await healRoot(connectStore(store.bucket), seeded.root, {
      mode: 'repair',
      publish: { lock: { waitMs: 10_000, onWait } },
    });
    await released;

    expect(report.scopes[0].published).toBe(true);
    expect(report.scopes[0].lockWaits).toBeGreaterThan(0);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });
});

describe("the indexer's own lock", () => {
  it('writes a short ttlMs (10 s) so a killed indexer blocks clients for seconds, and a release waits for a renewal in flight', async () => {
    const store = await testStore();
    const lock = await DatastoreLock.acquire(store, 'short/.datastore.lock');
    expect((await readJson<LockBody>(store, 'short/.datastore.lock'))!.ttlMs).toBe(10_000);
    await lock.release();
    expect(await readObject(store, 'short/.datastore.lock')).toBeUndefined();
  });

  it('releaseHeldLocks releases what this process holds (what the CLI does on Ctrl-C)', async () => {
    const { releaseHeldLocks } = await import('../../lambda/lib/lock');
    const store = await testStore();
    await DatastoreLock.acquire(store, 'a/.datastore.lock');
    await DatastoreLock.acquire(store, 'b/.datastore.lock');
    expect(await releaseHeldLocks()).toBe(2);
    expect(await readObject(store, 'a/.datastore.lock')).toBeUndefined();
    expect(await readObject(store, 'b/.datastore.lock')).toBeUndefined();
    expect(await releaseHeldLocks()).toBe(0);
  });
});

describe("a client's turn between the indexer's holds", () => {
  /**
   * The indexer holds `L` three times back to back (0.2 s each) while a client polls for it as swamp's
   * clients do (a conditional take, then a second's pause); the order in which each got the lock.
   */
  async function holdsBesideAPollingClient(clientTurn: ClientTurn): Promise<string[]> {
    const store = await testStore();
    const registry = new HeldLocks();
    const order: string[] = [];
    const firstIn = signal();
    const client = (async () => {
      await firstIn.promise;
      for (let tries = 0; tries < 10; tries++) {
        const put = await store.put('L', JSON.stringify(lockBody({ holder: 'client' })), { ifNoneMatch: '*' });
        if (put.status === 'written') {
          order.push('client');
          await store.delete('L');
          return;
        }
        await sleep(1_000);
      }
    })();
    for (let hold = 0; hold < 3; hold++) {
      await withLock(store, 'L', { holder: 'indexer', registry, clientTurn }, async () => {
        order.push('indexer');
        firstIn.fire();
        await sleep(200);
      });
    }
    await client;
    return order;
  }

  it('once holds taken back at once have run for afterMs, the next take waits, and a client polling once a second takes the lock', async () => {
    expect(await holdsBesideAPollingClient({ afterMs: 0, ms: CLIENT_TURN.ms })).toEqual(['indexer', 'client', 'indexer', 'indexer']);
  });

  it('holds shorter than afterMs in all are taken back at once: the client waits for the last', async () => {
    expect(await holdsBesideAPollingClient(CLIENT_TURN)).toEqual(['indexer', 'indexer', 'indexer', 'client']);
  });
});

describe('a lock take whose answer was lost', () => {
  it('is recognised by its nonce when the retry meets it, not waited on as a stranger', async () => {
    const { S3Store } = await import('../../lambda/lib/s3');
    const bucket = (await testStore()).bucket;
    const base = connectStore(bucket);
    // The first conditional put lands, but its answer is lost: the SDK's retry then sees 412.
    let lost = false;
    const store = Object.assign(Object.create(S3Store.prototype) as InstanceType<typeof S3Store>, base);
    store.put = async (key, body, condition, contentType) => {
      const result = await base.put(key, body, condition, contentType);
      if (!lost && condition && 'ifNoneMatch' in condition) {
        lost = true;
        return { status: 'conflict' };
      }
      return result;
    };
    let waited = 0;
    const lock = await DatastoreLock.acquire(store, 'lost/.datastore.lock', { waitMs: 2000, onWait: () => waited++ });
    expect(waited).toBe(0);
    await lock.release();
    expect(await readObject(base, 'lost/.datastore.lock')).toBeUndefined();
  });
});
