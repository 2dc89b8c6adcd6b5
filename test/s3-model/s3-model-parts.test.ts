/**
 * The S3 model's parts on their own: key order, the sorted store and its
 * listing walk, aws-chunked decoding, XML text, seeding, and the requests
 * moto cannot judge (checksum checks, unsupported operations).
 */
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { decodeAwsChunked } from '../../support/s3-model/chunked';
import { S3Error } from '../../support/s3-model/errors';
import { seedBucket } from '../../support/s3-model/seed';
import { startS3Model, type S3Model } from '../../support/s3-model/server';
import { Bucket, StoredObject, compareKeys, type ResumePoint } from '../../support/s3-model/store';
import { escapeXml, isoTime, urlEncodeKey } from '../../support/s3-model/xml';

const obj = (size = 1): StoredObject => new StoredObject(size, '"e"', 0, 'application/octet-stream', null, null, null);

/** A bucket holding `keys` (inserted one by one, in the given order). */
function bucketOf(keys: readonly string[]): Bucket {
  const bucket = new Bucket('b', 0);
  for (const key of keys) bucket.put(key, obj());
  return bucket;
}

/** Every page of a walk, as [contents, common prefixes] pairs. */
function walk(bucket: Bucket, prefix: string, delimiter: string, maxKeys: number): Array<[string[], string[]]> {
  const pages: Array<[string[], string[]]> = [];
  let after: ResumePoint | null = null;
  for (;;) {
    const page = bucket.list({ prefix, delimiter, after, maxKeys });
    pages.push([page.contents.map((c) => c.key), [...page.commonPrefixes]]);
    if (!page.isTruncated) return pages;
    after = page.resumeAfter;
    expect(pages.length).toBeLessThan(1000);
  }
}

describe('compareKeys', () => {
  it('orders like the UTF-8 bytes, which plain string comparison does not', () => {
    // Code points around the surrogate range, where UTF-16 and UTF-8 orders part.
    const alphabet = [
      'a',
      '/',
      ' ',
      '~',
      '\u007f',
      'é',
      '\u07ff',
      '\u0800',
      '\ud7ff',
      '\ue000',
      '\uff01',
      '\uffff',
      '😀',
      '\u{10000}',
      '\u{10ffff}',
    ];
    let state = 7;
    const random = (n: number): number => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state % n;
    };
    const word = (): string => Array.from({ length: 1 + random(4) }, () => alphabet[random(alphabet.length)]).join('');
    let utf16Disagrees = 0;
    for (let i = 0; i < 5000; i++) {
      const a = word();
      const b = word();
      const bytes = Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));
      expect([a, b, Math.sign(compareKeys(a, b))]).toEqual([a, b, bytes]);
      if (Math.sign(a < b ? -1 : a > b ? 1 : 0) !== bytes) utf16Disagrees++;
    }
    // The sample really exercises the case that needs the fix.
    expect(utf16Disagrees).toBeGreaterThan(0);
  });
});

describe('Bucket', () => {
  // In S3 order: '-' (0x2d) sorts before '/' (0x2f).
  const keys = ['a', 'a-b', 'a/', 'a/b', 'a/b/c', 'a/c', 'b', 'b/x', 'b/y/z', 'c'];

  it('keeps keys sorted whatever the insertion order, replaces and deletes', () => {
    const bucket = bucketOf([...keys].reverse());
    expect(walk(bucket, '', '', 1000)).toEqual([[keys, []]]);
    bucket.put('a/b', obj(5));
    expect(bucket.size).toBe(keys.length);
    expect(bucket.get('a/b')?.size).toBe(5);
    expect(bucket.delete('a/b')).toBe(true);
    expect(bucket.delete('a/b')).toBe(false);
    expect(bucket.get('a/b')).toBeUndefined();
    expect(walk(bucket, '', '', 1000)[0][0]).toEqual(keys.filter((k) => k !== 'a/b'));
  });

  it('pages with a delimiter: a common prefix counts once and the next page skips past all its keys', () => {
    const bucket = bucketOf(keys);
    expect(walk(bucket, '', '/', 2)).toEqual([
      [['a', 'a-b'], []],
      [['b'], ['a/']],
      [['c'], ['b/']],
    ]);
    expect(walk(bucket, 'a/', '/', 1)).toEqual([
      [['a/'], []],
      [['a/b'], []],
      [[], ['a/b/']],
      [['a/c'], []],
    ]);
  });

  it('is not truncated when a page ends exactly at the last key under the prefix', () => {
    const page = bucketOf(keys).list({ prefix: 'b', delimiter: '', after: null, maxKeys: 3 });
    expect(page.contents.map((c) => c.key)).toEqual(['b', 'b/x', 'b/y/z']);
    expect(page.isTruncated).toBe(false);
    expect(page.resumeAfter).toBeNull();
  });

  it('putMany merges unsorted batches with duplicates into existing keys, the last one winning', () => {
    const bucket = bucketOf(['b', 'd']);
    bucket.putMany(['e', 'a', 'd', 'a', 'c'], [obj(1), obj(2), obj(3), obj(4), obj(5)]);
    expect(walk(bucket, '', '', 1000)).toEqual([[['a', 'b', 'c', 'd', 'e'], []]]);
    expect(bucket.get('a')?.size).toBe(4);
    expect(bucket.get('d')?.size).toBe(3);
    bucket.putMany(['f', 'g'], [obj(6), obj(7)]);
    expect(bucket.size).toBe(7);
    expect(bucket.get('g')?.size).toBe(7);
  });
});

