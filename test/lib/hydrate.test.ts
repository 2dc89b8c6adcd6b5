/** Hydrating a local cache from an index, against moto: byte-for-byte, resumable, never outside the cache. */
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { bufferedBodyMax, cachePathOf, partPathOf } from '../../lambda/lib/cache-files';
import { UnsafeKeyError } from '../../lambda/lib/errors';
import { healRoot } from '../../lambda/lib/heal';
import { healAndHydrate, hydrateCache } from '../../lambda/lib/hydrate';
import { type DatastoreIndex, parseIndex, serializeIndex } from '../../lambda/lib/index-file';
import { S3Store } from '../../lambda/lib/s3';
import { datastoreIndex, indexEntry } from '../helpers/factories';
import {
  connectStore,
  faultyClient,
  hookedStore,
  putObject,
  putObjects,
  readIndex,
  seedDatastore,
  testStore,
  trackRequests,
  type SeededDatastore,
} from '../helpers/s3';
import { filesUnder } from '../helpers/temp';

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'hydrate-test-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A healed root and its index. */
async function indexedRoot(prefix: string, objects = 10): Promise<{ seeded: SeededDatastore; index: DatastoreIndex }> {
  const store = await testStore();
  const seeded = await seedDatastore(store, { prefix, objects });
  await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
  return { seeded, index: (await readIndex(store, seeded.indexKey()))! };
}

async function expectCacheMatches(cacheDir: string, seeded: SeededDatastore, scope = ''): Promise<void> {
  for (const [rel, body] of seeded.objects.get(scope)!) expect((await readFile(join(cacheDir, rel))).equals(body)).toBe(true);
}

