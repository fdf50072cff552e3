#!/usr/bin/env node
// A checkout runs the CLI from its TypeScript sources through tsx, so `npm ci` needs no build step; the installed
// package has no sources and runs the CLI compiled into dist/ (`npm run build`, run by `prepack`).
const fs = require('node:fs');
const path = require('node:path');

const sources = path.join(__dirname, '..', 'cli', 'main.ts');
if (fs.existsSync(sources)) {
  require('tsx/cjs');
  require(sources);
} else {
  require('../dist/cli/main.js');
}
