/**
 * The S3 model must answer like S3. moto stands in for S3 here: the same
 * requests go through @aws-sdk/client-s3 to a fresh bucket on moto and on
 * the model, and the parsed answers must be equal once the fields that
 * legitimately differ between servers are normalised: request ids, dates,
 * owners, and the values (not the presence) of opaque continuation tokens.
 */
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandInput,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { startS3Model, type S3Model } from '../../support/s3-model/server';

const credentials = {
  accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'testing',
  secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'testing',
};
const client = (endpoint: string): S3Client =>
  new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials, maxAttempts: 1 });

/** Keys chosen to sort around each other and to need escaping in paths, queries and XML. */
const KEYS = [
  'a',
  'a/',
  'a-b',
  'a.b',
  'a/b',
  'a/b/c',
  'a/c',
  'a b',
  'a+b',
  'a%b',
  'a%20b',
  'ab',
  'b',
  'é',
  'e\u0301',
  '😀',
  '\uff01', // fullwidth "!": above the surrogates in UTF-16, below the emoji in UTF-8
  '\ue000',
  '..',
  '../x',
  'x/../y',
  'dir/./z',
  'space dir/file 1.json',
  'plus+dir/f',
  'pct%dir/f',
  'uni/日本語.txt',
  'uni/émoji😀/x',
  'deep/a/b/c/d',
  'quote\'"&<>',
  'q?x=1&y#z',
  'semi;colon,comma=eq@at:colon$dollar*star!excl(paren)~tilde',
  'tab\there',
  'z',
];

type Normalised = unknown;

/** Replaces what two honest servers may answer differently; everything else must match. */
function normalise(value: unknown, path = ''): Normalised {
  if (value instanceof Date) return '<date>';
  if (Array.isArray(value)) return value.map((v) => normalise(v, path));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (['requestId', 'extendedRequestId', 'cfId', 'RequestId', 'HostId', 'Owner', '$response'].includes(k)) continue;
      // Opaque tokens: only whether one is there matters. moto also omits the
      // echo of the request's ContinuationToken that S3 sends.
      if (k === 'ContinuationToken') continue;
      if (k === 'NextContinuationToken') {
        out[k] = '<token>';
        continue;
      }
      out[k] = normalise(v, `${path}.${k}`);
    }
    return out;
  }
  return value;
}

interface Outcome {
  readonly ok?: Normalised;
  readonly error?: Normalised;
}

/** Runs one command and keeps what a caller sees: output, or the error's name, status and fields. */
async function outcome(s3: S3Client, send: (s3: S3Client) => Promise<object>): Promise<Outcome> {
  try {
    const out = (await send(s3)) as Record<string, unknown>;
    const body = out.Body as { transformToString?: () => Promise<string> } | undefined;
    if (body?.transformToString) out.Body = await body.transformToString();
    return { ok: normalise(out) };
  } catch (error) {
    const e = error as Error & Record<string, unknown>;
    if (!(e && typeof e === 'object' && '$metadata' in e)) throw error;
    return { error: normalise({ ...e, name: e.name, message: e.message }) };
  }
}

let model: S3Model;
let moto: S3Client;
let mine: S3Client;
const bucket = `model-vs-moto-${process.pid}-${Date.now() % 100000}`;

/** Sends the same request to both and expects the same answer; returns it for further checks. */
async function same(send: (s3: S3Client) => Promise<object>): Promise<Outcome> {
  const expected = await outcome(moto, send);
  const actual = await outcome(mine, send);
  expect(actual).toEqual(expected);
  return actual;
}

beforeAll(async () => {
  const endpoint = process.env.S3_TEST_ENDPOINT;
  if (!endpoint) throw new Error('S3_TEST_ENDPOINT is not set: the global setup starts moto');
  model = await startS3Model({ latencyMs: 0 });
  moto = client(endpoint);
  mine = client(model.endpoint);
  await same((s3) => s3.send(new CreateBucketCommand({ Bucket: bucket })));
  for (const [i, key] of KEYS.entries()) {
    await same((s3) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: `body of ${i}: ${key}` })));
  }
});

