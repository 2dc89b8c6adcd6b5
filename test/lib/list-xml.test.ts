/**
 * The fast ListObjectsV2 reader: it must read what the SDK reads, and step aside (answer undefined,
 * so the SDK parses the page) for anything it does not handle.
 */
import type { ListPage } from '../../lambda/lib/s3-types';
import { NotAListingError } from '../../lambda/lib/errors';
import { S3Store } from '../../lambda/lib/s3';
import { isoTime, parseListObjectsV2 } from '../../lambda/lib/list-xml';
import { faultyClient } from '../helpers/s3';

const page = (inner: string, truncated = false, token?: string): string =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>` +
  `<KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>${truncated}</IsTruncated>${inner}` +
  (token ? `<NextContinuationToken>${token}</NextContinuationToken>` : '') +
  '</ListBucketResult>';

const contents = (key: string, extra = ''): string =>
  `<Contents><Key>${key}</Key><LastModified>2026-05-04T15:20:00.000Z</LastModified><ETag>&quot;9f86d0&quot;</ETag>` +
  `<ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5321</Size>${extra}<StorageClass>STANDARD</StorageClass></Contents>`;

describe('parseListObjectsV2', () => {
  it('reads keys, sizes, times, ETags without quotes, common prefixes and the continuation token', () => {
    const parsed = parseListObjectsV2(
      page(
        `${contents('p/a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#x1F600; &#233;')}<CommonPrefixes><Prefix>p/f/</Prefix></CommonPrefixes>`,
        true,
        'tok&amp;en',
      ),
    );
    expect(parsed).toEqual({
      objects: [{ key: 'p/a & b <c> "d" \'e\' \u{1F600} \u00e9', size: 5321, lastModified: '2026-05-04T15:20:00.000Z', etag: '9f86d0' }],
      prefixes: ['p/f/'],
      isTruncated: true,
      nextContinuationToken: 'tok&en',
    });
  });

  it('reads UTF-8 keys, owners, times without milliseconds and multipart ETags', () => {
    const xml = page(
      contents('p/\u00e9t\u00e9/\u{1F600}', '<Owner><ID>x</ID><DisplayName>y</DisplayName></Owner>')
        .replace('15:20:00.000Z', '15:20:00Z')
        .replace('9f86d0', 'abc-3'),
    );
    const parsed = parseListObjectsV2(Buffer.from(xml, 'utf8'))!;
    expect(parsed.objects[0]).toEqual({
      key: 'p/\u00e9t\u00e9/\u{1F600}',
      size: 5321,
      lastModified: '2026-05-04T15:20:00.000Z',
      etag: 'abc-3',
    });
  });

  it('turns CR LF into LF in keys, as an XML parser does, and keeps an escaped CR', () => {
    expect(parseListObjectsV2(page(contents('p/a\r\nb&#13;c')))!.objects[0].key).toBe('p/a\nb\rc');
  });

  it('gives each time in toISOString form, one string per instant', () => {
    const parsed = parseListObjectsV2(page(contents('p/a') + contents('p/b') + contents('p/c').replace('15:20:00.000Z', '15:21:07.250Z')))!;
    const [a, b, c] = parsed.objects.map((o) => o.lastModified);
    expect([a, b, c]).toEqual(['2026-05-04T15:20:00.000Z', '2026-05-04T15:20:00.000Z', '2026-05-04T15:21:07.250Z']);
    expect(a).toBe(b);
    expect(isoTime(new Date(a))).toBe(a);
    for (const text of [
      '2024-02-29T23:59:59.999Z',
      '2026-05-04T15:20:00Z',
      '1999-12-31T23:59:59.000Z',
      '2026-05-04T17:20:00.5+02:00',
      '0099-01-01T00:00:00.000Z',
    ]) {
      const [object] = parseListObjectsV2(page(contents('p/x').replace('2026-05-04T15:20:00.000Z', text)))!.objects;
      expect(object.lastModified).toBe(new Date(text).toISOString());
    }
    expect(isoTime(new Date(Date.UTC(2031, 0, 2, 3, 4, 5, 6)))).toBe('2031-01-02T03:04:05.006Z');
  });

  it('reads objects of other shapes field by field: spaces between children, an empty child, a field twice (the first counts), raw quotes', () => {
    const xml = page(
      contents('p/a').replace(/></g, '>\n  <') +
        contents('p/b', '<Owner/>') +
        contents('p/c').replace('</Key>', '</Key><Key>p/other</Key>') +
        contents('p/d').replace('&quot;9f86d0&quot;', '"9f86d0"') +
        contents('p/e').replace('<ETag>&quot;9f86d0&quot;</ETag>', ''),
    );
    const objects = parseListObjectsV2(xml)!.objects;
    expect(objects.map((o) => [o.key, o.size, o.lastModified, o.etag])).toEqual([
      ['p/a', 5321, '2026-05-04T15:20:00.000Z', '9f86d0'],
      ['p/b', 5321, '2026-05-04T15:20:00.000Z', '9f86d0'],
      ['p/c', 5321, '2026-05-04T15:20:00.000Z', '9f86d0'],
      ['p/d', 5321, '2026-05-04T15:20:00.000Z', '9f86d0'],
      ['p/e', 5321, '2026-05-04T15:20:00.000Z', ''],
    ]);
  });

  it('leaves ETags empty when not asked for, and reads every other field alike, in either shape', () => {
    const xml = page(contents('p/a') + contents('p/b').replace(/></g, '>\n  <') + contents('p/c', '<Owner/>'));
    const withEtags = parseListObjectsV2(xml)!;
    const without = parseListObjectsV2(xml, false)!;
    expect(without.objects).toEqual(withEtags.objects.map((o) => ({ ...o, etag: '' })));
    expect(withEtags.objects.every((o) => o.etag === '9f86d0')).toBe(true);
    expect({ ...without, objects: [] }).toEqual({ ...withEtags, objects: [] });
  });

  it('reads an empty listing', () => {
    expect(parseListObjectsV2(page(''))).toEqual({ objects: [], prefixes: [], isTruncated: false, nextContinuationToken: undefined });
  });

  it.each([
    ['an error document', '<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>'],
    ['CDATA', page(contents('<![CDATA[p/x]]>'))],
    ['a comment', page(`<!-- hi -->${contents('p/x')}`)],
    ['an unknown entity', page(contents('p/&nbsp;'))],
    ['a bare ampersand', page(contents('p/a & b'))],
    ['a character reference past U+10FFFF', page(contents('p/&#1114112;'))],
    ['a hexadecimal one past U+10FFFF', page(contents('p/&#x110000;'))],
    ['a reference to a surrogate', page(contents('p/&#xD800;'))],
    ['a reference to NUL', page(contents('p/&#0;'))],
    ['an encoding other than url', page(`<EncodingType>base64</EncodingType>${contents('p/a%20b')}`)],
    ['a URL-encoded key that does not decode', page(`<EncodingType>url</EncodingType>${contents('p/a%E9b')}`)],
    ['a truncated page without a token', page(contents('p/x'), true)],
    ['an object without a size', page(contents('p/x').replace('<Size>5321</Size>', ''))],
    ['a time it cannot read', page(contents('p/x').replace('2026-05-04T15:20:00.000Z', 'yesterday'))],
  ])('steps aside for %s', (_, xml) => {
    expect(parseListObjectsV2(xml)).toBeUndefined();
  });

  it('reads keys holding a !, and still steps aside for a comment or CDATA after one', () => {
    expect(parseListObjectsV2(page(contents('p/wow!')))!.objects[0].key).toBe('p/wow!');
    expect(parseListObjectsV2(page(`${contents('p/wow!')}<!-- hi -->`))).toBeUndefined();
    expect(parseListObjectsV2(page(`${contents('p/wow!')}${contents('<![CDATA[p/x]]>')}`))).toBeUndefined();
  });
});

describe('URL-encoded listings (encoding-type=url)', () => {
  // S3 writes a space as +, moto as %20; a + in a key is %2B in both.
  const encoded = `${contents('p/cr%0Dkey.txt')}${contents('p/a%2Bb+c%20d')}${contents('p/100%2525')}${contents('p/caf%C3%A9')}`;
  const keys = ['p/cr\rkey.txt', 'p/a+b c d', 'p/100%25', 'p/caf\u00e9'];
  const prefixes = '<CommonPrefixes><Prefix>p/sp+ace%0D/</Prefix></CommonPrefixes>';

  it.each([
    ['before the objects (as S3 writes it)', page(`<EncodingType>url</EncodingType>${encoded}${prefixes}`)],
    ['after them (as moto writes it)', page(`${encoded}${prefixes}<EncodingType>url</EncodingType>`)],
  ])('decodes keys and common prefixes, the element %s', (_, xml) => {
    const parsed = parseListObjectsV2(xml)!;
    expect(parsed.objects.map((o) => o.key)).toEqual(keys);
    expect(parsed.prefixes).toEqual(['p/sp ace\r/']);
  });

  it('steps aside for the element written among the objects, where it is not looked for before the first key', () => {
    expect(parseListObjectsV2(page(`${contents('p/a%2Bb')}<EncodingType>url</EncodingType>${contents('p/c')}`))).toBeUndefined();
  });

  it('leaves the keys of an answer that does not say it is encoded as they are', () => {
    expect(parseListObjectsV2(page(contents('p/a%2Bb+c')))!.objects[0].key).toBe('p/a%2Bb+c');
  });

  it('asks for encoding-type=url, and the SDK path decodes what the fast reader steps aside for', async () => {
    const queries: Record<string, unknown>[] = [];
    const xml = page(`<EncodingType>url</EncodingType>${contents('<![CDATA[p/cr%0Dkey]]>')}${prefixes}`);
    const store = new S3Store(
      faultyClient((req) => {
        queries.push(req.query);
        return { status: 200, body: xml };
      }),
      'bucket',
    );
    const pages: ListPage[] = [];
    for await (const p of store.listPages({ prefix: 'p/' })) pages.push(p);
    expect(queries[0]).toMatchObject({ 'encoding-type': 'url' });
    expect(pages[0].objects.map((o) => o.key)).toEqual(['p/cr\rkey']);
    expect(pages[0].prefixes).toEqual(['p/sp ace\r/']);
  });

  it('refuses, with a typed error, an encoded key that does not decode', async () => {
    const xml = page(`<EncodingType>url</EncodingType>${contents('<![CDATA[p/a%E9b]]>')}`);
    const store = new S3Store(
      faultyClient(() => ({ status: 200, body: xml })),
      'bucket',
    );
    const list = async (): Promise<void> => {
      for await (const _ of store.listPages({ prefix: 'p/' })) return;
    };
    await expect(list()).rejects.toThrow(NotAListingError);
    await expect(list()).rejects.toThrow(/"p\/a%E9b", which is not valid URL encoding.*check --endpoint/);
  });
});

describe('S3Store.listPages with the fast reader', () => {
  it('lets the SDK read a page the fast reader steps aside for, with the same result', async () => {
    // GIVEN an endpoint answering with a listing written with CDATA (valid XML the fast reader does not handle)
    const xml = page(`${contents('<![CDATA[p/cdata & key]]>')}<CommonPrefixes><Prefix>p/f/</Prefix></CommonPrefixes>`);
    const store = new S3Store(
      faultyClient(() => ({ status: 200, body: xml })),
      'bucket',
    );

    // WHEN it is listed
    const pages: ListPage[] = [];
    for await (const p of store.listPages({ prefix: 'p/' })) pages.push(p);

    // THEN the SDK's reading comes through
    expect(pages).toEqual([
      {
        objects: [{ key: 'p/cdata & key', size: 5321, lastModified: '2026-05-04T15:20:00.000Z', etag: '9f86d0' }],
        prefixes: ['p/f/'],
        truncated: false,
      },
    ]);
  });

  it('hands a page with an out-of-range character reference to the SDK instead of throwing RangeError', async () => {
    // GIVEN an endpoint whose listing holds &#1114112; (one past the last Unicode code point)
    const xml = page(contents('p/a&#1114112;') + contents('p/b'));
    const read = async (parser: 'fast' | 'sdk'): Promise<ListPage[]> => {
      const store = new S3Store(
        faultyClient(() => ({ status: 200, body: xml })),
        'bucket',
      );
      store.listParser = parser;
      const pages: ListPage[] = [];
      for await (const p of store.listPages({ prefix: 'p/' })) pages.push(p);
      return pages;
    };

    // WHEN it is listed with the fast reader, THEN the listing is the SDK's own reading of the page
    const fast = await read('fast');
    expect(fast).toEqual(await read('sdk'));
    expect(fast[0].objects.map((o) => o.key)[1]).toBe('p/b');
  });

  it('reads exactly what the SDK reads from the same answer', async () => {
    const xml = page(
      `${contents('p/a &amp; b') + contents('p/\u00e9')}<CommonPrefixes><Prefix>p/f/</Prefix></CommonPrefixes>`,
      true,
      'next',
    );
    const read = async (parser: 'fast' | 'sdk'): Promise<ListPage> => {
      const store = new S3Store(
        faultyClient(() => ({ status: 200, body: xml })),
        'bucket',
      );
      store.listParser = parser;
      for await (const p of store.listPages({ prefix: 'p/' })) return p;
      throw new Error('no page');
    };
    expect(await read('fast')).toEqual(await read('sdk'));
  });
});
