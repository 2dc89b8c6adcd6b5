/**
 * The direct path (`s3-direct.ts`) agrees with the SDK it bypasses: the same URL for a bucket and key
 * (virtual-hosted or path style, regions, custom endpoints), and the same typed errors for the same answers.
 */
import type { ServerResponse } from 'node:http';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import type { S3Settings } from '../../lambda/lib/config';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { escapeUri, resolveBucketEndpoint } from '../../lambda/lib/s3-endpoint';
import { type LoopbackProxy, startLoopbackProxy } from '../helpers/proxy';
import { testEndpoint } from '../helpers/s3';

const CREDENTIALS = { accessKeyId: 'AKIDPARITY', secretAccessKey: 'parity' };

/** The URL the SDK sends a HeadObject of `key` to, caught before it leaves. */
async function sdkUrl(settings: S3Settings, bucket: string, key: string): Promise<string> {
  let url = '';
  const handler = {
    handle: async (request: { protocol: string; hostname: string; port?: number; path: string }) => {
      url = `${request.protocol}//${request.hostname}${request.port ? `:${request.port}` : ''}${request.path}`;
      throw Object.assign(new Error('caught'), { name: 'Caught' });
    },
  };
  const client = createS3Client(settings, { requestHandler: handler as never, maxAttempts: 1, credentials: CREDENTIALS });
  await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })).catch(() => undefined);
  client.destroy();
  return url;
}

/** The URL the direct path sends it to. */
async function directUrl(settings: S3Settings, bucket: string, key: string): Promise<string> {
  const client = createS3Client(settings, { credentials: CREDENTIALS });
  const e = (await resolveBucketEndpoint(client, bucket))!;
  client.destroy();
  return `${e.protocol}//${e.host}${e.basePath}/${key.split('/').map(escapeUri).join('/')}`;
}

describe('endpoint resolution', () => {
  it.each<[string, S3Settings, string]>([
    ['virtual-hosted on AWS', { region: 'eu-west-1' }, 'my-bucket'],
    ['path style on AWS', { region: 'eu-west-1', forcePathStyle: true }, 'my-bucket'],
    ['a bucket with dots (no virtual host under TLS)', { region: 'us-east-2' }, 'my.dotted.bucket'],
    ['virtual-hosted on a custom endpoint', { endpoint: 'http://localhost:9000', region: 'us-east-1' }, 'my-bucket'],
    ['path style on a custom endpoint', { endpoint: 'http://127.0.0.1:9000', forcePathStyle: true, region: 'us-east-1' }, 'my-bucket'],
    ['a custom endpoint with a path', { endpoint: 'https://store.example:8443/s3', forcePathStyle: true, region: 'auto' }, 'b'],
  ])('%s matches the SDK', async (_what, settings, bucket) => {
    const key = "dir/a b+c%d (é)!'*.txt";
    const direct = await directUrl(settings, bucket, key);
    expect(direct).toBe(await sdkUrl(settings, bucket, key));
  });

  it('takes the endpoint of AWS_ENDPOINT_URL_S3 as the SDK does', async () => {
    const before = process.env.AWS_ENDPOINT_URL_S3;
    process.env.AWS_ENDPOINT_URL_S3 = 'http://127.0.0.1:9911';
    try {
      const settings: S3Settings = { forcePathStyle: true, region: 'us-east-1' };
      const direct = await directUrl(settings, 'my-bucket', 'k');
      expect(direct).toBe('http://127.0.0.1:9911/my-bucket/k');
      expect(direct).toBe(await sdkUrl(settings, 'my-bucket', 'k'));
    } finally {
      if (before === undefined) delete process.env.AWS_ENDPOINT_URL_S3;
      else process.env.AWS_ENDPOINT_URL_S3 = before;
    }
  });

  it('puts the bucket in the host name unless told otherwise', async () => {
    expect(await directUrl({ region: 'eu-west-1' }, 'my-bucket', 'k')).toBe('https://my-bucket.s3.eu-west-1.amazonaws.com/k');
    expect(await directUrl({ region: 'eu-west-1', forcePathStyle: true }, 'my-bucket', 'k')).toBe(
      'https://s3.eu-west-1.amazonaws.com/my-bucket/k',
    );
  });
});

/** Canned answers, each given to every request of one call. */
const ANSWERS: [string, number, string | undefined, Record<string, string>][] = [
  ['403 without a body', 403, undefined, {}],
  ['403 AccessDenied', 403, 'AccessDenied', {}],
  ['404 without a body', 404, undefined, {}],
  ['404 NoSuchBucket', 404, 'NoSuchBucket', {}],
  ['301 with the bucket region', 301, 'PermanentRedirect', { 'x-amz-bucket-region': 'eu-west-2' }],
  ['400 InvalidArgument', 400, 'InvalidArgument', {}],
  ['403 InvalidAccessKeyId', 403, 'InvalidAccessKeyId', {}],
  ['503 SlowDown', 503, 'SlowDown', {}],
];

function answer(res: ServerResponse, status: number, code: string | undefined, headers: Record<string, string>, head: boolean): void {
  res.writeHead(status, { 'content-type': 'application/xml', 'x-amz-request-id': 'CANNED', ...headers });
  res.end(
    code && !head
      ? `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>canned ${code}</Message></Error>`
      : undefined,
  );
}

/** What a call came to: a typed error's name, message and hint, or what it returned. */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    const value = await call();
    return value === undefined ? 'absent' : 'value';
  } catch (err) {
    const e = err as Error & { hint?: string };
    return { name: e.name, message: e.message, hint: e.hint };
  }
}

describe('typed errors', () => {
  let proxy: LoopbackProxy;
  let canned: (res: ServerResponse, head: boolean) => void = () => undefined;
  beforeAll(async () => {
    proxy = await startLoopbackProxy(testEndpoint(), (req, res) => {
      canned(res, req.method === 'HEAD');
      return true;
    });
  });
  afterAll(() => proxy.close());

  it.each(ANSWERS)('are the SDK’s for %s', async (_what, status, code, headers) => {
    canned = (res, head) => answer(res, status, code, headers, head);
    const settings: S3Settings = { endpoint: proxy.endpoint, forcePathStyle: true, region: 'us-east-1' };
    const direct = new S3Store(createS3Client(settings, { maxAttempts: 1, credentials: CREDENTIALS }), 'b');
    // A transport given as options leaves every request to the SDK.
    const sdk = new S3Store(createS3Client(settings, { maxAttempts: 1, credentials: CREDENTIALS, requestHandler: {} as never }), 'b');
    sdk.listParser = 'sdk';
    const calls: [string, (s: S3Store) => Promise<unknown>][] = [
      ['head', (s) => s.head('dir/k')],
      ['open', (s) => s.open('dir/k')],
      ['list', (s) => s.listPages({ prefix: 'dir/' }).next()],
    ];
    try {
      for (const [name, call] of calls) {
        const ours = await outcome(() => call(direct));
        expect([name, ours]).toEqual([name, await outcome(() => call(sdk))]);
      }
      expect(direct.requestTotal()).toBe(sdk.requestTotal());
    } finally {
      direct.client.destroy();
      sdk.client.destroy();
    }
  });
});
