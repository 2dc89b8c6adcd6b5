/** `datastore-indexer hydrate`, run as a user runs it: the built command against a bucket on the test S3. */
import { existsSync, mkdirSync, readdirSync, statSync, watch, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { INDEX_KEY } from '../../lambda/lib/names';
import { parseIndex } from '../../lambda/lib/index-file';
import { partPathOf } from '../../lambda/lib/cache-files';
import { readIndex, seedDatastore, summarize, testStore } from '../helpers/s3';
import { asComparable, datastoreConfig, ensureBuiltCli, readTree, runCli, startCli, tempDir } from './helpers';

beforeAll(ensureBuiltCli, 120_000);

/** The cache's files other than the index copy. */
function cachedObjects(cacheDir: string): Map<string, Buffer> {
  const files = readTree(cacheDir);
  files.delete(INDEX_KEY);
  return files;
}

describe('datastore-indexer hydrate', () => {
  test('heals an unindexed root (prefix, internal keys, a namespace) and fills the cache with exactly its objects', async () => {
    // GIVEN a swamp datastore under a prefix with 100 objects, internal keys and a namespace, and no index
    const store = await testStore({ bucketPrefix: 'cli-hydrate' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 100, internal: true, namespaces: ['team-b'] });
    const cache = join(tempDir(), 'cache');

    // WHEN the command hydrates the cache
    const run = await runCli(['hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', cache]);

    // THEN one summary line, nothing on stderr (no SDK warning either), exit 0
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `^Healed s3://${store.bucket}/swamp \\(index was absent\\): \\+100 added, -0 removed, ~0 resized \\(index 100 entries\\)\\. ` +
          'Also healed 1 other index \\(\\+100 added, -0 removed, ~0 resized\\)\\. ' +
          'Pulled 100 files \\(\\d+\\.\\d kB\\), 0 already present\\.\\n$',
      ),
    );
    // AND the indexes in the bucket hold exactly the listing of their scopes
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(summarize(await readIndex(store, seeded.indexKey('team-b')))).toEqual(seeded.expectedEntries('team-b'));
    // AND the cache holds the root's objects byte for byte, and the index copy
    expect(asComparable(cachedObjects(cache))).toEqual(asComparable(seeded.objects.get('')!));
    const copy = parseIndex(readTree(cache).get(INDEX_KEY)!);
    expect(copy.ok && summarize(copy.index)).toEqual(seeded.expectedEntries());
  });

  test('--json prints one report on stdout; --namespace hydrates from that namespace index', async () => {
    // GIVEN a root with a namespace, no index
    const store = await testStore({ bucketPrefix: 'cli-json' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 20, namespaces: ['ns1'] });
    const config = datastoreConfig(store.bucket, 'swamp');
    const bytes = (ns: string): number => [...seeded.objects.get(ns)!.values()].reduce((n, b) => n + b.length, 0);

    // WHEN hydrating the root with --json
    const cache = join(tempDir(), 'cache');
    const first = await runCli(['hydrate', '--config', config, '--cache', cache, '--json']);

    // THEN stdout is exactly one JSON report
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout);
    const index = {
      scope: `s3://${store.bucket}/swamp`,
      namespace: null,
      layout: 'monolith',
      before: 'absent',
      unreadableReason: null,
      keptCopy: null,
      published: true,
      healedByAnotherWriter: false,
      added: 20,
      removed: 0,
      resized: 0,
      unshardable: 0,
      refused: 0,
      pending: null,
      held: null,
      staleMirrors: [],
      mirrorFailures: 0,
      objects: 20,
      entries: 20,
    };
    expect(report).toEqual({
      command: 'hydrate',
      ok: true,
      root: `s3://${store.bucket}/swamp`,
      scope: `s3://${store.bucket}/swamp`,
      cache,
      index,
      indexes: [index, { ...index, scope: `s3://${store.bucket}/swamp#ns1`, namespace: 'ns1' }],
      pulled: 20,
      present: 0,
      bytes: bytes(''),
      refused: [],
      failed: [],
      archived: [],
      seconds: expect.any(Number),
    });

    // WHEN hydrating the namespace into another cache
    const nsCache = join(tempDir(), 'ns-cache');
    const second = await runCli(['hydrate', '--config', config, '--namespace', 'ns1', '--cache', nsCache, '--json']);

    // THEN only that index is healed (already true) and its objects pulled, keys relative to the namespace
    expect(second.code).toBe(0);
    const nsReport = JSON.parse(second.stdout);
    expect(nsReport).toMatchObject({
      scope: `s3://${store.bucket}/swamp#ns1`,
      index: { namespace: 'ns1', before: 'valid', published: false, entries: 20 },
      pulled: 20,
      present: 0,
      bytes: bytes('ns1'),
    });
    expect(nsReport.indexes).toHaveLength(1);
    // files under <cache>/ns1/, as current clients keep a namespace's files
    expect(asComparable(cachedObjects(nsCache))).toEqual(
      asComparable(new Map([...seeded.objects.get('ns1')!].map(([k, v]) => [`ns1/${k}`, v]))),
    );
  });

  test('refuses keys that would land outside the cache, reports them, downloads the rest (exit 0)', async () => {
    // GIVEN objects whose relative keys climb out of the cache folder
    const store = await testStore({ bucketPrefix: 'cli-refuse' });
    const safe = { 'data/aws/ec2/i-1/1/raw': 'one', 'logs/run.log': 'two', 'notes.md': 'three' };
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: { ...safe, 'data/../../escape': 'E', '../x': 'X' } });
    const parent = tempDir();
    const cache = join(parent, 'cache');

    // WHEN hydrating
    const run = await runCli(['hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', cache]);

    // THEN both keys are refused with a warning each, the rest is pulled, exit 0
    expect(run.code).toBe(0);
    expect(run.stderr.split('\n').filter(Boolean).sort()).toEqual([
      'datastore-indexer: warning: refused key "../x": it has a "." or ".." path segment',
      'datastore-indexer: warning: refused key "data/../../escape": it has a "." or ".." path segment',
    ]);
    expect(run.stdout).toMatch(/Pulled 3 files \(\d+ B\), 0 already present\. Refused 2 keys clients cannot store\.\n$/);
    // AND nothing was written outside the cache folder
    expect(readdirSync(parent)).toEqual(['cache']);
    expect(existsSync(join(parent, 'escape')) || existsSync(join(parent, 'x'))).toBe(false);
    expect(asComparable(cachedObjects(cache))).toEqual(asComparable(new Map(Object.entries(safe).map(([k, v]) => [k, Buffer.from(v)]))));
    // AND the published index holds every other object and never the refused keys
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries().filter((e) => !e.key.includes('..')));
  });

  test('resumes a partly filled cache: pulls only what is absent or of another size', async () => {
    // GIVEN 60 objects, a cache already holding 30 of them, 5 at the wrong size, and a download left half done
    const store = await testStore({ bucketPrefix: 'cli-resume' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 60 });
    const objects = [...seeded.objects.get('')!];
    const cache = join(tempDir(), 'cache');
    const write = (rel: string, body: Buffer | string): void => {
      mkdirSync(dirname(join(cache, rel)), { recursive: true });
      writeFileSync(join(cache, rel), body);
    };
    for (const [rel, body] of objects.slice(0, 30)) write(rel, body);
    for (const [rel, body] of objects.slice(30, 35)) write(rel, Buffer.concat([body, Buffer.from('+')]));
    const part = partPathOf(cache, join(cache, objects[40][0]));
    mkdirSync(dirname(part), { recursive: true });
    writeFileSync(part, 'half');

    // WHEN hydrating
    const run = await runCli(['hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', cache]);

    // THEN only the 30 others are pulled, and the cache ends equal to the objects (no part file left)
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Pulled 30 files \(.+\), 30 already present\.\n$/);
    expect(asComparable(cachedObjects(cache))).toEqual(asComparable(seeded.objects.get('')!));
  });

  test('an interrupted run (killed mid-download) is resumed by the next one', async () => {
    // GIVEN 150 objects of 16 kB
    const store = await testStore({ bucketPrefix: 'cli-kill' });
    const bodies: Record<string, Buffer> = {};
    for (let i = 0; i < 150; i++) bodies[`data/aws/s3/obj-${i}/1/raw`] = Buffer.alloc(16_000, i % 251);
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: bodies });
    const cache = join(tempDir(), 'cache');
    const args = ['hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', cache];

    // WHEN a slow run is killed once its first files have landed
    const { child, done } = startCli([...args, '--concurrency', '2']);
    const complete = (): string[] =>
      Object.keys(bodies).filter((rel) => statSync(join(cache, rel), { throwIfNoEntry: false })?.size === 16_000);
    // Each file that lands is a rename in the cache: look then, not on a timer.
    mkdirSync(cache, { recursive: true });
    await new Promise<void>((resolve) => {
      const look = (): void => {
        if (complete().length < 5 && child.exitCode === null) return;
        watcher.close();
        resolve();
      };
      const watcher = watch(cache, { recursive: true }, look);
      child.once('exit', look);
      look();
    });
    child.kill('SIGKILL');
    const killed = await done;
    const landed = complete().length;
    expect(killed.signal).toBe('SIGKILL');
    expect(landed).toBeGreaterThanOrEqual(5);
    expect(landed).toBeLessThan(150);
    // AND every file at its final name is whole: an unfinished download is only ever a part file
    const tree = readTree(cache);
    // (the lock file of the killed run stays too: the next run takes it over, its holder being dead)
    const parts = [...tree.keys()].filter((rel) => rel.startsWith('_control/datastore-indexer/'));
    for (const rel of parts) tree.delete(rel);
    expect(asComparable(tree)).toEqual(asComparable(new Map([...tree.keys()].map((rel) => [rel, bodies[rel]]))));

    // THEN the next run pulls exactly the rest
    const resumed = await runCli(args);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain(`Index s3://${store.bucket}/swamp is true (150 entries).`);
    expect(resumed.stdout).toContain(`Pulled ${150 - landed} files`);
    expect(resumed.stdout).toContain(`, ${landed} already present.`);
    expect(asComparable(cachedObjects(cache))).toEqual(asComparable(seeded.objects.get('')!));
  });
});
