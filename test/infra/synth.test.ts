/**
 * A real `npx cdk synth` of the app, as a user runs it: bundling by local esbuild, no network, and
 * the asset compared byte for byte with what `npm run bundle` writes.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LAMBDA_BUNDLE, PROJECT_ROOT } from '../../infra/private/bundling';

const BUCKET = 'indexer-synth-test';
// biome-ignore lint/suspicious/noTemplateCurlyInString: the text a user would type, which IAM reads as a policy variable
const POLICY_VARIABLE = 'team${aws:username}';
const STACK = `DatastoreIndexer-${BUCKET}`;

/**
 * The environment of a machine with no AWS setup: no credentials or profile (so the CLI never asks
 * STS for an account), no instance metadata, no version check, no telemetry.
 */
function offlineEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AWS_') && !k.startsWith('CDK_')) env[k] = v;
  return {
    ...env,
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: path.join(home, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'no-aws-credentials'),
    CDK_DISABLE_VERSION_CHECK: 'true',
    CDK_DISABLE_CLI_TELEMETRY: 'true',
    // tsx keeps a folder in the temporary directory: in `home`, which the test removes.
    TMPDIR: home,
  };
}

/** Where the kernel allows it, run the command in a network namespace of its own: offline for sure. */
const NO_NETWORK = spawnSync('unshare', ['-rn', 'true']).status === 0 ? ['unshare', '-rn'] : [];

function run(command: string[], env: NodeJS.ProcessEnv): SpawnSyncReturns<string> {
  const [file, ...args] = [...NO_NETWORK, ...command];
  return spawnSync(file, args, { cwd: PROJECT_ROOT, env, encoding: 'utf8', timeout: 120_000 });
}

function describeRun(r: SpawnSyncReturns<string>): string {
  return `exit ${r.status} ${r.signal ?? ''}\n${r.stderr}\n${r.stdout}`.slice(0, 4000);
}

interface Template {
  Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
}

