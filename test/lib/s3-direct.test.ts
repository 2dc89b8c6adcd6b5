/**
 * The store's direct path (`s3-direct.ts`): listing pages, object streams and HEADs sent without the SDK's
 * middleware, through a loopback proxy in front of moto that checks signatures, records addressing and
 * injects faults; and the same typed errors as the SDK's path for the same answers.
 */
import { createHash, createHmac } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Socket } from 'node:net';
import type { S3ClientConfig } from '@aws-sdk/client-s3';
import type { S3Settings } from '../../lambda/lib/config';
import { S3Store } from '../../lambda/lib/s3';
import { S3UnavailableError } from '../../lambda/lib/errors';
import { createS3Client } from '../../lambda/lib/s3-client';
import { type LoopbackProxy, startLoopbackProxy } from '../helpers/proxy';
import { putObject, testEndpoint, testStore } from '../helpers/s3';

const CREDENTIALS = { accessKeyId: 'AKIDDIRECTTEST', secretAccessKey: 'direct/secret+key', sessionToken: 'session-token-of-the-test' };

const rfc3986 = (text: string): string =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The SigV4 signature `req` should carry for `secret`, computed here from what arrived, independently of the signer. */
function expectedSignature(req: IncomingMessage, secret: string): { signature: string; sent: string; signedHeaders: string[] } {
  const auth = req.headers.authorization ?? '';
  const m =
    /^AWS4-HMAC-SHA256 Credential=[^/]+\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
      auth,
    );
  if (!m) return { signature: 'no SigV4 authorization header', sent: auth, signedHeaders: [] };
  const [, date, region, service, signed, sent] = m;
  if (region !== 'us-east-1' || service !== 's3') return { signature: `signed for ${region}/${service}`, sent, signedHeaders: [] };
  const [path, search = ''] = (req.url ?? '').split('?');
  const query = search
    .split('&')
    .filter(Boolean)
    .map((p) => p.split('=').map((x) => rfc3986(decodeURIComponent(x))))
    .map(([k, v = '']) => `${k}=${v}`)
    .sort()
    .join('&');
  const signedHeaders = signed.split(';');
  const headers = signedHeaders
    .map(
      (h) =>
        `${h}:${String(req.headers[h] ?? '')
          .trim()
          .replace(/\s+/g, ' ')}\n`,
    )
    .join('');
  const canonical = [req.method, path, query, headers, signed, String(req.headers['x-amz-content-sha256'])].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', String(req.headers['x-amz-date']), scope, createHash('sha256').update(canonical).digest('hex')].join(
    '\n',
  );
  let key: Buffer = createHmac('sha256', `AWS4${secret}`).update(date).digest();
  for (const part of [region, service, 'aws4_request']) key = createHmac('sha256', key).update(part).digest();
  return { signature: createHmac('sha256', key).update(toSign).digest('hex'), sent, signedHeaders };
}

/** A store whose client (from `createS3Client`) reaches moto through `proxy`. */
function storeVia(proxy: LoopbackProxy, bucket: string, overrides: Partial<S3ClientConfig> = {}, timeoutMs?: number): S3Store {
  const settings: S3Settings = { endpoint: proxy.endpoint, forcePathStyle: true, region: 'us-east-1' };
  return new S3Store(createS3Client(settings, overrides, timeoutMs), bucket);
}

/** Counts the requests the SDK's own middleware stack sends for a store. */
function sdkCounter(store: S3Store): Record<string, number> {
  const counts: Record<string, number> = {};
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const op = (context.commandName ?? '?').replace(/Command$/, '');
      counts[op] = (counts[op] ?? 0) + 1;
      return next(args);
    },
    { step: 'initialize', name: 'testSdkCounter', override: true },
  );
  return counts;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

const proxies: LoopbackProxy[] = [];
async function proxy(intercept: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<LoopbackProxy> {
  const p = await startLoopbackProxy(testEndpoint(), intercept);
  proxies.push(p);
  return p;
}
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
});

