/** What a user sees when something is wrong, and `--help`: one clear line on stderr, exit 1, no stack trace. */
import { seedDatastore, snapshotBucket, testStore, uniqueBucketName } from '../helpers/s3';
import { datastoreConfig, ensureBuiltCli, runCli, tempDir } from './helpers';

beforeAll(ensureBuiltCli, 120_000);

/** Asserts a run failed with exactly one stderr line matching `message`, and printed nothing on stdout (with `--json`, one JSON error). */
function expectOneLineError(run: { code: number | null; stdout: string; stderr: string }, message: RegExp, json?: { name: string }): void {
  if (json) expect(JSON.parse(run.stdout)).toEqual({ error: { name: json.name, message: expect.any(String), hint: expect.any(String) } });
  else expect(run.stdout).toBe('');
  expect(run.stderr.endsWith('\n')).toBe(true);
  expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(run.stderr).toMatch(/^datastore-indexer: /);
  expect(run.stderr).toMatch(message);
  expect(run.code).toBe(1);
}

describe('datastore-indexer errors', () => {
  test.each([
    [
      'not JSON',
      '{bucket: b}',
      /^datastore-indexer: The datastore config is not valid JSON \(.+\)\. Example: \{"bucket":"my-bucket","prefix":"swamp"\}\n$/,
    ],
    [
      'an unknown key',
      '{"bucket":"b","bukket":"c"}',
      /^datastore-indexer: Unknown datastore config key "bukket"\. Allowed keys: bucket, prefix, region, endpoint, forcePathStyle\n$/,
    ],
    ['no bucket', '{"prefix":"swamp"}', /^datastore-indexer: The datastore config needs a "bucket"\. Pass --bucket or --config/],
    ['not an object', '["b"]', /^datastore-indexer: The datastore config must be a JSON object/],
  ])('a --config that is %s is one clear line, exit 1', async (_, config, message) => {
    const runs = await Promise.all([
      runCli(['hydrate', '--config', config, '--cache', tempDir()]),
      runCli(['check', '--config', config]),
      runCli(['repair', '--config', config]),
    ]);
    for (const run of runs) expectOneLineError(run, message);
  });

  test('a bucket that does not exist is one clear line, exit 1 (check too: 1 is an error, 2 is drift)', async () => {
    const config = datastoreConfig(uniqueBucketName('no-such'), 'swamp');
    const message = /^datastore-indexer: Bucket "no-such-[^"]+" does not exist\. Check the bucket name, region and endpoint\n$/;
    const runs = await Promise.all([runCli(['hydrate', '--config', config, '--cache', tempDir()]), runCli(['check', '--config', config])]);
    for (const run of runs) expectOneLineError(run, message);
  });

  test('with --json, an error is also one JSON object on stdout: its name, message and hint apart', async () => {
    const bucket = uniqueBucketName('no-such');
    const run = await runCli(['repair', '--config', datastoreConfig(bucket, 'swamp'), '--json']);
    expectOneLineError(run, /^datastore-indexer: Bucket "no-such-[^"]+" does not exist\./, { name: 'BucketNotFoundError' });
    expect(JSON.parse(run.stdout)).toEqual({
      error: {
        name: 'BucketNotFoundError',
        message: `Bucket "${bucket}" does not exist`,
        hint: 'Check the bucket name, region and endpoint',
      },
    });
  });

  describe('without credentials (no variables, no ~/.aws, no instance metadata)', () => {
    const home = (): string => tempDir();
    const noCredentials = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => {
      const dir = home();
      return {
        AWS_ACCESS_KEY_ID: '',
        AWS_SECRET_ACCESS_KEY: '',
        AWS_SESSION_TOKEN: '',
        AWS_PROFILE: '',
        HOME: dir,
        AWS_CONFIG_FILE: `${dir}/config`,
        AWS_SHARED_CREDENTIALS_FILE: `${dir}/credentials`,
        AWS_EC2_METADATA_DISABLED: 'true',
        ...extra,
      };
    };
    const config = (): string => datastoreConfig('any-bucket-name', 'swamp');

    test('says none were found and so none were sent, not that S3 rejected them', async () => {
      const run = await runCli(['check', '--config', config()], noCredentials());
      expectOneLineError(
        run,
        // The heal's first request reads the root's manifest (to know whether it heals by partitions).
        /^datastore-indexer: No AWS credentials were found, so nothing was sent to S3 for GetObject on s3:\/\/any-bucket-name\/swamp\/_index\/_meta\.json\. Set AWS_PROFILE/,
      );
      expect(run.stderr).not.toMatch(/rejected/);
    });

    test("an unknown AWS_PROFILE is named, and DATASTORE_INDEXER_DEBUG=1 shows the SDK's own cause", async () => {
      const plain = await runCli(['check', '--config', config()], noCredentials({ AWS_PROFILE: 'no-such-profile' }));
      expectOneLineError(
        plain,
        /^datastore-indexer: No AWS credentials were found for profile "no-such-profile" \(AWS_PROFILE\).*Check that profile "no-such-profile" is in ~\/\.aws\/config/,
      );

      const debug = await runCli(
        ['check', '--config', config()],
        noCredentials({ AWS_PROFILE: 'no-such-profile', DATASTORE_INDEXER_DEBUG: '1' }),
      );
      expect(debug.code).toBe(1);
      expect(debug.stderr).toMatch(/^CredentialsError: No AWS credentials were found/m);
      expect(debug.stderr).toMatch(/^ {2}Caused by: CredentialsProviderError: /m);
    });
  });

  test('a malformed --region is a ConfigError before any request, not "retry later"', async () => {
    const run = await runCli(['check', '--config', datastoreConfig('any-bucket-name', 'swamp'), '--region', 'eu west 1', '--json']);
    expectOneLineError(run, /^datastore-indexer: Datastore config "region" must be a region name such as eu-west-1 .*got "eu west 1"/, {
      name: 'ConfigError',
    });
    expect(run.stderr).not.toMatch(/retry later/i);
  });

  test('a namespace that does not exist is refused before anything is written', async () => {
    const store = await testStore({ bucketPrefix: 'cli-no-ns' });
    await seedDatastore(store, { prefix: 'swamp', objects: 2, namespaces: ['team-b'] });
    const run = await runCli(['repair', '--config', datastoreConfig(store.bucket, 'swamp'), '--namespace', 'team-c']);
    expectOneLineError(
      run,
      /^datastore-indexer: No namespace "team-c" in s3:\/\/\S+\/swamp\. A namespace is a top-level folder holding \.namespace\.json/,
    );
  });

  test('a root too large for the memory it has is one clear line naming it and what to raise, exit 1, and nothing is written', async () => {
    // GIVEN a monolith root of 1,200 objects without an index, and a process given 1 MiB of memory
    const store = await testStore({ bucketPrefix: 'cli-too-large' });
    await seedDatastore(store, { prefix: 'swamp', objects: 1200 });
    const before = await snapshotBucket(store);
    const small = { AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1' };
    // WHEN it is repaired, and hydrated (which heals first)
    const runs = await Promise.all([
      runCli(['repair', '--config', datastoreConfig(store.bucket, 'swamp')], small),
      runCli(['hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', tempDir()], small),
    ]);
    // THEN each stops before memory runs out, with the error's message and hint on one line
    for (const run of runs) {
      expectOneLineError(
        run,
        /^datastore-indexer: s3:\/\/\S+\/swamp is too large to heal in 1 MiB of function memory: stopped at \d+ objects, before memory ran out; nothing was written\. Raise the DatastoreIndexer construct's memorySize prop \(the Lambda\), or give Node more heap, e\.g\. NODE_OPTIONS=--max-old-space-size=4096 \(the command\)\n$/,
      );
    }
    expect(await snapshotBucket(store)).toEqual(before);
  });

  test('bad flags are one clear line, exit 1', async () => {
    const config = datastoreConfig('any-bucket-name', 'swamp');
    expectOneLineError(
      await runCli(['hydrate', '--config', config]),
      /^datastore-indexer: required option '--cache <dir>' not specified$/m,
    );
    expectOneLineError(
      await runCli(['hydrate', '--config', config, '--cache', tempDir(), '--concurrency', '0']),
      /'--concurrency <n>' argument '0' is invalid\. Expected a whole number from 1 to 256\./,
    );
    expectOneLineError(
      await runCli(['repair', '--config', config, '--lock-wait', 'soon']),
      /'--lock-wait <seconds>' argument 'soon' is invalid/,
    );
    expectOneLineError(await runCli(['check', '--config', config, '--frob']), /^datastore-indexer: unknown option '--frob'/);
    expectOneLineError(await runCli(['chek']), /^datastore-indexer: unknown command 'chek' \(Did you mean check\?\)$/m);
  });
});

describe('datastore-indexer --help', () => {
  const common = [
    '--config <json>',
    '--bucket <name>',
    '--prefix <prefix>',
    '--region <region>',
    '--endpoint <url>',
    '--force-path-style',
    '--namespace <ns>',
    '--json',
  ];

  test.each([
    ['hydrate', [...common, '--cache <dir>', '--concurrency <n>', '--lock-wait <seconds>', 'refused']],
    ['check', [...common, '--keys <n>', '2 drift found']],
    ['repair', [...common, '--lock-wait <seconds>']],
  ])('%s --help names every flag, exit 0', async (command, expected) => {
    const run = await runCli([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain(`Usage: datastore-indexer ${command} [options]`);
    for (const text of expected) expect(run.stdout).toContain(text);
  });

  test('--help lists the commands and exit codes', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    for (const text of ['hydrate [options]', 'check [options]', 'repair [options]', 'Exit codes: 0']) expect(run.stdout).toContain(text);
  });
});
