/** `datastore-indexer check` / `repair` on each index layout as clients leave it, and the mistakes that must create nothing. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { partitionOf } from '../../lambda/lib/keys';
import { dualWriteRoot, monolithOnlyPush, partitionsOf, swampObjects } from '../helpers/dual-write';
import { indexEntry, shardMeta } from '../helpers/factories';
import {
  listKeys,
  putIndex,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  readObject,
  snapshotBucket,
  sortByKey,
  summarize,
  testStore,
} from '../helpers/s3';
import { datastoreConfig, ensureBuiltCli, runCli } from './helpers';

beforeAll(ensureBuiltCli, 120_000);

const OBJECTS: Record<string, string> = {
  'data/aws/ec2/i-1/1/raw': 'ec2 one',
  'logs/run-1.log': 'log one',
  'files/readme.txt': 'hello',
};
const rows = (objects: Record<string, string>) =>
  Object.entries(objects)
    .map(([key, body]) => ({ key, size: Buffer.byteLength(body) }))
    .sort((a, b) => (a.key < b.key ? -1 : 1));

describe('datastore-indexer on each layout', () => {
  test('dual-write: check names the layout and its drift; repair heals the monolith and its mirror, the manifest stays version 1', async () => {
    const store = await testStore({ bucketPrefix: 'cli-dw' });
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`dw/${k}`, v])));
    const entries = rows(OBJECTS).map((r) => indexEntry(r.key, { size: r.size }));
    await putIndex(store, 'dw/.datastore-index.json', entries);
    await putShardLayout(store, 'dw/', entries);
    await putObject(store, 'dw/_index/_meta.json', JSON.stringify({ version: 1, partitions: ['data--aws--ec2', 'files', 'logs'] }));
    await putObject(store, 'dw/logs/run-2.log', 'out of band');
    const config = datastoreConfig(store.bucket, 'dw');

    const check = await runCli(['check', '--config', config, '--json']);
    expect(check.code).toBe(2);
    expect(JSON.parse(check.stdout).indexes[0]).toMatchObject({
      layout: 'dual-write',
      state: 'valid',
      missing: 1,
      stale: 0,
      refused: 0,
      pending: null,
    });

    const repair = await runCli(['repair', '--config', config]);
    expect(repair.stderr).toBe('');
    expect(repair.code).toBe(0);
    expect(repair.stdout).toBe(`Healed s3://${store.bucket}/dw: +1 added, -0 removed, ~0 resized (index 4 entries).\n`);
    const truth = rows({ ...OBJECTS, 'logs/run-2.log': 'out of band' });
    expect(summarize(await readIndex(store, 'dw/.datastore-index.json'))).toEqual(truth);
    expect(summarize(await readIndex(store, 'dw/_index/logs.json'))).toEqual(truth.filter((r) => r.key.startsWith('logs/')));
    expect(await readJson(store, 'dw/_index/_meta.json')).toEqual({ version: 1, partitions: ['data--aws--ec2', 'files', 'logs'] });

    const after = await runCli(['check', '--config', config]);
    expect(after.code).toBe(0);
    expect(after.stdout).toBe(`s3://${store.bucket}/dw: index true (4 entries, dual-write)\nThe index is true; nothing published.\n`);
  });

  test('an orphan shard: check says what is pending (exit 2); repair adopts it and exits 0', async () => {
    const store = await testStore({ bucketPrefix: 'cli-orphan' });
    await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [`sf/${k}`, v])));
    const entries = rows(OBJECTS).map((r) => indexEntry(r.key, { size: r.size }));
    await putShardLayout(store, 'sf/', entries, shardMeta(['data--aws--ec2', 'files'], 4));
    const config = datastoreConfig(store.bucket, 'sf');

    const check = await runCli(['check', '--config', config]);
    expect(check.code).toBe(2);
    expect(check.stdout.split('\n')[0]).toBe(
      `s3://${store.bucket}/sf: index of 2 entries, shard-first; 3 objects; 1 missing, 0 stale, 0 resized; partition files not in the manifest: logs`,
    );

    const repair = await runCli(['repair', '--config', config, '--json']);
    expect(repair.code).toBe(0);
    expect(JSON.parse(repair.stdout).indexes[0]).toMatchObject({
      layout: 'shard-first',
      published: true,
      added: 1,
      pending: 'partition files not in the manifest: logs',
    });
    expect(await readJson(store, 'sf/_index/_meta.json')).toEqual({
      version: 2,
      partitions: ['data--aws--ec2', 'files', 'logs'],
      commitSeq: 5,
    });
    expect((await runCli(['check', '--config', config])).code).toBe(0);
  });

  test('a refused key: check lists it under refused without failing; repair removes it from the index', async () => {
    const store = await testStore({ bucketPrefix: 'cli-refused' });
    await putObjects(
      store,
      Object.fromEntries(Object.entries({ ...OBJECTS, 'data/../../escape.txt': 'evil' }).map(([k, v]) => [`rf/${k}`, v])),
    );
    await putIndex(
      store,
      'rf/.datastore-index.json',
      rows(OBJECTS).map((r) => indexEntry(r.key, { size: r.size })),
    );
    const config = datastoreConfig(store.bucket, 'rf');

    const check = await runCli(['check', '--config', config, '--json']);
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout).indexes[0]).toMatchObject({ drift: false, refused: 1, keys: { refused: ['data/../../escape.txt'] } });

    // an index that already holds it is drift, and repair removes it
    await putIndex(store, 'rf/.datastore-index.json', [
      ...rows(OBJECTS).map((r) => indexEntry(r.key, { size: r.size })),
      indexEntry('data/../../escape.txt', { size: 4 }),
    ]);
    const drifted = await runCli(['check', '--config', config]);
    expect(drifted.code).toBe(2);
    expect(drifted.stdout).toContain('  stale    data/../../escape.txt\n');
    expect(drifted.stdout).toContain('  refused  data/../../escape.txt\n');
    expect((await runCli(['repair', '--config', config])).code).toBe(0);
    expect(summarize(await readIndex(store, 'rf/.datastore-index.json'))).toEqual(rows(OBJECTS));
  });
});

describe('datastore-indexer creates nothing by mistake', () => {
  test('repair and hydrate of a prefix holding nothing stop naming it; --allow-empty creates the empty index', async () => {
    const store = await testStore({ bucketPrefix: 'cli-empty' });
    await putObject(store, 'swamp/logs/a.log', 'a');
    const config = datastoreConfig(store.bucket, 'swampp');
    const before = await snapshotBucket(store);

    const repair = await runCli(['repair', '--config', config]);
    expect(repair.code).toBe(1);
    expect(repair.stderr).toBe(
      `datastore-indexer: s3://${store.bucket}/swampp/ holds no object at all; no index was created there. Check the bucket and --prefix; pass --allow-empty to create an empty index anyway\n`,
    );
    const hydrate = await runCli(['hydrate', '--config', config, '--cache', '/tmp/never-created-by-datastore-indexer-test']);
    expect(hydrate.code).toBe(1);
    expect(hydrate.stderr).toContain('holds no object at all');
    expect(await snapshotBucket(store)).toEqual(before);

    expect((await runCli(['repair', '--config', config, '--allow-empty'])).code).toBe(0);
    expect(await listKeys(store, 'swampp/')).toEqual(['swampp/.datastore-index.json']);
  });

  test('a prefix with "." or ".." segments is refused before anything is read', async () => {
    const store = await testStore({ bucketPrefix: 'cli-dots' });
    await putObject(store, 'swamp/logs/a.log', 'a');
    const run = await runCli(['repair', '--bucket', store.bucket, '--prefix', 'swamp/../swamp', '--config', datastoreConfig(store.bucket)]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^datastore-indexer: Datastore config "prefix" must not hold a "\." or "\.\." path segment, got "swamp\/\.\.\/swamp"/,
    );
    expect(await listKeys(store)).toEqual(['swamp/logs/a.log']);
  });

  test('an endpoint that answers a web page instead of a listing is an error naming it; nothing is written', async () => {
    const requests: string[] = [];
    const server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><html><body>Welcome to our storage portal</body></html>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const run = await runCli(['repair', '--bucket', 'b', '--prefix', 'swamp', '--endpoint', endpoint, '--force-path-style'], {
        AWS_ACCESS_KEY_ID: 'x',
        AWS_SECRET_ACCESS_KEY: 'y',
        AWS_EC2_METADATA_DISABLED: 'true',
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`The endpoint ${endpoint}/b`);
      expect(run.stderr).toContain('is not an S3 listing');
      expect(requests.filter((r) => !r.startsWith('GET '))).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('dual-write mirrors an older client left stale', () => {
  const PUSHED: Record<string, string> = {
    'data/aws/ec2/i-1/2/raw': 'model 1, version 2',
    'data/aws/ec2/i-2/2/raw': 'model 2, version 2',
    'data/aws/s3/b-1/2/raw': 'bucket 1, version 2',
    'workflow-runs/wf-1/run-2/log.txt': 'ran again',
    'workflow-runs/wf-2/run-2/log.txt': 'ran again',
    'files/notes.txt': 'notes',
    'logs/run-2.log': 'log two',
    'data/aws/ec2/i-3/2/raw': 'model 3, version 2',
  };

  test('check names every stale partition (exit 2); repair refreshes them from the monolith alone, the manifest stays version 1; a second repair publishes nothing', async () => {
    // GIVEN a dual-write root a current client wrote, then an older client's push of 8 keys (monolith only)
    const store = await testStore({ bucketPrefix: 'cli-mirror' });
    const objects = swampObjects(20);
    await dualWriteRoot(store, 'dw', objects);
    await monolithOnlyPush(store, 'dw', PUSHED);
    const stale = partitionsOf(Object.keys(PUSHED));
    const config = datastoreConfig(store.bucket, 'dw');
    const monolithBefore = await readObject(store, 'dw/.datastore-index.json');

    // WHEN checked: drift, naming each stale partition, though the monolith's entries are all true
    const check = await runCli(['check', '--config', config, '--json']);
    expect(check.code).toBe(2);
    const checked = JSON.parse(check.stdout).indexes[0];
    expect(checked).toMatchObject({ layout: 'dual-write', state: 'valid', missing: 0, stale: 0, resized: 0, staleMirrors: stale });
    expect(checked.pending).toBe(`mirror partition files differ from the monolith: ${stale.join(', ')}`);

    // WHEN repaired
    const repair = await runCli(['repair', '--config', config]);
    expect(repair.stderr).toBe('');
    expect(repair.code).toBe(0);

    // THEN every mirror file equals the monolith for its partition, entries whole; the monolith was not rewritten
    const monolith = (await readIndex(store, 'dw/.datastore-index.json'))!;
    expect(await readObject(store, 'dw/.datastore-index.json')).toEqual(monolithBefore);
    const all = partitionsOf(monolith.entries.keys());
    for (const partition of all) {
      const mirror = await readIndex(store, `dw/_index/${partition}.json`);
      const expected = [...monolith.entries.values()].filter((e) => partitionOf(e.key) === partition);
      expect(sortByKey([...(mirror?.entries.values() ?? [])])).toEqual(sortByKey(expected));
    }
    expect(await readJson(store, 'dw/_index/_meta.json')).toEqual({ version: 1, partitions: all });
    expect(await listKeys(store, 'dw/_control/')).toEqual([]);

    // AND a second repair publishes nothing, and check finds the root true
    const again = await runCli(['repair', '--config', config]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/is true .*; nothing published\.\n$/);
    expect((await runCli(['check', '--config', config])).code).toBe(0);
  });
});