const KEY = "files/a b+c%d (é)!'*~.txt";

describe('the direct path against moto', () => {
  it('signs with the session token and the key as sent, path style on a custom endpoint, without the SDK stack', async () => {
    const seed = await testStore();
    await putObject(seed, KEY, 'hello');
    await putObject(seed, 'files/other.txt', 'x');
    const seen: { method: string; url: string; host: string; token: string | undefined; ok: boolean; signed: string[] }[] = [];
    const p = await proxy((req, res) => {
      const check = expectedSignature(req, CREDENTIALS.secretAccessKey);
      const ok = check.signature === check.sent;
      const token = req.headers['x-amz-security-token'] as string | undefined;
      seen.push({ method: req.method ?? '', url: req.url ?? '', host: req.headers.host ?? '', token, ok, signed: check.signedHeaders });
      if (ok && token === CREDENTIALS.sessionToken && check.signedHeaders.includes('x-amz-security-token')) return false;
      // What S3 answers a request whose signature it cannot reproduce.
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>no</Message></Error>');
      return true;
    });
    const store = storeVia(p, seed.bucket, { credentials: CREDENTIALS });
    const sdk = sdkCounter(store);
    try {
      const pages = [];
      for await (const page of store.listPages({ prefix: 'files/a b', startAfter: 'files/a', maxKeys: 5 })) pages.push(page);
      const head = await store.head(KEY);
      const opened = await store.open(KEY);

      expect(pages.flatMap((page) => page.objects.map((o) => o.key))).toEqual([KEY]);
      expect(head).toMatchObject({ size: 5 });
      expect(opened!.info).toMatchObject({ size: 5, etag: head!.etag });
      expect(await readAll(opened!.stream!)).toBe('hello');
      expect(seen.map((s) => [s.method, s.ok, s.token])).toEqual([
        ['GET', true, CREDENTIALS.sessionToken],
        ['HEAD', true, CREDENTIALS.sessionToken],
        ['GET', true, CREDENTIALS.sessionToken],
      ]);
      // Path style on the endpoint given: the bucket leads the path, the host is the endpoint's.
      for (const s of seen) {
        expect(s.host).toBe(new URL(p.endpoint).host);
        expect(s.url.startsWith(`/${seed.bucket}/`)).toBe(true);
      }
      expect(store.requests).toEqual({ ListObjectsV2: 1, HeadObject: 1, GetObject: 1 });
      expect(sdk).toEqual({});
    } finally {
      store.client.destroy();
    }
  });

  it('takes credentials from the client’s provider, refreshed when they expire', async () => {
    const seed = await testStore();
    await putObject(seed, 'k/one.txt', 'one');
    const keys: string[] = [];
    const p = await proxy((req) => {
      keys.push(/Credential=([^/]+)\//.exec(req.headers.authorization ?? '')?.[1] ?? '');
      return false;
    });
    let issued = 0;
    // Credentials that expire within the SDK's refresh window are fetched again for the next request.
    const credentials = async () => ({ ...CREDENTIALS, accessKeyId: `AKIDROTATED${++issued}`, expiration: new Date(Date.now() + 60_000) });
    const store = storeVia(p, seed.bucket, { credentials });
    try {
      await store.head('k/one.txt');
      await store.head('k/one.txt');

      // Each request signed with credentials the provider issued, the second with fresher ones than the first.
      expect(keys).toHaveLength(2);
      for (const key of keys) expect(key).toMatch(/^AKIDROTATED\d+$/);
      expect(keys[1]).not.toBe(keys[0]);
    } finally {
      store.client.destroy();
    }
  });

  it('retries injected 503 SlowDown, 500 and connection resets, as many attempts as the client allows', async () => {
    const seed = await testStore();
    await putObject(seed, 'k/one.txt', 'one');
    const faults: Record<string, string[]> = { GET: ['slowdown', 'reset'], HEAD: ['500', 'reset'], LIST: ['reset', 'slowdown'] };
    const p = await proxy((req, res) => {
      const kind = req.method === 'GET' && (req.url ?? '').includes('list-type=2') ? 'LIST' : (req.method ?? '');
      const fault = faults[kind]?.shift();
      if (fault === undefined) return false;
      if (fault === 'reset') req.socket.destroy();
      else {
        res.writeHead(fault === '500' ? 500 : 503, { 'content-type': 'application/xml' });
        res.end(`<Error><Code>${fault === '500' ? 'InternalError' : 'SlowDown'}</Code><Message>injected</Message></Error>`);
      }
      return true;
    });
    const store = storeVia(p, seed.bucket);
    try {
      const listed = (await store.listPages({ prefix: 'k/' }).next()).value;
      const head = await store.head('k/one.txt');
      const opened = await store.open('k/one.txt');

      expect(listed?.objects.map((o: { key: string }) => o.key)).toEqual(['k/one.txt']);
      expect(head?.size).toBe(3);
      expect(await readAll(opened!.stream!)).toBe('one');
      expect(store.requests).toEqual({ ListObjectsV2: 3, HeadObject: 3, GetObject: 3 });
    } finally {
      store.client.destroy();
    }
  });

  it('corrects a clock an hour off from the Date of a RequestTimeTooSkewed answer, and signs again', async () => {
    const seed = await testStore();
    await putObject(seed, 'k/one.txt', 'one');
    const ahead = 3_600_000;
    const dates: number[] = [];
    let skewed = 1;
    const p = await proxy((req, res) => {
      const amz = String(req.headers['x-amz-date']).replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z');
      dates.push(Date.parse(amz));
      if (skewed-- <= 0) return false;
      res.writeHead(403, { 'content-type': 'application/xml', date: new Date(Date.now() + ahead).toUTCString() });
      res.end('<Error><Code>RequestTimeTooSkewed</Code><Message>The difference is too large.</Message></Error>');
      return true;
    });
    const store = storeVia(p, seed.bucket);
    try {
      const head = await store.head('k/one.txt');

      expect(head?.size).toBe(3);
      expect(store.requests).toEqual({ HeadObject: 2 });
      // The second attempt was signed on S3's time, not this machine's.
      expect(dates[1] - dates[0]).toBeGreaterThan(ahead - 300_000);
    } finally {
      store.client.destroy();
    }
  });

  it('gives up with S3UnavailableError after the client’s attempts', async () => {
    const seed = await testStore();
    const p = await proxy((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end('<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>');
      return true;
    });
    const store = storeVia(p, seed.bucket, { maxAttempts: 2 });
    try {
      const error = await store.head('k').catch((e: unknown) => e);

      expect(error).toBeInstanceOf(S3UnavailableError);
      expect((error as Error).message).toContain(`HeadObject s3://${seed.bucket}/k`);
      expect(store.requests).toEqual({ HeadObject: 2 });
    } finally {
      store.client.destroy();
    }
  });
});

describe('a silent endpoint', () => {
  it.each([
    ['HeadObject', (s: S3Store) => s.head('k')],
    ['GetObject', (s: S3Store) => s.open('k')],
    ['ListBucket', (s: S3Store) => s.listPages({ prefix: 'p/' }).next()],
  ])('fails %s with S3UnavailableError naming the endpoint', async (operation, call) => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const store = new S3Store(createS3Client({ endpoint, forcePathStyle: true, region: 'us-east-1' }, { maxAttempts: 2 }, 300), 'silent');
    try {
      const failure = await call(store).catch((err: unknown) => err);

      expect(failure).toBeInstanceOf(S3UnavailableError);
      expect((failure as Error).message).toContain(`no answer from ${endpoint} within 300 ms`);
      expect((failure as Error).message).toContain(operation);
      expect(store.requestTotal()).toBe(2);
    } finally {
      store.client.destroy();
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});
