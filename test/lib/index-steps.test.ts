import { type ParsedIndex, parseIndex } from '../../lambda/lib/index-file';
import { parseIndexInSteps } from '../../lambda/lib/index-steps';
import { seededRng } from '../chaos/rng';

const KEYS = [
  'data/a/1',
  'b c/é/ü',
  'x+y%20z',
  'q"uote',
  'back\\slash',
  '__proto__',
  '7',
  '12',
  'tab\there',
  'emoji/🙂',
  'a/..',
  'long/'.repeat(20),
];
const FIELDS = ['sha256', 'localMtime', 'extra', '0', 'constructor', 'toString'];

/** What both parsers say, in a form `toEqual` compares field by field, entry order included. */
function said(parsed: ParsedIndex): unknown {
  const index = parsed.ok ? parsed.index : parsed.salvaged;
  return {
    ok: parsed.ok,
    reason: parsed.ok ? undefined : parsed.reason,
    version: parsed.ok ? undefined : parsed.version,
    index: index && {
      lastPulled: index.lastPulled,
      extra: index.extra,
      entries: [...index.entries].map(([k, v]) => [k, Object.entries(v)]),
    },
  };
}

/** A document of `count` entries in one of the forms clients and foreign writers use. */
function document(next: () => number, count: number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  const entries: string[] = [];
  for (let i = 0; i < count; i++) {
    const key = next() < 0.7 ? `data/m/${Math.floor(next() * 1e6)}/raw` : pick(KEYS);
    const fields: string[] = [`"key":${JSON.stringify(next() < 0.95 ? key : `${key}x`)}`];
    fields.push(`"size":${pick(['1', '0', '12345', '-1', '1.5', '1e3', '"9"'])}`);
    if (next() < 0.95) fields.push(`"lastModified":${JSON.stringify('2026-05-04T15:20:00.000Z')}`);
    if (next() < 0.3)
      fields.push(
        `${JSON.stringify(pick(FIELDS))}:${pick(['"ab"', '{"n":[1,{"m":null}]}', '[true,false]', '"\\u00e9\\n"', 'null', '-0.5E-2'])}`,
      );
    if (next() < 0.1) fields.reverse();
    const value = next() < 0.03 ? pick(['null', '[1]', '"text"', '3']) : `{${fields.join(pick([',', ', ', ',\n    ']))}}`;
    entries.push(`${JSON.stringify(key)}${pick([':', ': ', ' :\t'])}${value}`);
  }
  const head = [`"version":${next() < 0.95 ? '1' : pick(['2', '"1"'])}`, `"lastPulled":"2026-05-04T15:20:00.000Z"`];
  if (next() < 0.3) head.push(`"client":{"name":"swamp","tags":["a","b"]}`);
  const members = [...head, `"entries":{${entries.join(pick([',', ',\n  ', ' , ']))}}`];
  if (next() < 0.5) members.reverse();
  return `${pick(['', '\n', '  '])}{${members.join(pick([',', ',\n']))}}${pick(['', '\n'])}`;
}

/** The ways a document goes bad: cut short, a byte changed, a comma doubled or lost, something after it. */
function spoiled(next: () => number, text: string): string {
  const at = Math.floor(next() * text.length);
  switch (Math.floor(next() * 6)) {
    case 0:
      return text.slice(0, at);
    case 1:
      return `${text.slice(0, at)}${String.fromCharCode(Math.floor(next() * 128))}${text.slice(at + 1)}`;
    case 2:
      return text.replace(/,/g, (comma) => (next() < 0.05 ? ',,' : comma));
    case 3:
      return text.replace(/,/g, (comma) => (next() < 0.05 ? '' : comma));
    case 4:
      return `${text}x`;
    default:
      return `\ufeff${text}`;
  }
}

describe('parseIndexInSteps', () => {
  it('says what parseIndex says, for seeded documents cut into steps of a few bytes', async () => {
    const { next } = seededRng(33);
    for (let run = 0; run < 300; run++) {
      const text = document(next, 1 + Math.floor(next() * 40));
      const bytes = Buffer.from(text);
      expect(said(await parseIndexInSteps(bytes, 1 + Math.floor(next() * 64)))).toEqual(said(parseIndex(bytes)));
    }
  });

  it('says what parseIndex says of documents gone bad', async () => {
    const { next } = seededRng(34);
    for (let run = 0; run < 300; run++) {
      const bytes = Buffer.from(spoiled(next, document(next, 1 + Math.floor(next() * 30))));
      expect(said(await parseIndexInSteps(bytes, 1 + Math.floor(next() * 32)))).toEqual(said(parseIndex(bytes)));
    }
  });

  it('keeps the order an object gives, numeric keys first, and the last of a key written twice', async () => {
    const entry = (key: string, size: number): string =>
      `${JSON.stringify(key)}:{"key":${JSON.stringify(key)},"size":${size},"lastModified":"t"}`;
    const text = `{"version":1,"entries":{${[entry('b', 1), entry('a', 2), entry('10', 3), entry('b', 4), entry('2', 5)].join(',')}}}`;
    const parsed = await parseIndexInSteps(Buffer.from(text), 8);
    expect(parsed.ok && [...parsed.index.entries].map(([key, e]) => [key, e.size])).toEqual([
      ['2', 5],
      ['10', 3],
      ['b', 4],
      ['a', 2],
    ]);
  });

  it.each([
    ['a comma doubled where it would cut', '{"version":1,"entries":{"a":{E},,"b":{E}}}'],
    ['entries written twice, the last no object', '{"version":1,"entries":{"a":{E}},"entries":5}'],
    ['entries written twice, the last with an escape', '{"version":1,"entries":{"a":{E}},"\\u0065ntries":{"b":{E}}}'],
  ])('says what parseIndex says of %s', async (_, shape) => {
    const bytes = Buffer.from(shape.replace(/\{E\}/g, '{"key":"k","size":1,"lastModified":"t"}'));
    expect(said(await parseIndexInSteps(bytes, 1))).toEqual(said(parseIndex(bytes)));
  });

  it('leaves the event loop to run between its steps', async () => {
    const entries = Array.from({ length: 400 }, (_, i) => `"k/${i}":{"key":"k/${i}","size":${i},"lastModified":"t"}`);
    const bytes = Buffer.from(`{"version":1,"entries":{${entries.join(',')}}}`);
    let turns = 0;
    let counting = true;
    const count = (): void => {
      turns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const parsed = await parseIndexInSteps(bytes, 1024);
    counting = false;
    expect(parsed.ok && parsed.index.entries.size).toBe(400);
    // About one turn per kibibyte of entries: the parse did not hold the thread throughout.
    expect(turns).toBeGreaterThan(bytes.length / 1024 - 2);
  });
});
