/**
 * `npm run demo`: the command end to end against a local S3, in steps.
 *
 * Builds the command, starts moto on a free loopback port, seeds a swamp datastore of about 300
 * objects with no index (a prefix, internal files, a namespace), runs the real `datastore-indexer
 * hydrate` into a temporary cache, checks that the index and the cache equal the objects, runs
 * `check`, and stops the server whatever happens.
 *
 * Adding a part (e.g. the Lambda) is adding a `Step` to `STEPS`; steps share one `DemoState`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { DatastoreRoot, IndexScope } from '../lambda/lib/scope';
import { INDEX_KEY, scopeBase } from '../lambda/lib/names';
import { S3Store } from '../lambda/lib/s3';
import { mapLimit } from '../lambda/lib/concurrency';
import { readLiveIndex } from '../lambda/lib/layouts/read';
import { type MotoServer, startMoto } from '../support/moto';
import { lambdaStep } from './demo-lambda';

const ROOT = join(__dirname, '..');
const CLI = join(ROOT, 'dist', 'cli', 'cli.js');

/** What the steps build up and share. */
interface DemoState {
  readonly bucket: string;
  readonly prefix: string;
  readonly namespace: string;
  moto?: MotoServer;
  store?: S3Store;
  /** swamp's `--config` JSON for the seeded root. */
  config?: string;
  /** Data objects by scope ('' is the root's own, else the namespace): relative key → bytes. */
  objects: Map<string, Map<string, Buffer>>;
  internalKeys: string[];
  cacheDir?: string;
  /** Run whatever happens, last first. */
  readonly cleanups: (() => Promise<void> | void)[];
}

/** One step: a title, and lines saying what happened. Throw to stop the demo. */
interface Step {
  readonly title: string;
  run(state: DemoState): Promise<string[]>;
}

// ---------------------------------------------------------------------------------------------

/** Runs the command like a user: `node dist/cli/cli.js …`; stderr is passed through (a progress bar on a terminal). */
function datastoreIndexer(args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout }));
  });
}

/** A shell-quoted argument, for showing the command line. */
function shellQuote(arg: string): string {
  return /^[\w./:@=-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** Deterministic filler so sizes vary between objects. */
function body(rel: string, i: number): Buffer {
  return Buffer.from(`${rel}\n${'swamp '.repeat(20 + ((i * 7919) % 700))}\n`);
}

/** `count` relative keys spread over swamp's standard folders. */
function swampLikeKeys(count: number, tag: string): string[] {
  const shapes = [
    (i: number) => `data/aws/ec2/i-0${tag}${(i * 7919 + 4096).toString(16)}/1/raw`,
    (i: number) => `data/aws/s3/bucket-${tag}${i}/2/raw`,
    (i: number) => `outputs/model-${i % 9}/run-${tag}${i}/out.json`,
    (i: number) => `workflow-runs/nightly/${tag}run-${i}.yaml`,
    (i: number) => `workflows-evaluated/${tag}wf-${i}.yaml`,
    (i: number) => `definitions-evaluated/defs/${tag}d${i}/def.yaml`,
    (i: number) => `logs/${tag}run-${i}.log`,
    (i: number) => `audit/${tag}${i}.json`,
    (i: number) => `files/${tag}f${i}.txt`,
  ];
  return Array.from({ length: count }, (_, i) => shapes[i % shapes.length](i));
}

function readTree(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.set(relative(dir, path).split(sep).join('/'), readFileSync(path));
    }
  };
  walk(dir);
  return files;
}

function sameKeys(a: Iterable<string>, b: Iterable<string>): boolean {
  const x = [...a].sort();
  const y = [...b].sort();
  return x.length === y.length && x.every((k, i) => k === y[i]);
}

const kb = (bytes: number): string => `${(bytes / 1000).toFixed(1)} kB`;

// ---------------------------------------------------------------------------------------------

