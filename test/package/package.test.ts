/**
 * The package as someone else gets it: `npm pack` of this project, installed from the tarball into an
 * empty folder, then used there as its README says: the command through `npx`, the library from
 * Node.js (JavaScript and TypeScript) and from Deno, the construct from a fresh CDK app synthesised
 * offline. Packing and installing happen once for the whole file.
 */
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INDEX_KEY } from '../../lambda/lib';
import * as errors from '../../lambda/lib/errors';
import { asComparable, datastoreConfig, readTree } from '../cli/helpers';
import { installRuntime } from '../helpers/runtimes';
import { readIndex, seedDatastore, summarize, testStore } from '../helpers/s3';

const ROOT = join(__dirname, '..', '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  devDependencies: Record<string, string>;
};

/**
 * What the library entry exports at run time: the documented surface, nothing internal. Every error
 * class of `lambda/lib/errors.ts` belongs to it (a caller tells failures apart by class).
 */
const LIBRARY_VALUES = [
  ...Object.keys(errors),
  'DEFAULT_HYDRATE_CONCURRENCY',
  'HeldLocks',
  'INDEX_KEY',
  'S3Store',
  'checkAccountId',
  'checkNamespaceName',
  'createS3Client',
  'describeScope',
  'hasDrift',
  'healAndHydrate',
  'healRoot',
  'hydrateCache',
  'isInternalKey',
  'isRefusedKey',
  'namespaceExists',
  'normalizePrefix',
  'parallelLister',
  'parseDatastoreConfig',
  'parseIndex',
  'refusedKeyReason',
  'releaseHeldLocks',
  'repairResumable',
  'resolveDatastoreConfig',
  'rootOf',
  'sequentialLister',
];

/** The environment of the installed package's processes: the test S3's credentials, no SDK chatter, no AWS profile. */
function consumerEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('npm_') && k !== 'AWS_PROFILE') env[k] = v;
  return { ...env, AWS_EC2_METADATA_DISABLED: 'true', ...extra };
}

