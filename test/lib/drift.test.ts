import { diffIndex, driftCounts, healIndex, isClean, resizedEntry } from '../../lambda/lib/drift';
import { serializeIndex } from '../../lambda/lib/index-file';
import { KeySample } from '../../lambda/lib/key-sample';
import { datastoreIndex, indexEntry, listedObject, listingOf } from '../helpers/factories';
import { seededRng } from '../chaos/rng';

describe('diffIndex', () => {
  it('finds exactly the missing, stale and resized keys, sorted', () => {
    const entries = datastoreIndex([
      indexEntry('same', { size: 3 }),
      indexEntry('z-stale', { size: 1 }),
      indexEntry('a-stale', { size: 1 }),
      indexEntry('grown', { size: 1 }),
      indexEntry('emptied', { size: 4 }),
    ]).entries;
    const listing = listingOf([
      listedObject('same', { size: 3 }),
      listedObject('z-missing', { size: 2 }),
      listedObject('a-missing', { size: 2 }),
      listedObject('grown', { size: 10 }),
      listedObject('emptied', { size: 0 }),
    ]);

    expect(diffIndex(entries, listing)).toEqual({
      missing: ['a-missing', 'z-missing'],
      stale: ['a-stale', 'z-stale'],
      resized: [
        { key: 'emptied', indexSize: 4, objectSize: 0 },
        { key: 'grown', indexSize: 1, objectSize: 10 },
      ],
    });
  });

  it('gives the same drift whether both sides run in key order or not', () => {
    // Keys from a small alphabet (astral and private-use characters too, where UTF-16 and byte order differ), so
    // that both sides share many keys and each has some of its own.
    const { next } = seededRng(7);
    const alphabet = ['a', 'b', 'B', '/', ' ', '%', '\u00e9', '\ue000', '\u{1f600}'];
    const key = (): string =>
      Array.from({ length: 1 + Math.floor(next() * 3) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
    const shuffled = <T>(items: readonly T[]): T[] => {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [out[i], out[j]] = [out[j], out[i]];
      }
      return out;
    };
    const ascending = (keys: Iterable<string>): string[] => [...keys].sort();
    let walked = 0;
    for (let round = 0; round < 200; round++) {
      const listed = new Set(Array.from({ length: Math.floor(next() * 40) }, key));
      const indexed = new Set(Array.from({ length: Math.floor(next() * 40) }, key));
      const size = (k: string): number => (k.length + (next() < 0.1 ? 1 : 0)) % 3;
      // In key order; some rounds with a few entries appended out of order, as a client adds them.
      const order = ascending(indexed);
      if (round % 3 === 1) order.push(...order.splice(Math.floor(next() * order.length), Math.floor(next() * 4)));
      if (round % 3 === 2) order.reverse();
      const entries = datastoreIndex(order.map((k) => indexEntry(k, { size: size(k) }))).entries;
      const listing = listingOf(ascending(listed).map((k) => listedObject(k, { size: k.length % 3 })));
      const inOrder = diffIndex(entries, listing);
      // The same maps in another order are diffed by lookups.
      const byLookup = diffIndex(new Map(shuffled([...entries])), new Map(shuffled([...listing])));
      expect(inOrder).toEqual(byLookup);
      walked += inOrder.missing.length + inOrder.stale.length;
    }
    expect(walked).toBeGreaterThan(1000);
  });

  it('is clean when sizes agree, whatever the times and ETags say', () => {
    const entries = datastoreIndex([indexEntry('a', { size: 2, lastModified: '2020-01-01T00:00:00.000Z' })]).entries;
    const drift = diffIndex(entries, listingOf([listedObject('a', { size: 2, lastModified: '2026-01-01T00:00:00.000Z', etag: 'other' })]));
    expect(isClean(drift)).toBe(true);
    expect(driftCounts(drift)).toEqual({ missing: 0, stale: 0, resized: 0 });
  });

  it('counts a drift', () => {
    const drift = diffIndex(datastoreIndex([indexEntry('gone')]).entries, listingOf([listedObject('new')]));
    expect(isClean(drift)).toBe(false);
    expect(driftCounts(drift)).toEqual({ missing: 1, stale: 1, resized: 0 });
  });
});

describe('healIndex', () => {
  const kept = indexEntry('kept', { size: 3, localMtime: '2026-05-04T15:19:58.120Z', sha256: 'aa', clientField: { x: 1 } });
  const resized = indexEntry('resized', { size: 1, localMtime: '2026-05-04T15:19:58.120Z', sha256: 'bb', clientField: 'stays' });
  const index = datastoreIndex([kept, resized, indexEntry('stale')], { extra: { clientVersion: '2026.04.28' } });
  const listing = listingOf([
    listedObject('kept', { size: 3 }),
    listedObject('resized', { size: 9, lastModified: '2026-06-01T00:00:00.000Z' }),
    listedObject('missing', { size: 4, lastModified: '2026-06-02T00:00:00.000Z', etag: 'e' }),
  ]);

  it('adds missing entries, drops stale ones and fixes sizes, keeping client fields of untouched entries', () => {
    const healed = healIndex(index, diffIndex(index.entries, listing), listing);
    expect([...healed.entries.keys()].sort()).toEqual(['kept', 'missing', 'resized']);
    expect(healed.entries.get('kept')).toBe(kept);
    expect(healed.entries.get('missing')).toEqual({ key: 'missing', size: 4, lastModified: '2026-06-02T00:00:00.000Z' });
    // sha256 and localMtime described the old bytes: they go; unknown fields stay.
    expect(healed.entries.get('resized')).toEqual({
      key: 'resized',
      size: 9,
      lastModified: '2026-06-01T00:00:00.000Z',
      clientField: 'stays',
    });
    expect(healed.extra).toEqual({ clientVersion: '2026.04.28' });
    expect(healed.lastPulled).toBe(index.lastPulled);
    expect(diffIndex(healed.entries, listing)).toEqual({ missing: [], stale: [], resized: [] });
  });

  it('leaves the index it was given untouched', () => {
    healIndex(index, diffIndex(index.entries, listing), listing);
    expect([...index.entries.keys()]).toEqual(['kept', 'resized', 'stale']);
    expect(index.entries.get('resized')).toEqual(resized);
  });

  it('builds a fresh index from the listing when there is none', () => {
    const healed = healIndex(undefined, diffIndex(new Map(), listing), listing);
    expect(healed.version).toBe(1);
    expect([...healed.entries.keys()].sort()).toEqual(['kept', 'missing', 'resized']);
  });

  it('gives an index that held nothing the listing itself when its objects are plain entries, and a copy when they carry ETags', () => {
    const plain = listingOf([listedObject('a', { size: 1, etag: undefined }), listedObject('b', { size: 2, etag: undefined })]);
    const fresh = healIndex(undefined, diffIndex(new Map(), plain), plain);
    expect(fresh.entries).toBe(plain);
    expect(JSON.parse(serializeIndex(fresh).toString('utf8')).entries.b).toEqual({
      key: 'b',
      size: 2,
      lastModified: plain.get('b')!.lastModified,
    });
    // A later heal of it changes a copy: the listing stays as listed.
    const shorter = listingOf([plain.get('a')!]);
    const next = healIndex(fresh, diffIndex(fresh.entries, shorter), shorter);
    expect([...next.entries.keys()]).toEqual(['a']);
    expect([...plain.keys()]).toEqual(['a', 'b']);

    const tagged = healIndex(undefined, diffIndex(new Map(), listing), listing);
    expect(tagged.entries).not.toBe(listing);
    expect(tagged.entries.get('missing')).toEqual({ key: 'missing', size: 4, lastModified: '2026-06-02T00:00:00.000Z' });
  });

  it('resizedEntry keeps the key and unknown fields only', () => {
    expect(resizedEntry(resized, { size: 0, lastModified: 'T' })).toEqual({
      key: 'resized',
      size: 0,
      lastModified: 'T',
      clientField: 'stays',
    });
  });
});

describe('KeySample', () => {
  it('keeps the first keys in key order and counts them all, whatever order they come in', () => {
    // Mostly ascending, as a listing gives them, with smaller keys coming late (a revisited partition).
    const keys = Array.from({ length: 5000 }, (_, i) => `k/${String(i).padStart(5, '0')}`);
    const late = keys.splice(0, 30);
    const given = [...keys.slice(0, 2500), ...late.reverse(), ...keys.slice(2500)];
    const sample = new KeySample<string>(25, (key) => key);
    for (let i = 0; i < given.length; i += 97) sample.add(given.slice(i, i + 97));
    expect(sample.count).toBe(5000);
    expect(sample.sorted()).toEqual([...given].sort().slice(0, 25));
  });

  it('keeps no key at all when asked for none, and still counts them', () => {
    const sample = new KeySample<string>(0, (key) => key);
    sample.add(['b', 'a']);
    expect(sample.count).toBe(2);
    expect(sample.sorted()).toEqual([]);
  });
});
