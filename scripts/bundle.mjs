#!/usr/bin/env node
// Bundles the Lambda handler (dist/lambda/index.js) and the command (dist/cli/cli.js) with esbuild.
// The Lambda's esbuild options live in infra/bundling.json, which the CDK construct reads too, so the
// asset `cdk synth` builds is byte-identical to dist/lambda/index.js.
import { build } from 'esbuild';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lambda = JSON.parse(readFileSync(join(root, 'infra', 'bundling.json'), 'utf8'));
// Both bundles load the same SDK, so both take its ES modules: a run loads only the commands it sends.
const common = {
  bundle: true,
  platform: 'node',
  sourcemap: true,
  logLevel: 'warning',
  absWorkingDir: root,
  mainFields: lambda.mainFields,
  supported: lambda.supported,
};
const targets = [
  {
    entryPoints: [lambda.entry],
    outfile: lambda.outfile,
    platform: lambda.platform,
    format: lambda.format,
    target: lambda.target,
    minify: lambda.minify,
    keepNames: lambda.keepNames,
    sourcemap: lambda.sourcemap,
    external: lambda.external,
  },
  { entryPoints: ['bin/cli.ts'], outfile: 'dist/cli/cli.js', target: 'node20' },
];
for (const t of targets) {
  if (!existsSync(join(root, t.entryPoints[0]))) continue;
  const { outputFiles } = await build({ ...common, ...t, write: false });
  // Replace each file in one rename: tests (and `npm pack`) may load the bundle while it is rebuilt.
  for (const f of outputFiles) {
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(`${f.path}.${process.pid}.tmp`, f.contents);
    renameSync(`${f.path}.${process.pid}.tmp`, f.path);
  }
}
