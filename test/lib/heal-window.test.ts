/**
 * A heal by partitions holds a window of the listing, not the root: with the default lister, the pages
 * listed ahead of what the heal has taken stay within a few times `PARTITION_WINDOW`, even when
 * its commits are slower than the listing. On the bench's S3 model, which seeds a root this large at once.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { HealReport } from '../../lambda/lib/heal-types';
import { PARTITION_WINDOW, healRoot } from '../../lambda/lib/heal';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { manifestKeyOf } from '../../lambda/lib/names';
import { parallelLister } from '../../lambda/lib/parallel-list';
import { type S3Model, startS3Model } from '../../support/s3-model/server';
import { listKeys, putObjects, testSettings, uniqueBucketName } from '../helpers/s3';
import { sleep } from '../../support/sleep';

const OBJECTS = 300_000;
// Two heals of a root this large are CPU-bound: what is asserted is how far the listing ran ahead, never how long it took.
jest.setTimeout(300_000);
let model: S3Model;
beforeAll(async () => {
  model = await startS3Model({ latencyMs: 0 });
});
afterAll(() => model.stop());

/** Heals a fresh shard-first root of `OBJECTS` objects; `ahead` is the most listing pages sent and not yet taken by the heal. */
async function healAndWatch(options: { lister?: ReturnType<typeof parallelLister> }): Promise<{ report: HealReport; ahead: number }> {
  const store = new S3Store(createS3Client({ ...testSettings(), endpoint: model.endpoint }), uniqueBucketName('window'));
  try {
    await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
    model.seed(store.bucket, { count: OBJECTS, prefix: 'root', layout: 'swamp', seed: 7 });
    const root = { bucket: store.bucket, prefix: 'root' };
    await store.put(manifestKeyOf({ root }), JSON.stringify({ version: 2, partitions: [], commitSeq: 1 }));
    let sent = 0;
    let taken = 0;
    let ahead = 0;
    store.observe((op, input) => {
      if (op === 'ListObjectsV2' && input.Delimiter === undefined) sent++;
      return undefined;
    });
    const report = await healRoot(store, root, {
      mode: 'repair',
      chunkEntries: 2000,
      ...options,
      onListed: () => {
        taken++;
        ahead = Math.max(ahead, sent - taken);
      },
    });
    return { report, ahead };
  } finally {
    store.client.destroy();
  }
}

describe('a heal by partitions', () => {
  it('lists a window of pages ahead of its commits by default, where an unbounded lister lists the root', async () => {
    const windowed = await healAndWatch({});
    // The same heal with a lister that keeps no window: the listing runs far ahead of the commits.
    const unbounded = await healAndWatch({ lister: parallelLister() });

    for (const { report } of [windowed, unbounded]) {
      expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true });
      expect(report.scopes[0].entries).toBe(report.scopes[0].drift.missing);
    }
    expect(windowed.report.scopes[0].entries).toBeGreaterThan(OBJECTS * 0.99);
    // Sent and not taken: the window's pages, those in flight, pages read past a slice's end, and pages of
    // slices that listed while the slices before them were short.
    expect(windowed.ahead).toBeGreaterThanOrEqual(PARTITION_WINDOW);
    expect(windowed.ahead).toBeLessThan(4 * PARTITION_WINDOW);
    expect(unbounded.ahead).toBeGreaterThan(Math.max(4 * PARTITION_WINDOW, OBJECTS / 1000 / 2));
  });

  it('takes no more than about a chunk of objects into a large partition while a commit runs', async () => {
    // GIVEN a shard-first root of two small partitions, then one of many chunks, and partition files slow to write
    const chunkEntries = 500;
    const pageSize = 100;
    const slow = await startS3Model({ latencyMs: 10 });
    const store = new S3Store(createS3Client({ ...testSettings(), endpoint: slow.endpoint }), uniqueBucketName('beside'));
    try {
      await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
      const keys = [
        ...Array.from({ length: 150 }, (_, i) => `root/audit/${i}.json`),
        ...Array.from({ length: 150 }, (_, i) => `root/files/${i}.txt`),
        ...Array.from({ length: 8000 }, (_, i) => `root/logs/${String(i).padStart(5, '0')}.log`),
      ];
      await putObjects(store, Object.fromEntries(keys.map((key) => [key, 'x'])), 64);
      const root = { bucket: store.bucket, prefix: 'root' };
      await store.put(manifestKeyOf({ root }), JSON.stringify({ version: 2, partitions: [], commitSeq: 1 }));
      let taken = 0;
      let writingSince: number | undefined;
      let besideACommit = 0;
      const put = store.put.bind(store);
      // Fault injection: every partition file takes a while to write, so the listing could run far ahead of a
      // commit; what the heal took from the first file's write to the manifest's is counted.
      (store as { put: S3Store['put'] }).put = async (key, ...rest) => {
        if (!key.startsWith('root/_index/')) return put(key, ...rest);
        if (key.endsWith('_meta.json')) {
          const written = await put(key, ...rest);
          besideACommit = Math.max(besideACommit, taken - (writingSince ?? taken));
          writingSince = undefined;
          return written;
        }
        writingSince ??= taken;
        await sleep(200);
        return put(key, ...rest);
      };

      // WHEN it is healed in commits of a few hundred changes, listed as the default lister does but in short pages
      const report = await healRoot(store, root, {
        mode: 'repair',
        chunkEntries,
        lister: parallelLister({ window: PARTITION_WINDOW, etags: false, pageSize }),
        onListed: (seen) => {
          taken = seen;
        },
      });

      // THEN every object is indexed, and while a commit wrote its files the heal took no more than a chunk
      // of objects into its open partition and a chunk of changes, each give or take the page that crossed it
      expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true, entries: keys.length });
      expect(await listKeys(store, 'root/_index/')).toContain('root/_index/logs.json');
      expect(besideACommit).toBeLessThanOrEqual(2 * chunkEntries + 2 * pageSize);
    } finally {
      store.client.destroy();
      await slow.stop();
    }
  });
});
