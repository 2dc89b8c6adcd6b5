/**
 * A root too large for the memory a heal has: it stops with IndexTooLargeError before memory runs out, and
 * writes nothing. A heal by partitions keeps V8's heap near what is live.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { IndexTooLargeError } from '../../lambda/lib/errors';
import { MEMORY_COST, MemoryGuard, PARTITION_HEAP_GROWTH, memoryBudget } from '../../lambda/lib/memory';
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

describe('holdHeapGrowth', () => {
  /**
   * A process that keeps a set of objects live and lets go of many more after they have lived a while (as a
   * heal by partitions lets go of listed objects and partition files), with V8's growth as `mode` leaves it;
   * answers the largest heap it saw, in MiB.
   */
  function largestHeap(mode: 'default' | 'held' | 'released', flags: string[] = []): number {
    const script = `
      const { holdHeapGrowth } = require(${JSON.stringify(join(__dirname, '../../lambda/lib/memory.ts'))});
      const { getHeapStatistics } = require('node:v8');
      const mode = ${JSON.stringify(mode)};
      if (mode !== 'default') { const release = holdHeapGrowth(); if (mode === 'released') release(); }
      let seed = 1;
      const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648).toString(36);
      const live = Array.from({ length: 150000 }, (_, i) => ({ key: 'data/model/type-' + i + '/' + next(), n: i }));
      const recent = [];
      let largest = 0;
      for (let b = 0; b < 300; b++) {
        recent.push(Array.from({ length: 20000 }, (_, i) => ({ key: 'gone/' + b + '/' + i + '/' + next(), n: i })));
        if (recent.length > 4) recent.shift();
        largest = Math.max(largest, getHeapStatistics().total_heap_size);
      }
      process.stdout.write(JSON.stringify({ largest: Math.round(largest / 1048576), live: live.length }));
    `;
    const run = spawnSync(process.execPath, [...flags, '--import', 'tsx', '-e', script], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(run.stderr);
    return (JSON.parse(run.stdout) as { largest: number }).largest;
  }

  test('keeps the heap near what is live while held, and gives V8 its own growth back once released', () => {
    const own = largestHeap('default');
    // WHEN the growth is held, the same work keeps a much smaller heap
    expect(largestHeap('held')).toBeLessThan(0.7 * own);
    // ...and once released, the heap grows as V8 would have it
    expect(largestHeap('released')).toBeGreaterThan(0.85 * own);
  });

  /** The V8 flags a hold and its release set in a process started with `flags`. */
  function flagsSet(flags: string[] = []): string[] {
    const script = `
      const v8 = require('node:v8');
      const set = [];
      const own = v8.setFlagsFromString;
      v8.setFlagsFromString = (flag) => { set.push(flag); own(flag); };
      const { holdHeapGrowth } = require(${JSON.stringify(join(__dirname, '../../lambda/lib/memory.ts'))});
      holdHeapGrowth()();
      process.stdout.write(JSON.stringify(set));
    `;
    const run = spawnSync(process.execPath, [...flags, '--import', 'tsx', '-e', script], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(run.stderr);
    return JSON.parse(run.stdout) as string[];
  }

  test('leaves a smaller heap, which V8 grows by less already (a Lambda function of 1024 MiB), as V8 grows it', () => {
    // Held at PARTITION_HEAP_GROWTH regardless, this heap grew larger than V8 grows it.
    expect(flagsSet(['--max-old-space-size=921', '--max-semi-space-size=51'])).toEqual([]);
    // ...while a heap of 4 GiB is held, then given its own growth back.
    expect(flagsSet(['--max-old-space-size=4096'])).toEqual([
      `--heap-growing-percent=${PARTITION_HEAP_GROWTH}`,
      '--heap-growing-percent=0',
    ]);
    // ...and a growth given on the command line is kept.
    expect(flagsSet(['--max-old-space-size=4096', '--heap-growing-percent=50'])).toEqual([]);
  });
});
