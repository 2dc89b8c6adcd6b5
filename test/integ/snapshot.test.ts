/**
 * The deploy test's snapshot, checked offline: `integ.indexer.ts` synthesised again must give the committed
 * `integ.indexer.ts.snapshot/`, templates and asset hashes included (see `snapshot.ts` for why not
 * integ-runner). After an intended change, `npm run integ:snapshot` rewrites it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { freshSnapshot, readSnapshot } from './snapshot';

/** The resources (or other top-level entries) of two template texts that differ. */
function differingEntries(before: string | undefined, after: string | undefined): string[] {
  const parse = (text: string | undefined) => (text ? (JSON.parse(text) as Record<string, Record<string, unknown>>) : {});
  const [a, b] = [parse(before), parse(after)];
  const out: string[] = [];
  for (const section of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const [x, y] = [a[section] ?? {}, b[section] ?? {}];
    for (const id of new Set([...Object.keys(x), ...Object.keys(y)])) {
      if (JSON.stringify(x[id]) !== JSON.stringify(y[id])) out.push(`${section}.${id}`);
    }
  }
  return out;
}

describe('the deploy test (test/integ/integ.indexer.ts), synthesised offline', () => {
  let fresh: Map<string, string>;
  /** The files of the function's code asset in the fresh synthesis. */
  let functionAsset: Record<string, Buffer>;

  beforeAll(() => {
    fresh = freshSnapshot((outdir) => {
      const template = JSON.parse(readFileSync(path.join(outdir, 'DatastoreIndexerInteg.template.json'), 'utf8')) as {
        Resources: Record<string, { Type: string; Properties: { Code?: { S3Key?: string }; Environment?: unknown } }>;
      };
      const fn = Object.values(template.Resources).find((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment);
      const dir = path.join(outdir, `asset.${fn!.Properties.Code!.S3Key!.replace(/\.zip$/, '')}`);
      functionAsset = Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(path.join(dir, f))]));
    });
  }, 240_000);

  test('gives the committed snapshot, templates and asset hashes included', () => {
    const committed = readSnapshot();
    const names = [...new Set([...committed.keys(), ...fresh.keys()])].sort();
    const differences = names
      .filter((name) => committed.get(name) !== fresh.get(name))
      .map((name) =>
        name.endsWith('.template.json') ? `${name}: ${differingEntries(committed.get(name), fresh.get(name)).join(', ')}` : name,
      );
    // An intended change: `npm run integ:snapshot`, then review and commit the snapshot's diff.
    expect(differences).toEqual([]);
  });

  test("deploys the built bundle of npm run bundle as the function's code, byte for byte", () => {
    const built = path.join(__dirname, '..', '..', 'dist', 'lambda');
    expect(Object.keys(functionAsset).sort()).toEqual(['index.js', 'index.js.map']);
    for (const [name, bytes] of Object.entries(functionAsset)) expect(bytes.equals(readFileSync(path.join(built, name)))).toBe(true);
  });
});
