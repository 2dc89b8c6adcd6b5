/** `datastore-indexer check` and `repair`, run as a user runs them against a bucket on the test S3. */
import { readIndex, putIndex, putObject, seedDatastore, snapshotBucket, summarize, testStore } from '../helpers/s3';
import { indexEntry, lockBody } from '../helpers/factories';
import { datastoreConfig, ensureBuiltCli, runCli } from './helpers';

beforeAll(ensureBuiltCli, 120_000);

/** A root of 30 objects whose index lacks 3 of them, keeps 2 gone ones and has 1 at the wrong size. */
async function driftedRoot() {
  const store = await testStore({ bucketPrefix: 'cli-check' });
  const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 30 });
  const expected = seeded.expectedEntries();
  const missing = expected.slice(0, 3).map((e) => e.key);
  const resized = expected[10];
  const stale = ['data/aws/ec2/gone-1/1/raw', 'logs/gone-2.log'];
  const entries = [
    ...expected.slice(3).map((e) => indexEntry(e.key, { size: e === resized ? e.size + 7 : e.size, sha256: 'kept-by-clients' })),
    ...stale.map((key) => indexEntry(key)),
  ];
  await putIndex(store, seeded.indexKey(), entries);
  return { store, seeded, missing, stale, resized, config: datastoreConfig(store.bucket, 'swamp') };
}

