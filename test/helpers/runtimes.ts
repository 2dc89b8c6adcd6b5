/**
 * Runtimes the tests need besides the Node.js running them, installed from the npm packages that ship
 * their binaries into `node_modules/.cache/s3-datastore-indexer/` (kept across runs, gone with `npm ci`).
 *
 * @example
 * const deno = installRuntime('deno');
 * if (!deno.ok) console.warn(`skipped: ${deno.reason}`);
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
/** Where the runtimes are installed. */
export const RUNTIME_CACHE = join(ROOT, 'node_modules', '.cache', 's3-datastore-indexer');

/** Runtimes by name: the npm package for this platform and the binary inside it. */
const RUNTIMES = {
  /** The Node.js the Lambda runs (nodejs24.x). */
  node24: { package: () => `node-${process.platform}-${process.arch}`, range: '24', bin: join('bin', 'node') },
  /** swamp's runtime. */
  deno: {
    package: () => (process.platform === 'linux' ? `@deno/linux-${process.arch}-glibc` : `@deno/${process.platform}-${process.arch}`),
    range: '2',
    bin: 'deno',
  },
} as const;

export type RuntimeName = keyof typeof RUNTIMES;

/** An installed runtime (`bin`, `version`), or why it could not be installed. */
export type Runtime =
  | { readonly ok: true; readonly bin: string; readonly version: string }
  | { readonly ok: false; readonly reason: string };

function versionOf(bin: string): string | undefined {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 ? r.stdout.trim().split('\n')[0] : undefined;
}

/**
 * Installs the runtime's npm package into the cache unless it is there already, and returns its
 * binary; `{ ok: false, reason }` where it cannot be installed (no such package for this platform, or
 * the registry out of reach), so the caller can skip with that reason.
 */
export function installRuntime(name: RuntimeName): Runtime {
  const runtime = RUNTIMES[name];
  const pkg = runtime.package();
  const dir = join(RUNTIME_CACHE, name);
  const bin = join(dir, 'node_modules', ...pkg.split('/'), runtime.bin);
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    // A package.json of its own keeps npm from walking up into the project.
    writeFileSync(join(dir, 'package.json'), '{ "private": true }\n');
    try {
      execFileSync(
        'npm',
        [
          'install',
          '--no-save',
          '--no-package-lock',
          '--no-audit',
          '--no-fund',
          '--prefer-offline',
          '--loglevel=error',
          `${pkg}@${runtime.range}`,
        ],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 },
      );
    } catch (err) {
      const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
      return {
        ok: false,
        reason: `npm could not install ${pkg}@${runtime.range}: ${stderr.split('\n').slice(-3).join(' ') || String(err)}`,
      };
    }
  }
  const version = existsSync(bin) ? versionOf(bin) : undefined;
  if (!version) return { ok: false, reason: `${pkg}@${runtime.range} installed no working ${runtime.bin} binary at ${bin}` };
  return { ok: true, bin, version };
}
