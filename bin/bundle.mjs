#!/usr/bin/env node
// Bundles the Lambda handler (dist/lambda/index.js) and the command (dist/cli/cli.js) with esbuild.
import { build } from 'esbuild';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const common = { bundle: true, platform: 'node', sourcemap: true, logLevel: 'warning', absWorkingDir: root };
const targets = [
  { entryPoints: ['lambda/index.ts'], outfile: 'dist/lambda/index.js', target: 'node22', minify: true },
  { entryPoints: ['bin/cli.ts'], outfile: 'dist/cli/cli.js', target: 'node20' },
];
for (const t of targets) {
  if (!existsSync(join(root, t.entryPoints[0]))) continue;
  await build({ ...common, ...t });
}