afterAll(async () => {
  moto?.destroy();
  mine?.destroy();
  await model?.stop();
});

describe('ListObjectsV2 answers like S3', () => {
  const cases: Array<[string, Omit<ListObjectsV2CommandInput, 'Bucket'>]> = [
    ['everything', {}],
    ['prefix a', { Prefix: 'a' }],
    ['prefix a/', { Prefix: 'a/' }],
    ['prefix with space', { Prefix: 'a ' }],
    ['prefix with plus', { Prefix: 'a+' }],
    ['prefix with percent', { Prefix: 'a%' }],
    ['unicode prefix', { Prefix: 'uni/é' }],
    ['prefix matching nothing', { Prefix: 'nothing/' }],
    ['delimiter /', { Delimiter: '/' }],
    ['prefix a + delimiter /', { Prefix: 'a', Delimiter: '/' }],
    ['prefix uni/ + delimiter /', { Prefix: 'uni/', Delimiter: '/' }],
    ['delimiter that is not a slash', { Delimiter: 'b' }],
    ['multi-character delimiter', { Delimiter: '/b' }],
    ['start-after a-b', { StartAfter: 'a-b' }],
    ['start-after between keys', { StartAfter: 'a/bb' }],
    ['start-after past everything', { StartAfter: '\u{10ffff}' }],
    ['start-after an emoji', { StartAfter: '😀' }],
    ['start-after with prefix', { Prefix: 'a', StartAfter: 'a.b' }],
    ['max-keys 0', { MaxKeys: 0 }],
    ['max-keys 1', { MaxKeys: 1 }],
    ['max-keys equal to the count', { MaxKeys: KEYS.length }],
    ['max-keys 1 with delimiter', { MaxKeys: 1, Delimiter: '/' }],
    ['fetch-owner', { FetchOwner: true, Prefix: 'a' }],
  ];
  it.each(cases)('%s', async (_label, input) => {
    const answer = await same((s3) => s3.send(new ListObjectsV2Command({ Bucket: bucket, ...input })));
    expect(answer.ok).toBeDefined();
  });

  it('keeps all keys in UTF-8 byte order', async () => {
    const out = (await mine.send(new ListObjectsV2Command({ Bucket: bucket }))) as ListObjectsV2CommandOutput;
    const keys = (out.Contents ?? []).map((c) => c.Key as string);
    const byBytes = [...KEYS].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(keys).toEqual(byBytes);
    // The cases that UTF-16 order gets wrong are really there.
    expect(keys.indexOf('\uff01')).toBeLessThan(keys.indexOf('😀'));
    expect(keys.indexOf('\ue000')).toBeLessThan(keys.indexOf('😀'));
  });

  const pagings: Array<[string, Omit<ListObjectsV2CommandInput, 'Bucket'>]> = [
    ['pages of 1', { MaxKeys: 1 }],
    ['pages of 3', { MaxKeys: 3 }],
    ['pages of 2 under a prefix', { MaxKeys: 2, Prefix: 'a' }],
    ['pages of 2 with a delimiter', { MaxKeys: 2, Delimiter: '/' }],
    ['pages of 1 with prefix and delimiter', { MaxKeys: 1, Prefix: 'a', Delimiter: '/' }],
    ['pages of 4 after start-after', { MaxKeys: 4, StartAfter: 'a/b' }],
  ];
  it.each(pagings)('continuation-token paging: %s', async (_label, input) => {
    const pages = async (s3: S3Client): Promise<Normalised[]> => {
      const out: Normalised[] = [];
      let token: string | undefined;
      do {
        const page: ListObjectsV2CommandOutput = await s3.send(
          new ListObjectsV2Command({ Bucket: bucket, ...input, ContinuationToken: token }),
        );
        out.push(normalise(page));
        token = page.NextContinuationToken;
        expect(out.length).toBeLessThan(100);
      } while (token);
      return out;
    };
    const expected = await pages(moto);
    expect(await pages(mine)).toEqual(expected);
    expect(expected.length).toBeGreaterThan(1);
  });

  it('rejects a continuation token it did not make, as S3 does', async () => {
    const answer = await same((s3) => s3.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: '' })));
    expect(answer.error).toBeDefined();
  });

  it('encoding-type=url: same keys once decoded; a space is written +, as S3 does', async () => {
    const input = { Bucket: bucket, EncodingType: 'url' as const, Delimiter: '/' };
    const motoOut = await moto.send(new ListObjectsV2Command(input));
    const mineOut = await mine.send(new ListObjectsV2Command(input));
    // moto writes a space as %20, S3 as +; both decode the same way.
    const formDecode = (s: string | undefined): string | undefined => (s === undefined ? s : decodeURIComponent(s.replace(/\+/g, ' ')));
    const decoded = (out: ListObjectsV2CommandOutput): Normalised =>
      normalise({
        ...out,
        Contents: out.Contents?.map((c) => ({ ...c, Key: formDecode(c.Key) })),
        CommonPrefixes: out.CommonPrefixes?.map((p) => ({ Prefix: formDecode(p.Prefix) })),
      });
    expect(decoded(mineOut)).toEqual(decoded(motoOut));
    const raw = (mineOut.Contents ?? []).map((c) => c.Key);
    expect(raw).toContain('a%2Bb'); // the key "a+b"
    expect(raw).toContain('a+b'); // the key "a b"
    expect(raw).toContain('%C3%A9'); // the key "é"
    expect((mineOut.CommonPrefixes ?? []).map((p) => p.Prefix)).toContain('space+dir/');
  });
});

