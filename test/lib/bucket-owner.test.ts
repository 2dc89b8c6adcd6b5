/**
 * The expected bucket owner and namespace names, at the library's seam: a store given an owner sends it on every
 * request, by the SDK and by the direct path alike; a namespace `.` or `..` is refused before any request.
 */
import type { IncomingMessage } from 'node:http';
import { ConfigError } from '../../lambda/lib/errors';
import { S3Store } from '../../lambda/lib/s3';
import { checkNamespaceName } from '../../lambda/lib/names';
import { healRoot } from '../../lambda/lib/heal';
import { repairResumable } from '../../lambda/lib/repair';
import { type LoopbackProxy, startLoopbackProxy } from '../helpers/proxy';
import { createTestBucket, testEndpoint, testSettings } from '../helpers/s3';

const OWNER = '123456789012';

describe('an expected bucket owner', () => {
  let proxy: LoopbackProxy;
  const seen: { method: string; path: string; owner?: string }[] = [];

  beforeAll(async () => {
    proxy = await startLoopbackProxy(testEndpoint(), (req: IncomingMessage) => {
      const owner = req.headers['x-amz-expected-bucket-owner'];
      seen.push({ method: req.method ?? '', path: req.url ?? '', owner: typeof owner === 'string' ? owner : undefined });
      return false;
    });
  });
  afterAll(() => proxy.close());

  test('goes with every request the store sends: listings, reads, heads, writes and deletes', async () => {
    // GIVEN a store that expects the owner, through a proxy that records each request's header
    const bucket = await createTestBucket('owner');
    const store = S3Store.connect({ ...testSettings(), endpoint: proxy.endpoint, expectedBucketOwner: OWNER }, bucket);
    try {
      // WHEN it makes every kind of request
      await store.put('swamp/a.json', '{}');
      for await (const _page of store.listPages({ prefix: 'swamp/' })) break;
      await store.get('swamp/a.json');
      await store.head('swamp/a.json');
      await store.delete('swamp/a.json');
    } finally {
      store.client.destroy();
    }
    // THEN each of them carried it
    const mine = seen.filter((r) => r.path.includes(bucket));
    expect(new Set(mine.map((r) => r.method))).toEqual(new Set(['PUT', 'GET', 'HEAD', 'DELETE']));
    expect(mine.filter((r) => r.owner !== OWNER)).toEqual([]);
  });

  test('is not sent when none is configured (S3-compatible stores, the command without the flag)', async () => {
    const bucket = await createTestBucket('no-owner');
    const store = S3Store.connect({ ...testSettings(), endpoint: proxy.endpoint }, bucket);
    try {
      await store.put('swamp/a.json', '{}');
      await store.head('swamp/a.json');
    } finally {
      store.client.destroy();
    }
    expect(seen.filter((r) => r.path.includes(bucket) && r.owner !== undefined)).toEqual([]);
  });
});

describe('namespace names', () => {
  test('the check refuses an empty name too (a heal takes an empty namespace option as none)', () => {
    expect(() => checkNamespaceName('', '--namespace')).toThrow(/^--namespace "" is not a namespace name/);
  });

  test.each(['.', '..', 'a/b'])('%j is refused with a ConfigError by the check, a heal and a resumable repair', async (ns) => {
    // GIVEN a store that must never be asked anything
    const store = S3Store.connect({ ...testSettings(), endpoint: 'http://127.0.0.1:9' }, 'never-asked');
    const root = { bucket: 'never-asked', prefix: 'swamp' };
    try {
      // THEN
      expect(() => checkNamespaceName(ns)).toThrow(ConfigError);
      await expect(healRoot(store, root, { mode: 'check', namespace: ns })).rejects.toThrow(/is not a namespace name/);
      await expect(repairResumable(store, root, { mode: 'check', namespace: ns, remainingMs: () => 60_000 })).rejects.toThrow(ConfigError);
      expect(store.requests).toEqual({});
    } finally {
      store.client.destroy();
    }
  });
});
