/** Concurrent writers on one root, against moto: healers racing each other, clients pushing, writers ignoring the lock. */
import { DatastoreLock, withLock } from '../../lambda/lib/lock';
import type { IndexEntry } from '../../lambda/lib/index-file';
import { healRoot } from '../../lambda/lib/heal';
import { indexEntry } from '../helpers/factories';
import {
  connectStore,
  deleteObject,
  hookedStore,
  listObjects,
  putIndex,
  putObject,
  readIndex,
  readObject,
  seedDatastore,
  summarize,
  testStore,
} from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';
import { healedIndexJson, repairLines } from '../../bin/cli/format';

/** A swamp client's push as the contract describes it: GET the index, upload, PUT the merged index unconditionally. */
async function clientPush(store: S3Store, indexKey: string, base: string, files: Record<string, string>): Promise<void> {
  const current = await readIndex(store, indexKey);
  const entries = new Map<string, IndexEntry>(current?.entries ?? []);
  for (const [rel, body] of Object.entries(files)) {
    await putObject(store, base + rel, body);
    entries.set(rel, indexEntry(rel, { size: Buffer.byteLength(body), lastModified: new Date().toISOString(), sha256: `client-${rel}` }));
  }
  await putIndex(store, indexKey, entries.values(), current?.extra ?? {});
}

