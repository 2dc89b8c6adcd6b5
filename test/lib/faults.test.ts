/**
 * Faults injected at the HTTP layer of the library's own client (`createS3Client`), everything else real
 * (moto behind it): retries, typed errors, and stores without conditional writes.
 */
import { createServer } from 'node:net';
import {
  AccessDeniedError,
  BucketNotFoundError,
  ConfigError,
  CredentialsError,
  S3UnavailableError,
  UnexpectedError,
} from '../../lambda/lib/errors';
import type { PublishEvent } from '../../lambda/lib/publish-types';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { healRoot } from '../../lambda/lib/heal';
import {
  type CannedResponse,
  type OutgoingRequest,
  connectStore,
  faultyClient,
  listObjects,
  putObject,
  readIndex,
  readObject,
  seedDatastore,
  summarize,
  testStore,
  testClient,
  uniqueBucketName,
} from '../helpers/s3';

/** A loopback port nothing listens on: bound, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A fault that answers the first `times` requests matching `when`, then lets everything through. */
function firstN(times: number, when: (r: OutgoingRequest) => boolean, response: CannedResponse) {
  let left = times;
  return (r: OutgoingRequest): CannedResponse | undefined => (when(r) && left-- > 0 ? response : undefined);
}

describe('retries (createS3Client)', () => {
  it('retries a throttled request (503 SlowDown) and succeeds', async () => {
    const bucket = (await testStore()).bucket;
    const store = new S3Store(
      faultyClient(firstN(1, (r) => r.method === 'PUT', { status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' })),
      bucket,
    );

    const result = await store.put('logs/a.log', 'hello');

    expect(result.status).toBe('written');
    expect(store.requests.PutObject).toBe(2);
    expect((await readObject(connectStore(bucket), 'logs/a.log'))!.toString()).toBe('hello');
  });

  it('retries 5xx up to six attempts in all', async () => {
    const bucket = (await testStore()).bucket;
    await putObject(connectStore(bucket), 'k', 'value');
    const store = new S3Store(faultyClient(firstN(5, (r) => r.method === 'GET', { status: 500, code: 'InternalError' })), bucket);

    const object = await store.get('k');

    expect(object!.body.toString()).toBe('value');
    expect(store.requests.GetObject).toBe(6);
  });

  it('gives up with S3UnavailableError when the store keeps throttling', async () => {
    const bucket = (await testStore()).bucket;
    const store = new S3Store(
      faultyClient(() => ({ status: 503, code: 'SlowDown' }), { maxAttempts: 2 }),
      bucket,
    );

    const error = await store.get('k').catch((e: unknown) => e);

    expect(error).toBeInstanceOf(S3UnavailableError);
    expect((error as Error).message).toMatch(/GetObject .*\/k/);
    expect(store.requests.GetObject).toBe(2);
  });
});

describe('typed errors', () => {
  const denied = () => ({ status: 403, code: 'AccessDenied', message: 'Access Denied' });

  it.each([
    ['ListBucket', (s: S3Store) => s.listPages({ prefix: 'p/' }).next()],
    ['GetObject', (s: S3Store) => s.get('p/k')],
    ['HeadObject', (s: S3Store) => s.head('p/k')],
    ['PutObject', (s: S3Store) => s.put('p/k', 'x')],
    ['DeleteObject', (s: S3Store) => s.delete('p/k')],
  ])('turns a 403 AccessDenied on %s into AccessDeniedError, without retrying', async (operation, call) => {
    const store = new S3Store(faultyClient(denied), (await testStore()).bucket);

    const error = await call(store).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(AccessDeniedError);
    expect((error as Error).message).toContain(`Access denied: ${operation}`);
    // A denied read is settled by a one-key listing (denied too here); nothing is retried.
    expect(store.requestTotal()).toBe(operation === 'GetObject' || operation === 'HeadObject' ? 2 : 1);
  });

  it('reads a 403 on a missing key as absent when a one-key listing shows no such key (ListBucket granted on prefixes only)', async () => {
    const real = await testStore();
    await putObject(real, 'p/present', 'here');
    // Keys that do not exist, as S3 answers them under a prefix-conditioned ListBucket grant.
    const missing = ['/p/.datastore-index.json', '/p/_index/_meta.json', '/p/gone'];
    let indexWritten = false;
    const missingDenied = (r: OutgoingRequest) => {
      if (r.method === 'PUT' && r.path.endsWith('/p/.datastore-index.json')) indexWritten = true;
      const absent = missing.some((m) => r.path.endsWith(m)) && !(indexWritten && r.path.endsWith('/p/.datastore-index.json'));
      return (r.method === 'GET' || r.method === 'HEAD') && r.query['list-type'] === undefined && absent ? denied() : undefined;
    };
    const store = new S3Store(faultyClient(missingDenied), real.bucket);

    expect(await store.get('p/.datastore-index.json')).toBeUndefined();
    expect(await store.head('p/gone')).toBeUndefined();
    expect((await store.get('p/present'))!.body.toString()).toBe('here');
    const healed = await healRoot(store, { bucket: real.bucket, prefix: 'p' }, { mode: 'repair' });
    expect(healed.scopes[0]).toMatchObject({ indexState: 'absent', published: true, entries: 1 });
  });

  it('still fails with AccessDeniedError when the denied key is listed (it exists, we may not read it)', async () => {
    const real = await testStore();
    await putObject(real, 'p/secret', 'x');
    const store = new S3Store(
      faultyClient((r) => (r.method === 'GET' && r.query['list-type'] === undefined ? denied() : undefined)),
      real.bucket,
    );

    await expect(store.get('p/secret')).rejects.toBeInstanceOf(AccessDeniedError);
  });

  it('fails a heal with AccessDeniedError when the index may not be written, leaving the bucket as it was', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'ro', objects: 3 });
    const readOnly = new S3Store(
      faultyClient((r) => (r.method === 'PUT' || r.method === 'DELETE' ? denied() : undefined)),
      store.bucket,
    );
    const before = await listObjects(store);

    await expect(healRoot(readOnly, seeded.root, { mode: 'repair' })).rejects.toBeInstanceOf(AccessDeniedError);

    expect(await listObjects(store)).toEqual(before);
  });

  it("names the bucket's region from x-amz-bucket-region when S3 redirects (a wrong region), as a ConfigError", async () => {
    const redirect = {
      status: 301,
      code: 'PermanentRedirect',
      message: 'The bucket you are attempting to access must be addressed using the specified endpoint.',
      headers: { 'x-amz-bucket-region': 'eu-west-2' },
    };
    const store = new S3Store(
      faultyClient(() => redirect),
      'elsewhere',
    );

    const error = await store
      .listPages({ prefix: 'p/' })
      .next()
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).name).toBe('ConfigError');
    expect((error as Error).message).toContain('Bucket "elsewhere" is in region eu-west-2');
    expect((error as ConfigError).hint).toBe('Pass --region eu-west-2 (or set "region" in the datastore config)');
  });

  it('reports an error without an HTTP status (a TypeError) as UnexpectedError with its name and message, not as an S3 outage', async () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    const handler = { handle: async () => Promise.reject(bug), destroy: () => undefined };
    const store = new S3Store(testClient({ requestHandler: handler as never }), 'b');

    const error = await store.get('k').catch((e: unknown) => e);

    expect(error).toBeInstanceOf(UnexpectedError);
    expect(error).not.toBeInstanceOf(S3UnavailableError);
    expect((error as UnexpectedError).original).toEqual({ name: 'TypeError', message: bug.message });
    expect((error as Error).message).toContain(`Unexpected TypeError during GetObject on s3://b/k: ${bug.message}`);
    expect((error as Error).cause).toBe(bug);
    expect((error as Error).message).not.toMatch(/retry later/i);
  });

  it('reports a closed endpoint port as S3UnavailableError naming ECONNREFUSED', async () => {
    const client = createS3Client(
      { endpoint: `http://127.0.0.1:${await closedPort()}`, forcePathStyle: true, region: 'us-east-1' },
      { maxAttempts: 1 },
    );
    const store = new S3Store(client, 'b');
    try {
      const error = await store.get('k').catch((e: unknown) => e);

      expect(error).toBeInstanceOf(S3UnavailableError);
      expect((error as Error).message).toContain('Could not reach S3 for GetObject on s3://b/k (ECONNREFUSED)');
    } finally {
      client.destroy();
    }
  });

  it('turns InvalidAccessKeyId into CredentialsError', async () => {
    const store = new S3Store(
      faultyClient(() => ({ status: 403, code: 'InvalidAccessKeyId' })),
      (await testStore()).bucket,
    );
    await expect(store.get('k')).rejects.toBeInstanceOf(CredentialsError);
  });

  it.each([
    ['a listing', (s: S3Store) => s.listPages({ prefix: '' }).next()],
    ['a read', (s: S3Store) => s.get('k')],
    ['a write', (s: S3Store) => s.put('k', 'x')],
    ['a conditional write', (s: S3Store) => s.put('k', 'x', { ifNoneMatch: '*' })],
    ['a heal', (s: S3Store) => healRoot(s, { bucket: s.bucket, prefix: 'p' }, { mode: 'check' })],
  ])('turns NoSuchBucket on %s into BucketNotFoundError naming the bucket', async (_what, call) => {
    const bucket = uniqueBucketName('missing');
    const error = await call(connectStore(bucket)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BucketNotFoundError);
    expect((error as Error).message).toContain(`"${bucket}"`);
  });
});

