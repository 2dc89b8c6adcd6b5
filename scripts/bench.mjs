#!/usr/bin/env node
// `npm run bench`: bundles bench/run.ts and its offline child with esbuild, then runs the bundle, so the
// library is measured as the Lambda and the command ship it. Run through tsx, each module is compiled on its
// own and every imported binding read becomes a getter call, which costs the listing's reader more CPU than
// the bundle spends on the whole page.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bench = join(root, 'bench');
const out = join(root, '.bench', 'bundle');
/** Makes `__dirname` in each TypeScript source the folder of that source, not of the bundle. */
const sourceFolders = {
  name: 'source-folders',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replace(/\b__dirname\b/g, JSON.stringify(dirname(args.path))),
      loader: 'ts',
    }));
  },
};

await build({
  entryPoints: { run: join(bench, 'run.ts'), 'offline-child': join(bench, 'offline-child.ts') },
  outdir: out,
  outExtension: { '.js': '.cjs' },
  bundle: true,
  platform: 'node',
  target: 'node20',
  packages: 'external',
  // Each source finds its helper scripts (the model's host, the Lambda's worker) beside itself, as under tsx.
  plugins: [sourceFolders],
  logLevel: 'warning',
  absWorkingDir: root,
});
const run = spawnSync(process.execPath, [join(out, 'run.cjs'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(run.status ?? 1);