describe('concurrent repairs of one root', () => {
  it('three healers and a pushing client (honouring the lock) converge on an exact index, losing nothing', async () => {
    // GIVEN an unindexed root with a namespace
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'race', objects: 12, namespaces: ['ns1'] });
    const pushed: string[] = [];
    // Contention made certain, not left to timing: whoever takes the lock first keeps it until the three
    // others have each tried to take it too (and so found it held).
    const LOCK = 'race/.datastore.lock';
    let leader: string | undefined;
    const arrived = new Set<string>();
    let everyoneArrived!: () => void;
    const everyone = new Promise<void>((resolve) => (everyoneArrived = resolve));
    const leaderWaits = async (id: string): Promise<void> => {
      if (id === leader && arrived.size < 3) await everyone;
    };
    const participant = (id: string) =>
      hookedStore(store.bucket, {
        async beforePut(key) {
          if (key === LOCK && leader === undefined) leader = id;
          else if (key === LOCK && id !== leader && !arrived.has(id) && arrived.add(id).size === 3) everyoneArrived();
          else if (key !== LOCK && key.endsWith('.datastore-index.json')) await leaderWaits(id);
        },
      });
    const client = participant('client');
    let clientWaits = 0;

    // WHEN three healers (each with its own store) run while a client pushes new files in four rounds
    const pushes = (async () => {
      for (let round = 0; round < 4; round++) {
        const files = { [`logs/pushed-${round}.log`]: `round ${round}`, [`data/new/x/${round}/raw`]: 'y'.repeat(round + 1) };
        const lock = await DatastoreLock.acquire(client, LOCK, { holder: 'swamp-cli', waitMs: 30_000, onWait: () => void clientWaits++ });
        try {
          await leaderWaits('client'); // the client's push writes with the helpers' own requests, past the hook
          await clientPush(client, seeded.indexKey(), 'race/', files);
        } finally {
          await lock.release();
        }
        pushed.push(...Object.keys(files));
      }
    })();
    const heals = [0, 1, 2].map((i) =>
      healRoot(participant(`healer-${i}`), seeded.root, { mode: 'repair', publish: { lock: { waitMs: 30_000 } } }),
    );
    const reports = await Promise.all(heals);
    await pushes;

    // THEN the three that came second found the lock held and waited
    expect(arrived.size).toBe(3);
    const healerWaits = reports.flatMap((r) => r.scopes).reduce((n, s) => n + s.lockWaits, 0);
    expect(healerWaits + clientWaits).toBeGreaterThanOrEqual(3);

    // THEN the root's index holds exactly every data object in the bucket (seeded and pushed), the namespace's too
    const objects = (await listObjects(store, 'race/')).map((o) => o.key.slice('race/'.length));
    const rootData = objects.filter((k) => !k.startsWith('ns1/') && k !== '.datastore-index.json');
    const index = await readIndex(store, seeded.indexKey());
    expect([...index!.entries.keys()].sort()).toEqual(rootData.sort());
    expect(pushed).toHaveLength(8);
    for (const rel of pushed) expect(index!.entries.has(rel)).toBe(true);
    expect(summarize(await readIndex(store, seeded.indexKey('ns1')))).toEqual(seeded.expectedEntries('ns1'));
    expect(reports.some((r) => r.scopes.some((s) => s.published))).toBe(true);
    expect(await readObject(store, 'race/.datastore.lock')).toBeUndefined();
  });

  it('loses its conditional write (412) to a push that ignores the lock, then re-reads and keeps what the push added', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'r412', objects: 6 });
    const rogue = connectStore(store.bucket);
    let raced = 0;
    // Between the healer's read of the index (under the lock) and its write, a client pushes without the lock.
    const healer = hookedStore(store.bucket, {
      async beforePut(key, conditional) {
        if (key !== seeded.indexKey() || !conditional || raced++ > 0) return;
        await clientPush(rogue, seeded.indexKey(), 'r412/', { 'logs/rogue.log': 'pushed mid-publish' });
      },
    });

    const report = await healRoot(healer, seeded.root, { mode: 'repair' });

    expect(raced).toBeGreaterThan(1);
    expect(report.scopes[0].conflicts).toBeGreaterThan(0);
    expect(report.scopes[0].published).toBe(true);
    const index = (await readIndex(store, seeded.indexKey()))!;
    expect(summarize(index)).toEqual(
      [...seeded.expectedEntries(), { key: 'logs/rogue.log', size: 'pushed mid-publish'.length }].sort((a, b) => (a.key < b.key ? -1 : 1)),
    );
    expect(index.entries.get('logs/rogue.log')!.sha256).toBe('client-logs/rogue.log');
  });

  it('re-applies its heal when a client push overwrites the index right after the write', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'erase', objects: 6 });
    const rogue = connectStore(store.bucket);
    let writes = 0;
    // The heal's write lands; then a client that read the index before it writes back its stale copy.
    const staleCopy = [indexEntry(seeded.expectedEntries()[0].key, { size: seeded.expectedEntries()[0].size })];
    const healer = hookedStore(store.bucket, {
      async beforeGet(key) {
        if (key === seeded.indexKey() && writes === 1) {
          writes++;
          await putIndex(rogue, seeded.indexKey(), staleCopy);
        }
      },
      beforePut(key) {
        if (key === seeded.indexKey() && writes === 0) writes++;
      },
    });
    const events: string[] = [];

    const report = await healRoot(healer, seeded.root, { mode: 'repair', onEvent: (_scope, e) => events.push(e.event) });

    expect(events).toContain('erased');
    expect(report.scopes[0].published).toBe(true);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });

  it('does not re-add an object a client deleted (and unindexed) after the listing passed it', async () => {
    // GIVEN an indexed root, plus one new object so the heal has something to publish
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'del', objects: 6 });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    await putObject(store, 'del/logs/new.log', 'new');
    const victim = seeded.expectedEntries()[2].key;
    const client = connectStore(store.bucket);
    let deleted = false;
    // WHEN, after the healer listed (and first read the index) but before it takes the lock, a client deletes an object
    const healer = hookedStore(store.bucket, {
      async beforePut(key) {
        if (key !== 'del/.datastore.lock' || deleted) return;
        deleted = true;
        await withLock(client, 'del/.datastore.lock', { holder: 'swamp-cli' }, async () => {
          await deleteObject(client, `del/${victim}`);
          const current = (await readIndex(client, seeded.indexKey()))!;
          await putIndex(
            client,
            seeded.indexKey(),
            [...current.entries.values()].filter((e) => e.key !== victim),
          );
        });
      },
    });

    const report = await healRoot(healer, seeded.root, { mode: 'repair' });

    // THEN the index has the new object and not the deleted one: a stale entry would fail every client's pull
    expect(deleted).toBe(true);
    expect(report.scopes[0].published).toBe(true);
    const index = (await readIndex(store, seeded.indexKey()))!;
    expect(index.entries.has('logs/new.log')).toBe(true);
    expect(index.entries.has(victim)).toBe(false);
    expect(summarize(index)).toEqual(
      [...seeded.expectedEntries().filter((e) => e.key !== victim), { key: 'logs/new.log', size: 3 }].sort((a, b) =>
        a.key < b.key ? -1 : 1,
      ),
    );
  });

  it('reports what happened when another writer healed the index first: nothing published, nothing added, the entries as they now stand', async () => {
    // GIVEN an indexed root with 4 unindexed objects
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'first', objects: 6 });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    const added = { 'logs/a.log': 'a', 'logs/b.log': 'bb', 'logs/c.log': 'ccc', 'logs/d.log': 'dddd' };
    for (const [rel, body] of Object.entries(added)) await putObject(store, `first/${rel}`, body);
    const client = connectStore(store.bucket);
    let pushed = false;
    // WHEN, after the healer listed and planned but before it takes the lock, a client indexes them (and pushes one more file)
    const healer = hookedStore(store.bucket, {
      async beforePut(key) {
        if (key !== 'first/.datastore.lock' || pushed) return;
        pushed = true;
        await withLock(client, 'first/.datastore.lock', { holder: 'swamp-cli' }, () =>
          clientPush(client, seeded.indexKey(), 'first/', { ...added, 'logs/e.log': 'e' }),
        );
      },
    });

    const report = await healRoot(healer, seeded.root, { mode: 'repair' });

    // THEN the report says the heal found 4 missing, published nothing, added nothing, and the index holds 6 + 5 entries now
    expect(pushed).toBe(true);
    const scope = report.scopes[0];
    expect(scope).toMatchObject({ published: false, drift: { missing: 4, stale: 0, resized: 0 }, entries: 11 });
    expect((await readIndex(store, seeded.indexKey()))!.entries.size).toBe(11);
    expect(healedIndexJson(scope)).toMatchObject({
      published: false,
      healedByAnotherWriter: true,
      added: 0,
      removed: 0,
      resized: 0,
      entries: 11,
    });
    expect(repairLines(report)).toEqual([`Index ${scope.scope} was healed by another writer meanwhile (11 entries); nothing published.`]);
  });

  it('treats an index deleted between its read and its If-Match write as a lost race, not a failure', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'gone', objects: 5 });
    await putIndex(store, seeded.indexKey(), [indexEntry('logs/stale.log', { lastModified: '2020-01-01T00:00:00.000Z' })]);
    let deleted = false;
    const healer = hookedStore(store.bucket, {
      async beforePut(key, conditional) {
        if (key === seeded.indexKey() && conditional && !deleted) {
          deleted = true;
          await deleteObject(store, seeded.indexKey());
        }
      },
    });

    const report = await healRoot(healer, seeded.root, { mode: 'repair' });

    expect(deleted).toBe(true);
    expect(report.scopes[0]).toMatchObject({ published: true });
    expect(report.scopes[0].conflicts).toBeGreaterThan(0);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });
});
