/** A root too large for the memory a heal has: it stops with IndexTooLargeError before memory runs out, and writes nothing. */
import { IndexTooLargeError } from '../../lambda/lib/errors';
import { MEMORY_COST, MemoryGuard, memoryBudget } from '../../lambda/lib/memory';
import { healRoot } from '../../lambda/lib/heal';
import { listScopes } from '../../lambda/lib/list';
import { repairResumable } from '../../lambda/lib/repair';
import { indexEntry } from '../helpers/factories';
import { connectStore, putIndex, readIndex, seedDatastore, snapshotBucket, summarize, swampKeys, testStore } from '../helpers/s3';

const MiB = 1024 * 1024;

describe('memoryBudget', () => {
  test('is the budget given; else a share of the function memory in a Lambda; else a share of the V8 heap', () => {
    expect(memoryBudget(2 * MiB, {})).toEqual({ bytes: 2 * MiB, memory: 'a memory budget of 2.0 MiB' });
    const lambda = memoryBudget(undefined, { AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024' });
    expect(lambda.memory).toBe('1024 MiB of function memory');
    expect(lambda.bytes).toBeLessThan(1024 * MiB);
    expect(memoryBudget(undefined, {}).memory).toMatch(/^a \d+ MiB V8 heap$/);
  });

  test('at the default 1024 MiB of function memory, a root of 1,000,000 objects without an index still heals', () => {
    // GIVEN the guard of a heal at the stack's default memory
    const guard = new MemoryGuard(memoryBudget(undefined, { AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024' }));
    // WHEN 1,000 pages of 1,000 objects are listed, then the index is built and written
    const page = Array.from({ length: 1000 }, (_, i) => ({ key: `swamp/data/m/${i}`, size: 100 }));
    for (let i = 0; i < 1000; i++) guard.page('s3://b/swamp', 'swamp/', page);
    // THEN nothing trips
    expect(() => guard.healing('s3://b/swamp', 1_000_000, 0, true)).not.toThrow();
    // ...while a root half as large again stops in its listing
    expect(() => {
      for (let i = 0; i < 500; i++) guard.page('s3://b/swamp', 'swamp/', page);
    }).toThrow(IndexTooLargeError);
  });

  test('a listing that holds a large index stops before that index is read: its bytes count, not only its objects', () => {
    const guard = new MemoryGuard({ bytes: 100 * MiB, memory: 'test' });
    const objects = [{ key: 'swamp/data/a', size: 1 }];
    expect(() => guard.page('s3://b/swamp', 'swamp/', objects)).not.toThrow();
    // A namespace's index counts too; a file of that name deeper down is data, not an index.
    const big = Math.ceil((100 * MiB) / MEMORY_COST.readPerIndexByte) + 1;
    expect(() => guard.page('s3://b/swamp', 'swamp/', [{ key: 'swamp/data/x/.datastore-index.json', size: big }])).not.toThrow();
    expect(() => guard.page('s3://b/swamp', 'swamp/', [{ key: 'swamp/ns1/.datastore-index.json', size: big }])).toThrow(IndexTooLargeError);
  });
});

describe('a heal with too little memory', () => {
  test('a monolith root stops in its listing with IndexTooLargeError naming it, and the bucket is unchanged', async () => {
    // GIVEN a monolith root of 1,500 objects whose index misses one of them
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 1500 });
    const entries = seeded.expectedEntries().slice(1);
    await putIndex(
      store,
      seeded.indexKey(),
      entries.map((e) => indexEntry(e.key, { size: e.size })),
    );
    const before = await snapshotBucket(store);

    // WHEN it is repaired with a budget far below what its listing holds
    const run = healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair', memoryBudget: 256 * 1024 });

    // THEN it fails with the typed error, naming the root, the objects reached and the memory it had
    const error = await run.catch((err: unknown) => err);
    expect(error).toBeInstanceOf(IndexTooLargeError);
    expect((error as IndexTooLargeError).scope).toBe(`s3://${store.bucket}/swamp`);
    expect((error as IndexTooLargeError).message).toMatch(
      new RegExp(`^s3://${store.bucket}/swamp is too large to heal in a memory budget of 0\\.3 MiB: stopped at \\d+ objects`),
    );
    expect((error as IndexTooLargeError).hint).toMatch(/memorySize prop .*--max-old-space-size/);
    // ...and nothing was written: no index, no lock, no control record
    expect(await snapshotBucket(store)).toEqual(before);
  });

  test('a namespace whose index does not fit is left alone while the root beside it is healed, then reported', async () => {
    // GIVEN a root of 20 objects without an index, and a namespace of 1,500 objects whose index misses one
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 20, namespaces: ['big'] });
    const bigKeys = swampKeys(1500);
    await seedDatastore(store, { prefix: 'swamp/big', objects: Object.fromEntries(bigKeys.map((k) => [k, `body of ${k}`])) });
    await putIndex(
      store,
      seeded.indexKey('big'),
      bigKeys.slice(1).map((k) => indexEntry(k, { size: `body of ${k}`.length })),
    );
    const bigIndexBefore = await snapshotBucket(store, 'swamp/big/');

    // WHEN it is repaired from a listing made already (as the Lambda's resumable repair does), with a budget
    // that holds that listing and the root's small index, but not the namespace's index beside it
    const listing = await listScopes(connectStore(store.bucket), 'swamp/');
    const budget = listing.objectsSeen * (MEMORY_COST.listed + MEMORY_COST.written) + 1000;
    const run = healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair', listing, memoryBudget: budget });

    // THEN the namespace is reported too large, by name
    const error = await run.catch((err: unknown) => err);
    expect(error).toBeInstanceOf(IndexTooLargeError);
    expect((error as IndexTooLargeError).scope).toBe(`s3://${store.bucket}/swamp#big`);
    // ...its objects and index are as they were, and the root's own index was written all the same
    expect(await snapshotBucket(store, 'swamp/big/')).toEqual(bigIndexBefore);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });

  test("the Lambda's resumable repair stops in its listing too, and saves no progress", async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 1500 });
    const before = await snapshotBucket(store);
    const run = repairResumable(connectStore(store.bucket), seeded.root, {
      mode: 'repair',
      remainingMs: () => 600_000,
      pageSize: 500,
      memoryBudget: 256 * 1024,
    });
    await expect(run).rejects.toThrow(IndexTooLargeError);
    expect(await snapshotBucket(store)).toEqual(before);
  });
});