describe(`npx cdk synth of the app${NO_NETWORK.length ? ', with no network at all' : ''}`, () => {
  let outdir: string;
  let synth: SpawnSyncReturns<string>;
  let seconds: number;

  /** `npm run bundle`'s output, read right after it is written. */
  let bundledBefore: Buffer;
  let bundledAfter: Buffer;

  const bundle = (): Buffer => {
    const r = spawnSync(process.execPath, ['scripts/bundle.mjs'], { cwd: PROJECT_ROOT, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`npm run bundle failed: ${r.stderr}`);
    return readFileSync(path.join(PROJECT_ROOT, LAMBDA_BUNDLE.outfile));
  };

  beforeAll(() => {
    outdir = mkdtempSync(path.join(tmpdir(), 'indexer-synth-'));
    // The reference, bundled on both sides of the synth: if the two differ, the handler's sources
    // changed while the test ran (someone is editing them), and the comparison says so.
    bundledBefore = bundle();
    const started = Date.now();
    synth = run(
      ['npx', 'cdk', 'synth', '-q', '-c', `bucketName=${BUCKET}`, '-c', 'prefixes=a,b', '-c', 'maxConcurrency=3', '--output', outdir],
      offlineEnv(outdir),
    );
    seconds = (Date.now() - started) / 1000;
    bundledAfter = bundle();
  }, 240_000);

  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  const template = (): Template => JSON.parse(readFileSync(path.join(outdir, `${STACK}.template.json`), 'utf8')) as Template;

  test('succeeds offline', () => {
    expect({ status: synth.status, output: synth.status === 0 ? '' : describeRun(synth) }).toEqual({ status: 0, output: '' });
    // No time bound (the machine is shared); the figure is printed for the record.
    console.log(`cdk synth took ${seconds.toFixed(1)} s`);
  });

  test("bundles the real handler into an asset byte-identical to npm run bundle's", () => {
    // GIVEN: the function's asset, found through the stack's asset manifest
    const fn = Object.values(template().Resources).find(
      (r) => r.Type === 'AWS::Lambda::Function' && (r.Properties.Environment as { Variables?: object } | undefined)?.Variables,
    );
    const key = (fn!.Properties.Code as { S3Key: string }).S3Key;
    const assets = JSON.parse(readFileSync(path.join(outdir, `${STACK}.assets.json`), 'utf8')) as {
      files: Record<string, { source: { path: string; packaging: string } }>;
    };
    const asset = assets.files[key.replace(/\.zip$/, '')].source;
    // THEN
    expect(asset.packaging).toBe('zip');
    const synthesized = readFileSync(path.join(outdir, asset.path, 'index.js'));
    expect(synthesized.length).toBeGreaterThan(1000);
    expect({ identical: synthesized.equals(bundledAfter), sourcesChangedDuringTest: !bundledBefore.equals(bundledAfter) }).toEqual({
      identical: true,
      sourcesChangedDuringTest: false,
    });
  });

  test('holds exactly the indexer resources for one bucket with two prefixes', () => {
    const counts: Record<string, number> = {};
    for (const r of Object.values(template().Resources)) counts[r.Type] = (counts[r.Type] ?? 0) + 1;
    expect(counts).toEqual({
      'AWS::SQS::Queue': 2, // events + dead letters
      'AWS::SQS::QueuePolicy': 2, // TLS only; S3 may send
      'AWS::IAM::Role': 2, // the function; CDK's notifications handler
      'AWS::IAM::Policy': 3, // function logs+queue; datastore access; handler's bucket notification access
      'AWS::Logs::LogGroup': 1,
      'AWS::Lambda::Function': 2, // the indexer; CDK's notifications handler
      'AWS::Lambda::EventSourceMapping': 1,
      'AWS::Lambda::Permission': 1, // the schedule may invoke
      'AWS::Events::Rule': 1, // the schedule
      // dead letters, errors, throttles, age of the oldest event, an index too large, roots failed, loops dropped, the schedule's deliveries
      'AWS::CloudWatch::Alarm': 8,
      'AWS::SNS::Topic': 1, // what the alarms notify
      'AWS::SNS::TopicPolicy': 1, // TLS only; CloudWatch alarms of this account may publish
      'Custom::S3BucketNotifications': 1,
    });
    const indexer = Object.values(template().Resources).find((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment);
    expect((indexer!.Properties.Environment as { Variables: Record<string, unknown> }).Variables).toMatchObject({
      DATASTORE_BUCKET: BUCKET,
      DATASTORE_PREFIXES: 'a,b',
    });
  });

  test('bounds the queue runs with the maxConcurrency context key, and reserves them plus the schedule and a direct invoke', () => {
    const resources = Object.values(template().Resources);
    expect(
      resources
        .filter((r) => r.Type === 'AWS::Lambda::Function' && 'ReservedConcurrentExecutions' in r.Properties)
        .map((r) => r.Properties.ReservedConcurrentExecutions),
    ).toEqual([5]);
    const mapping = resources.find((r) => r.Type === 'AWS::Lambda::EventSourceMapping');
    expect(mapping?.Properties.ScalingConfig).toEqual({ MaximumConcurrency: 3 });
  });
});

describe('the app', () => {
  /** A real `npx cdk synth` of one bucket with `extra` context, offline, in a folder of its own. */
  function synthWith(extra: string[]): SpawnSyncReturns<string> {
    const home = mkdtempSync(path.join(tmpdir(), 'indexer-synth-refused-'));
    try {
      return run(['npx', 'cdk', 'synth', '-q', '-c', `bucketName=${BUCKET}`, ...extra, '--output', home], offlineEnv(home));
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }

  test(`cdk synth -c prefixes='${POLICY_VARIABLE}' fails naming the character`, () => {
    const r = synthWith(['-c', `prefixes=${POLICY_VARIABLE}`]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`datastore-indexer: Invalid prefixes: prefixes[0] "${POLICY_VARIABLE}" must not contain "$"`);
  }, 120_000);

  test('cdk synth -c prefixes= fails naming the empty value', () => {
    const r = synthWith(['-c', 'prefixes=']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('datastore-indexer: Invalid prefixes: is empty ("")');
  }, 120_000);

  test('fails with a clear message when bucketName is missing', () => {
    const home = mkdtempSync(path.join(tmpdir(), 'indexer-app-'));
    try {
      const r = run(['npx', 'tsx', 'infra/app.ts'], { ...offlineEnv(home), CDK_OUTDIR: home, CDK_CONTEXT_JSON: '{}' });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('datastore-indexer: Invalid bucketName: is missing. Deploy with: npx cdk deploy -c bucketName=');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 120_000);
});