describe('hydrateCache', () => {
  it('downloads every entry byte-for-byte and keeps a copy of the index beside them', async () => {
    const { seeded, index } = await indexedRoot('hy');
    const cacheDir = join(tmp, 'cache');
    const progress: number[] = [];

    const report = await hydrateCache(connectStore(seeded.store.bucket), seeded.scope(), index, {
      cacheDir,
      onProgress: (done) => progress.push(done),
    });

    expect(report).toEqual({
      pulled: 10,
      present: 0,
      bytes: [...seeded.objects.get('')!.values()].reduce((n, b) => n + b.length, 0),
      refused: [],
      failed: [],
      archived: [],
    });
    await expectCacheMatches(cacheDir, seeded);
    expect(await filesUnder(cacheDir)).toEqual([...seeded.objects.get('')!.keys(), '.datastore-index.json'].sort());
    const copy = parseIndex(await readFile(join(cacheDir, '.datastore-index.json')));
    expect(copy.ok && [...copy.index.entries.values()]).toEqual([...index.entries.values()]);
    expect(progress).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
  });

  it('skips files of the indexed size and re-downloads those of another size', async () => {
    const { seeded, index } = await indexedRoot('skip', 4);
    const cacheDir = join(tmp, 'cache');
    const [same, resized] = [...seeded.objects.get('')!.entries()];
    const sameSizeOtherBytes = Buffer.alloc(same[1].length, '#');
    await mkdir(dirname(join(cacheDir, same[0])), { recursive: true });
    await writeFile(join(cacheDir, same[0]), sameSizeOtherBytes);
    await mkdir(dirname(join(cacheDir, resized[0])), { recursive: true });
    await writeFile(join(cacheDir, resized[0]), 'stale local copy of another size, surely');
    const store = connectStore(seeded.store.bucket);

    const report = await hydrateCache(store, seeded.scope(), index, { cacheDir });

    expect(report).toMatchObject({ pulled: 3, present: 1, refused: [], failed: [] });
    expect((await readFile(join(cacheDir, same[0]))).equals(sameSizeOtherBytes)).toBe(true); // clients compare sizes only
    expect((await readFile(join(cacheDir, resized[0]))).equals(resized[1])).toBe(true);
    expect(store.requests.GetObject).toBe(3);
  });

  it('resumes: only the files not yet pulled are downloaded', async () => {
    const { seeded, index } = await indexedRoot('resume', 10);
    const cacheDir = join(tmp, 'cache');
    const done = [...seeded.objects.get('')!.entries()].filter((_, i) => i % 2 === 0);
    for (const [rel, body] of done) {
      await mkdir(dirname(join(cacheDir, rel)), { recursive: true });
      await writeFile(join(cacheDir, rel), body);
    }
    // a half-written part from the interrupted run is simply replaced
    const [leftover] = [...seeded.objects.get('')!.keys()].filter((_, i) => i % 2 === 1);
    await mkdir(dirname(join(cacheDir, leftover)), { recursive: true });
    await mkdir(dirname(partPathOf(cacheDir, join(cacheDir, leftover))), { recursive: true });
    await writeFile(partPathOf(cacheDir, join(cacheDir, leftover)), 'half');
    const store = connectStore(seeded.store.bucket);

    const report = await hydrateCache(store, seeded.scope(), index, { cacheDir });

    expect(report).toMatchObject({ pulled: 5, present: 5, refused: [], failed: [] });
    expect(store.requests.GetObject).toBe(5);
    await expectCacheMatches(cacheDir, seeded);
    expect(await filesUnder(cacheDir)).toEqual([...seeded.objects.get('')!.keys(), '.datastore-index.json'].sort());
  });

  it('refuses keys that would escape the cache, downloads the others, and writes nothing outside', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, {
      prefix: 'esc',
      objects: { 'logs/ok.log': 'fine', 'data/a..b/c..d/e/f': 'dots inside names are fine', '../escape': 'evil', 'a/../../b': 'evil too' },
    });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    const index = (await readIndex(store, seeded.indexKey()))!;
    // the heal never indexes them; an index from elsewhere may still hold them
    expect([...index.entries.keys()].sort()).toEqual(['data/a..b/c..d/e/f', 'logs/ok.log']);
    for (const key of ['../escape', 'a/../../b']) index.entries.set(key, indexEntry(key, { size: 4 }));
    const cacheDir = join(tmp, 'inner', 'cache');

    const report = await hydrateCache(connectStore(store.bucket), seeded.scope(), index, { cacheDir });

    expect(report).toMatchObject({ pulled: 2, present: 0, refused: ['../escape', 'a/../../b'], failed: [] });
    expect(await filesUnder(tmp)).toEqual([
      'inner/cache/.datastore-index.json',
      'inner/cache/data/a..b/c..d/e/f',
      'inner/cache/logs/ok.log',
    ]);
    expect((await readFile(join(cacheDir, 'data/a..b/c..d/e/f'))).toString()).toBe('dots inside names are fine');
  });

  it('reports an entry whose object is gone as failed and pulls the rest', async () => {
    const store = await testStore();
    await putObjects(store, { 'r/logs/a.log': 'aaa', 'r/logs/b.log': 'bbbb' });
    const index = datastoreIndex([
      indexEntry('logs/a.log', { size: 3 }),
      indexEntry('logs/gone.log', { size: 9 }),
      indexEntry('logs/b.log', { size: 4 }),
    ]);
    const cacheDir = join(tmp, 'cache');

    const report = await hydrateCache(connectStore(store.bucket), { root: { bucket: store.bucket, prefix: 'r' } }, index, { cacheDir });

    expect(report).toMatchObject({ pulled: 2, present: 0, refused: [] });
    // what the report (and the command's warning) says: what failed, and what to do
    expect(report.failed).toEqual([{ key: 'logs/gone.log', error: expect.stringMatching(/gone \(404\)\. .*run hydrate again/) }]);
    expect(await filesUnder(cacheDir)).toEqual(['.datastore-index.json', 'logs/a.log', 'logs/b.log']);
  });

  it('holds at most 128 MiB of bodies however many download at once: a body above its share streams, byte for byte', async () => {
    expect([1, 128, 256].map(bufferedBodyMax)).toEqual([1 << 20, 1 << 20, 512 << 10]);
    const store = await testStore();
    // Around the share of 256 downloads at once (512 KiB) and of 128 (1 MiB): read whole or streamed, each lands whole.
    const sizes = {
      'logs/small.log': 9,
      'logs/half.log': 512 << 10,
      'logs/above-half.log': (512 << 10) + 1,
      'logs/above-one.log': (1 << 20) + 1,
    };
    const bodies = Object.entries(sizes).map(([key, size], i) => [key, Buffer.alloc(size, 97 + i)] as const);
    await putObjects(store, Object.fromEntries(bodies.map(([key, body]) => [`r/${key}`, body])));
    const index = datastoreIndex(bodies.map(([key, body]) => indexEntry(key, { size: body.length })));
    for (const concurrency of [undefined, 128]) {
      const cacheDir = join(tmp, `cache-${concurrency ?? 'default'}`);

      const report = await hydrateCache(connectStore(store.bucket), { root: { bucket: store.bucket, prefix: 'r' } }, index, {
        cacheDir,
        concurrency,
      });

      expect(report).toMatchObject({ pulled: 4, failed: [] });
      for (const [key, body] of bodies) expect((await readFile(join(cacheDir, key))).equals(body)).toBe(true);
    }
  });
});

