/** Fetching ahead while a hydrate's heal lists (`hydrate-ahead.ts`), against moto: placed only as planned, never twice. */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CacheWriter } from '../../lambda/lib/cache-writer';
import { healAndHydrate } from '../../lambda/lib/hydrate';
import { FetchAhead } from '../../lambda/lib/hydrate-ahead';
import { indexEntry } from '../helpers/factories';
import { connectStore, putObject, seedDatastore, testStore, trackRequests } from '../helpers/s3';
import { filesUnder } from '../helpers/temp';

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'hydrate-ahead-test-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('healAndHydrate into an empty cache, fetching ahead', () => {
  it('downloads what the listing names before the heal plans, each object once, and places every planned file', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'fa', objects: 20 });
    const cacheDir = join(tmp, 'cache');
    const hydrating = connectStore(store.bucket);
    const requests = trackRequests(hydrating);
    let planned = -1;

    const report = await healAndHydrate(hydrating, seeded.root, {
      cacheDir,
      heal: {
        onPlanned: () => {
          planned = requests.length;
        },
      },
    });

    const data = requests.filter((r) => r.op === 'GetObject' && seeded.objects.get('')!.has(r.key!.slice('fa/'.length)));
    expect(new Set(data.map((r) => r.key)).size).toBe(20);
    expect(data).toHaveLength(20);
    const firstData = requests.findIndex((r) => r.op === 'GetObject' && seeded.objects.get('')!.has(r.key!.slice('fa/'.length)));
    expect(firstData).toBeLessThan(planned);
    expect(report.hydrate).toMatchObject({ pulled: 20, present: 0, failed: [], refused: [] });
    expect(report.hydrate.bytes).toBe([...seeded.objects.get('')!.values()].reduce((n, b) => n + b.length, 0));
    for (const [rel, body] of seeded.objects.get('')!) expect((await readFile(join(cacheDir, rel))).equals(body)).toBe(true);
    expect(await filesUnder(cacheDir)).toEqual([...seeded.objects.get('')!.keys(), '.datastore-index.json'].sort());
  });

  it("never places what the root's index leaves out: a namespace's objects, listed with the root's, leave no file", async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'fn', objects: 6, namespaces: ['team'] });
    const cacheDir = join(tmp, 'cache');
    const hydrating = connectStore(store.bucket);
    const requests = trackRequests(hydrating);

    const report = await healAndHydrate(hydrating, seeded.root, { cacheDir });

    // The namespace's objects were fetched ahead: the listing had not yet said they were a namespace's.
    expect(requests.some((r) => r.op === 'GetObject' && r.key?.startsWith('fn/team/') && !r.key.endsWith('.json'))).toBe(true);
    expect(report.hydrate).toMatchObject({ pulled: 6, failed: [] });
    expect(await filesUnder(cacheDir)).toEqual([...seeded.objects.get('')!.keys(), '.datastore-index.json'].sort());
  });

  it('fetches nothing ahead into a cache that holds a file already', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'fh', objects: 5 });
    const cacheDir = join(tmp, 'cache');
    const [first, firstBody] = [...seeded.objects.get('')!][0];
    await mkdir(join(cacheDir, first, '..'), { recursive: true });
    await writeFile(join(cacheDir, first), firstBody);
    const hydrating = connectStore(store.bucket);
    const requests = trackRequests(hydrating);

    const report = await healAndHydrate(hydrating, seeded.root, { cacheDir });

    expect(report.hydrate).toMatchObject({ pulled: 4, present: 1 });
    expect(requests.filter((r) => r.op === 'GetObject' && r.key === `fh/${first}`)).toHaveLength(0);
  });
});

