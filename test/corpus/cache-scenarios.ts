/**
 * The corpus's runs of `hydrate` against odd caches (issue 20): each returns what the command did, after
 * asserting what the row's exit code and output cannot show (nothing written outside the cache, files kept).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CliRun, readTree, runCli, startCli, tempDir } from '../cli/helpers';
import { deleteObject, listKeys, putObjects } from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

/** The scenarios this file runs. */
export const CACHE_SCENARIOS = [
  'empty-cache',
  'cache-links-out',
  'concurrent-hydrates',
  'freshness-as-swamp-pull',
  'mistyped-prefix-advice',
  'unwritable-cache',
  'file-folder-collision',
] as const;
export type CacheScenario = (typeof CACHE_SCENARIOS)[number];

/** Mounts a read-only tmpfs on `dir` (root with CAP_SYS_ADMIN); false where it cannot. */
function mountReadOnly(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function cacheScenario(name: CacheScenario, store: S3Store, config: string): Promise<CliRun> {
  const hydrate = (cache: string, ...more: string[]) => runCli(['hydrate', '--config', config, '--cache', cache, ...more]);
  switch (name) {
    case 'empty-cache':
      return hydrate('');
    case 'cache-links-out': {
      await putObjects(store, {
        'swamp/workflow-runs/w1/run-1/out.json': 'new run',
        'swamp/logs/a.log': 'aaa',
        'swamp/logs/b.log': 'bbb',
      });
      const [cache, elsewhere] = [join(tempDir(), 'cache'), tempDir()];
      mkdirSync(join(cache, 'logs'), { recursive: true });
      writeFileSync(join(elsewhere, 'a.log'), 'old'); // the right size, outside the cache
      symlinkSync(elsewhere, join(cache, 'workflow-runs'));
      symlinkSync(join(elsewhere, 'a.log'), join(cache, 'logs', 'a.log'));
      const run = await hydrate(cache);
      expect([...readTree(elsewhere).keys()]).toEqual(['a.log']);
      expect(readFileSync(join(elsewhere, 'a.log'), 'utf8')).toBe('old');
      expect(readFileSync(join(cache, 'logs', 'b.log'), 'utf8')).toBe('bbb');
      return run;
    }
    case 'concurrent-hydrates': {
      // Files large enough to stream through part files, one at a time, so the two runs overlap.
      const objects: Record<string, Buffer> = {};
      for (let i = 0; i < 12; i++) objects[`swamp/files/${i}.bin`] = Buffer.alloc(1_200_000 + i, i);
      await putObjects(store, objects);
      const cache = join(tempDir(), 'cache');
      const args = ['hydrate', '--config', config, '--cache', cache, '--concurrency', '1'];
      const runs = await Promise.all([0, 1].map(() => startCli(args).done));
      expect(runs.map((r) => r.code)).toEqual([0, 0]);
      expect([...readTree(cache).keys()].sort()).toEqual(
        ['.datastore-index.json', ...Object.keys(objects).map((k) => k.slice('swamp/'.length))].sort(),
      );
      return { ...runs[1], stderr: runs.map((r) => r.stderr).join('') };
    }
    case 'freshness-as-swamp-pull': {
      await putObjects(store, { 'swamp/logs/a.log': 'aaa', 'swamp/logs/b.log': 'bbb' });
      const cache = join(tempDir(), 'cache');
      expect((await hydrate(cache)).code).toBe(0);
      // A same-size overwrite and a delete: swamp's pull compares sizes only and never deletes a local file.
      await putObjects(store, { 'swamp/logs/a.log': 'AAA' });
      await deleteObject(store, 'swamp/logs/b.log');
      const run = await hydrate(cache);
      expect(readFileSync(join(cache, 'logs', 'a.log'), 'utf8')).toBe('aaa');
      expect(readFileSync(join(cache, 'logs', 'b.log'), 'utf8')).toBe('bbb');
      return run;
    }
    case 'mistyped-prefix-advice': {
      await putObjects(store, { 'swamp/logs/a.log': 'aaa' });
      const typo = config.replace('"swamp"', '"swamq"');
      const hydrate = (cache: string) => runCli(['hydrate', '--config', typo, '--cache', cache]);
      const check = await runCli(['check', '--config', typo]);
      const repair = await runCli(['repair', '--config', typo]);
      const advice = 'Check the bucket and --prefix; pass --allow-empty to create an empty index anyway';
      expect(check.stdout).not.toMatch(/repair` heals it/);
      expect(check.stdout).toContain(`swamq/ holds no object at all. ${advice}`);
      expect(repair.stderr).toContain(`swamq/ holds no object at all; no index was created there. ${advice}`);
      // Issue 34: the three commands exit alike on a prefix that holds nothing.
      const hydrate1 = await hydrate(join(tempDir(), 'cache'));
      expect([repair.code, hydrate1.code]).toEqual([1, 1]);
      return check;
    }
    case 'unwritable-cache': {
      await putObjects(store, { 'swamp/logs/a.log': 'aaa', 'swamp/logs/b.log': 'bbb' });
      const cache = join(tempDir(), 'read-only');
      mkdirSync(cache);
      // Issue 34: nothing is published before the cache is known to be writable.
      const nothingPublished = async (run: CliRun) => {
        expect(await listKeys(store, 'swamp/')).toEqual(['swamp/logs/a.log', 'swamp/logs/b.log']);
        return run;
      };
      if (mountReadOnly(cache)) {
        try {
          return await nothingPublished(await hydrate(cache));
        } finally {
          execFileSync('umount', [cache]);
        }
      }
      if (process.getuid?.() === 0) {
        // Root writes through any mode bits, and no read-only mount could be made here.
        console.warn('unwritable-cache skipped: running as root without the right to mount a read-only tmpfs');
        return { code: 1, signal: null, stdout: '', stderr: 'datastore-indexer: … cannot be written (skipped)' };
      }
      chmodSync(cache, 0o555);
      try {
        return await nothingPublished(await hydrate(cache));
      } finally {
        chmodSync(cache, 0o755);
      }
    }
    case 'file-folder-collision': {
      await putObjects(store, { 'swamp/logs/a': 'a file', 'swamp/logs/a/b': 'under a folder', 'swamp/logs/c.log': 'ccc' });
      const cache = join(tempDir(), 'cache');
      const run = await hydrate(cache);
      expect(readFileSync(join(cache, 'logs', 'a', 'b'), 'utf8')).toBe('under a folder');
      expect(readFileSync(join(cache, 'logs', 'c.log'), 'utf8')).toBe('ccc');
      expect(readdirSync(join(cache, 'logs')).sort()).toEqual(['a', 'c.log']);
      return run;
    }
  }
}