describe('decodeAwsChunked', () => {
  it('decodes signed and unsigned chunks and reads the trailers', () => {
    const raw = Buffer.from(
      '5;chunk-signature=abc\r\nhello\r\n6;chunk-signature=def\r\n world\r\n0;chunk-signature=0\r\n' +
        'x-amz-checksum-crc32:DUoRhQ==\r\nx-amz-trailer-signature:xyz\r\n\r\n',
    );
    const decoded = decodeAwsChunked(raw, 11);
    expect(decoded.body.toString()).toBe('hello world');
    expect(decoded.trailers.get('x-amz-checksum-crc32')).toBe('DUoRhQ==');
    const unsigned = decodeAwsChunked(Buffer.from('3\r\n\r\n\0\r\n0\r\n\r\n'), null);
    expect([...unsigned.body]).toEqual([13, 10, 0]);
  });

  it('refuses bodies that end early or disagree with x-amz-decoded-content-length', () => {
    expect(() => decodeAwsChunked(Buffer.from('5\r\nhel'), null)).toThrow(S3Error);
    expect(() => decodeAwsChunked(Buffer.from('5\r\nhello'), null)).toThrow(S3Error);
    expect(() => decodeAwsChunked(Buffer.from('5\r\nhello\r\n0\r\n\r\n'), 6)).toThrow(/decoded-content-length/);
  });
});

describe('XML text', () => {
  it('escapes markup and control characters, keeps tab and newline', () => {
    expect(escapeXml(`a&b<c>"d'\r\u0001\t\n`)).toBe('a&amp;b&lt;c&gt;&quot;d&apos;&#xD;&#x1;\t\n');
  });
  it('url-encodes keys like S3: space as +, plus as %2B, slash kept, UTF-8 percent-encoded', () => {
    expect(urlEncodeKey("a b+c/é%*()!'~._-")).toBe('a+b%2Bc/%C3%A9%25%2A%28%29%21%27~._-');
  });
  it('writes times as Date does, from its cached parts, for any millisecond and past the caches', () => {
    let seed = 20261207;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const times = [0, 1, 999, 86_399_999, 86_400_000, Date.UTC(2026, 1, 28, 23, 59, 59, 999), 253_402_300_799_999];
    // Days beyond the day cache's bound, and whole seconds as seeded objects have them.
    for (let i = 0; i < 20_000; i++) times.push(Math.floor(next() * 4e12), Math.floor(next() * 4e9) * 1000);
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    // Outside four-digit years, and not whole milliseconds: left to Date.
    for (const ms of [253_402_300_800_000, 1.5, -1]) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
  });
});

