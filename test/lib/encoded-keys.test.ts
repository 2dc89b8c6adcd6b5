/**
 * Keys XML cannot carry as they are (a CR comes back as LF from any XML parser) are listed with
 * `encoding-type=url` and decoded: each is indexed as itself, on moto and on the bench's S3 model, by the
 * sequential and the parallel listing, and so are keys whose names look encoded.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { type Lister, sequentialLister } from '../../lambda/lib/list';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { healRoot } from '../../lambda/lib/heal';
import { parallelLister } from '../../lambda/lib/parallel-list';
import { type S3Model, startS3Model } from '../../support/s3-model/server';
import { readIndex, testSettings, uniqueBucketName } from '../helpers/s3';

/** Keys under the root; each must be indexed exactly as it is named. */
const KEYS = [
  'files/cr\rkey.txt',
  'files/cr\rdir/inner.txt',
  'files/tab\tkey.txt',
  'files/a+b.txt',
  'files/a b.txt',
  'files/a%2Bb.txt',
  'files/100%25 done.txt',
  'files/100% done.txt',
  'files/plus+dir/f.txt',
  'files/space dir/f.txt',
  'files/caf\u00e9/\u65e5\u672c.txt',
  'logs/my log file.log',
  'logs/q?x=1&y#z;\'"<>.log',
];

let model: S3Model;
beforeAll(async () => {
  model = await startS3Model({ latencyMs: 0 });
});
afterAll(() => model.stop());

const stores: S3Store[] = [];
afterAll(() => {
  for (const store of stores) store.client.destroy();
});

/** A store on a fresh bucket of moto (the test endpoint) or of the S3 model, holding every key of `KEYS` under `swamp/`. */
async function seeded(where: 'moto' | 'model'): Promise<S3Store> {
  const settings = where === 'moto' ? testSettings() : { ...testSettings(), endpoint: model.endpoint };
  const store = new S3Store(createS3Client(settings), uniqueBucketName(`enc-${where}`));
  stores.push(store);
  await store.client.send(new CreateBucketCommand({ Bucket: store.bucket }));
  for (const key of KEYS) await store.put(`swamp/${key}`, `body of ${key}`, undefined, 'text/plain');
  return store;
}

const listers: [string, () => Lister][] = [
  ['the sequential listing', () => sequentialLister],
  ['the parallel listing', () => parallelLister()],
  ['the parallel listing cut into pages of 2', () => parallelLister({ pageSize: 2, concurrency: 4 })],
];

describe.each(['moto', 'model'] as const)('on %s', (where) => {
  it.each(listers)('%s indexes every key as itself, and a check then finds nothing', async (_name, lister) => {
    const store = await seeded(where);
    const root = { bucket: store.bucket, prefix: 'swamp' };

    const repair = (await healRoot(store, root, { mode: 'repair', lister: lister() })).scopes[0];

    expect(repair.drift).toEqual({ missing: KEYS.length, stale: 0, resized: 0 });
    const index = (await readIndex(store, 'swamp/.datastore-index.json'))!;
    expect([...index.entries.keys()].sort()).toEqual([...KEYS].sort());
    for (const key of KEYS) expect(index.entries.get(key)!.size).toBe(Buffer.byteLength(`body of ${key}`));
    const check = (await healRoot(store, root, { mode: 'check', lister: lister() })).scopes[0];
    expect(check.drift).toEqual({ missing: 0, stale: 0, resized: 0 });
  });
});