function run(file: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = consumerEnv()): SpawnSyncReturns<string> {
  return spawnSync(file, args, { cwd, env, encoding: 'utf8', timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
}

/** exit status and output, for a readable failure. */
function outcome(r: SpawnSyncReturns<string>): { status: number | null; output: string } {
  return { status: r.status, output: r.status === 0 ? '' : `${r.error ?? ''}\n${r.stderr}\n${r.stdout}`.slice(-4000) };
}

/** Where the kernel allows it, a command runs in a network namespace of its own: offline for sure. */
const NO_NETWORK = spawnSync('unshare', ['-rn', 'true']).status === 0 ? ['unshare', '-rn'] : [];

// Deno is installed (once, into node_modules/.cache) while the file is collected, so the Deno test can
// be skipped by name, with the reason, where it cannot be installed.
const deno = installRuntime('deno');
if (!deno.ok) console.warn(`The Deno test is SKIPPED: ${deno.reason}`);

let work: string;
let app: string;
let tarball: string;
let packed: { size: number; unpackedSize: number; entryCount: number; files: { path: string }[] };

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'datastore-indexer-package-'));
  // `npm pack` runs `prepare`, which builds dist/ (the bundles and the compiled library and construct).
  const packStarted = Date.now();
  const pack = run('npm', ['pack', '--json', '--pack-destination', work], ROOT);
  const packSeconds = (Date.now() - packStarted) / 1000;
  expect(outcome(pack)).toEqual({ status: 0, output: '' });
  [packed] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as (typeof packed)[];
  tarball = join(work, readdirSync(work).find((f) => f.endsWith('.tgz'))!);

  // An empty folder that installs the tarball, and the CDK libraries a CDK app has of its own.
  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'someone-elses-app', private: true }));
  const installStarted = Date.now();
  const install = run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      tarball,
      `aws-cdk-lib@${manifest.devDependencies['aws-cdk-lib']}`,
      `constructs@${manifest.devDependencies.constructs}`,
    ],
    app,
  );
  expect(outcome(install)).toEqual({ status: 0, output: '' });
  console.log(
    `npm pack (with the build): ${packSeconds.toFixed(1)} s; npm install of the tarball and the CDK libraries: ${((Date.now() - installStarted) / 1000).toFixed(1)} s`,
  );
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the tarball', () => {
  test('holds the built package (bundles, compiled library and construct with types, LICENSE) and no tests, bench or sources', () => {
    const files = packed.files.map((f) => f.path).sort();
    const unexpected = files.filter(
      (f) =>
        ![
          'package.json',
          'README.md',
          'LICENSE',
          'bin/datastore-indexer.js',
          'dist/cli/cli.js',
          'dist/lambda/index.js',
          'dist/lambda/index.js.map',
        ].includes(f) && !/^dist\/js\/((lambda\/lib|infra)\/[\w/-]+|lambda\/env)\.(js|d\.ts|json)$/.test(f),
    );
    expect(unexpected).toEqual([]);
    for (const f of ['LICENSE', 'dist/js/lambda/lib/index.d.ts', 'dist/js/infra/index.d.ts', 'dist/lambda/index.js'])
      expect(files).toContain(f);
    console.log(`${manifest.name}: ${packed.entryCount} files, ${packed.size} bytes packed, ${packed.unpackedSize} unpacked`);
  });

  test('installs no CDK, Powertools or command-line dependencies: they are peers or bundled', () => {
    const installed = JSON.parse(readFileSync(join(app, 'node_modules', manifest.name, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    // The direct requests are signed by the package's own SigV4 (s3-sign.ts): the SDK is the one dependency.
    expect(Object.keys(installed.dependencies)).toEqual(['@aws-sdk/client-s3']);
    expect(installed.peerDependencies).toEqual({ 'aws-cdk-lib': expect.any(String), constructs: expect.any(String) });
    expect(installed.peerDependenciesMeta).toEqual({ 'aws-cdk-lib': { optional: true }, constructs: { optional: true } });
  });
});

describe('the command from the installed package', () => {
  test('`npx datastore-indexer --help` prints the usage', () => {
    const help = run('npx', ['datastore-indexer', '--help'], app);
    expect(outcome(help)).toEqual({ status: 0, output: '' });
    expect(help.stdout).toMatch(/^Usage: datastore-indexer \[options\] \[command\]/);
    expect(help.stdout).toMatch(/\bhydrate\b/);
  });

  test('`npx datastore-indexer hydrate` heals an unindexed root and fills the cache with exactly its objects', async () => {
    // GIVEN a swamp datastore with internal keys and no index
    const store = await testStore({ bucketPrefix: 'pkg-cli' });
    const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 12, internal: true });
    const cache = join(work, 'cli-cache');
    // WHEN the installed command hydrates
    const hydrate = run('npx', ['datastore-indexer', 'hydrate', '--config', datastoreConfig(store.bucket, 'swamp'), '--cache', cache], app);
    // THEN
    expect(outcome(hydrate)).toEqual({ status: 0, output: '' });
    expect(hydrate.stdout).toMatch(/^Healed s3:\/\/.+ Pulled 12 files/);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    const files = readTree(cache);
    files.delete(INDEX_KEY);
    expect(asComparable(files)).toEqual(asComparable(seeded.objects.get('')!));
  }, 180_000);
});

describe('a global install', () => {
  test('puts `datastore-indexer` on the PATH, and `npm uninstall -g` takes it away with everything else', () => {
    // A prefix of its own stands for the machine's global folder.
    const prefix = join(work, 'global');
    const npm = (...args: string[]): SpawnSyncReturns<string> =>
      run('npm', [...args, '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline'], work);
    expect(outcome(npm('install', '-g', tarball))).toEqual({ status: 0, output: '' });
    const version = run(join(prefix, 'bin', 'datastore-indexer'), ['--version'], work);
    expect(outcome(version)).toEqual({ status: 0, output: '' });
    expect(version.stdout.trim()).toBe(manifest.version);
    expect(outcome(npm('uninstall', '-g', manifest.name))).toEqual({ status: 0, output: '' });
    expect(readdirSync(join(prefix, 'bin'))).toEqual([]);
    expect(readdirSync(join(prefix, 'lib', 'node_modules'))).toEqual([]);
  }, 180_000);
});

