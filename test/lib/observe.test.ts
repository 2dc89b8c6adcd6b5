/**
 * observeKeys against moto: a folder holding many of the keys is listed over their range, other keys are
 * HEADed, and either way a key removed or rewritten since its event reads as S3 says it is now.
 */
import { MIN_KEYS_PER_LISTING, observeKeys } from '../../lambda/lib/observe';
import type { ObjectChange } from '../../lambda/lib/events';
import { S3Store } from '../../lambda/lib/s3';
import { connectStore, deleteObject, putObject, putObjects, testClient, testStore } from '../helpers/s3';

const scope = (bucket: string) => ({ root: { bucket, prefix: 'r' } });
const pad = (i: number): string => String(i).padStart(2, '0');

/** A store whose listings ask for `pageSize` keys a page, so a test can have pages without seeding thousands of objects. */
function pagedStore(bucket: string, pageSize: number): S3Store {
  class Paged extends S3Store {
    override listPages(options: Parameters<S3Store['listPages']>[0]): ReturnType<S3Store['listPages']> {
      return super.listPages({ ...options, maxKeys: pageSize });
    }
  }
  return new Paged(testClient(), bucket);
}

/** The requests a store sent, by operation, leaving out the zeros. */
const sent = (store: S3Store): Record<string, number> => Object.fromEntries(Object.entries(store.requests).filter(([, n]) => n > 0));

/** `{kind, size, etag}` per relative key, sorted: what a re-check acts on. */
function facts(observed: Map<string, ObjectChange>): Record<string, string> {
  return Object.fromEntries(
    [...observed].sort(([a], [b]) => (a < b ? -1 : 1)).map(([rel, c]) => [rel, c.kind === 'created' ? `${c.size} ${c.etag}` : 'removed']),
  );
}