describe('datastore-indexer check and repair', () => {
  test('check reports drift with exact counts and keys (exit 2) and writes nothing; repair heals; then check exits 0', async () => {
    // GIVEN an index with 3 missing, 2 stale and 1 resized entries
    const { store, seeded, missing, stale, resized, config } = await driftedRoot();
    const before = await snapshotBucket(store);
    const scope = `s3://${store.bucket}/swamp`;

    // WHEN checking
    const check = await runCli(['check', '--config', config]);

    // THEN exit 2, the counts and every drifting key, and the bucket untouched
    expect(check.stderr).toBe('');
    expect(check.code).toBe(2);
    expect(check.stdout.split('\n')).toEqual([
      `${scope}: index of 29 entries; 30 objects; 3 missing, 2 stale, 1 resized`,
      ...missing.map((k) => `  missing  ${k}`),
      ...stale.map((k) => `  stale    ${k}`),
      `  resized  ${resized.key} (index ${resized.size + 7} B, object ${resized.size} B)`,
      'Drift in 1 of 1 index; nothing published (`datastore-indexer repair` heals it).',
      '',
    ]);
    expect(await snapshotBucket(store)).toEqual(before);

    // WHEN checking with a key limit
    const few = await runCli(['check', '--config', config, '--keys', '1']);

    // THEN the first key of each kind, and how many more there are
    expect(few.stdout.split('\n')).toEqual([
      `${scope}: index of 29 entries; 30 objects; 3 missing, 2 stale, 1 resized`,
      `  missing  ${missing[0]}`,
      '  … 2 more missing',
      `  stale    ${stale[0]}`,
      '  … 1 more stale',
      `  resized  ${resized.key} (index ${resized.size + 7} B, object ${resized.size} B)`,
      'Drift in 1 of 1 index; nothing published (`datastore-indexer repair` heals it).',
      '',
    ]);

    // WHEN checking with --json and a key limit
    const json = await runCli(['check', '--config', config, '--json', '--keys', '1']);

    // THEN one JSON report with the full counts and the first key of each kind
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({
      command: 'check',
      root: scope,
      drift: true,
      indexes: [
        {
          scope,
          namespace: null,
          layout: 'monolith',
          state: 'valid',
          unreadableReason: null,
          drift: true,
          objects: 30,
          entries: 29,
          missing: 3,
          stale: 2,
          resized: 1,
          unshardable: 0,
          refused: 0,
          pending: null,
          held: null,
          staleMirrors: [],
          keys: {
            missing: [missing[0]],
            stale: [stale[0]],
            resized: [{ key: resized.key, indexSize: resized.size + 7, objectSize: resized.size }],
            refused: [],
          },
        },
      ],
      seconds: expect.any(Number),
    });

    // WHEN repairing
    const repair = await runCli(['repair', '--config', config]);

    // THEN the index is healed, with the words of a heal, and clients' fields of kept entries survive
    expect(repair.stderr).toBe('');
    expect(repair.code).toBe(0);
    expect(repair.stdout).toBe(`Healed ${scope}: +3 added, -2 removed, ~1 resized (index 30 entries).\n`);
    const healed = await readIndex(store, seeded.indexKey());
    expect(summarize(healed)).toEqual(seeded.expectedEntries());
    expect(healed!.entries.get(seeded.expectedEntries()[20].key)!.sha256).toBe('kept-by-clients');

    // AND a check now finds the index true
    const again = await runCli(['check', '--config', config]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`${scope}: index true (30 entries)\nThe index is true; nothing published.\n`);
  });

  test('a second repair publishes nothing', async () => {
    // GIVEN a drifted root repaired once
    const { store, config } = await driftedRoot();
    expect((await runCli(['repair', '--config', config])).code).toBe(0);
    const before = await snapshotBucket(store);

    // WHEN repairing again
    const second = await runCli(['repair', '--config', config, '--lock-wait', '5']);

    // THEN it says so and the bucket is byte for byte what it was (no index write, no lock left)
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(`Index s3://${store.bucket}/swamp is true (30 entries); nothing published.\n`);
    expect(await snapshotBucket(store)).toEqual(before);
  });

  test('an absent index is drift for check; --namespace checks and repairs only that namespace', async () => {
    // GIVEN a root and a namespace, neither indexed
    const store = await testStore({ bucketPrefix: 'cli-absent' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 12, namespaces: ['team-b'] });
    const config = datastoreConfig(store.bucket, 'swamp');
    const root = `s3://${store.bucket}/swamp`;

    // WHEN checking the whole root
    const all = await runCli(['check', '--config', config, '--keys', '0']);

    // THEN both indexes drift (exit 2)
    expect(all.code).toBe(2);
    expect(all.stdout).toBe(
      `${root}: index absent; 12 objects; 12 missing, 0 stale, 0 resized\n` +
        `${root}#team-b: index absent; 12 objects; 12 missing, 0 stale, 0 resized\n` +
        'Drift in 2 of 2 indexes; nothing published (`datastore-indexer repair` heals it).\n',
    );

    // WHEN repairing only the namespace
    const repair = await runCli(['repair', '--config', config, '--namespace', 'team-b']);

    // THEN only its index is published
    expect(repair.code).toBe(0);
    expect(repair.stdout).toBe(`Healed ${root}#team-b (index was absent): +12 added, -0 removed, ~0 resized (index 12 entries).\n`);
    expect(summarize(await readIndex(store, seeded.indexKey('team-b')))).toEqual(seeded.expectedEntries('team-b'));
    expect(await readIndex(store, seeded.indexKey())).toBeUndefined();

    // AND checking only the namespace finds it true
    const ns = await runCli(['check', '--config', config, '--namespace', 'team-b']);
    expect(ns.code).toBe(0);
    expect(ns.stdout).toBe(`${root}#team-b: index true (12 entries)\nThe index is true; nothing published.\n`);
  });

  test('an unreadable index is drift; repair keeps a copy of it and replaces it', async () => {
    // GIVEN an index that is not JSON
    const store = await testStore({ bucketPrefix: 'cli-unreadable' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 5 });
    await putObject(store, seeded.indexKey(), '{"version": 1, "entr');
    const config = datastoreConfig(store.bucket, 'swamp');

    const check = await runCli(['check', '--config', config]);
    expect(check.code).toBe(2);
    expect(check.stdout).toMatch(/^s3:\/\/\S+: index unreadable \(not JSON \(.+\)\); 5 objects; 5 missing, 0 stale, 0 resized\n/);

    const repair = await runCli(['repair', '--config', config, '--json']);
    expect(repair.code).toBe(0);
    const report = JSON.parse(repair.stdout);
    expect(report).toMatchObject({ command: 'repair', published: true, indexes: [{ before: 'unreadable', published: true, added: 5 }] });
    expect(report.indexes[0].keptCopy).toMatch(/^swamp\/_control\/datastore-indexer\/unreadable\/root\//);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
  });

  test('--lock-wait bounds the wait for a busy datastore lock: one note, then one error line, exit 1, nothing published', async () => {
    // GIVEN an unindexed root whose lock a live swamp client holds
    const store = await testStore({ bucketPrefix: 'cli-lock' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 3 });
    await putObject(store, 'swamp/.datastore.lock', JSON.stringify(lockBody({ ttlMs: 60_000 })));

    // WHEN repairing with a 1 s bound
    const run = await runCli(['repair', '--config', datastoreConfig(store.bucket, 'swamp'), '--lock-wait', '1']);

    // THEN it gives up after the second it was given ("after 1 s"), saying who holds the lock
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        /^datastore-indexer: waiting for the datastore lock of s3:\/\/\S+\/swamp, held by swamp-cli on laptop\.local pid 4242/,
      ),
      expect.stringMatching(
        /^datastore-indexer: The datastore lock swamp\/\.datastore\.lock is held by swamp-cli .* and was still held after 1 s\. Another writer is busy/,
      ),
    ]);
    expect(await readIndex(store, seeded.indexKey())).toBeUndefined();
  });

  test('separate flags override --config keys', async () => {
    // GIVEN a config naming another bucket and prefix
    const store = await testStore({ bucketPrefix: 'cli-flags' });
    await seedDatastore(store, { prefix: 'real', objects: 4 });
    const config = datastoreConfig('some-other-bucket-name', 'elsewhere');

    // WHEN --bucket and --prefix name the real ones
    const run = await runCli(['repair', '--config', config, '--bucket', store.bucket, '--prefix', 'real/']);

    // THEN the flags win
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(`Healed s3://${store.bucket}/real (index was absent): +4 added, -0 removed, ~0 resized (index 4 entries).\n`);
  });
});