describe('objects answer like S3', () => {
  it('GET and HEAD of existing objects, including hard keys', async () => {
    for (const key of KEYS) {
      const got = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
      expect(got.ok).toMatchObject({ Body: expect.stringContaining(key) });
      await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
    }
  });

  it('GET and HEAD of a missing key or bucket: 404 with the same codes', async () => {
    const a = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'missing' })));
    expect(a.error).toMatchObject({ name: 'NoSuchKey', Key: 'missing' });
    const b = await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'missing' })));
    expect(b.error).toMatchObject({ name: 'NotFound', $metadata: { httpStatusCode: 404 } });
    const c = await same((s3) => s3.send(new GetObjectCommand({ Bucket: `${bucket}-none`, Key: 'k' })));
    expect(c.error).toMatchObject({ name: 'NoSuchBucket' });
    await same((s3) => s3.send(new HeadObjectCommand({ Bucket: `${bucket}-none`, Key: 'k' })));
    await same((s3) => s3.send(new ListObjectsV2Command({ Bucket: `${bucket}-none` })));
  });

  it('ranged GETs', async () => {
    for (const Range of ['bytes=0-2', 'bytes=3-', 'bytes=-4', 'bytes=2-1000']) {
      const answer = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a', Range })));
      expect(answer.ok).toMatchObject({ $metadata: { httpStatusCode: 206 } });
    }
  });

  it('conditional GET and HEAD: If-None-Match 304, If-Match 412, and the reverse', async () => {
    const etag = (await mine.send(new HeadObjectCommand({ Bucket: bucket, Key: 'z' }))).ETag as string;
    const notModified = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfNoneMatch: etag })));
    expect(notModified.error).toMatchObject({ $metadata: { httpStatusCode: 304 } });
    await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'z', IfNoneMatch: etag })));
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfNoneMatch: '"other"' })));
    const failed = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfMatch: '"other"' })));
    expect(failed.error).toMatchObject({ $metadata: { httpStatusCode: 412 } });
    await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'z', IfMatch: '"other"' })));
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfMatch: etag })));
    const later = new Date(Date.now() + 3600_000);
    const earlier = new Date(Date.now() - 3600_000);
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfModifiedSince: later })));
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfModifiedSince: earlier })));
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'z', IfUnmodifiedSince: earlier })));
  });

  it('PUT keeps Content-Type and user metadata', async () => {
    await same((s3) =>
      s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: 'typed.json',
          Body: '{}',
          ContentType: 'application/json',
          Metadata: { 'my-field': 'Some Value' },
        }),
      ),
    );
    const head = await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'typed.json' })));
    expect(head.ok).toMatchObject({ ContentType: 'application/json', Metadata: { 'my-field': 'Some Value' } });
  });

  it('PUT with If-None-Match: * creates once, then 412', async () => {
    const put = (s3: S3Client) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'lock', Body: '{"n":1}', IfNoneMatch: '*' }));
    expect((await same(put)).ok).toBeDefined();
    expect((await same(put)).error).toMatchObject({ name: 'PreconditionFailed', Condition: 'If-None-Match' });
  });

  it('PUT with If-Match: the right ETag replaces, a wrong one is 412, a missing key 404', async () => {
    const head = (await mine.send(new HeadObjectCommand({ Bucket: bucket, Key: 'a' }))).ETag as string;
    const right = await same((s3) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a', Body: 'replaced', IfMatch: head })));
    expect(right.ok).toMatchObject({ ETag: `"${createHash('md5').update('replaced').digest('hex')}"` });
    const wrong = await same((s3) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a', Body: 'again', IfMatch: head })));
    expect(wrong.error).toMatchObject({ name: 'PreconditionFailed', Condition: 'If-Match' });
    const missing = await same((s3) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'never-written', Body: 'x', IfMatch: head })));
    expect(missing.error).toMatchObject({ name: 'NoSuchKey' });
    await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a' })));
  });

  it('PUT of a streamed body (aws-chunked with a CRC32 trailer) stores the exact bytes', async () => {
    const parts = [Buffer.from('first part, '), Buffer.alloc(70_000, 0x61), Buffer.from(' last')];
    const length = parts.reduce((n, p) => n + p.length, 0);
    const put = await same((s3) =>
      s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: 'streamed',
          Body: Readable.from(parts),
          ContentLength: length,
          Metadata: { origin: 'Stream' },
        }),
      ),
    );
    expect(put.ok).toMatchObject({ ChecksumCRC32: expect.any(String) });
    const got = await same((s3) => s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'streamed' })));
    expect(got.ok).toMatchObject({ Body: Buffer.concat(parts).toString(), ContentLength: length });
  });

  it('DeleteObject with If-Match: wrong is 412, missing key 404, right deletes', async () => {
    const wrong = await same((s3) => s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'b', IfMatch: '"0"' })));
    expect(wrong.error).toMatchObject({ name: 'PreconditionFailed' });
    const missing = await same((s3) => s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'never-written', IfMatch: '"0"' })));
    expect(missing.error).toMatchObject({ name: 'NoSuchKey' });
    const etag = (await mine.send(new HeadObjectCommand({ Bucket: bucket, Key: 'b' }))).ETag;
    const right = await same((s3) => s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'b', IfMatch: etag })));
    expect(right.ok).toMatchObject({ $metadata: { httpStatusCode: 204 } });
    await same((s3) => s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'never-written' })));
    await same((s3) => s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'b' })));
    await same((s3) => s3.send(new ListObjectsV2Command({ Bucket: bucket })));
  });

  it('buckets: create again, head, head missing, a name too short', async () => {
    await same((s3) => s3.send(new CreateBucketCommand({ Bucket: bucket })));
    await same((s3) => s3.send(new HeadBucketCommand({ Bucket: bucket })));
    await same((s3) => s3.send(new HeadBucketCommand({ Bucket: `${bucket}-none` })));
    // (moto accepts upper case and `_`, which S3 refuses and the model refuses too; both refuse this.)
    const bad = await same((s3) => s3.send(new CreateBucketCommand({ Bucket: 'ab' })));
    expect(bad.error).toMatchObject({ name: 'InvalidBucketName' });
  });
});