describe('observeKeys', () => {
  it('confirms a burst in one folder with one listing, and a lone key with one HEAD', async () => {
    const seed = await testStore();
    const burst = Array.from({ length: 20 }, (_, i) => `files/burst/${pad(i)}.bin`);
    await putObjects(seed, Object.fromEntries([...burst, 'files/lone.txt', 'logs/x.log'].map((rel, i) => [`r/${rel}`, 'x'.repeat(i + 1)])));
    // The burst's event said 1 byte for 00: rewritten since; 05 was removed since.
    const etag = await putObject(seed, 'r/files/burst/00.bin', 'rewritten');
    await deleteObject(seed, 'r/files/burst/05.bin');

    const listed = connectStore(seed.bucket);
    const fromListing = await observeKeys(listed, scope(seed.bucket), [...burst, 'files/burst/gone.bin']);
    expect(sent(listed)).toEqual({ ListObjectsV2: 1 });
    const headed = connectStore(seed.bucket);
    const fromHeads = new Map<string, ObjectChange>();
    for (const rel of [...burst, 'files/burst/gone.bin'])
      for (const [k, c] of await observeKeys(headed, scope(seed.bucket), [rel])) fromHeads.set(k, c);
    expect(sent(headed)).toEqual({ HeadObject: 21 });
    // The listing says what HEADs say: sizes, ETags, times; a key it does not show is gone.
    expect(facts(fromListing)).toEqual(facts(fromHeads));
    expect(facts(fromListing)['files/burst/00.bin']).toBe(`9 ${etag}`);
    expect(facts(fromListing)['files/burst/05.bin']).toBe('removed');
    expect(facts(fromListing)['files/burst/gone.bin']).toBe('removed');
    for (const [rel, c] of fromListing) if (c.kind === 'created') expect(c.eventTime).toBe(fromHeads.get(rel)!.eventTime);

    const lone = connectStore(seed.bucket);
    expect(facts(await observeKeys(lone, scope(seed.bucket), ['files/lone.txt', 'logs/x.log']))).toEqual({
      'files/lone.txt': expect.stringMatching(/^21 /),
      'logs/x.log': expect.stringMatching(/^22 /),
    });
    expect(sent(lone)).toEqual({ HeadObject: 2 });
  });

  it('lists a folder only from the threshold on', async () => {
    const seed = await testStore();
    const keys = Array.from({ length: MIN_KEYS_PER_LISTING }, (_, i) => `files/t/${pad(i)}`);
    await putObjects(seed, Object.fromEntries(keys.map((rel) => [`r/${rel}`, 'x'])));
    const below = connectStore(seed.bucket);
    await observeKeys(below, scope(seed.bucket), keys.slice(1));
    expect(sent(below)).toEqual({ HeadObject: MIN_KEYS_PER_LISTING - 1 });
    const at = connectStore(seed.bucket);
    await observeKeys(at, scope(seed.bucket), keys);
    expect(sent(at)).toEqual({ ListObjectsV2: 1 });
  });

  it('lists only the range of the keys, and HEADs the rest of a folder where they lie far apart', async () => {
    const seed = await testStore();
    const folder = Array.from({ length: 100 }, (_, i) => `files/big/k${pad(i)}`);
    await putObjects(seed, Object.fromEntries([...folder.map((rel) => [`r/${rel}`, 'x']), ['r/files/big/sub/deep', 'y']]));
    // Twenty keys in the middle of a folder of a hundred, pages of 20: one page, from the first key to the last.
    const ranged = pagedStore(seed.bucket, 20);
    const middle = folder.slice(40, 60);
    const observed = await observeKeys(ranged, scope(seed.bucket), middle);
    expect(sent(ranged)).toEqual({ ListObjectsV2: 1 });
    expect(Object.values(facts(observed)).filter((f) => f === 'removed')).toHaveLength(0);
    // Fifteen keys spread over the whole folder (and one absent): the first page answers 3 of them, so the others are HEADed.
    const spread = pagedStore(seed.bucket, 20);
    const sparse = folder.filter((_, i) => i % 7 === 0);
    const answers = await observeKeys(spread, scope(seed.bucket), [...sparse, 'files/big/k99x']);
    expect(sent(spread)).toEqual({ ListObjectsV2: 1, HeadObject: sparse.length + 1 - 3 });
    expect(facts(answers)['files/big/k98']).toBe(`1 ${facts(observed)['files/big/k40'].split(' ')[1]}`);
    expect(facts(answers)['files/big/k99x']).toBe('removed');
  });

  it('reads keys with spaces, unicode, + and % from a url-encoded listing as HEADs read them', async () => {
    const seed = await testStore();
    const names = ['a b.txt', 'c+d.txt', 'x%41.txt', '100%.txt', 'é.txt', 'ü ü+.txt', '日本.txt', '😀.txt', '\uE000.txt', 'tab\there.txt'];
    const folder = 'files/we ird+%é/';
    const rels = names.map((n) => folder + n);
    await putObjects(seed, Object.fromEntries(rels.map((rel, i) => [`r/${rel}`, 'z'.repeat(i + 1)])));
    // Absent keys that a wrong decoding would confuse with present ones.
    const absent = ['a+b.txt', 'c d.txt', 'xA.txt', 'gone 😀.txt'].map((n) => folder + n);
    const listed = connectStore(seed.bucket);
    const fromListing = await observeKeys(listed, scope(seed.bucket), [...rels, ...absent]);
    expect(sent(listed)).toEqual({ ListObjectsV2: 1 });
    const headed = connectStore(seed.bucket);
    const fromHeads = new Map<string, ObjectChange>();
    for (const rel of [...rels, ...absent]) for (const [k, c] of await observeKeys(headed, scope(seed.bucket), [rel])) fromHeads.set(k, c);
    expect(facts(fromListing)).toEqual(facts(fromHeads));
    expect(
      Object.entries(facts(fromListing))
        .filter(([, f]) => f === 'removed')
        .map(([k]) => k),
    ).toEqual(absent.sort());
  });
});
