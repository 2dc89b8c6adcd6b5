/**
 * The test run's own temporary folder: the global setup points TMPDIR at a fresh folder inside the
 * system's, so every temporary file of the run (jest workers, the CLI, `cdk synth`, moto) lands there,
 * and the global teardown fails the run, naming them, if anything is left behind.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const VARIABLE = 'DATASTORE_INDEXER_TEST_TMPDIR';

/** Makes the run's temporary folder and points TMPDIR (inherited by workers and children) at it. */
export function useRunTempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'datastore-indexer-test-run-'));
  process.env[VARIABLE] = dir;
  process.env.TMPDIR = dir;
  // tsx (the CDK app's runner) keeps a compile cache in the temp folder unless told not to.
  process.env.TSX_DISABLE_CACHE = '1';
  return dir;
}

/** Removes the run's temporary folder; throws naming what the tests left in it. */
export function removeRunTempDir(): void {
  const dir = process.env[VARIABLE];
  if (!dir) return;
  const left = readdirSync(dir);
  rmSync(dir, { recursive: true, force: true });
  if (left.length > 0) {
    throw new Error(
      `The tests left ${left.length} entries in the temporary folder (each test must remove what it makes): ${left.slice(0, 20).join(', ')}`,
    );
  }
}

/** Every file under `dir`, relative to it, sorted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? (e as unknown as { path: string }).path, e.name).slice(dir.length + 1))
    .sort();
}
