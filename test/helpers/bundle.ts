/**
 * The built artifacts the tests run (`dist/lambda/index.js`, `dist/cli/cli.js`) and whether they are older
 * than the sources they are built from. The jest global setup rebuilds them once per run when stale, so a
 * focused `npx jest test/lambda` after an edit never runs yesterday's bundle.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/** The Lambda bundle and the command bundle `node scripts/bundle.mjs` writes. */
export const BUILT = [join(ROOT, 'dist', 'lambda', 'index.js'), join(ROOT, 'dist', 'cli', 'cli.js')];

/** Folders and files whose change changes a bundle. */
const SOURCES = ['lambda', 'bin', join('scripts', 'bundle.mjs'), join('infra', 'bundling.json'), 'package.json', 'package-lock.json'].map(
  (p) => join(ROOT, p),
);

function newest(path: string): number {
  const info = statSync(path, { throwIfNoEntry: false });
  if (!info) return 0;
  if (!info.isDirectory()) return info.mtimeMs;
  let latest = info.mtimeMs;
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

/** True when a bundle is missing or any source is newer than it. */
export function bundlesAreStale(): boolean {
  const sources = Math.max(...SOURCES.map(newest));
  return BUILT.some((file) => (statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? -1) < sources);
}

/** Runs `node scripts/bundle.mjs` when a bundle is missing or older than the sources; true when it built. */
export function rebuildIfStale(): boolean {
  if (!bundlesAreStale()) return false;
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs')], { cwd: ROOT, stdio: 'inherit' });
  return true;
}
