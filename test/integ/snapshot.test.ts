/**
 * The deploy test's snapshot, checked offline: `integ.indexer.ts` synthesised again must give the committed
 * `integ.indexer.ts.snapshot/` (see `snapshot.ts` for why not integ-runner). Asset hashes are compared as
 * integ-runner compares them, by where they stand, so a change of the function's code alone is no
 * difference; a change of what is deployed is. After an intended change, `npm run integ:snapshot` rewrites it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { freshSnapshot, readSnapshot } from './snapshot';

/**
 * A snapshot file with its asset hashes blanked, as integ-runner canonicalises templates. Outside templates
 * (asset manifests, keyed by hash) a changed hash reorders entries, so those compare as a set of lines.
 */
function canonical(name: string, text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  // A destination's name ends in a short hash of what it publishes.
  const blanked = text.replace(/[0-9a-f]{64}/g, 'AssetHash').replace(/(current_account-current_region)-[0-9a-f]{8}\b/g, '$1');
  return name.endsWith('.template.json') ? blanked : blanked.split('\n').sort().join('\n');
}

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

  test('gives the committed snapshot, asset hashes compared by where they stand', () => {
    const committed = readSnapshot();
    const names = [...new Set([...committed.keys(), ...fresh.keys()])].sort();
    const [was, is] = [(name: string) => canonical(name, committed.get(name)), (name: string) => canonical(name, fresh.get(name))];
    const differences = names
      .filter((name) => was(name) !== is(name))
      .map((name) => (name.endsWith('.template.json') ? `${name}: ${differingEntries(was(name), is(name)).join(', ')}` : name));
    // An intended change: `npm run integ:snapshot`, then review and commit the snapshot's diff.
    expect(differences).toEqual([]);
  });

  test("deploys the built bundle of npm run bundle as the function's code, byte for byte", () => {
    const built = path.join(__dirname, '..', '..', 'dist', 'lambda');
    expect(Object.keys(functionAsset).sort()).toEqual(['index.js', 'index.js.map']);
    for (const [name, bytes] of Object.entries(functionAsset)) expect(bytes.equals(readFileSync(path.join(built, name)))).toBe(true);
  });
});
