/** Ctrl-C or SIGTERM during `repair` releases the datastore lock before the command exits, so no client waits for it. */
import { createServer, request as httpRequest } from 'node:http';
import { ensureBuiltCli, startCli } from './helpers';
import { putObjects, readObject, testEndpoint, testStore } from '../helpers/s3';

beforeAll(ensureBuiltCli);

/** A loopback proxy that holds every index write until released, and says when the first one arrives. */
async function stallingProxy(): Promise<{ endpoint: string; indexWrite: Promise<void>; close(): void }> {
  const upstream = new URL(testEndpoint());
  let seen!: () => void;
  const indexWrite = new Promise<void>((r) => (seen = r));
  const server = createServer((req, res) => {
    const forward = () => {
      const out = httpRequest(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(out);
    };
    if (req.method === 'PUT' && (req.url ?? '').includes('.datastore-index.json')) {
      seen();
      return; // never answered: the command is inside its read-merge-write, holding the lock
    }
    forward();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    indexWrite,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
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
    proxy.close();
  }
});
