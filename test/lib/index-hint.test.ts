/**
 * sampledHint reads a sample of an index file's keys from its bytes, before the file is parsed, so that a
 * heal's listing is cut as soon as the index is downloaded. A hint only places cuts: what it must get right
 * is to name keys the index holds, spread over it, and about how many entries each stands for.
 */
import { serializeIndex } from '../../lambda/lib/index-file';
import { sampledHint } from '../../lambda/lib/index-hint';
import { sampleHint } from '../../lambda/lib/parallel-hint';
import { datastoreIndex, indexEntry, indexJson } from '../helpers/factories';

/** `count` keys of swamp's shape, in a seeded order that is not key order (clients write entries as they come). */
function keysOf(count: number): string[] {
  const keys: string[] = [];
  let x = 7;
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    keys.push(`data/gcp/${(x % 97).toString(36)}/${x.toString(16)}/resource-${i}.yaml`);
  }
  return keys;
}

describe('sampledHint', () => {
  it.each([
    ['as this indexer writes it (compact)', (keys: string[]) => serializeIndex(datastoreIndex(keys.map((k) => indexEntry(k))))],
    [
      'as a client writes it (indented, with sha256)',
      (keys: string[]) => indexJson(keys.map((k) => indexEntry(k, { sha256: 'ab'.repeat(32) }))),
    ],
  ])('samples keys the index holds, spread over it, each standing for its share of entries: %s', (_how, write) => {
    // GIVEN an index of 20,000 entries
    const keys = keysOf(20_000);
    const bytes = Buffer.from(write(keys));

    // WHEN a sample is read from its bytes
    const hint = sampledHint(bytes)!;

    // THEN every sampled key is one of the index's, a few thousand of them, standing for the 20,000 entries
    const sampled = [...hint.keys];
    const all = new Set(keys);
    expect(sampled.every((k) => all.has(k))).toBe(true);
    expect(new Set(sampled).size).toBe(sampled.length);
    expect(sampled.length).toBeGreaterThan(3000);
    expect(sampled.length).toBeLessThanOrEqual(4200);
    expect(hint.count).toBe(sampled.length);
    expect((hint.weight ?? 1) * sampled.length).toBeGreaterThan(19_000);
    expect((hint.weight ?? 1) * sampled.length).toBeLessThan(21_000);
    // and sorted, each tenth of the key space holds about a tenth of the sample
    const sample = sampleHint('root/', hint)!;
    const sorted = [...keys].sort();
    for (let tenth = 1; tenth < 10; tenth++) {
      const bound = `root/${sorted[(tenth * sorted.length) / 10]}`;
      const below = sample.keys.filter((k) => k < bound).length;
      expect(Math.abs(below / sample.keys.length - tenth / 10)).toBeLessThan(0.03);
    }
    expect(sample.weight * sample.keys.length).toBeGreaterThan(19_000);
  });

  it('reads every key of a small index, unicode ones as they are, and skips one written with escapes', () => {
    // GIVEN an index of three entries: one in plain ASCII, one with accents, one whose key JSON escapes
    const bytes = Buffer.from(indexJson([indexEntry('data/a.txt'), indexEntry('data/é ü.txt'), indexEntry('data/say "hi".txt')]));

    // WHEN a sample is read
    const hint = sampledHint(bytes)!;

    // THEN the first two are read exactly, the escaped one is left out, and each stands for about one entry
    expect([...hint.keys]).toEqual(['data/a.txt', 'data/é ü.txt']);
    expect(hint.weight).toBeGreaterThan(0.9);
    expect(hint.weight).toBeLessThan(2);
  });

  it.each([
    ['no bytes', ''],
    ['foreign JSON', '{"foo":1,"bar":[1,2,3]}'],
    ['an index without entries', '{"version":1,"entries":{}}'],
    ['a key field that is no string', '{"version":1,"entries":{"key":{"key":5},"b":{"key":null}}}'],
    ['a cut-off file', '{"version":1,"entries":{"data/a":{"key":"data/a'],
  ])('gives no hint for %s', (_what, text) => {
    expect(sampledHint(Buffer.from(text))).toBeUndefined();
  });
});