describe('a store without conditional writes (501 NotImplemented)', () => {
  it('publishes under the lock alone, says so, and keeps every object intact', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'nocond', objects: 8, internal: true, namespaces: ['ns1'] });
    const data = await listObjects(store);
    const conditional = (r: OutgoingRequest) => 'if-match' in r.headers || 'if-none-match' in r.headers;
    let refused = 0;
    const plain = new S3Store(
      faultyClient((r) =>
        conditional(r) && (r.method === 'PUT' || r.method === 'DELETE') && ++refused
          ? { status: 501, code: 'NotImplemented', message: 'A header you provided implies functionality that is not implemented' }
          : undefined,
      ),
      store.bucket,
    );
    const events: PublishEvent['event'][] = [];

    const report = await healRoot(plain, seeded.root, { mode: 'repair', onEvent: (_scope, e) => events.push(e.event) });

    expect(refused).toBeGreaterThan(0);
    expect(events).toContain('conditional-writes-unsupported');
    for (const scope of report.scopes) expect(scope).toMatchObject({ published: true, conditional: false });
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(summarize(await readIndex(store, seeded.indexKey('ns1')))).toEqual(seeded.expectedEntries('ns1'));
    // every object that was there is there unchanged; only the two indexes were added; the lock is gone
    const after = await listObjects(store);
    expect(after.filter((o) => !o.key.endsWith('.datastore-index.json'))).toEqual(data);
    expect(after.map((o) => o.key).filter((k) => k.endsWith('.datastore-index.json'))).toEqual([
      'nocond/.datastore-index.json',
      'nocond/ns1/.datastore-index.json',
    ]);
    expect(await readObject(store, 'nocond/.datastore.lock')).toBeUndefined();
  });
});

describe('an endpoint that accepts and never answers', () => {
  it('fails with S3UnavailableError naming the endpoint instead of hanging', async () => {
    const { createServer } = await import('node:net');
    const sockets: import('node:net').Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const endpoint = `http://127.0.0.1:${port}`;
    const { createS3Client } = await import('../../lambda/lib');
    const client = createS3Client({ endpoint, forcePathStyle: true, region: 'us-east-1' }, { maxAttempts: 2 }, 300);
    try {
      const failure = await new S3Store(client, 'silent-bucket').get('k').catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(S3UnavailableError);
      expect((failure as Error).message).toContain(endpoint);
      expect((failure as Error).message).toContain('GetObject');
    } finally {
      client.destroy();
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});
