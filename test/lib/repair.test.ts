/** repairResumable against moto: a listing spread over several runs, saved under _control/, healed once complete. */
import { type ResumableRepairResult, repairResumable } from '../../lambda/lib/repair';
import {
  connectStore,
  deleteObject,
  listKeys,
  putObject,
  readIndex,
  readObject,
  seedDatastore,
  snapshotBucket,
  summarize,
  testStore,
} from '../helpers/s3';

describe('repairResumable', () => {
  it('lists a page per run when time is short, publishes nothing until the listing is complete, then heals exactly and cleans up', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'rr', objects: 8, internal: true, namespaces: ['ns1'] });
    const total = (await listKeys(store, 'rr/')).length;
    const short = { mode: 'repair' as const, remainingMs: () => 0, pageSize: 6 };

    const runs: ResumableRepairResult[] = [];
    for (let i = 0; i < 20; i++) {
      const run = await repairResumable(connectStore(store.bucket), seeded.root, short);
      runs.push(run);
      if (run.status === 'complete') break;
      // while incomplete: progress saved under _control/, no index published yet
      expect(run.progressKey).toBe(`rr/_control/datastore-indexer/repair/root/progress.json`);
      expect(await readObject(store, seeded.indexKey())).toBeUndefined();
      expect(await readObject(store, seeded.indexKey('ns1'))).toBeUndefined();
    }

    const last = runs[runs.length - 1];
    expect(last.status).toBe('complete');
    expect(runs.length).toBeGreaterThanOrEqual(Math.ceil(total / 6));
    expect(last.invocations).toBe(runs.length);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(summarize(await readIndex(store, seeded.indexKey('ns1')))).toEqual(seeded.expectedEntries('ns1'));
    expect(await listKeys(store, `rr/_control/datastore-indexer/repair/root/listing/`)).toEqual([]);
    expect(await readObject(store, `rr/_control/datastore-indexer/repair/root/progress.json`)).toBeUndefined();
  });

  it('confirms objects listed in earlier runs: one deleted meanwhile is not indexed, one rewritten gets its new size', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'rc', objects: 8 });
    const [first, second] = seeded.expectedEntries();
    const run1 = await repairResumable(connectStore(store.bucket), seeded.root, { mode: 'repair', remainingMs: () => 0, pageSize: 4 });
    expect(run1.status).toBe('incomplete');
    // the first page held the first keys in order: change two of them before the listing completes
    await deleteObject(store, seeded.fullKey(first.key));
    await putObject(store, seeded.fullKey(second.key), 'rewritten, and longer than it was before');

    let run: ResumableRepairResult = run1;
    for (let i = 0; i < 10 && run.status !== 'complete'; i++) {
      run = await repairResumable(connectStore(store.bucket), seeded.root, { mode: 'repair', remainingMs: () => 0, pageSize: 4 });
    }

    expect(run.status).toBe('complete');
    if (run.status === 'complete') expect(run.confirmed).toBeGreaterThanOrEqual(2);
    const index = (await readIndex(store, seeded.indexKey()))!;
    expect(index.entries.has(first.key)).toBe(false);
    expect(index.entries.get(second.key)!.size).toBe('rewritten, and longer than it was before'.length);
    expect(summarize(index)).toEqual(
      seeded
        .expectedEntries()
        .filter((e) => e.key !== first.key)
        .map((e) => (e.key === second.key ? { key: e.key, size: 'rewritten, and longer than it was before'.length } : e)),
    );
  });

  it.each([
    ['is not JSON', (_: string) => '{not json'],
    ['holds a time that does not read', (body: string) => body.replace(/"\d{4}-\d\d-\d\dT[^"]*"/, '"yesterday-ish"')],
  ])('starts the listing over when a saved part %s, and still heals exactly', async (_what, corrupt) => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'rx', objects: 8 });
    const short = { mode: 'repair' as const, remainingMs: () => 0, pageSize: 4 };
    const run1 = await repairResumable(connectStore(store.bucket), seeded.root, short);
    expect(run1).toMatchObject({ status: 'incomplete', invocations: 1 });
    const [part] = await listKeys(store, `rx/_control/datastore-indexer/repair/root/listing/`);
    const body = (await readObject(store, part))!.toString('utf8');
    const damaged = corrupt(body);
    expect(damaged).not.toBe(body);
    await putObject(store, part, damaged);

    const run2 = await repairResumable(connectStore(store.bucket), seeded.root, short);
    // Started over: this run is the first of a new listing, not the second of the old one.
    expect(run2).toMatchObject({ status: 'incomplete', invocations: 1, objectsListed: 4 });
    let run: ResumableRepairResult = run2;
    for (let i = 0; i < 10 && run.status !== 'complete'; i++) run = await repairResumable(connectStore(store.bucket), seeded.root, short);
    expect(run.status).toBe('complete');
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });

  it('in check mode saves nothing and writes nothing', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'rk', objects: 8 });
    const before = await snapshotBucket(store);

    const run = await repairResumable(connectStore(store.bucket), seeded.root, { mode: 'check', remainingMs: () => 0, pageSize: 3 });

    expect(run).toMatchObject({ status: 'incomplete', objectsListed: 3, invocations: 1 });
    expect(run.status === 'incomplete' ? run.progressKey : 'complete').toBeUndefined();
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('heals in one run when there is time', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'r1', objects: 5 });

    const run = await repairResumable(connectStore(store.bucket), seeded.root, { mode: 'repair', remainingMs: () => 900_000 });

    expect(run).toMatchObject({ status: 'complete', invocations: 1, confirmed: 0 });
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(await listKeys(store, 'r1/_control/')).toEqual([]);
  });
});
