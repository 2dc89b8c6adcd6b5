import { unbundledApp } from './helpers';
import { Template } from 'aws-cdk-lib/assertions';
import { DatastoreIndexerPropError } from '../../infra/errors';
import { readStackConfigs, stackNameFor } from '../../infra/private/app-context';
import { addIndexerStacks } from '../../infra/private/app-stacks';
import { EventDelivery } from '../../infra/props';

/** A context lookup over a plain object, as `app.node.tryGetContext` would answer. */
const ctx =
  (values: Record<string, unknown>) =>
  (key: string): unknown =>
    values[key];

function errorFrom(values: Record<string, unknown>): DatastoreIndexerPropError {
  try {
    readStackConfigs(ctx(values));
  } catch (e) {
    if (e instanceof DatastoreIndexerPropError) return e;
    throw e;
  }
  throw new Error('expected the context to be refused');
}

describe('app context', () => {
  test('one bucket from -c flags: comma-separated prefixes and a schedule', () => {
    // GIVEN / WHEN
    const [config, ...rest] = readStackConfigs(
      ctx({ bucketName: 'my-shared-bucket', prefixes: 'swamp,infra', schedule: 'rate(30 minutes)' }),
    );
    // THEN
    expect(rest).toEqual([]);
    expect(config).toMatchObject({
      stackName: 'DatastoreIndexer-my-shared-bucket',
      bucketName: 'my-shared-bucket',
      prefixes: ['swamp', 'infra'],
    });
    expect(config.schedule?.expressionString).toBe('rate(30 minutes)');
    expect(config.eventDelivery).toBeUndefined();
  });

  test('maxConcurrency from -c (a string) or cdk.json (a number) reaches the event source mapping', () => {
    expect(readStackConfigs(ctx({ bucketName: 'my-shared-bucket', prefixes: 'swamp', maxConcurrency: '4' }))[0].maxConcurrency).toBe(4);
    expect(readStackConfigs(ctx({ buckets: [{ bucketName: 'a-bucket', prefixes: ['x'], maxConcurrency: 6 }] }))[0].maxConcurrency).toBe(6);
    expect(readStackConfigs(ctx({ bucketName: 'my-shared-bucket', prefixes: 'swamp' }))[0].maxConcurrency).toBeUndefined();
  });

  test('the bucket root takes -c bucketRoot=true; without it, no prefixes is an error naming both', () => {
    expect(readStackConfigs(ctx({ bucketName: 'my-shared-bucket', bucketRoot: 'true' }))[0]).toMatchObject({
      prefixes: [],
      bucketRoot: true,
    });
    const error = errorFrom({ bucketName: 'my-shared-bucket' });
    expect(error.prop).toBe('prefixes');
    expect(error.message).toMatch(/^Invalid prefixes: is missing: give -c prefixes=a,b, or -c bucketRoot=true/);
  });

  test.each([
    [{ bucketName: 'my-bucket', prefixes: '' }, 'prefixes'],
    [{ bucketName: 'my-bucket', prefixes: '   ' }, 'prefixes'],
    [{ buckets: [{ bucketName: 'a-bucket', prefixes: [] }] }, 'buckets[0].prefixes'],
    [{ buckets: [{ bucketName: 'a-bucket', prefixes: '' }] }, 'buckets[0].prefixes'],
  ])('an empty prefixes value %j is an error naming it, never the bucket root', (values, prop) => {
    const error = errorFrom(values);
    expect(error.prop).toBe(prop);
    expect(error.message).toMatch(new RegExp(`^Invalid ${prop.replace(/[[\]]/g, '\\$&')}: is empty \\(`));
  });

  test('several buckets from a JSON list given with -c', () => {
    const configs = readStackConfigs(
      ctx({
        buckets: '[{"bucketName":"a-bucket","prefixes":["x"]},{"bucketName":"b.bucket","bucketRoot":true,"eventDelivery":"eventbridge"}]',
      }),
    );
    expect(configs.map((c) => [c.stackName, c.bucketName, c.prefixes, c.eventDelivery])).toEqual([
      ['DatastoreIndexer-a-bucket', 'a-bucket', ['x'], undefined],
      ['DatastoreIndexer-b-bucket', 'b.bucket', [], EventDelivery.EVENTBRIDGE],
    ]);
  });

  test('several buckets from a cdk.json array', () => {
    const configs = readStackConfigs(
      ctx({ buckets: [{ bucketName: 'a-bucket', prefixes: 'x,y', alarmTopicArn: 'arn:aws:sns:eu-west-1:1:t' }] }),
    );
    expect(configs[0]).toMatchObject({ bucketName: 'a-bucket', prefixes: ['x', 'y'], alarmTopicArn: 'arn:aws:sns:eu-west-1:1:t' });
  });

  test('a missing bucketName fails with the command to run', () => {
    const error = errorFrom({ prefixes: 'swamp' });
    expect(error.prop).toBe('bucketName');
    expect(error.message).toMatch(/^Invalid bucketName: is missing\. Deploy with: npx cdk deploy -c bucketName=/);
  });

  test.each([
    [{ bucketName: 'Not_A_Bucket' }, 'bucketName', /"Not_A_Bucket" is not an S3 bucket name/],
    [{ bucketName: 'my-bucket', prefixes: '/swamp' }, 'prefixes', /must not start with '\/'/],
    [{ bucketName: 'my-bucket', prefixes: 'x', schedule: 'hourly' }, 'schedule', /EventBridge expression/],
    [{ bucketName: 'my-bucket', prefixes: 'x', eventDelivery: 'sns' }, 'eventDelivery', /one of s3, eventbridge/],
    [{ bucketName: 'my-bucket', prefixes: 'x', maxConcurrency: 'two' }, 'maxConcurrency', /whole number, got "two"/],
    [{ bucketName: 'my-bucket', prefixes: 'x', bucketRoot: 'yes' }, 'bucketRoot', /true or false, got "yes"/],
    [{ buckets: '[{"bucketName":"a-bucket","prefix":"x"}]' }, 'buckets[0].prefix', /not a known setting/],
    [
      { buckets: '[{"bucketName":"a.b","prefixes":"x"},{"bucketName":"a-b","prefixes":"x"}]' },
      'buckets[1].bucketName',
      /same stack name as buckets\[0\]/,
    ],
    [{ buckets: 'not json' }, 'buckets', /not valid JSON/],
    [{ buckets: '[]' }, 'buckets', /non-empty array/],
    [{ buckets: '[{"bucketName":"a-bucket"}]', bucketName: 'b-bucket' }, 'buckets', /cannot be combined with bucketName/],
  ])('refuses %j, naming %s', (values, prop, message) => {
    const error = errorFrom(values);
    expect(error.prop).toBe(prop);
    expect(error.message).toMatch(message);
  });

  test('stack names keep only letters, digits and hyphens', () => {
    expect(stackNameFor('logs.example.com')).toBe('DatastoreIndexer-logs-example-com');
  });

  test('the app makes one stack per bucket of a buckets list, each wired to its bucket', () => {
    // GIVEN: context as `-c buckets=…` gives it; bundling skipped, the bundle is under test in synth.test.ts
    const app = unbundledApp({
      buckets: '[{"bucketName":"team-a-bucket","prefixes":["swamp"]},{"bucketName":"team-b-bucket","bucketRoot":true}]',
    });
    // WHEN
    const stacks = addIndexerStacks(app);
    // THEN
    expect(stacks.map((s) => s.stackName)).toEqual(['DatastoreIndexer-team-a-bucket', 'DatastoreIndexer-team-b-bucket']);
    const env = stacks.map((s) => {
      const fns = Object.values(Template.fromStack(s).findResources('AWS::Lambda::Function'));
      return fns.map((f) => f.Properties.Environment?.Variables).find(Boolean);
    });
    expect(env).toEqual([
      expect.objectContaining({ DATASTORE_BUCKET: 'team-a-bucket', DATASTORE_PREFIXES: 'swamp' }),
      expect.objectContaining({ DATASTORE_BUCKET: 'team-b-bucket', DATASTORE_PREFIXES: '' }),
    ]);
  });
});
