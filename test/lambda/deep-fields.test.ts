/**
 * The bundle repairing a root whose index entry holds a client field nested deeper than `JSON.stringify`
 * recurses: a direct invoke and the schedule publish the object added out of band, and the logs hold.
 */
import { handlerEnv, invoke, loadHandler, scheduledEvent } from '../helpers/lambda';
import { deepJson, deepRoot } from '../helpers/deep';
import { readIndex, readObject, testStore } from '../helpers/s3';

type Report = {
  totals: { missing: number; stale: number; resized: number };
  roots: { status: string; scopes: { indexState: string; published: boolean; sample: { missing: string[] } }[] }[];
};

describe.each([5_000, 200_000])('an index entry with a client field %i levels deep', (depth) => {
  test('check names the missing object; repair by direct invoke publishes it and keeps the field', async () => {
    const store = await testStore({ bucketPrefix: 'ldeep' });
    const { added } = await deepRoot(store, 'swamp', depth);
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp' }));

    const check = await invoke<Report>(lambda, { action: 'check' });
    expect(check.result.totals).toEqual({ missing: 1, stale: 0, resized: 0 });
    expect(check.result.roots[0].scopes[0]).toMatchObject({ indexState: 'valid', published: false, sample: { missing: [added] } });

    const repair = await invoke<Report>(lambda, { action: 'repair' });
    expect(repair.result.roots[0].scopes[0]).toMatchObject({ published: true });
    expect(repair.lines.filter((l) => l.level === 'ERROR')).toEqual([]);
    expect((await readIndex(store, 'swamp/.datastore-index.json'))!.entries.has(added)).toBe(true);
    // A bare boolean: the text is too large to print on failure.
    expect((await readObject(store, 'swamp/.datastore-index.json'))!.toString('utf8').includes(deepJson(depth))).toBe(true);
  });

  test('the scheduled repair publishes the object too', async () => {
    const store = await testStore({ bucketPrefix: 'ldeeps' });
    const { added } = await deepRoot(store, 'swamp', depth, 'dual-write');
    const lambda = loadHandler(handlerEnv({ bucket: store.bucket, prefixes: 'swamp' }));

    const run = await invoke<Report>(lambda, scheduledEvent());

    expect(run.logs('root done')).toHaveLength(1);
    expect(run.lines.filter((l) => l.level === 'ERROR')).toEqual([]);
    expect((await readIndex(store, 'swamp/.datastore-index.json'))!.entries.has(added)).toBe(true);
    expect((await readIndex(store, 'swamp/_index/files.json'))!.entries.has(added)).toBe(true);
  });
});
