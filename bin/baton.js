#!/usr/bin/env node
// The CLI runs from TypeScript sources through tsx, so `npm ci` needs no build step.
require('tsx/cjs');
require('../cli/main.ts');
