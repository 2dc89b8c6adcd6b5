/** `check` and `repair` of a root whose index entry holds a client field nested deeper than `JSON.stringify` recurses. */
import { deepJson, deepRoot } from '../helpers/deep';
import { readIndex, readObject, testStore } from '../helpers/s3';
import { datastoreConfig, ensureBuiltCli, runCli } from './helpers';

beforeAll(ensureBuiltCli, 120_000);

test.each([5_000, 200_000])(
  'a client field %i levels deep: check says the added object is missing, repair publishes it (exit 0)',
  async (depth) => {
    const store = await testStore({ bucketPrefix: 'cli-deep' });
    const { added } = await deepRoot(store, 'swamp', depth);
    const config = datastoreConfig(store.bucket, 'swamp');

    const check = await runCli(['check', '--config', config]);
    expect({ code: check.code, stderr: check.stderr }).toEqual({ code: 2, stderr: '' });
    expect(check.stdout).toContain(`  missing  ${added}`);

    const repair = await runCli(['repair', '--config', config]);
    expect({ code: repair.code, stderr: repair.stderr }).toEqual({ code: 0, stderr: '' });
    expect((await readIndex(store, 'swamp/.datastore-index.json'))!.entries.has(added)).toBe(true);
    expect((await readObject(store, 'swamp/.datastore-index.json'))!.toString('utf8').includes(deepJson(depth))).toBe(true);

    expect((await runCli(['check', '--config', config])).code).toBe(0);
  },
);
