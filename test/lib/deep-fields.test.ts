/**
 * Client fields nested deeper than `JSON.stringify` recurses: written without recursion (`jsonText`), kept
 * byte for byte through a parse and a rewrite, and healed through in every layout against moto.
 */
import { type DatastoreIndex, parseIndex, serializeIndex, serializePartitionFile } from '../../lambda/lib/index-file';
import { healRoot } from '../../lambda/lib/heal';
import { jsonText, sameJson } from '../../lambda/lib/json-text';
import { partitionOf } from '../../lambda/lib/keys';
import { type DeepLayout, deepJson, deepRoot, depthOf, indexWithDeepField } from '../helpers/deep';
import { indexEntry } from '../helpers/factories';
import { connectStore, readIndex, readObject, testStore } from '../helpers/s3';

/** A small seeded generator (mulberry32), so the values below are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD = [undefined, null, Number.NaN, Number.POSITIVE_INFINITY, -0, 1e21, 'a\u2028b', '\ud800', '"\\', () => 1, new Date(0), true];

/** A value of every kind JSON.stringify meets, at most `depth` levels deep. */
function randomValue(next: () => number, depth: number): unknown {
  const pick = next();
  if (depth === 0 || pick < 0.4) return ODD[Math.floor(next() * ODD.length)];
  const size = Math.floor(next() * 4);
  if (pick < 0.7) return Array.from({ length: size }, () => randomValue(next, depth - 1));
  const object: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) object[['k', '__proto__', 'toString', 'é', ''][Math.floor(next() * 5)] + i] = randomValue(next, depth - 1);
  return object;
}

describe('jsonText', () => {
  it('writes what JSON.stringify writes, for seeded values of every kind', () => {
    const next = seeded(20);
    for (let i = 0; i < 500; i++) {
      const value = randomValue(next, 6);
      expect(jsonText(value)).toBe(JSON.stringify(value));
    }
  });

  it.each([5_000, 200_000])('writes a value %i levels deep, which JSON.stringify cannot', (depth) => {
    const text = deepJson(depth);
    const value = JSON.parse(text) as unknown;
    expect(() => JSON.stringify(value)).toThrow(RangeError);
    expect(jsonText(value)).toBe(text);
    expect(sameJson(value, JSON.parse(text))).toBe(true);
    expect(sameJson(value, JSON.parse(deepJson(depth - 1)))).toBe(false);
  });

  it('refuses a cycle as JSON.stringify does', () => {
    const cycle: Record<string, unknown> = { a: [1] };
    (cycle.a as unknown[]).push(cycle);
    expect(() => jsonText(cycle)).toThrow(TypeError);
    // The same object twice, side by side, is no cycle.
    const shared = { x: 1 };
    expect(jsonText([shared, { shared }])).toBe(JSON.stringify([shared, { shared }]));
  });
});

describe('an index entry holding a deep client field', () => {
  const entries = [indexEntry('files/a.txt', { size: 3, sha256: 'aa' }), indexEntry('logs/b.log', { size: 4 })];

  it.each([5_000, 200_000])('is parsed, and written again with the field byte for byte (%i levels)', (depth) => {
    const parsed = parseIndex(indexWithDeepField(entries, 'files/a.txt', depth));
    if (!parsed.ok) throw new Error(parsed.reason);
    const written = serializeIndex(parsed.index).toString('utf8');
    expect(written.includes(`"clientState":${deepJson(depth)}`)).toBe(true);
    const again = parseIndex(written);
    expect(again.ok && serializeIndex(again.index).toString('utf8')).toBe(written);
    const partition = serializePartitionFile(parsed.index.entries).toString('utf8');
    expect(partition.startsWith('{"version":1,"entries":{"files/a.txt":')).toBe(true);
    expect(depthOf(partition)).toBe(depth + 4);
  });

  it('keeps deep unknown top-level fields too', () => {
    const index: DatastoreIndex = {
      version: 1,
      lastPulled: 'then',
      entries: new Map(),
      extra: { clientNote: JSON.parse(deepJson(5_000)) },
    };
    expect(serializeIndex(index).toString('utf8')).toBe(`{"version":1,"clientNote":${deepJson(5_000)},"lastPulled":"then","entries":{}}`);
  });

  it('is unreadable, with the reason, where the parser itself gives up on the depth', () => {
    const parse = jest.spyOn(JSON, 'parse').mockImplementationOnce(() => {
      throw new RangeError('Maximum call stack size exceeded');
    });
    try {
      expect(parseIndex(indexWithDeepField(entries, 'files/a.txt', 5_000))).toEqual({
        ok: false,
        reason: 'nested too deeply to parse here (Maximum call stack size exceeded)',
      });
    } finally {
      parse.mockRestore();
    }
  });
});

describe('healRoot of a root whose index holds a deep client field, and an object added out of band', () => {
  const cases: [DeepLayout, number][] = [
    ['monolith', 5_000],
    ['dual-write', 5_000],
    ['shard-first', 5_000],
    ['monolith', 200_000],
    ['dual-write', 200_000],
    ['shard-first', 200_000],
  ];

  it.each(cases)('%s, %i levels: check says missing; repair publishes it and keeps the field; then all is true', async (layout, depth) => {
    // GIVEN the root, in the layout a client left it
    const store = await testStore({ bucketPrefix: 'deep' });
    const root = { bucket: store.bucket, prefix: 'swamp' };
    const { deepKey, added } = await deepRoot(store, 'swamp', depth, layout);

    // WHEN checked, THEN exactly the added object is missing and nothing else is wrong
    const check = (await healRoot(connectStore(store.bucket), root, { mode: 'check' })).scopes[0];
    expect({
      layout: check.layout,
      state: check.indexState,
      drift: check.drift,
      pending: check.pending,
      stale: check.staleMirrors,
    }).toEqual({
      layout,
      state: 'valid',
      drift: { missing: 1, stale: 0, resized: 0 },
      pending: undefined,
      stale: [],
    });

    // WHEN repaired, THEN the object is indexed and the deep field is kept where clients read it
    const repair = (await healRoot(connectStore(store.bucket), root, { mode: 'repair' })).scopes[0];
    expect(repair.published).toBe(true);
    const files =
      layout === 'shard-first'
        ? [`swamp/_index/${partitionOf(deepKey)}.json`, `swamp/_index/${partitionOf(added)}.json`]
        : ['swamp/.datastore-index.json'];
    const readAll = await Promise.all(files.map((key) => readIndex(store, key)));
    expect(readAll.some((index) => index?.entries.has(added))).toBe(true);
    const deepFile = (await readObject(store, files[0]))!.toString('utf8');
    // Whether rewritten or left as the client wrote it, the field is there whole (a bare boolean: the text is huge).
    expect(/"clientState": ?\[/.test(deepFile) && deepFile.includes(deepJson(depth))).toBe(true);
    if (layout === 'dual-write') {
      const mirror = (await readObject(store, `swamp/_index/${partitionOf(added)}.json`))!.toString('utf8');
      expect(parseIndex(mirror).ok && mirror.includes(added)).toBe(true);
    }

    // ...and a second check finds nothing to do
    const after = (await healRoot(connectStore(store.bucket), root, { mode: 'check' })).scopes[0];
    expect({ drift: after.drift, pending: after.pending, stale: after.staleMirrors }).toEqual({
      drift: { missing: 0, stale: 0, resized: 0 },
      pending: undefined,
      stale: [],
    });
  });
});