describe('the library from the installed package', () => {
  test('exports the documented surface and nothing internal', () => {
    const keys = run(
      process.execPath,
      ['-e', `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(manifest.name)})).sort()))`],
      app,
    );
    expect(outcome(keys)).toEqual({ status: 0, output: '' });
    expect(JSON.parse(keys.stdout)).toEqual([...LIBRARY_VALUES].sort());
    for (const value of Object.values(errors))
      expect(value.prototype).toBeInstanceOf(errors.IndexerError === value ? Error : errors.IndexerError);
  });

  test('is typed: a TypeScript caller compiles against both entry points, and internals are not there', () => {
    writeFileSync(
      join(app, 'consumer.ts'),
      [
        `import { type HealOptions, type HealReport, S3Store, healRoot, resolveDatastoreConfig, rootOf } from '${manifest.name}';`,
        `import { DatastoreIndexer, type DatastoreIndexerProps, EventDelivery } from '${manifest.name}/infra';`,
        `import { type DeltaReport, applyDelta } from '${manifest.name}/events';`,
        `// @ts-expect-error writeIndex is internal`,
        `import { writeIndex } from '${manifest.name}';`,
        `// @ts-expect-error mapLimit is internal`,
        `import { mapLimit } from '${manifest.name}';`,
        `export async function check(json: string): Promise<HealReport> {`,
        `  const config = resolveDatastoreConfig(json);`,
        `  const options: HealOptions = { mode: 'check' };`,
        `  return healRoot(S3Store.connect(config, config.bucket), rootOf(config), options);`,
        `}`,
        `export const delivery: DatastoreIndexerProps['eventDelivery'] = EventDelivery.EVENTBRIDGE;`,
        `export type Indexer = DatastoreIndexer['role'] | DatastoreIndexer['logGroup'];`,
        `export type Applied = DeltaReport['status'];`,
        `void writeIndex; void mapLimit; void applyDelta;`,
        '',
      ].join('\n'),
    );
    // As a NodeNext app resolves modules (through `exports`), and as an older CommonJS app does (the
    // `node10` resolution of many CDK apps' tsconfig, through `types` and `typesVersions`).
    const tsc = (module: string, resolution: string): SpawnSyncReturns<string> =>
      run(
        process.execPath,
        [
          join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
          ...['--noEmit', '--strict', '--skipLibCheck', '--target', 'es2022', '--module', module, '--moduleResolution', resolution],
          ...['--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), 'consumer.ts'],
        ],
        app,
      );
    for (const [module, resolution] of [
      ['node16', 'node16'],
      ['commonjs', 'node10'],
    ]) {
      const r = tsc(module, resolution);
      expect({ resolution, status: r.status, output: r.stdout + r.stderr }).toEqual({ resolution, status: 0, output: '' });
    }
  }, 180_000);
});

describe('the construct from a fresh CDK app that installed the package', () => {
  let synth: SpawnSyncReturns<string>;
  let outdir: string;

  beforeAll(() => {
    outdir = join(work, 'cdk.out');
    writeFileSync(
      join(app, 'app.js'),
      `const { App, Duration, Stack } = require('aws-cdk-lib');
const { Tracing } = require('aws-cdk-lib/aws-lambda');
const { Bucket } = require('aws-cdk-lib/aws-s3');
const { DatastoreIndexer } = require('${manifest.name}/infra');

const app = new App({ outdir: process.argv[2] });
const stack = new Stack(app, 'TheirStack', { env: { account: '123456789012', region: 'eu-west-1' } });
const indexer = new DatastoreIndexer(stack, 'Indexer', {
  bucket: Bucket.fromBucketName(stack, 'Existing', 'their-existing-bucket'),
  prefixes: ['swamp'],
  functionProps: { tracing: Tracing.ACTIVE, environment: { TEAM: 'platform' } },
  queueProps: { retentionPeriod: Duration.days(7) },
});
// role and logGroup are the function's own
if (indexer.function.role !== indexer.role) throw new Error('indexer.role is not the function role');
indexer.logGroup.grantRead(indexer.role);
app.synth();
`,
    );
    // No esbuild and no Docker in this app: the function's code is the bundle the package ships.
    synth = run(...nodeOffline(['app.js', outdir]), app);
  }, 300_000);

  function nodeOffline(args: string[]): [string, string[]] {
    const [file, ...rest] = [...NO_NETWORK, process.execPath, ...args];
    return [file, rest];
  }

  interface Resource {
    Type: string;
    Properties: Record<string, unknown>;
  }
  const resources = (): Resource[] =>
    Object.values(
      (JSON.parse(readFileSync(join(outdir, 'TheirStack.template.json'), 'utf8')) as { Resources: Record<string, Resource> }).Resources,
    );

  test(`synthesises${NO_NETWORK.length ? ' with no network at all' : ''}, with no esbuild installed`, () => {
    expect(outcome(synth)).toEqual({ status: 0, output: '' });
    expect(existsSync(join(app, 'node_modules', 'esbuild'))).toBe(false);
  });

  test("the function's code is the package's built bundle, byte for byte, on Node.js 24", () => {
    const fns = resources().filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Runtime === 'nodejs24.x');
    expect(fns).toHaveLength(1);
    const [fn] = fns;
    expect(fn.Properties).toMatchObject({ Runtime: 'nodejs24.x', Architectures: ['arm64'] });
    // maxConcurrency (2) plus the schedule and one direct invoke
    expect(fn.Properties).toHaveProperty('ReservedConcurrentExecutions', 4);
    // The asset's folder in the cloud assembly is named after the zip the template points at.
    const asset = `asset.${String((fn.Properties.Code as { S3Key: string }).S3Key).replace(/\.zip$/, '')}`;
    const shipped = join(app, 'node_modules', manifest.name, 'dist', 'lambda');
    expect(readdirSync(join(outdir, asset)).sort()).toEqual(['index.js', 'index.js.map']);
    expect(readFileSync(join(outdir, asset, 'index.js')).equals(readFileSync(join(shipped, 'index.js')))).toBe(true);
  });

  test('takes function and queue overrides, keeping its own settings', () => {
    const [fn] = resources().filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Runtime === 'nodejs24.x');
    expect(fn.Properties.TracingConfig).toEqual({ Mode: 'Active' });
    expect((fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables).toMatchObject({
      TEAM: 'platform',
      DATASTORE_BUCKET: 'their-existing-bucket',
      DATASTORE_PREFIXES: 'swamp',
    });
    const queues = resources().filter((r) => r.Type === 'AWS::SQS::Queue');
    expect(queues.map((q) => q.Properties.MessageRetentionPeriod).sort()).toEqual([1209600, 604800]);
  });
});

