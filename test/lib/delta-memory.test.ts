/** The event path on a monolith whose index does not fit in the memory the process has: IndexTooLargeError before it is read, nothing written. */
import { IndexTooLargeError } from '../../lambda/lib/errors';
import { LAMBDA_MEMORY_ENV } from '../../lambda/lib/memory';
import { applyDelta } from '../../lambda/lib/delta';
import { indexEntry, objectChange } from '../helpers/factories';
import { connectStore, putIndex, putObjects, readIndex, snapshotBucket, testStore } from '../helpers/s3';

describe('applyDelta on a monolith too large for its memory', () => {
  const saved = process.env[LAMBDA_MEMORY_ENV];
  afterEach(() => {
    if (saved === undefined) delete process.env[LAMBDA_MEMORY_ENV];
    else process.env[LAMBDA_MEMORY_ENV] = saved;
  });

  async function bigMonolith() {
    // GIVEN a monolith root under `m/` whose index of 3,000 entries is about half a megabyte
    const store = await testStore();
    const entries = Array.from({ length: 3000 }, (_, i) => indexEntry(`data/m/${i}/1/raw`, { sha256: 'f'.repeat(64) }));
    await putIndex(store, 'm/.datastore-index.json', entries);
    await putObjects(store, { 'm/logs/new.log': 'hello' });
    const change = new Map([['logs/new.log', objectChange('m/logs/new.log', { size: 5 })]]);
    return { store, scope: { root: { bucket: store.bucket, prefix: 'm' } }, change };
  }

  it('stops with IndexTooLargeError naming the scope and the memory, and writes nothing', async () => {
    const { store, scope, change } = await bigMonolith();
    const before = await snapshotBucket(store);

    // WHEN an event batch reaches it in a Lambda of 1 MiB
    process.env[LAMBDA_MEMORY_ENV] = '1';
    const error = await applyDelta(connectStore(store.bucket), scope, change, { convergeRounds: 0 }).catch((err: unknown) => err);

    // THEN the typed error says which scope and what memory, and the bucket is as it was
    expect(error).toBeInstanceOf(IndexTooLargeError);
    expect((error as IndexTooLargeError).scope).toBe(`s3://${store.bucket}/m`);
    expect((error as IndexTooLargeError).message).toMatch(
      /in 1 MiB of function memory: stopped before reading its \d+-byte index; nothing was written\./,
    );
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('applies the delta when the memory holds the index', async () => {
    const { store, scope, change } = await bigMonolith();
    process.env[LAMBDA_MEMORY_ENV] = '1024';
    const report = await applyDelta(connectStore(store.bucket), scope, change, { convergeRounds: 0 });
    expect(report).toMatchObject({ status: 'applied', added: 1, published: true });
    expect((await readIndex(store, 'm/.datastore-index.json'))?.entries.size).toBe(3001);
  });
});
