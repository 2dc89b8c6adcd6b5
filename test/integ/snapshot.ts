/**
 * The deploy test's snapshot, in integ-runner's layout: `integ.indexer.ts.snapshot/` beside the test, the
 * cloud assembly of `integ.indexer.ts` without the staged asset folders (their hashes stay in the templates
 * and asset manifests). `@aws-cdk/integ-runner` cannot check it yet: its release reads cloud assemblies up
 * to schema 53 and carries that reader in its own bundle, while aws-cdk-lib writes 55. So
 * `snapshot.test.ts` synthesises the app again and compares; `npm run integ:snapshot` (this file, run by
 * tsx) rewrites the snapshot.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/** The integ test app. */
export const INTEG_APP = path.join(__dirname, 'integ.indexer.ts');

/** Where integ-runner keeps the snapshot of `INTEG_APP`. */
export const SNAPSHOT_DIR = `${INTEG_APP}.snapshot`;

/**
 * The context `cdk deploy --app "npx tsx test/integ/integ.indexer.ts"` gives the app (cdk.json's, no
 * version reporting, path and asset metadata), so the snapshot holds the templates that command
 * deploys; without stack traces, which hold this machine's paths and only go to the metadata files.
 */
function deployContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return {
    ...cdkJson.context,
    'aws:cdk:version-reporting': false,
    'aws:cdk:enable-path-metadata': true,
    'aws:cdk:enable-asset-metadata': true,
    'aws:cdk:disable-stack-trace': true,
    'aws:cdk:disable-creation-stack-traces': true,
  };
}

/** Where the kernel allows it, the app runs in a network namespace of its own: offline for sure. */
const NO_NETWORK = spawnSync('unshare', ['-rn', 'true']).status === 0 ? ['unshare', '-rn'] : [];

/**
 * Runs the integ app as integ-runner does (tsx, `CDK_OUTDIR`), offline, with no AWS configuration;
 * tsx's temporary files go to `scratch`.
 */
export function synthesize(outdir: string, scratch: string): void {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AWS_') && !k.startsWith('CDK_')) env[k] = v;
  const [file, ...args] = [...NO_NETWORK, process.execPath, path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs'), INTEG_APP];
  const r = spawnSync(file, args, {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 180_000,
    env: {
      ...env,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: path.join(scratch, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: path.join(scratch, 'no-aws-credentials'),
      TMPDIR: scratch,
      CDK_OUTDIR: outdir,
      CDK_CONTEXT_JSON: JSON.stringify(deployContext()),
    },
  });
  if (r.status !== 0) throw new Error(`synthesis of ${INTEG_APP} failed (exit ${r.status} ${r.signal ?? ''}):\n${r.stderr}\n${r.stdout}`);
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * A cloud assembly's files, name to text, as the snapshot holds them: no staged asset folders; no stack
 * traces in the metadata (as integ-runner cleans its snapshots: they name this machine's paths and
 * source lines); each assertion's `salt` (the time of synthesis, so that every deploy runs the assertion
 * again) set to "0", with the template's hash and asset destination keys recomputed to follow it.
 */
export function readAssembly(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith('asset.')) continue;
    if (statSync(path.join(dir, name)).isDirectory()) throw new Error(`${dir}/${name}: a folder the snapshot does not expect`);
    files.set(name, readFileSync(path.join(dir, name), 'utf8'));
  }
  const replaceEverywhere = (before: string, after: string) => {
    for (const [name, text] of files) files.set(name, text.split(before).join(after));
  };
  for (const [name, text] of files) {
    if (name.endsWith('.metadata.json')) files.set(name, withoutTraces(text));
    if (!name.endsWith('.template.json')) continue;
    const fixed = text.replace(/^(\s*"salt": )"\d+"/gm, '$1"0"');
    if (fixed !== text) replaceEverywhere(sha256(text), sha256(fixed));
    files.set(name, fixed);
  }
  // A destination's key ends in the first 8 hex digits of its JSON's hash, and the JSON holds the object key.
  for (const [name, text] of files) {
    if (!name.endsWith('.assets.json')) continue;
    const manifest = JSON.parse(text) as { files?: Record<string, { destinations: Record<string, unknown> }> };
    for (const { destinations } of Object.values(manifest.files ?? {})) {
      for (const [key, destination] of Object.entries(destinations)) {
        const expected = key.replace(/-[0-9a-f]{8}$/, `-${sha256(JSON.stringify(destination)).slice(0, 8)}`);
        if (expected !== key) replaceEverywhere(`"${key}"`, `"${expected}"`);
      }
    }
  }
  return files;
}

/** A metadata file without the `trace` of its entries, in the layout CDK writes (two-space JSON). */
function withoutTraces(text: string): string {
  const metadata = JSON.parse(text) as Record<string, Array<Record<string, unknown>>>;
  for (const entries of Object.values(metadata)) for (const entry of entries) delete entry.trace;
  return JSON.stringify(metadata, undefined, 2);
}

/** The committed snapshot's files (none when it is missing). */
export function readSnapshot(): Map<string, string> {
  return statSync(SNAPSHOT_DIR, { throwIfNoEntry: false }) ? readAssembly(SNAPSHOT_DIR) : new Map();
}

/** Synthesises the app into a temporary folder and returns its files as the snapshot holds them. */
export function freshSnapshot(inspect?: (outdir: string) => void): Map<string, string> {
  const scratch = mkdtempSync(path.join(tmpdir(), 'indexer-integ-'));
  const outdir = path.join(scratch, 'cdk.out');
  try {
    synthesize(outdir, scratch);
    inspect?.(outdir);
    return readAssembly(outdir);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const files = freshSnapshot();
  rmSync(SNAPSHOT_DIR, { recursive: true, force: true });
  mkdirSync(SNAPSHOT_DIR);
  for (const [name, text] of files) writeFileSync(path.join(SNAPSHOT_DIR, name), text);
  console.log(`wrote ${files.size} files to ${path.relative(ROOT, SNAPSHOT_DIR)}`);
}
