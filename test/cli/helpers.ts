/**
 * Running the built command as a user does: `node dist/cli/cli.js …` in a child process against the
 * test S3 endpoint, and reading what it left in a cache folder.
 *
 * The working tree is shared and `npm run bundle` may rewrite dist/cli/cli.js at any moment, so each
 * test file runs its own copy of the bundle, taken once it is known to be whole.
 *
 * @example
 * beforeAll(ensureBuiltCli);
 * const run = await runCli(['check', '--config', datastoreConfig(bucket, 'swamp')]);
 * expect(run.code).toBe(0);
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { testEndpoint } from '../helpers/s3';

const ROOT = join(__dirname, '..', '..');
/** The bundled command. */
export const CLI = join(ROOT, 'dist', 'cli', 'cli.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (/\.(ts|json)$/.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

function isFresh(): boolean {
  const built = statSync(CLI, { throwIfNoEntry: false });
  if (!built) return false;
  return built.mtimeMs >= Math.max(newestSource(join(ROOT, 'bin')), newestSource(join(ROOT, 'lambda')));
}

/**
 * Builds dist/cli/cli.js with `node scripts/bundle.mjs` when it is missing or older than the sources
 * (`npm test` bundles first, so this is for `npx jest test/cli`). Workers that build at once do no harm:
 * the bundle script puts each file in place with one rename, so every reader sees one whole bundle.
 */
export function ensureBuiltCli(): void {
  if (!isFresh()) execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs')], { cwd: ROOT, stdio: 'pipe' });
  snapshot = snapshotBundle();
}

let snapshot: string | undefined;

/**
 * Copies the bundle to a temporary file, so a later bundle does not change it under a test. The copy opens
 * the file once, and a bundle replaces it with one rename: the copy is one whole version.
 */
function snapshotBundle(): string {
  const target = join(tempDir(), 'cli.js');
  copyFileSync(CLI, target);
  return target;
}

/** What a run of the command left: its exit code and output. */
export interface CliRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Starts the command; the caller may kill it. stdout and stderr are pipes (not a TTY, so no progress bar). */
export function startCli(args: readonly string[], env: NodeJS.ProcessEnv = {}): { child: ChildProcess; done: Promise<CliRun> } {
  if (!snapshot) throw new Error('call ensureBuiltCli() in beforeAll first');
  const child = spawn(process.execPath, [snapshot, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<CliRun>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, done };
}

/** Runs the command to its end. */
export function runCli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return startCli(args, env).done;
}

/** swamp's `--config` JSON for a root on the test endpoint. */
export function datastoreConfig(bucket: string, prefix?: string): string {
  return JSON.stringify({ bucket, prefix, region: process.env.AWS_REGION ?? 'us-east-1', endpoint: testEndpoint(), forcePathStyle: true });
}

const tempDirs: string[] = [];
if (typeof afterAll === 'function')
  afterAll(() => {
    for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  });

/** A fresh temporary folder, removed after the test file. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'datastore-indexer-cli-'));
  tempDirs.push(dir);
  return dir;
}

/** Every file under `dir` as relative `/`-separated path → bytes. */
export function readTree(dir: string): Map<string, Buffer> {
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

/** Byte-comparable form of a key → bytes map: sorted `[key, sha256]` pairs, so a mismatch names the key. */
export function asComparable(files: ReadonlyMap<string, Buffer>): [string, string][] {
  const hash = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
  return [...files].map(([k, v]): [string, string] => [k, hash(v)]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
