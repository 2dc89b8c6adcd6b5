/** Solutions Constructs-style overrides of the function and the queues, the exposed role and log group, and the shipped bundle as code. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Duration, Stack } from 'aws-cdk-lib';
import { AssetCode, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { DatastoreIndexer } from '../../infra/datastore-indexer';
import { BUILT_BUNDLE_CONTEXT, shippedBundleCode } from '../../infra/private/bundling';
import { BUCKET_NAME, indexerStack, logicalIdOf, propsOf, unbundledApp } from './helpers';

describe('DatastoreIndexer overrides', () => {
  test('functionProps are merged over the defaults; the indexer keeps its variables, its reserved concurrency and memory', () => {
    // GIVEN overrides that also try to change what the indexer relies on
    const { template } = indexerStack({
      memorySize: 2048,
      functionProps: {
        tracing: Tracing.ACTIVE,
        functionName: 'their-indexer',
        environment: { TEAM: 'platform', DATASTORE_BUCKET: 'another-bucket' },
        // Not in the type: a JavaScript caller could still pass it.
        ...({ reservedConcurrentExecutions: 10, memorySize: 128 } as object),
      },
    });
    // THEN
    const fn = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    expect(fn).toMatchObject({
      TracingConfig: { Mode: 'Active' },
      FunctionName: 'their-indexer',
      MemorySize: 2048,
    });
    // maxConcurrency (2) plus the schedule and one direct invoke
    expect(fn).toHaveProperty('ReservedConcurrentExecutions', 4);
    expect((fn.Environment as { Variables: Record<string, unknown> }).Variables).toMatchObject({
      TEAM: 'platform',
      DATASTORE_BUCKET: 'shared-bucket',
    });
  });

  test('queueProps and deadLetterQueueProps are merged over the queue defaults; visibility and redrive stay the indexer’s', () => {
    const { template } = indexerStack({
      queueProps: { retentionPeriod: Duration.days(7), ...({ visibilityTimeout: Duration.seconds(1) } as object) },
      deadLetterQueueProps: { retentionPeriod: Duration.days(10) },
    });
    const queue = propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    expect(queue).toMatchObject({ MessageRetentionPeriod: 604800, VisibilityTimeout: 6 * 300 + 1, SqsManagedSseEnabled: true });
    expect(queue.RedrivePolicy).toMatchObject({ maxReceiveCount: 10 });
    expect(propsOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue')).toMatchObject({ MessageRetentionPeriod: 864000 });
  });

  test('role and logGroup are the function’s own', () => {
    const { indexer, template } = indexerStack();
    expect(indexer.function.role).toBe(indexer.role);
    const fn = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    expect(fn.Role).toEqual({ 'Fn::GetAtt': [logicalIdOf(template, 'AWS::IAM::Role', 'IndexerServiceRole'), 'Arn'] });
    expect(fn.LoggingConfig).toEqual({ LogGroup: { Ref: logicalIdOf(template, 'AWS::Logs::LogGroup', 'IndexerLogGroup') } });
    expect(indexer.function.stack.resolve(indexer.logGroup.logGroupName)).toEqual({
      Ref: logicalIdOf(template, 'AWS::Logs::LogGroup', 'IndexerLogGroup'),
    });
  });
});

describe('the shipped bundle as the function code', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'indexer-shipped-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('is the folder of index.js, as an asset', () => {
    writeFileSync(path.join(dir, 'index.js'), 'exports.handler = async () => {};\n');
    const code = shippedBundleCode(dir);
    expect(code).toBeInstanceOf(AssetCode);
    expect((code as AssetCode).path).toBe(dir);
  });

  test.each([
    [true, false],
    ['true', false], // as `-c datastore-indexer:builtBundle=true` gives it
    [undefined, true],
  ])('with the context set to %p, a clone bundles by esbuild: %p', (value, bundledHere) => {
    // GIVEN: the default entry, from the TypeScript sources
    const stack = new Stack(unbundledApp({ [BUILT_BUNDLE_CONTEXT]: value }), 'Test');
    const indexer = new DatastoreIndexer(stack, 'Indexer', {
      bucket: Bucket.fromBucketName(stack, 'Shared', BUCKET_NAME),
      prefixes: ['swamp'],
    });
    // THEN
    expect(indexer.function instanceof NodejsFunction).toBe(bundledHere);
  });

  test('missing, fails at synth time naming the file and what to do', () => {
    expect(() => shippedBundleCode(dir)).toThrow(
      `The indexer's Lambda bundle ${path.join(dir, 'index.js')} is missing: reinstall the package`,
    );
  });
});
