/**
 * Runs the Lambda bundle's tests (test/lambda) again under Node.js 24, the runtime the stack deploys
 * the function on (this machine's Node.js may be older): jest itself runs on the Node.js 24 binary of
 * the npm package `node-<platform>-<arch>`. Extra arguments go to jest (`.ci/run` passes --json).
 * Where Node.js 24 cannot be installed, it says so and exits 0 without running anything.
 *
 *   npm run test:node24
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { installRuntime } from './helpers/runtimes';

const ROOT = join(__dirname, '..');
const node = installRuntime('node24');
if (!node.ok) {
  console.log(`Lambda tests under Node.js 24 SKIPPED: ${node.reason}`);
  process.exit(0);
}
console.log(`Lambda tests under Node.js ${node.version} (${node.bin})`);
const jest = join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
const r = spawnSync(node.bin, [jest, 'test/lambda', ...process.argv.slice(2)], {
  cwd: ROOT,
  stdio: 'inherit',
  // Child processes the tests start (`node …`) get Node.js 24 too.
  env: { ...process.env, PATH: `${dirname(node.bin)}:${process.env.PATH ?? ''}` },
});
process.exit(r.status ?? 1);
