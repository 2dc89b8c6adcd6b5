/** Ctrl-C or SIGTERM during `repair` releases the datastore lock before the command exits, so no client waits for it. */
import { ensureBuiltCli, startCli } from './helpers';
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