describe('FetchAhead', () => {
  it('places a part only for an entry of the size fetched; any other entry, or key, is left to a download', async () => {
    const store = await testStore();
    await putObject(store, 'p/a.txt', 'five!');
    await putObject(store, 'p/b.txt', 'bee');
    const cacheDir = join(tmp, 'cache');
    const writer = new CacheWriter([tmp]);
    let n = 0;
    const ahead = new FetchAhead(connectStore(store.bucket), writer, {
      cacheDir,
      base: 'p/',
      partsDir: join(cacheDir, '_control', 'parts'),
      nextPart: () => n++,
      concurrency: 4,
      most: 100,
      bufferedMax: 1024,
    });
    try {
      ahead.offer([
        { key: 'p/a.txt', size: 5 },
        { key: 'p/b.txt', size: 3 },
        { key: 'q/outside.txt', size: 1 },
        { key: 'p/.datastore-index.json', size: 10 },
        { key: 'p/big.bin', size: 4096 },
      ]);

      expect(await ahead.place(indexEntry('a.txt', { size: 5 }), join(cacheDir, 'a.txt'))).toBe(true);
      expect(await ahead.place(indexEntry('b.txt', { size: 4 }), join(cacheDir, 'b.txt'))).toBe(false);
      expect(await ahead.place(indexEntry('a.txt', { size: 5 }), join(cacheDir, 'again.txt'))).toBe(false);
      expect(await ahead.place(indexEntry('outside.txt', { size: 1 }), join(cacheDir, 'outside.txt'))).toBe(false);
      await ahead.close();

      expect(await readFile(join(cacheDir, 'a.txt'), 'utf8')).toBe('five!');
      await expect(stat(join(cacheDir, 'b.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
      expect(n).toBe(2);
    } finally {
      await writer.close();
    }
  });
});

describe('FetchAhead, on a full disk', () => {
  it('names the file and what to do when a part fetched ahead cannot be moved into place', async () => {
    const store = await testStore();
    await putObject(store, 'p/a.txt', 'five!');
    const cacheDir = join(tmp, 'cache');
    const real = new CacheWriter([tmp]);
    // The disk fills between the part's write and its move: only the move fails, as a folder's mkdir would.
    const writer = {
      write: (dirs: readonly string[], part: string, path: string | undefined, body: Uint8Array | undefined) =>
        path === undefined
          ? real.write(dirs, part, path, body)
          : Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, mkdir'), { code: 'ENOSPC' })),
    } as CacheWriter;
    const ahead = new FetchAhead(connectStore(store.bucket), writer, {
      cacheDir,
      base: 'p/',
      partsDir: join(cacheDir, '_control', 'parts'),
      nextPart: () => 0,
      concurrency: 1,
      most: 10,
      bufferedMax: 1024,
    });
    try {
      ahead.offer([{ key: 'p/a.txt', size: 5 }]);
      const path = join(cacheDir, 'a.txt');

      await expect(ahead.place(indexEntry('a.txt', { size: 5 }), path)).rejects.toMatchObject({
        message: `Cannot write ${path}: no space left on device. Free disk space, then run the same command again to resume`,
      });
      await ahead.close();
    } finally {
      await real.close();
    }
  });
});

describe('FetchAhead, bounded', () => {
  it('fetches no more objects ahead than it may, however long the listing', async () => {
    const store = await testStore();
    for (const name of ['a', 'b', 'c']) await putObject(store, `p/${name}.txt`, name);
    const cacheDir = join(tmp, 'cache');
    const writer = new CacheWriter([tmp]);
    const hydrating = connectStore(store.bucket);
    const requests = trackRequests(hydrating);
    let n = 0;
    const options = {
      cacheDir,
      base: 'p/',
      partsDir: join(cacheDir, 'parts'),
      nextPart: () => n++,
      concurrency: 4,
      most: 2,
      bufferedMax: 1024,
    };
    const ahead = new FetchAhead(hydrating, writer, options);
    try {
      ahead.offer([{ key: 'p/a.txt', size: 1 }]);
      ahead.offer([
        { key: 'p/b.txt', size: 1 },
        { key: 'p/c.txt', size: 1 },
      ]);
      await ahead.close();

      expect(requests.filter((r) => r.op === 'GetObject').map((r) => r.key)).toEqual(['p/a.txt', 'p/b.txt']);
      expect(await ahead.place(indexEntry('c.txt', { size: 1 }), join(cacheDir, 'c.txt'))).toBe(false);
      expect(await ahead.place(indexEntry('b.txt', { size: 1 }), join(cacheDir, 'b.txt'))).toBe(true);
    } finally {
      await writer.close();
    }
  });
});