describe('hydrateCache, downloads that go wrong', () => {
  const scope = (bucket: string) => ({ root: { bucket, prefix: 'r' } });

  it('fails a body of another size than announced, leaving neither the file nor its part file; the next run pulls it', async () => {
    const store = await testStore();
    await putObjects(store, { 'r/logs/a.log': 'aaaaaaaaaa', 'r/logs/b.log': 'bbbb' });
    const index = datastoreIndex([indexEntry('logs/a.log', { size: 10 }), indexEntry('logs/b.log', { size: 4 })]);
    const cacheDir = join(tmp, 'cache');
    const cut = (announced: string, body: string) =>
      new S3Store(
        faultyClient((r) =>
          r.method === 'GET' && r.path.endsWith('/r/logs/a.log')
            ? { status: 200, headers: { 'content-length': announced }, body }
            : undefined,
        ),
        store.bucket,
      );

    const short = await hydrateCache(cut('10', 'aaaaa'), scope(store.bucket), index, { cacheDir });
    const long = await hydrateCache(cut('3', 'aaaaaaaaaa'), scope(store.bucket), index, { cacheDir });

    expect(short).toMatchObject({
      pulled: 1,
      present: 0,
      failed: [{ key: 'logs/a.log', error: expect.stringMatching(/sent 5 bytes of the 10 announced/) }],
    });
    expect(long).toMatchObject({
      pulled: 0,
      present: 1,
      failed: [{ key: 'logs/a.log', error: expect.stringMatching(/sent 10 bytes of the 3 announced/) }],
    });
    expect(await filesUnder(cacheDir)).toEqual(['.datastore-index.json', 'logs/b.log']);
    const again = await hydrateCache(connectStore(store.bucket), scope(store.bucket), index, { cacheDir });
    expect(again).toMatchObject({ pulled: 1, present: 1, failed: [] });
    expect((await readFile(join(cacheDir, 'logs/a.log'))).toString()).toBe('aaaaaaaaaa');
  });

  it('retries a throttled download and counts each attempt, from the first download on', async () => {
    const store = await testStore();
    await putObjects(store, { 'r/logs/a.log': 'aaa', 'r/logs/b.log': 'bbbb' });
    const index = datastoreIndex([indexEntry('logs/a.log', { size: 3 }), indexEntry('logs/b.log', { size: 4 })]);
    const cacheDir = join(tmp, 'cache');
    let throttled = 0;
    const flaky = new S3Store(
      faultyClient((r) => (r.method === 'GET' && throttled++ < 2 ? { status: 503, code: 'SlowDown' } : undefined)),
      store.bucket,
    );

    const report = await hydrateCache(flaky, scope(store.bucket), index, { cacheDir, concurrency: 1 });

    expect(report).toMatchObject({ pulled: 2, present: 0, failed: [] });
    expect(flaky.requests.GetObject).toBe(4);
    expect((await readFile(join(cacheDir, 'logs/a.log'))).toString()).toBe('aaa');
    expect((await readFile(join(cacheDir, 'logs/b.log'))).toString()).toBe('bbbb');
  });

  it('fails every file of a folder it cannot make (a file stands in its place) and pulls the others', async () => {
    const store = await testStore();
    await putObjects(store, { 'r/logs/a.log': 'a', 'r/logs/b.log': 'b', 'r/logs/c.log': 'c', 'r/data/x': 'x' });
    const index = datastoreIndex(['logs/a.log', 'logs/b.log', 'logs/c.log', 'data/x'].map((k) => indexEntry(k, { size: 1 })));
    const cacheDir = join(tmp, 'cache');
    await mkdir(cacheDir, { recursive: true });
    await writeFile(join(cacheDir, 'logs'), 'a file where a folder should be');

    const report = await hydrateCache(connectStore(store.bucket), scope(store.bucket), index, { cacheDir, concurrency: 3 });

    expect(report).toMatchObject({ pulled: 1, present: 0, refused: [] });
    expect(report.failed.map((f) => f.key)).toEqual(['logs/a.log', 'logs/b.log', 'logs/c.log']);
    for (const { error } of report.failed)
      expect(error).toMatch(/cache\/logs is a file where a folder should be .*\. Remove it, then run again$/);
    expect(await filesUnder(cacheDir)).toEqual(['.datastore-index.json', 'data/x', 'logs']);
  });
});

describe('healAndHydrate', () => {
  it('heals an unindexed namespace and hydrates its files under <cache>/<namespace>/, as current clients keep them', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'hh', objects: 5, namespaces: ['team'] });
    const cacheDir = join(tmp, 'cache');

    const report = await healAndHydrate(connectStore(store.bucket), seeded.root, { cacheDir, namespace: 'team' });

    expect(report.scope).toMatchObject({ namespace: 'team', indexState: 'absent', published: true });
    expect(report.hydrate).toMatchObject({ pulled: 5, present: 0, refused: [], failed: [] });
    await expectCacheMatches(join(cacheDir, 'team'), seeded, 'team');
    expect(await filesUnder(cacheDir)).toEqual(
      [...[...seeded.objects.get('team')!.keys()].map((k) => `team/${k}`), '.datastore-index.json'].sort(),
    );
  });
});