describe('the library from Deno (swamp runtime)', () => {
  (deno.ok ? test : test.skip)(
    `heals and hydrates a root on the test S3 (${deno.ok ? deno.version : 'Deno not installable'})`,
    async () => {
      // GIVEN a swamp datastore with a namespace and no index
      const store = await testStore({ bucketPrefix: 'pkg-deno' });
      const seeded = await seedDatastore(store, { prefix: 'swamp', objects: 12, internal: true, namespaces: ['team-b'] });
      const cache = join(work, 'deno-cache');
      writeFileSync(
        join(app, 'hydrate.ts'),
        `import { S3Store, healAndHydrate, resolveDatastoreConfig, rootOf } from '${manifest.name}';

const [json, cacheDir] = Deno.args;
const config = resolveDatastoreConfig(json);
const result = await healAndHydrate(S3Store.connect(config, config.bucket), rootOf(config), { cacheDir });
// @ts-expect-error the library has no such export: deno run --check reads the package's declarations
export type Internal = (typeof import('${manifest.name}'))['writeIndex'];
console.log(JSON.stringify({ healed: result.heal.scopes.map((s) => [s.namespace ?? '', s.published]), pulled: result.hydrate.pulled }));
`,
      );
      // WHEN a Deno program, type-checked against the package's declarations, heals and hydrates with the
      // library installed in node_modules (no download: Deno uses the folder's package.json and node_modules)
      const r = run(
        (deno as { bin: string }).bin,
        [
          'run',
          '--check',
          '--allow-env',
          '--allow-read',
          '--allow-sys',
          `--allow-net=${new URL(process.env.S3_TEST_ENDPOINT!).host}`,
          `--allow-write=${cache}`,
          'hydrate.ts',
          datastoreConfig(store.bucket, 'swamp'),
          cache,
        ],
        app,
        consumerEnv({ DENO_DIR: join(work, 'deno-dir'), DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' }),
      );
      // THEN both indexes are published and true, and the cache holds the root's objects
      expect(outcome(r)).toEqual({ status: 0, output: '' });
      expect(JSON.parse(r.stdout)).toEqual({
        healed: [
          ['', true],
          ['team-b', true],
        ],
        pulled: 12,
      });
      expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
      expect(summarize(await readIndex(store, seeded.indexKey('team-b')))).toEqual(seeded.expectedEntries('team-b'));
      const files = readTree(cache);
      files.delete(INDEX_KEY);
      expect(asComparable(files)).toEqual(asComparable(seeded.objects.get('')!));
    },
    180_000,
  );
});