describe('seedBucket', () => {
  const keysOf = (bucket: Bucket): string[] => walk(bucket, '', '', 1000).flatMap(([c]) => c);

  it('makes exactly `count` keys, in order, deterministic for a seed', () => {
    for (const count of [0, 1, 3, 4, 5, 17, 2500]) {
      const a = new Bucket('a', 0);
      const result = seedBucket(a, { count, seed: 9 });
      expect(result.count).toBe(count);
      expect(a.size).toBe(count);
      const keys = keysOf(a);
      expect(new Set(keys).size).toBe(count);
      const b = new Bucket('b', 0);
      seedBucket(b, { count, seed: 9 });
      expect(keysOf(b)).toEqual(keys);
    }
    const c = new Bucket('c', 0);
    seedBucket(c, { count: 2500, seed: 10 });
    const d = new Bucket('d', 0);
    seedBucket(d, { count: 2500, seed: 9 });
    expect(keysOf(c)).not.toEqual(keysOf(d));
  });

  it('shapes keys like a swamp datastore, under a root prefix when asked', () => {
    const bucket = new Bucket('s', 0);
    const newest = new Date('2026-06-01T00:00:00Z');
    seedBucket(bucket, { count: 20_000, prefix: 'root/', lastModified: newest });
    const keys = keysOf(bucket);
    expect(keys.every((k) => k.startsWith('root/'))).toBe(true);
    const top = new Map<string, number>();
    for (const k of keys) {
      const folder = k.split('/')[1];
      top.set(folder, (top.get(folder) ?? 0) + 1);
    }
    expect(top.get('data')).toBeGreaterThan(10_000);
    expect([...top.keys()]).toEqual(expect.arrayContaining(['_catalog.db', 'data', 'workflow-runs', 'logs', 'outputs', 'audit']));
    expect(keys).toContain('root/.datastore-sync-state.json');
    expect(keys.filter((k) => /^root\/data\/[^/]+\/[^/]+\/[^/]+\/\d\/raw$/.test(k)).length).toBe(top.get('data'));
    expect(keys.filter((k) => /^root\/workflow-runs\/[^/]+\/run-[0-9a-f]{12}\.json$/.test(k)).length).toBe(top.get('workflow-runs'));
    for (const key of keys.slice(0, 200)) {
      const o = bucket.get(key) as StoredObject;
      expect(o.lastModifiedMs).toBeLessThanOrEqual(newest.getTime());
      expect(o.lastModifiedMs % 1000).toBe(0);
      expect(o.size % 64).toBe(0);
      expect(o.etag).toMatch(/^"[0-9a-f]{32}"$/);
    }
  });

  it('splits the flat layout evenly over obj/0 ... obj/f', () => {
    const bucket = new Bucket('f', 0);
    seedBucket(bucket, { count: 1600, layout: 'flat' });
    for (const hex of '0123456789abcdef') {
      expect(bucket.list({ prefix: `obj/${hex}`, delimiter: '', after: null, maxKeys: 1000 }).contents).toHaveLength(100);
    }
  });
});

describe('requests moto cannot judge', () => {
  let model: S3Model;
  let s3: S3Client;
  beforeAll(async () => {
    model = await startS3Model({ latencyMs: 0 });
    model.seed('parts', { count: 10 });
    s3 = new S3Client({
      endpoint: model.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'any', secretAccessKey: 'any' },
      maxAttempts: 1,
    });
  });
  afterAll(async () => {
    s3?.destroy();
    await model?.stop();
  });

  it('answers BadDigest when the body does not match its CRC32 or Content-MD5', async () => {
    await expect(
      s3.send(new PutObjectCommand({ Bucket: 'parts', Key: 'k', Body: 'hello', ChecksumCRC32: 'AAAAAA==' })),
    ).rejects.toMatchObject({ name: 'BadDigest', $metadata: { httpStatusCode: 400 } });
    const res = await fetch(`${model.endpoint}/parts/k`, {
      method: 'PUT',
      body: 'hello',
      headers: { 'content-md5': Buffer.alloc(16).toString('base64') },
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('<Code>BadDigest</Code>');
  });

  it('answers 501 NotImplemented, in S3 error XML, for what it does not model', async () => {
    for (const [method, path] of [
      ['GET', '/parts'],
      ['GET', '/parts?acl'],
      ['POST', '/parts?delete'],
      ['GET', '/parts/k?tagging'],
      ['PUT', '/parts/k?partNumber=1&uploadId=x'],
      ['GET', '/'],
    ] as const) {
      const res = await fetch(`${model.endpoint}${path}`, { method });
      expect([path, res.status]).toEqual([path, 501]);
      expect(await res.text()).toMatch(/<Error><Code>NotImplemented<\/Code>.*<RequestId>/);
    }
    expect(model.requestCounts().Unsupported).toBe(6);
  });

  it('deletes an empty bucket and refuses a full one', async () => {
    expect((await fetch(`${model.endpoint}/parts`, { method: 'DELETE' })).status).toBe(409);
    expect((await fetch(`${model.endpoint}/spare-bucket`, { method: 'PUT' })).status).toBe(200);
    expect((await fetch(`${model.endpoint}/spare-bucket`, { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(`${model.endpoint}/spare-bucket`, { method: 'HEAD' })).status).toBe(404);
  });
});
