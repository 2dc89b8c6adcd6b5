import { scanEntries } from '../../lambda/lib/index-scan';
import { parseIndex } from '../../lambda/lib/index-file';
import { parseIndexInSteps } from '../../lambda/lib/index-steps';
import { seededRng } from '../chaos/rng';

/** What `JSON.parse` makes of members text, as [key, fields in order] pairs. */
function parsed(members: string): unknown {
  return Object.entries(JSON.parse(`{${members}}`) as Record<string, object>).map(([key, value]) => [key, Object.entries(value)]);
}

/** What the scan reads of members text, in the same form; undefined when it leaves them to `JSON.parse`. */
function scanned(members: string): unknown {
  const bytes = Buffer.from(`{${members}}`);
  const into = new Map<string, unknown>();
  const count = scanEntries(bytes, 1, bytes.length - 1, into);
  if (count === undefined) return undefined;
  expect(count).toBe(into.size);
  return [...into].map(([key, value]) => [key, Object.entries(value as object)]);
}

const plain = (key: string, rest = ''): string => `"${key}":{"key":"${key}","size":12,"lastModified":"2026-05-04T15:20:00.000Z"${rest}}`;

describe('scanEntries', () => {
  it.each([
    ['compact entries', [plain('data/a/1'), plain('data/a/2'), plain('b c/+%20/..')].join(',')],
    [
      'entries as clients pretty-print them, with their fields',
      `\n    "data/a/1": {\n      "key": "data/a/1",\n      "size": 0,\n      "lastModified": "2026-05-04T15:20:00.000Z",\n      "localMtime": "2026-05-04T15:19:58.120Z",\n      "sha256": "9f86d0"\n    },\n\t"logs/x" : { "key" : "logs/x" , "size" : 987654321012345 , "lastModified" : "t" }\r\n  `,
    ],
    ['fields it does not know, named as the prototype names them', plain('k', ',"toString":"x","constructor":"y","note":""')],
  ])('reads %s as JSON.parse does', (_, members) => {
    expect(scanned(members)).toEqual(parsed(members));
  });

  it.each([
    ['an escape in a key', plain('a\\u0062')],
    ['a key not in ASCII', plain('é')],
    ['a control character', plain('a\tb')],
    ['a key that differs from its name', '"a":{"key":"b","size":1,"lastModified":"t"}'],
    ['a negative size', '"a":{"key":"a","size":-1,"lastModified":"t"}'],
    ['a fraction', '"a":{"key":"a","size":1.5,"lastModified":"t"}'],
    ['an exponent', '"a":{"key":"a","size":1e3,"lastModified":"t"}'],
    ['a leading zero', '"a":{"key":"a","size":07,"lastModified":"t"}'],
    ['a size in quotes', '"a":{"key":"a","size":"7","lastModified":"t"}'],
    ['a size of 16 digits', '"a":{"key":"a","size":1234567890123456,"lastModified":"t"}'],
    ['fields in another order', '"a":{"size":1,"key":"a","lastModified":"t"}'],
    ['no lastModified', '"a":{"key":"a","size":1}'],
    ['a field written twice', plain('a', ',"size":"x"')],
    ['a client field that is no text', plain('a', ',"localMtime":5')],
    ['a nested client field', plain('a', ',"x":{"y":"z"}')],
    ['a numeric client field', plain('a', ',"0":"z"')],
    ['a numeric key', plain('12')],
    ['a key named __proto__', plain('__proto__')],
    ['a client field named __proto__', plain('a', ',"__proto__":"z"')],
    ['an entry that is no object', '"a":[1]'],
    ['no member at all', '  '],
    ['a comma at the end', `${plain('a')},`],
    ['something after the members', `${plain('a')} x`],
  ])('leaves %s to JSON.parse', (_, members) => {
    expect(scanned(members)).toBeUndefined();
  });

  it('reads no byte past the end it is given', () => {
    const bytes = Buffer.from(`{${plain('a')}}`);
    const into = new Map<string, unknown>();
    // Cut one byte before the entry's closing brace: the brace that follows is not its to take.
    expect(scanEntries(bytes, 1, bytes.length - 2, into)).toBeUndefined();
  });

  it('lets the stepped parse say what parseIndex says of large indexes as clients write them', async () => {
    const { next } = seededRng(35);
    for (let run = 0; run < 40; run++) {
      const entries: Record<string, Record<string, unknown>> = {};
      const count = 50 + Math.floor(next() * 400);
      for (let i = 0; i < count; i++) {
        const key = next() < 0.02 ? `ünï/${i}` : `data/m/${Math.floor(next() * 1e5)}/raw`;
        const entry: Record<string, unknown> = {
          key,
          size: next() < 0.01 ? -1 : Math.floor(next() * 1e6),
          lastModified: `2026-05-0${1 + (i % 3)}T00:00:00.000Z`,
        };
        if (next() < 0.5) Object.assign(entry, { localMtime: '2026-05-04T15:19:58.120Z', sha256: 'f'.repeat(64) });
        entries[key] = entry;
      }
      const text = JSON.stringify({ version: 1, lastPulled: 'x', entries }, null, next() < 0.5 ? 2 : undefined);
      const bytes = Buffer.from(text);
      const [steps, whole] = [await parseIndexInSteps(bytes, 256 + Math.floor(next() * 4096)), parseIndex(bytes)];
      const form = (p: typeof whole): unknown => {
        const index = p.ok ? p.index : p.salvaged;
        return [p.ok, p.ok ? undefined : p.reason, index && [...index.entries].map(([k, v]) => [k, Object.entries(v)])];
      };
      expect(form(steps)).toEqual(form(whole));
    }
  });
});
