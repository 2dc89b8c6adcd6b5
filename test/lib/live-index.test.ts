/**
 * readLiveIndex reads the manifest and the monolith at once: one round trip for a monolith root, the
 * monolith's read aborted for a shard-first one, and the manifest's error reported whatever the other read did.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { CredentialsError, S3UnavailableError } from '../../lambda/lib/errors';
import { INDEX_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import { S3Store } from '../../lambda/lib/s3';
import { readLiveIndex } from '../../lambda/lib/layouts/read';
import { indexEntry, shardMeta } from '../helpers/factories';
import { signal } from '../helpers/signal';
import { faultyClient, putIndex, putObject, putShardLayout, testClient, connectStore, testStore } from '../helpers/s3';
import { sleep } from '../../support/sleep';

type Handler = { handle(request: unknown, options?: { abortSignal?: AbortSignal }): Promise<{ response: unknown }>; destroy?(): void };

/** What a watched client saw of one request: its path, when it started and ended, and whether it was aborted. */
interface Seen {
  readonly path: string;
  readonly started: number;
  ended?: number;
  aborted?: boolean;
}

/**
 * A client of the test endpoint that logs each request; requests whose path ends with `hold` are kept
 * waiting until aborted (or `release`d), so a test can tell a read that was dropped from one that was used.
 */
function watchedClient(hold?: string): { client: S3Client; seen: Seen[]; release: () => void } {
  const held = signal();
  const inner = testClient().config.requestHandler as unknown as Handler;
  const seen: Seen[] = [];
  let tick = 0;
  const handler: Handler = {
    async handle(request, options) {
      const entry: Seen = { path: (request as { path: string }).path, started: tick++ };
      seen.push(entry);
      const abort = options?.abortSignal;
      if (hold && entry.path.endsWith(hold)) {
        await new Promise<void>((resolve) => {
          held.promise.then(resolve);
          abort?.addEventListener('abort', () => resolve());
        });
      }
      try {
        if (abort?.aborted) throw Object.assign(new Error('Request aborted'), { name: 'AbortError' });
        return await inner.handle(request, options);
      } finally {
        entry.ended = tick++;
        entry.aborted = abort?.aborted ?? false;
      }
    },
    destroy: () => inner.destroy?.(),
  };
  return { client: testClient({ requestHandler: handler as unknown as S3ClientConfig['requestHandler'] }), seen, release: held.fire };
}

/** Fails the test if a promise rejection goes unhandled while `run` runs (and a little after). */
async function withoutUnhandledRejections<T>(run: () => Promise<T>): Promise<T> {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const result = await run().finally(() => sleep(50));
    expect(unhandled).toEqual([]);
    return result;
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}

describe('readLiveIndex', () => {
  it('reads the manifest and the monolith of a monolith root in one round trip', async () => {
    const store = await testStore();
    await putIndex(store, `m/${INDEX_KEY}`, [indexEntry('logs/a.log', { size: 3 })]);
    const { client, seen } = watchedClient();

    const live = await readLiveIndex(new S3Store(client, store.bucket), { root: { bucket: store.bucket, prefix: 'm' } });

    expect(live).toMatchObject({ state: 'valid', layout: 'monolith' });
    expect(live.state === 'valid' && [...live.index.entries.keys()]).toEqual(['logs/a.log']);
    expect(seen.map((s) => s.path.slice(s.path.indexOf('/m/') + 3)).sort()).toEqual([INDEX_KEY, SHARD_META_KEY]);
    // Both sent before either answered.
    expect(Math.max(...seen.map((s) => s.started))).toBeLessThan(Math.min(...seen.map((s) => s.ended!)));
  });

  it('aborts the monolith read of a shard-first root instead of downloading it', async () => {
    const store = await testStore();
    await putShardLayout(store, 's/', [indexEntry('logs/a.log', { size: 3 })], shardMeta(['logs'], 4));
    await putObject(store, `s/${INDEX_KEY}`, JSON.stringify({ version: 1, entries: {}, padding: 'x'.repeat(100_000) }));
    const { client, seen, release } = watchedClient(INDEX_KEY);
    const reader = new S3Store(client, store.bucket);

    const live = await withoutUnhandledRejections(() => readLiveIndex(reader, { root: { bucket: store.bucket, prefix: 's' } })).finally(
      release,
    );

    expect(live).toMatchObject({ state: 'valid', layout: 'shard-first', etag: expect.any(String) });
    expect(live.state === 'valid' && [...live.index.entries.keys()]).toEqual(['logs/a.log']);
    const monolith = seen.filter((s) => s.path.endsWith(INDEX_KEY));
    expect(monolith).toEqual([expect.objectContaining({ aborted: true })]);
    expect(reader.requests.GetObject).toBe(3);
  });

  it('reads partition files without a manifest as clients do: a monolith, the files only a mirror', async () => {
    const store = await testStore();
    await putShardLayout(store, 's/', [indexEntry('logs/a.log', { size: 3 })]);
    await putObject(store, `s/${INDEX_KEY}`, JSON.stringify({ version: 1, entries: {} }));

    const live = await readLiveIndex(
      connectStore(store.bucket),
      { root: { bucket: store.bucket, prefix: 's' } },
      { shardPartitions: ['logs'] },
    );

    expect(live).toMatchObject({ state: 'valid', layout: 'monolith', mirror: { files: new Set(['logs']) } });
    expect(live.state === 'valid' && live.index.entries.size).toBe(0);
  });

  it("reports the manifest's error, not the monolith's, when both reads fail", async () => {
    const bucket = (await testStore()).bucket;
    // The monolith's read fails with S3UnavailableError, the manifest's with CredentialsError.
    let metaAsked = 0;
    const store = new S3Store(
      faultyClient(
        (r) => {
          if (r.path.endsWith(INDEX_KEY)) return { status: 503, code: 'SlowDown' };
          if (r.path.endsWith(SHARD_META_KEY)) metaAsked++;
          return r.path.endsWith(SHARD_META_KEY) ? { status: 403, code: 'InvalidAccessKeyId' } : undefined;
        },
        { maxAttempts: 1 },
      ),
      bucket,
    );

    const error = await withoutUnhandledRejections(() => readLiveIndex(store, { root: { bucket, prefix: 'x' } }).catch((e: unknown) => e));

    expect(metaAsked).toBe(1);
    expect(error).toBeInstanceOf(CredentialsError);
  });

  it("reports the monolith's error when the manifest is absent", async () => {
    const bucket = (await testStore()).bucket;
    const store = new S3Store(
      faultyClient((r) => (r.path.endsWith(INDEX_KEY) ? { status: 503, code: 'SlowDown' } : undefined), { maxAttempts: 1 }),
      bucket,
    );

    const error = await withoutUnhandledRejections(() => readLiveIndex(store, { root: { bucket, prefix: 'x' } }).catch((e: unknown) => e));

    expect(error).toBeInstanceOf(S3UnavailableError);
    expect((error as Error).message).toMatch(/GetObject .*\.datastore-index\.json/);
  });
});
