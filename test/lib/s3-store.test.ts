/** The S3 seam against moto: reads, writes, conditional results, paging and request counts. */
import type { ListPage } from '../../lambda/lib/s3-types';
import type { Lister } from '../../lambda/lib/list';
import { healRoot } from '../../lambda/lib/heal';
import { unquoteEtag } from '../../lambda/lib/s3-pages';
import { connectStore, listKeys, putObjects, readIndex, readObject, seedDatastore, summarize, testStore } from '../helpers/s3';

describe('S3Store', () => {
  it('writes, reads, heads and deletes, with ETags unquoted and requests counted', async () => {
    const store = await testStore();

    const written = await store.put('a/b.json', '{"x":1}');
    const object = await store.get('a/b.json');
    const info = await store.head('a/b.json');

    expect(written).toEqual({ status: 'written', etag: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(object).toMatchObject({ size: 7, etag: written.status === 'written' ? written.etag : '' });
    expect(object!.body.toString()).toBe('{"x":1}');
    expect(info).toMatchObject({ size: 7, etag: object!.etag });
    expect(await store.delete('a/b.json')).toBe('deleted');
    expect(await store.get('a/b.json')).toBeUndefined();
    expect(await store.head('a/b.json')).toBeUndefined();
    expect(store.requests).toEqual({ PutObject: 1, GetObject: 2, HeadObject: 2, DeleteObject: 1 });
    expect(store.requestTotal()).toBe(6);
  });

  it('answers conditional writes with written or conflict', async () => {
    const store = await testStore();
    const created = await store.put('k', 'v1', { ifNoneMatch: '*' });
    expect(created.status).toBe('written');
    expect(await store.put('k', 'v2', { ifNoneMatch: '*' })).toEqual({ status: 'conflict' });
    expect(await store.put('k', 'v2', { ifMatch: '0123456789abcdef0123456789abcdef' })).toEqual({ status: 'conflict' });
    const replaced = await store.put('k', 'v3', { ifMatch: created.status === 'written' ? created.etag : '' });
    expect(replaced.status).toBe('written');
    // replacing a version that was deleted meanwhile is a lost race too
    expect(await store.put('gone', 'v', { ifMatch: '0123456789abcdef0123456789abcdef' })).toEqual({ status: 'conflict' });
    expect(await readObject(store, 'gone')).toBeUndefined();
    expect((await readObject(store, 'k'))!.toString()).toBe('v3');
  });

  it('deletes only the version named by If-Match', async () => {
    const store = await testStore();
    const first = await store.put('k', 'one');
    await store.put('k', 'two');
    expect(await store.delete('k', first.status === 'written' ? first.etag : '')).toBe('conflict');
    expect((await readObject(store, 'k'))!.toString()).toBe('two');
    expect(await store.delete('missing', 'abc')).toBe('conflict');
  });

  it('pages through a listing, resuming with continuation tokens', async () => {
    const store = await testStore();
    const keys = Array.from({ length: 11 }, (_, i) => `p/k-${String(i).padStart(2, '0')} &<${i}>`);
    await putObjects(store, Object.fromEntries(keys.map((k) => [k, k])));
    await putObjects(store, { 'q/outside': 'x' });

    const pages: ListPage[] = [];
    for await (const page of store.listPages({ prefix: 'p/', maxKeys: 4 })) pages.push(page);

    expect(pages.map((p) => p.objects.length)).toEqual([4, 4, 3]);
    expect(pages.flatMap((p) => p.objects.map((o) => o.key))).toEqual(keys);
    expect(pages[0].objects[0]).toEqual({
      key: keys[0],
      size: Buffer.byteLength(keys[0]),
      lastModified: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      etag: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(store.requests.ListObjectsV2).toBe(3);
  });

  it('heals from a listing of many small pages exactly as from one', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'pg', objects: 9, internal: true, namespaces: ['ns1'] });
    const smallPages: Lister = (s, prefix) => s.listPages({ prefix, maxKeys: 2 });
    const healer = connectStore(store.bucket);
    const listed = (await listKeys(store, 'pg/')).length;

    await healRoot(healer, seeded.root, { mode: 'repair', lister: smallPages });

    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    expect(summarize(await readIndex(store, seeded.indexKey('ns1')))).toEqual(seeded.expectedEntries('ns1'));
    expect(healer.requests.ListObjectsV2).toBe(Math.ceil(listed / 2));
  });
});

describe('unquoteEtag', () => {
  it.each([
    ['"abc"', 'abc'],
    ['abc', 'abc'],
    ['W/"abc"', 'abc'],
    ['"abc-3"', 'abc-3'],
    [undefined, ''],
  ])('turns %j into %j', (etag, plain) => {
    expect(unquoteEtag(etag)).toBe(plain);
  });
});
