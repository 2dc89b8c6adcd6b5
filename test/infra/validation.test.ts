import { Duration } from 'aws-cdk-lib';
import { DatastoreIndexerPropError } from '../../infra/errors';
import type { DatastoreIndexerProps } from '../../infra/props';
import { indexerStack } from './helpers';

/** Builds an indexer with `props` and returns the error it threw. */
function errorFrom(props: Partial<DatastoreIndexerProps>): DatastoreIndexerPropError {
  try {
    indexerStack(props);
  } catch (e) {
    if (e instanceof DatastoreIndexerPropError) return e;
    throw e;
  }
  throw new Error('expected the props to be refused');
}

describe('DatastoreIndexer prop validation', () => {
  test.each([
    [['/swamp'], /prefixes\[0\] "\/swamp" must not start with '\/'/],
    [['swamp/'], /prefixes\[0\] "swamp\/" must not end with '\/'/],
    [['swamp', 'infra', 'swamp'], /prefixes\[2\] "swamp" is listed twice \(also prefixes\[0\]\)/],
    [[''], /prefixes\[0\] "" is empty/],
    [['  '], /prefixes\[0\] " {2}" is empty/],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the text a user would type, which IAM reads as a policy variable
    [['team${aws:username}'], /must not contain "\$"/],
    [['team{a}'], /must not contain "\{"/],
    [['team}'], /must not contain "\}"/],
    [['a//b'], /empty path segment/],
    [['swamp/../swamp'], /prefixes\[0\] "swamp\/..\/swamp" must not contain a "." or ".." path segment/],
    [['./swamp'], /"." or ".." path segment/],
    [['swamp*'], /must not contain "\*"/],
    [['a,b'], /must not contain .*','/],
    [['team', 'team/swamp'], /"team\/swamp" lies inside "team"/],
  ])('refuses prefixes %j, naming the prop', (prefixes, message) => {
    const error = errorFrom({ prefixes });
    expect(error.prop).toBe('prefixes');
    expect(error.message).toMatch(/^Invalid prefixes: /);
    expect(error.message).toMatch(message);
  });

  test('the bucket root takes an explicit bucketRoot, never a forgotten prefixes', () => {
    // GIVEN / WHEN / THEN
    expect(() => indexerStack({ bucketRoot: false })).toThrow(/^Invalid prefixes: none given; .*bucketRoot: true/);
    expect(() => indexerStack({ prefixes: [], bucketRoot: false })).toThrow(/^Invalid prefixes: none given/);
    expect(() => indexerStack({ prefixes: ['swamp'], bucketRoot: true })).toThrow(/^Invalid bucketRoot: cannot be combined with prefixes/);
    expect(() => indexerStack({ bucketRoot: true })).not.toThrow();
  });

  test('accepts sibling prefixes that share a start but not a folder', () => {
    expect(() => indexerStack({ prefixes: ['team', 'team-b', 'a/b'] })).not.toThrow();
  });

  test.each([
    [{ batchingWindow: Duration.seconds(0) }, 'batchingWindow', /from 1 to 300, got 0/],
    [{ batchingWindow: Duration.minutes(6) }, 'batchingWindow', /got 360/],
    [{ timeout: Duration.minutes(16) }, 'timeout', /from 1 to 900 \(15 min\), got 960/],
    [{ timeout: Duration.millis(1500) }, 'timeout', /whole number of seconds/],
    [{ memorySize: 64 }, 'memorySize', /from 128 to 10240, got 64/],
  ] as const)('refuses %j, naming %s', (props, prop, message) => {
    const error = errorFrom(props);
    expect(error.prop).toBe(prop);
    expect(error.message).toMatch(new RegExp(`^Invalid ${prop}: `));
    expect(error.message).toMatch(message);
  });
});
