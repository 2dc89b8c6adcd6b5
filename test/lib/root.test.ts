/** Datastore configs and roots (pure), and finding namespaces and shard partitions in a bucket (moto). */
import { ConfigError } from '../../lambda/lib/errors';
import { NamespaceResolver } from '../../lambda/lib/namespaces';
import { describeScope } from '../../lambda/lib/scope';
import { listShardPartitions, namespaceExists } from '../../lambda/lib/list';
import { normalizePrefix, parseDatastoreConfig, resolveDatastoreConfig, rootOf } from '../../lambda/lib/config';
import { rootBase, scopeBase } from '../../lambda/lib/names';
import { namespaceMarker } from '../helpers/factories';
import { connectStore, putObjects, testStore } from '../helpers/s3';

describe('datastore configs', () => {
  it("reads swamp's config keys", () => {
    expect(
      parseDatastoreConfig({ bucket: 'b', prefix: 'swamp/', region: 'eu-west-1', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true }),
    ).toEqual({
      bucket: 'b',
      prefix: 'swamp/',
      region: 'eu-west-1',
      endpoint: 'http://127.0.0.1:9000',
      forcePathStyle: true,
    });
  });

  it.each([
    ['not an object', [], /must be a JSON object/],
    ['no bucket', { prefix: 'x' }, /needs a "bucket"/],
    ['an unknown key', { bucket: 'b', profile: 'x' }, /Unknown datastore config key "profile"/],
    ['a numeric prefix', { bucket: 'b', prefix: 5 }, /"prefix" must be a string/],
    ['forcePathStyle as a string', { bucket: 'b', forcePathStyle: 'true' }, /"forcePathStyle" must be true or false/],
    ['an endpoint without scheme', { bucket: 'b', endpoint: '127.0.0.1:9000' }, /"endpoint" must be an http\(s\) URL/],
    ['a region with spaces', { bucket: 'b', region: 'eu west 1' }, /"region" must be a region name such as eu-west-1/],
    ['a region in capitals', { bucket: 'b', region: 'EU-WEST-1' }, /"region" must be a region name/],
  ])('refuses %s, naming the problem', (_what, value, message) => {
    expect(() => parseDatastoreConfig(value)).toThrow(ConfigError);
    expect(() => parseDatastoreConfig(value)).toThrow(message);
  });

  it('accepts region names of S3 and of S3-compatible stores', () => {
    for (const region of ['eu-west-1', 'us-gov-west-1', 'cn-north-1', 'auto'])
      expect(parseDatastoreConfig({ bucket: 'b', region }).region).toBe(region);
  });

  it('lets settings override the --config JSON, ignoring undefined ones', () => {
    expect(resolveDatastoreConfig('{"bucket":"b","prefix":"p","region":"us-east-1"}', { region: 'eu-west-1', prefix: undefined })).toEqual({
      bucket: 'b',
      prefix: 'p',
      region: 'eu-west-1',
      endpoint: undefined,
      forcePathStyle: undefined,
    });
    expect(resolveDatastoreConfig(undefined, { bucket: 'flags-only' }).bucket).toBe('flags-only');
    expect(() => resolveDatastoreConfig('{bad')).toThrow(/not valid JSON/);
  });

  it('normalises prefixes and builds keys of roots and scopes', () => {
    expect(['a/b', '/a/b/', '//a/b//', 'a/b/'].map(normalizePrefix)).toEqual(['a/b', 'a/b', 'a/b', 'a/b']);
    expect(normalizePrefix(undefined)).toBe('');
    const root = rootOf({ bucket: 'b', prefix: '/swamp/' });
    expect(root).toEqual({ bucket: 'b', prefix: 'swamp' });
    expect(rootBase(root)).toBe('swamp/');
    expect(rootBase({ bucket: 'b', prefix: '' })).toBe('');
    expect(scopeBase({ root, namespace: 'ns1' })).toBe('swamp/ns1/');
    expect(scopeBase({ root: { bucket: 'b', prefix: '' }, namespace: 'ns1' })).toBe('ns1/');
    expect(describeScope({ root, namespace: 'ns1' })).toBe('s3://b/swamp#ns1');
  });
});

describe('namespaces and shard partitions in a bucket', () => {
  it('finds namespaces by their marker only', async () => {
    const store = await testStore();
    await putObjects(store, {
      'r/ns1/.namespace.json': JSON.stringify(namespaceMarker('ns1')),
      'r/ns1/data/x': 'x',
      'r/plain/data/x': 'x',
      'r/ns10/.namespace.jsonx': 'not a marker',
      'r/deep/ns/.namespace.json': 'nested, not top-level',
    });
    const root = { bucket: store.bucket, prefix: 'r' };

    expect(await namespaceExists(store, root, 'ns1')).toBe(true);
    for (const name of ['plain', 'ns10', 'deep', 'missing', '', '..', 'a/b']) expect(await namespaceExists(store, root, name)).toBe(false);

    const resolver = new NamespaceResolver(connectStore(store.bucket), root);
    expect(await resolver.scopeOf('ns1/data/x')).toEqual({ namespace: 'ns1', rel: 'data/x' });
    expect(await resolver.scopeOf('plain/data/x')).toEqual({ rel: 'plain/data/x' });
    expect(await resolver.scopeOf('notes.md')).toEqual({ rel: 'notes.md' });
    resolver.note('plain', true);
    expect(await resolver.scopeOf('plain/data/x')).toEqual({ namespace: 'plain', rel: 'data/x' });
  });

  it('lists shard partitions as clients rebuild a missing manifest: top-level _index/*.json but _meta.json', async () => {
    const store = await testStore();
    await putObjects(store, {
      's/_index/_meta.json': '{}',
      's/_index/logs.json': '{}',
      's/_index/data--aws--ec2.json': '{}',
      's/_index/tmp/x.json': '{}',
      's/_index/notes.txt': '{}',
      's/data/_index/files.json': '{}',
    });
    expect(await listShardPartitions(store, { root: { bucket: store.bucket, prefix: 's' } })).toEqual(['data--aws--ec2', 'logs']);
    expect(await listShardPartitions(store, { root: { bucket: store.bucket, prefix: 'elsewhere' } })).toEqual([]);
  });
});
