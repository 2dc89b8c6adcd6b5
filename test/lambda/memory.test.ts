/**
 * The bundled handler with little function memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, as the runtime sets it):
 * a root too large to heal stops with IndexTooLargeError, counted in the IndexTooLarge metric and logged
 * naming the scope and the prop to raise, while the schedule goes on with the other roots.
 */
import { handlerEnv, invoke, loadHandler, scheduledEvent } from '../helpers/lambda';
import { putIndex, seedDatastore, snapshotBucket, testStore } from '../helpers/s3';
import { indexEntry } from '../helpers/factories';
import { indexOf } from './support';

type ScheduleResult = { roots: { root: string; status: string; error?: string; published?: number }[] };

describe('the schedule with little function memory', () => {
  test('a root too large is counted and logged, written nothing, and the next root is repaired', async () => {
    // GIVEN a monolith root of 1,200 objects whose index misses one, and a small unindexed root beside it
    const store = await testStore({ bucketPrefix: 'too-large' });
    const big = await seedDatastore(store, { prefix: 'big', objects: 1200 });
    await putIndex(
      store,
      big.indexKey(),
      big
        .expectedEntries()
        .slice(1)
        .map((e) => indexEntry(e.key, { size: e.size })),
    );
    const small = await seedDatastore(store, { prefix: 'small', objects: 5 });
    const bigBefore = await snapshotBucket(store, 'big/');

    // WHEN the schedule runs in a function of 1 MiB
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'big,small', functionMemoryMiB: '1' }));
    const run = await invoke<ScheduleResult>(lambda, scheduledEvent());

    // THEN the large root failed with the typed error, and the small one was repaired all the same
    expect(run.result.roots.map((r) => [r.root.split('/').pop(), r.status])).toEqual([
      ['big', 'failed'],
      ['small', 'complete'],
    ]);
    expect(run.result.roots[0].error).toMatch(/is too large to heal in 1 MiB of function memory: stopped at \d+ objects/);
    expect(await indexOf(store, { root: small.root })).toEqual(small.expectedEntries());
    // ...the IndexTooLarge metric counts it once, and one error line names the scope, the memory and the prop
    expect(run.metric('IndexTooLarge')).toEqual([1]);
    const lines = run.lines.filter((l) => l.level === 'ERROR' && String(l.message).includes('memorySize'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ scope: `s3://${store.bucket}/big`, memory: '1 MiB of function memory', prop: 'memorySize' });
    // ...and nothing of the large root was written: no index, no lock, no saved listing
    expect(await snapshotBucket(store, 'big/')).toEqual(bigBefore);
  });
});