describe('healAndHydrate, downloads beside the publish', () => {
  it('begins downloading the index it planned before that index is written, and keeps the index published', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'hp', objects: 12 });
    const cacheDir = join(tmp, 'cache');
    const hydrating = connectStore(store.bucket);
    const requests = trackRequests(hydrating);

    const report = await healAndHydrate(hydrating, seeded.root, { cacheDir });

    const firstData = requests.findIndex((r) => r.op === 'GetObject' && seeded.objects.get('')!.has(r.key!.slice('hp/'.length)));
    const indexWritten = requests.findIndex((r) => r.op === 'PutObject' && r.key === seeded.indexKey());
    expect(firstData).toBeGreaterThanOrEqual(0);
    expect(firstData).toBeLessThan(indexWritten);
    expect(report.scope).toMatchObject({ indexState: 'absent', published: true });
    expect(report.hydrate).toMatchObject({ pulled: 12, present: 0, failed: [] });
    await expectCacheMatches(cacheDir, seeded);
    const copy = parseIndex(await readFile(join(cacheDir, '.datastore-index.json')));
    expect(copy.ok && copy.index.entries).toEqual((await readIndex(store, seeded.indexKey()))!.entries);
  });

  it('downloads from an index found true as the heal read it, without reading it again', async () => {
    const { seeded } = await indexedRoot('ht', 8);
    const cacheDir = join(tmp, 'cache');
    const hydrating = connectStore(seeded.store.bucket);
    const requests = trackRequests(hydrating);

    const report = await healAndHydrate(hydrating, seeded.root, { cacheDir });

    expect(report.scope).toMatchObject({ indexState: 'valid', published: false, drift: { missing: 0, stale: 0, resized: 0 } });
    expect(report.hydrate).toMatchObject({ pulled: 8, failed: [] });
    expect(requests.filter((r) => r.op === 'GetObject' && r.key === seeded.indexKey())).toHaveLength(1);
    await expectCacheMatches(cacheDir, seeded);
  });

  it("pulls what another writer's index adds while the heal publishes, and keeps the index it published", async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'hw', objects: 6 });
    const cacheDir = join(tmp, 'cache');
    const late = 'late/upload.bin';
    const body = Buffer.from('written by a client that takes no lock');
    // A client uploads, then writes its index without the lock, just before the heal's first write of it.
    let raced = 0;
    const racing = hookedStore(store.bucket, {
      async beforePut(key) {
        if (key !== seeded.indexKey() || raced++ > 0) return;
        await putObject(store, `hw/${late}`, body);
        const entry = indexEntry(late, { size: body.length, lastModified: new Date().toISOString(), sha256: 'c'.repeat(64) });
        await putObject(store, key, serializeIndex(datastoreIndex([entry])));
      },
    });

    const report = await healAndHydrate(racing, seeded.root, { cacheDir });

    expect(raced).toBe(2);
    expect(report.scope).toMatchObject({ published: true, conflicts: 1 });
    const published = (await readIndex(store, seeded.indexKey()))!;
    expect(published.entries.get(late)?.sha256).toBe('c'.repeat(64));
    expect(report.entries).toBe(7);
    expect(report.hydrate).toMatchObject({ pulled: 7, present: 0, failed: [] });
    await expectCacheMatches(cacheDir, seeded);
    expect((await readFile(join(cacheDir, late))).equals(body)).toBe(true);
    const copy = await readFile(join(cacheDir, '.datastore-index.json'));
    expect(copy.equals(Buffer.from(serializeIndex(published)))).toBe(true);
  });
});

describe('cachePathOf', () => {
  it.each(['', '../x', 'a/../../b', 'a/./b', './a', 'a//b', 'a/', '/etc/passwd', 'a\\..\\b', 'a\0b', '..'])('refuses %j', (key) => {
    expect(() => cachePathOf('/cache', key)).toThrow(UnsafeKeyError);
  });

  it.each([
    ['a b/c+d/100%', '/cache/a b/c+d/100%'],
    ['a..b/c..d', '/cache/a..b/c..d'],
    ['...', '/cache/...'],
    ['ünï/日本.txt', '/cache/ünï/日本.txt'],
  ])('maps %j inside the cache', (key, path) => {
    expect(cachePathOf('/cache', key)).toBe(path);
  });
});
