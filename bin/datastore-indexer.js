#!/usr/bin/env node
// The npm `bin` of this package: runs the bundled command (built by `npm run bundle`, which `npm install` runs).
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const cli = join(__dirname, '..', 'dist', 'cli', 'cli.js');
if (!existsSync(cli)) {
  process.stderr.write('datastore-indexer: dist/cli/cli.js is missing; run `npm run bundle` in this package first\n');
  process.exit(1);
}
require(cli);
