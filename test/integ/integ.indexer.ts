/**
 * The deploy test, in the CDK's own form (@aws-cdk/integ-tests-alpha): a bucket the test creates, the
 * indexer for its prefix `swamp` with one listed namespace, an object put out of band, and an assertion,
 * retried until it holds, that the prefix's index comes to list the object. `npm test` checks its snapshot
 * (`integ.indexer.ts.snapshot/`, integ-runner's layout) offline in `snapshot.test.ts`; `npm run integ:deploy`
 * deploys it to an account and destroys it (see the README).
 */
import { App, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Bucket, BucketEncryption } from 'aws-cdk-lib/aws-s3';
import { ExpectedResult, IntegTest, Match } from '@aws-cdk/integ-tests-alpha';
import { DatastoreIndexer } from '../../infra/datastore-indexer';
import { BUILT_BUNDLE_CONTEXT } from '../../infra/private/bundling';

// The function's code is the built bundle (`npm run bundle`), as the installed package deploys it:
// its asset hash, and so the snapshot, does not depend on where the assembly is written.
const app = new App({ context: { [BUILT_BUNDLE_CONTEXT]: true } });
const stack = new Stack(app, 'DatastoreIndexerInteg');
const bucket = new Bucket(stack, 'Datastore', {
  encryption: BucketEncryption.S3_MANAGED,
  enforceSSL: true,
  removalPolicy: RemovalPolicy.DESTROY,
  autoDeleteObjects: true,
});
const indexer = new DatastoreIndexer(stack, 'Indexer', { bucket, prefixes: ['swamp'], namespaces: ['swamp/team-a'] });
// A deployment kept only for the test: what a real stack keeps on deletion goes with it.
indexer.logGroup.applyRemovalPolicy(RemovalPolicy.DESTROY);
indexer.deadLetterQueue.applyRemovalPolicy(RemovalPolicy.DESTROY);

const integ = new IntegTest(app, 'DatastoreIndexerDeploy', {
  testCases: [stack],
  cdkCommandOptions: { destroy: { args: { force: true } } },
});

const key = 'swamp/data/integ/1/v1/raw';
const put = integ.assertions.awsApiCall('S3', 'putObject', { Bucket: bucket.bucketName, Key: key, Body: 'hello from the integ test' });
const index = integ.assertions
  .awsApiCall('S3', 'getObject', { Bucket: bucket.bucketName, Key: 'swamp/.datastore-index.json' })
  .expect(ExpectedResult.objectLike({ Body: Match.stringLikeRegexp('"data/integ/1/v1/raw"') }))
  .waitForAssertions({ totalTimeout: Duration.minutes(10), interval: Duration.seconds(20) });
put.next(index);
