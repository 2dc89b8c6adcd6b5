import { type IndexEntry, cloneIndex, emptyIndex, entryFor, parseIndex, serializeIndex } from '../../lambda/lib/index-file';
import { datastoreIndex, indexEntry, indexJson, listedObject } from '../helpers/factories';

/** Parses and fails the test with the reason when the bytes are not a valid index. */
function mustParse(bytes: string | Uint8Array) {
  const parsed = parseIndex(bytes);
  if (!parsed.ok) throw new Error(`expected a valid index, got: ${parsed.reason}`);
  return parsed.index;
}

function reasonOf(bytes: string): string {
  const parsed = parseIndex(bytes);
  if (parsed.ok) throw new Error(`expected ${bytes} to be unreadable`);
  return parsed.reason;
}

describe('parseIndex', () => {
  it('reads a client-written (pretty) index from a string or bytes', () => {
    const text = indexJson([indexEntry('data/a/b/c', { size: 5, localMtime: '2026-05-04T15:19:58.120Z', sha256: '9f86d0' })]);
    for (const input of [text, Buffer.from(text), new Uint8Array(Buffer.from(text))]) {
      const index = mustParse(input);
      expect(index.version).toBe(1);
      expect(index.lastPulled).toBe('2026-05-04T15:20:00.000Z');
      expect([...index.entries.keys()]).toEqual(['data/a/b/c']);
      expect(index.entries.get('data/a/b/c')).toEqual({
        key: 'data/a/b/c',
        size: 5,
        lastModified: '2026-05-04T15:20:00.000Z',
        localMtime: '2026-05-04T15:19:58.120Z',
        sha256: '9f86d0',
      });
    }
  });

  it('reads every entry in file order, one named __proto__ too, from a part of a larger buffer', () => {
    const entry = (key: string): string => `${JSON.stringify(key)}:${JSON.stringify(indexEntry(key))}`;
    const text = `{"version":1,"entries":{${['b/2', '__proto__', 'a/1'].map(entry).join(',')}}}`;
    const bytes = Buffer.from(`padding${text}padding`).subarray('padding'.length, 'padding'.length + Buffer.byteLength(text));
    const index = mustParse(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    expect([...index.entries.keys()]).toEqual(['b/2', '__proto__', 'a/1']);
    expect(index.entries.get('__proto__')?.key).toBe('__proto__');
  });

  it('takes no entry from properties a host program added to every object', () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto.polluted = { key: 'polluted', size: 1, lastModified: '2026-05-04T15:20:00.000Z' };
    try {
      expect([...mustParse(indexJson([indexEntry('a/1')])).entries.keys()]).toEqual(['a/1']);
    } finally {
      delete proto.polluted;
    }
  });

  it('reads an index without lastPulled or entries in it', () => {
    const index = mustParse('{"version":1,"entries":{}}');
    expect(index.entries.size).toBe(0);
    expect(index.lastPulled).toBeUndefined();
  });

  it.each([
    ['bad JSON', '{"version":1,"entries":{', /not JSON/],
    ['an empty body', '', /not JSON/],
    ['a JSON array', '[1,2,3]', /not a JSON object/],
    ['JSON null', 'null', /not a JSON object/],
    ['a JSON string', '"hello"', /not a JSON object/],
    ['foreign JSON', '{"foo":1}', /^no "version" \(clients write 1\)$/],
    ['version 2 (a shard manifest)', '{"version":2,"partitions":[],"commitSeq":1}', /^version 2, a format this indexer does not know/],
    ['version "1" as a string', '{"version":"1","entries":{}}', /^"version" is "1", not the number 1$/],
    ['no entries', '{"version":1}', /no "entries" object/],
    ['entries as an array', '{"version":1,"entries":[]}', /no "entries" object/],
    ['lastPulled as a number', '{"version":1,"lastPulled":5,"entries":{}}', /lastPulled/],
  ])('refuses %s', (_what, bytes, reason) => {
    expect(reasonOf(bytes)).toMatch(reason);
  });

  it.each([
    ['not an object', 5, /"a" is not an object/],
    ['null', null, /"a" is not an object/],
    ['a key that differs from its map key', { key: 'b', size: 1, lastModified: 'x' }, /"a" has key "b"/],
    ['no key', { size: 1, lastModified: 'x' }, /"a" has no key$/],
    ['a string size', { key: 'a', size: '1', lastModified: 'x' }, /no valid size/],
    ['a negative size', { key: 'a', size: -1, lastModified: 'x' }, /no valid size/],
    ['a fractional size', { key: 'a', size: 1.5, lastModified: 'x' }, /no valid size/],
    ['no lastModified', { key: 'a', size: 1 }, /no lastModified/],
    ['a numeric lastModified', { key: 'a', size: 1, lastModified: 1 }, /no lastModified/],
  ])('refuses an entry with %s', (_what, entry, reason) => {
    expect(reasonOf(JSON.stringify({ version: 1, entries: { a: entry } }))).toMatch(reason);
  });
});

