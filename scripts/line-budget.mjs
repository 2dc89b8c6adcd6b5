/**
 * The line budget `npm test` holds the tree to: a source file under `lambda/` or `infra/` past 400 lines,
 * or a README past 300, fails with what to do. Biome's own file-length rule does not look at TypeScript
 * here, and nothing else reads the README.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const SOURCE_LINES = 400;
const README_LINES = 300;

/** Lines as `wc -l` counts them, a last line without its newline included. */
function linesOf(path) {
  const text = readFileSync(path, 'utf8');
  if (text.length === 0) return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

function* sources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (/\.(ts|js|mjs|cjs)$/.test(entry.name)) yield path;
  }
}

const over = [];
for (const dir of ['lambda', 'infra']) {
  for (const path of sources(dir)) {
    const lines = linesOf(path);
    if (lines > SOURCE_LINES) over.push(`${path} has ${lines} lines, over ${SOURCE_LINES}: split it by concern`);
  }
}
const readme = linesOf('README.md');
if (readme > README_LINES) over.push(`README.md has ${readme} lines, over ${README_LINES}: move detail into docs/`);

for (const line of over) console.error(`line budget: ${line}`);
process.exit(over.length > 0 ? 1 : 0);