const build: Step = {
  title: 'Build the command (npm run bundle)',
  async run() {
    const out = spawnSync(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs')], { cwd: ROOT, encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`the bundle failed: ${out.stderr || out.error?.message}`);
    return [`dist/cli/cli.js (${(statSync(CLI).size / 1e6).toFixed(1)} MB)`];
  },
};

const startS3: Step = {
  title: 'Start a local S3 (moto on 127.0.0.1)',
  async run(state) {
    const moto = await startMoto();
    state.moto = moto;
    state.cleanups.push(() => moto.stop());
    const store = S3Store.connect({ endpoint: moto.endpoint, forcePathStyle: true, region: 'us-east-1' }, state.bucket);
    state.cleanups.push(() => store.client.destroy());
    await store.client.send(new CreateBucketCommand({ Bucket: state.bucket }));
    state.store = store;
    state.config = JSON.stringify({
      bucket: state.bucket,
      prefix: state.prefix,
      region: 'us-east-1',
      endpoint: moto.endpoint,
      forcePathStyle: true,
    });
    return [`${moto.endpoint}, bucket ${state.bucket}`];
  },
};

const seed: Step = {
  title: 'Seed a swamp datastore with no index',
  async run(state) {
    const root: DatastoreRoot = { bucket: state.bucket, prefix: state.prefix };
    const ns = state.namespace;
    state.objects.set('', new Map(swampLikeKeys(240, '').map((k, i) => [k, body(k, i)])));
    state.objects.set(ns, new Map(swampLikeKeys(50, 'b').map((k, i) => [k, body(k, i)])));
    const puts = new Map<string, Buffer>();
    for (const [scope, objects] of state.objects) {
      const base = scopeBase(scope ? { root, namespace: scope } : { root });
      for (const [rel, bytes] of objects) puts.set(base + rel, bytes);
    }
    const base = scopeBase({ root });
    // Keys swamp keeps to itself: never indexed.
    const internal: [string, string][] = [
      ['.push-queue.json', '[]'],
      ['.datastore-sync-state.json', '{}'],
      ['_catalog.db', 'SQLite format 3'],
      ['_catalog.db-wal', 'wal'],
      ['data/aws/.lock', '{}'],
      [`${ns}/.namespace.json`, JSON.stringify({ namespace: ns, repoId: 'repo-b', registeredAt: new Date().toISOString() })],
      [`${ns}/.push-queue.json`, '[]'],
    ];
    for (const [rel, text] of internal) puts.set(base + rel, Buffer.from(text));
    state.internalKeys = internal.map(([rel]) => base + rel);
    const started = Date.now();
    await mapLimit(puts, 32, ([key, bytes]) => state.store!.put(key, bytes, undefined, 'application/octet-stream'));
    const bytes = [...puts.values()].reduce((n, b) => n + b.length, 0);
    return [
      `s3://${state.bucket}/${state.prefix}: ${state.objects.get('')!.size} data objects, namespace ${ns}/ with ` +
        `${state.objects.get(ns)!.size}, ${internal.length} internal keys (locks, push queues, catalog db, marker); no index`,
      `${puts.size} objects (${kb(bytes)}) written in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    ];
  },
};

const hydrate: Step = {
  title: 'Run datastore-indexer hydrate into a temporary cache',
  async run(state) {
    const cacheDir = mkdtempSync(join(tmpdir(), 'datastore-indexer-demo-'));
    state.cacheDir = cacheDir;
    state.cleanups.push(() => rmSync(cacheDir, { recursive: true, force: true }));
    const args = ['hydrate', '--config', state.config!, '--cache', cacheDir];
    const started = Date.now();
    const run = await datastoreIndexer(args);
    if (run.code !== 0) throw new Error(`datastore-indexer hydrate exited ${run.code}`);
    return [
      `$ datastore-indexer ${args.map(shellQuote).join(' ')}`,
      ...run.stdout.trimEnd().split('\n'),
      `(exit ${run.code}, ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    ];
  },
};

const verify: Step = {
  title: 'Check the indexes and the cache against the objects',
  async run(state) {
    const root: DatastoreRoot = { bucket: state.bucket, prefix: state.prefix };
    const lines: string[] = [];
    for (const [ns, objects] of state.objects) {
      const scope: IndexScope = ns ? { root, namespace: ns } : { root };
      const live = await readLiveIndex(state.store!, scope);
      if (live.state !== 'valid') throw new Error(`the index at ${scopeBase(scope)}${INDEX_KEY} is ${live.state}`);
      const entries = live.index.entries;
      const sizesMatch = [...objects].every(([rel, bytes]) => entries.get(rel)?.size === bytes.length);
      if (!sameKeys(entries.keys(), objects.keys()) || !sizesMatch)
        throw new Error(`the index of ${ns || 'the root'} differs from its objects`);
      lines.push(
        `${scopeBase(scope)}${INDEX_KEY}: ${entries.size} entries, exactly the ${objects.size} data objects of ${ns ? `namespace ${ns}` : 'the root'}`,
      );
    }
    const cached = readTree(state.cacheDir!);
    if (!cached.has(INDEX_KEY)) throw new Error(`the cache has no ${INDEX_KEY}`);
    cached.delete(INDEX_KEY);
    const objects = state.objects.get('')!;
    const equal = sameKeys(cached.keys(), objects.keys()) && [...objects].every(([rel, bytes]) => cached.get(rel)?.equals(bytes));
    if (!equal) throw new Error('the cache differs from the objects');
    lines.push(
      `cache: ${cached.size} files equal to the ${objects.size} objects byte for byte, plus ${INDEX_KEY}; no internal key, nothing of ${state.namespace}/`,
    );
    return lines;
  },
};

const check: Step = {
  title: 'Run datastore-indexer check (exit 0 when every index is true)',
  async run(state) {
    const args = ['check', '--config', state.config!];
    const run = await datastoreIndexer(args);
    if (run.code !== 0) throw new Error(`datastore-indexer check exited ${run.code}:\n${run.stdout}`);
    return [`$ datastore-indexer check --config '…'`, ...run.stdout.trimEnd().split('\n'), `(exit ${run.code})`];
  },
};

/** The demo, in order; a later part appends its steps here. */
const STEPS: Step[] = [build, startS3, seed, hydrate, verify, check, lambdaStep];

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  // moto accepts any credentials: never send a real one, even to loopback.
  Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'demo', AWS_SECRET_ACCESS_KEY: 'demo', AWS_REGION: 'us-east-1' });
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

  const state: DemoState = {
    bucket: 'swamp-demo',
    prefix: 'swamp',
    namespace: 'team-b',
    objects: new Map(),
    internalKeys: [],
    cleanups: [],
  };
  const started = Date.now();
  let cleaned = false;
  const cleanup = async (): Promise<void> => {
    if (cleaned) return;
    cleaned = true;
    for (const undo of state.cleanups.reverse()) await Promise.resolve(undo()).catch(() => undefined);
  };
  process.once('SIGINT', () => {
    console.error('\nDemo interrupted; stopping the local S3.');
    void cleanup().finally(() => process.exit(130));
  });
  try {
    for (const [i, step] of STEPS.entries()) {
      const t = Date.now();
      console.log(`\n[${i + 1}/${STEPS.length}] ${step.title}`);
      const lines = await step.run(state);
      for (const line of lines) console.log(`    ${line}`);
      console.log(`    ✓ ${((Date.now() - t) / 1000).toFixed(1)} s`);
    }
    console.log(`\nDemo passed in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
    return 0;
  } catch (err) {
    console.error(`\nDemo failed after ${((Date.now() - started) / 1000).toFixed(1)} s: ${(err as Error).message}`);
    return 1;
  } finally {
    await cleanup();
  }
}

void main().then((code) => {
  process.exitCode = code;
});