describe('serializeIndex', () => {
  it('round-trips unknown top-level fields and unknown, localMtime and sha256 entry fields', () => {
    const original = JSON.stringify({
      version: 1,
      lastPulled: '2026-05-04T15:24:03.000Z',
      clientVersion: '2026.04.28',
      nested: { a: [1, 2, { b: null }] },
      entries: {
        'data/aws/ec2/i-0abc/1/raw': {
          key: 'data/aws/ec2/i-0abc/1/raw',
          size: 5321,
          lastModified: '2026-05-04T15:20:00.000Z',
          localMtime: '2026-05-04T15:19:58.120Z',
          sha256: '9f86d0',
          contentType: 'application/json',
          tags: { owner: 'me' },
        },
        'notes ü + 100%.md': { key: 'notes ü + 100%.md', size: 0, lastModified: '2026-05-04T15:20:00.000Z' },
      },
    });
    const bytes = serializeIndex(mustParse(original));
    expect(JSON.parse(bytes.toString('utf8'))).toEqual(JSON.parse(original));
    expect(mustParse(bytes)).toEqual(mustParse(original));
  });

  it('keeps the entries in their order and writes compact JSON', () => {
    const index = datastoreIndex([indexEntry('b'), indexEntry('a'), indexEntry('c')]);
    const text = serializeIndex(index).toString('utf8');
    expect(Object.keys(JSON.parse(text).entries)).toEqual(['b', 'a', 'c']);
    expect(text).not.toMatch(/\n/);
  });

  it('stamps lastPulled when the index has none', () => {
    const before = Date.now();
    const parsed = JSON.parse(serializeIndex(emptyIndex()).toString('utf8'));
    expect(parsed.version).toBe(1);
    expect(parsed.entries).toEqual({});
    expect(Date.parse(parsed.lastPulled)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('writes every entry byte for byte as JSON.stringify does, plain or not', () => {
    const entries = new Map<string, IndexEntry>();
    const add = (key: string, entry: Record<string, unknown>): void => void entries.set(key, entry as IndexEntry);
    add('plain', { key: 'plain', size: 5, lastModified: '2026-05-04T15:20:00.000Z' });
    add('q "\\ \n \u0001 \u00e9 \u{1F600} \ud800 </x>', {
      key: 'q "\\ \n \u0001 \u00e9 \u{1F600} \ud800 </x>',
      size: 0,
      lastModified: 'odd "time"\n',
    });
    add('numbers', { key: 'numbers', size: 1e21, lastModified: 'x' });
    add('negative zero', { key: 'negative zero', size: -0, lastModified: 'x' });
    add('not a number', { key: 'not a number', size: NaN, lastModified: 'x' });
    add('infinite', { key: 'infinite', size: Infinity, lastModified: 'x' });
    add('fraction', { key: 'fraction', size: 1.25, lastModified: 'x' });
    add('other order', { size: 1, key: 'other order', lastModified: 'x' });
    add('other key', { key: 'another', size: 1, lastModified: 'x' });
    add('client fields', { key: 'client fields', size: 1, lastModified: 'x', sha256: 'abc', localMtime: 'y' });
    add('numeric field', { key: 'numeric field', size: 1, lastModified: 'x', 7: 'seven' });
    add('undefined field', { key: 'undefined field', size: 1, lastModified: 'x', sha256: undefined });
    add('no time', { key: 'no time', size: 1, lastModified: 3 });
    add('string size', { key: 'string size', size: '1', lastModified: 'x' });
    add('toJSON', { key: 'toJSON', size: 1, lastModified: 'x', toJSON: () => ({ replaced: true }) });
    add('inherited', Object.assign(Object.create({ inherited: 1 }) as object, { key: 'inherited', size: 1, lastModified: 'x' }));
    const index = { version: 1 as const, lastPulled: '2026-05-04T15:24:03.000Z', entries, extra: {} };
    const expected = `{"version":1,"lastPulled":"2026-05-04T15:24:03.000Z","entries":{${[...entries].map(([k, e]) => `${JSON.stringify(k)}:${JSON.stringify(e)}`).join(',')}}}`;
    expect(serializeIndex(index).toString('utf8')).toBe(expected);
  });

  it('writes long runs of plain entries, broken by other entries, as JSON.stringify does', () => {
    const entries = new Map<string, IndexEntry>();
    for (let i = 0; i < 3000; i++) {
      const key = `data/m/${String(i).padStart(5, '0')}/raw`;
      const plain = i % 997 !== 500;
      entries.set(
        key,
        plain
          ? ({ key, size: i, lastModified: '2026-05-04T15:20:00.000Z' } as IndexEntry)
          : ({ key, size: i, lastModified: 'x', sha256: 'é' } as IndexEntry),
      );
    }
    const index = { version: 1 as const, lastPulled: '2026-05-04T15:24:03.000Z', entries, extra: {} };
    const expected = `{"version":1,"lastPulled":"2026-05-04T15:24:03.000Z","entries":{${[...entries].map(([k, e]) => `${JSON.stringify(k)}:${JSON.stringify(e)}`).join(',')}}}`;
    expect(serializeIndex(index).toString('utf8')).toBe(expected);
  });

  it('serialises an index larger than one chunk (over 1 MiB) whole', () => {
    const entries = Array.from({ length: 12_000 }, (_, i) =>
      indexEntry(`data/a/b/${String(i).padStart(6, '0')}/raw`, { size: i, sha256: 'f'.repeat(64) }),
    );
    const bytes = serializeIndex(datastoreIndex(entries));
    expect(bytes.length).toBeGreaterThan(1 << 20);
    const back = mustParse(bytes);
    expect(back.entries.size).toBe(12_000);
    expect(back.entries.get('data/a/b/011999/raw')).toEqual(entries[11_999]);
  });
});

describe('entryFor and cloneIndex', () => {
  it('makes an entry of exactly key, size and lastModified (no etag)', () => {
    expect(entryFor(listedObject('a/b', { size: 7, lastModified: '2026-01-01T00:00:00.000Z', etag: 'abc' }))).toEqual({
      key: 'a/b',
      size: 7,
      lastModified: '2026-01-01T00:00:00.000Z',
    });
  });

  it('clones the entry map and extra fields, leaving the original untouched', () => {
    const original = datastoreIndex([indexEntry('a')], { extra: { x: 1 } });
    const copy = cloneIndex(original);
    copy.entries.delete('a');
    copy.entries.set('b', indexEntry('b'));
    copy.extra.y = 2;
    expect([...original.entries.keys()]).toEqual(['a']);
    expect(original.extra).toEqual({ x: 1 });
  });
});
