/** Ctrl-C or SIGTERM during `repair` releases the datastore lock before the command exits, so no client waits for it. */
import { request as httpRequest } from 'node:http';
import { ensureBuiltCli, startCli } from './helpers';
import { signal } from '../helpers/signal';
import { type LoopbackProxy, startLoopbackProxy } from '../helpers/proxy';
import { putObjects, readObject, testEndpoint, testStore } from '../helpers/s3';

beforeAll(ensureBuiltCli);

/** A loopback proxy that holds every index write until closed, and says when the first one arrives. */
async function stallingProxy(): Promise<LoopbackProxy & { indexWrite: Promise<void> }> {
  let seen!: () => void;
  const indexWrite = new Promise<void>((r) => (seen = r));
  const proxy = await startLoopbackProxy(testEndpoint(), (req) => {
    if (req.method !== 'PUT' || !(req.url ?? '').includes('.datastore-index.json')) return false;
    seen();
    return true; // never answered: the command is inside its read-merge-write, holding the lock
  });
  return { ...proxy, indexWrite };
}

it.each([
  ['SIGTERM', 143],
  ['SIGINT', 130],
] as const)('%s while the lock is held: the lock is released, then exit %i', async (signal, code) => {
  const store = await testStore();
  await putObjects(store, { 'swamp/logs/a.log': 'aaa' });
  const proxy = await stallingProxy();
  try {
    const config = JSON.stringify({ bucket: store.bucket, prefix: 'swamp', endpoint: proxy.endpoint, forcePathStyle: true });
    const { child, done } = startCli(['repair', '--config', config]);
    await proxy.indexWrite;
    expect(await readObject(store, 'swamp/.datastore.lock')).toBeDefined();
    child.kill(signal);
    const run = await done;
    expect(run.code).toBe(code);
    expect(run.stderr).toMatch(new RegExp(`interrupted \\(${signal}\\)`));
    expect(await readObject(store, 'swamp/.datastore.lock')).toBeUndefined();
  } finally {
    await proxy.close();
  }
});

/** A loopback proxy that holds the first lock take (a PUT of the lock) until `letThrough`, then sends it on. */
async function heldTakeProxy(): Promise<LoopbackProxy & { take: Promise<void>; letThrough: () => void }> {
  const seen = signal();
  const go = signal();
  const upstream = new URL(testEndpoint());
  let first = true;
  const proxy = await startLoopbackProxy(testEndpoint(), (req, res) => {
    if (!first || req.method !== 'PUT' || !(req.url ?? '').includes('.datastore.lock')) return false;
    first = false;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.fire();
      // Sent on once the command was interrupted: S3 applies a take whose answer comes late.
      void go.promise.then(() => {
        const forward = httpRequest(
          { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        forward.end(Buffer.concat(chunks));
      });
    });
    return true;
  });
  return { ...proxy, take: seen.promise, letThrough: go.fire };
}

it('SIGINT while the lock is being taken: the take that lands is released, then exit 130', async () => {
  const store = await testStore();
  await putObjects(store, { 'swamp/logs/a.log': 'aaa' });
  const proxy = await heldTakeProxy();
  try {
    const config = JSON.stringify({ bucket: store.bucket, prefix: 'swamp', endpoint: proxy.endpoint, forcePathStyle: true });
    const { child, done } = startCli(['repair', '--config', config]);
    await proxy.take;
    child.kill('SIGINT');
    // The command has begun to exit before S3 applies the take.
    let said = '';
    await new Promise<void>((resolve) => {
      child.stderr!.on('data', (c: Buffer) => {
        said += c.toString();
        if (said.includes('interrupted')) resolve();
      });
      child.stderr!.once('close', resolve);
    });
    proxy.letThrough();
    const run = await done;
    expect(run.code).toBe(130);
    expect(await readObject(store, 'swamp/.datastore.lock')).toBeUndefined();
  } finally {
    await proxy.close();
  }
});
