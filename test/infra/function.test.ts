import { Duration } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import { OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import shared from '../../infra/bundling.json';
import { LAMBDA_BUNDLE, LAMBDA_RUNTIME, nodejsBundling } from '../../infra/private/bundling';
import { indexerStack, logicalIdOf, propsOf } from './helpers';

describe('DatastoreIndexer function', () => {
  test('runs Node.js 22 or newer on ARM64 with the bundle handler', () => {
    // GIVEN / WHEN
    const { template } = indexerStack();
    // THEN
    const fn = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    expect(fn.Runtime).toBe('nodejs24.x');
    expect(Number(/^nodejs(\d+)\.x$/.exec(String(fn.Runtime))?.[1])).toBeGreaterThanOrEqual(22);
    expect(fn.Architectures).toEqual(['arm64']);
    expect(fn.Handler).toBe('index.handler');
  });

  test('reserves the queue runs plus the schedule and one direct invoke, and lets its own message chains run', () => {
    const { template } = indexerStack({ maxConcurrency: 5 });
    expect(propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction')).toMatchObject({
      ReservedConcurrentExecutions: 7,
      RecursiveLoop: 'Allow',
    });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { ScalingConfig: { MaximumConcurrency: 5 } });
  });

  test('passes the bucket, prefixes, namespaces, queue URL and Powertools names to the Lambda', () => {
    // GIVEN
    const { template } = indexerStack({ prefixes: ['swamp', 'infra'], namespaces: ['swamp/team-a', 'infra/ops'] });
    const queue = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    // THEN: exactly these variables, nothing else
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.exact({
          DATASTORE_BUCKET: 'shared-bucket',
          DATASTORE_PREFIXES: 'swamp,infra',
          DATASTORE_NAMESPACES: 'swamp/team-a,infra/ops',
          DATASTORE_QUEUE_URL: { Ref: queue },
          DATASTORE_BUCKET_OWNER: { Ref: 'AWS::AccountId' },
          POWERTOOLS_SERVICE_NAME: 'datastore-indexer',
          POWERTOOLS_METRICS_NAMESPACE: 'DatastoreIndexer',
          NODE_OPTIONS: '--enable-source-maps',
        }),
      },
    });
  });

  test('an empty DATASTORE_PREFIXES means the bucket root', () => {
    const { template } = indexerStack();
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ DATASTORE_PREFIXES: '' }) },
    });
  });

  test('memory and timeout default to 1024 MiB and 5 min, and follow the props', () => {
    expect(propsOf(indexerStack().template, 'AWS::Lambda::Function', 'IndexerFunction')).toMatchObject({ MemorySize: 1024, Timeout: 300 });
    const custom = indexerStack({ memorySize: 2048, timeout: Duration.minutes(10) }).template;
    expect(propsOf(custom, 'AWS::Lambda::Function', 'IndexerFunction')).toMatchObject({ MemorySize: 2048, Timeout: 600 });
  });

  test('writes to its own log group with the given retention, not through a managed policy', () => {
    // GIVEN
    const { template } = indexerStack();
    const logGroup = logicalIdOf(template, 'AWS::Logs::LogGroup', 'IndexerLogGroup');
    // THEN
    template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
    template.hasResourceProperties('AWS::Lambda::Function', { LoggingConfig: { LogGroup: { Ref: logGroup } } });
    const role = logicalIdOf(template, 'AWS::IAM::Role', 'IndexerServiceRole');
    expect(template.findResources('AWS::IAM::Role')[role].Properties.ManagedPolicyArns).toBeUndefined();
  });
});

describe('Lambda bundle options', () => {
  test('come from infra/bundling.json, the file scripts/bundle.mjs reads', () => {
    expect(LAMBDA_BUNDLE).toEqual(shared);
  });

  test('bundle the AWS SDK from its ES modules, minify keeping names, emit source maps and never use Docker', () => {
    // GIVEN / WHEN
    const bundling = nodejsBundling();
    // THEN
    expect(bundling).toEqual({
      forceDockerBundling: false,
      format: OutputFormat.CJS,
      target: LAMBDA_BUNDLE.target,
      minify: true,
      keepNames: true,
      sourceMap: true,
      mainFields: ['module', 'main'],
      esbuildArgs: { '--supported:dynamic-import': 'false' },
      externalModules: [],
    });
  });

  test('leave out the SDK commands the handler never sends', () => {
    // GIVEN the handler as `npm run bundle` built it (the tests' global setup rebuilds it when stale)
    const bundle = readFileSync(join(__dirname, '..', '..', LAMBDA_BUNDLE.outfile), 'utf8');
    // WHEN its command classes are named (names are kept through minification)
    const commands = new Set(bundle.match(/"\w+Command"/g));
    // THEN the S3 ones are those the store sends, and no other S3 command came along
    for (const sent of ['GetObject', 'PutObject', 'HeadObject', 'DeleteObject']) expect(commands).toContain(`"${sent}Command"`);
    expect(commands).not.toContain('"PutBucketLifecycleConfigurationCommand"');
    expect(commands.size).toBeLessThan(20);
  });

  test('the runtime matches the esbuild target', () => {
    expect(`node${/^nodejs(\d+)\.x$/.exec(LAMBDA_RUNTIME.name)?.[1]}`).toBe(LAMBDA_BUNDLE.target);
  });
});
