/**
 * Preloaded (`node --require`) into the test processes of `npm run test:quick`: that tier promises no child
 * processes (no shells, no bubblewrap, no servers), so starting one throws, naming the way out. Plain CommonJS,
 * loaded before the test file; it patches the `node:child_process` functions in place, which both `require` and
 * `import` see. The runner's own process (which starts the test files) gets the preload too and is left alone: only
 * processes the runner started carry `NODE_TEST_CONTEXT`.
 */
'use strict';
const childProcess = require('node:child_process');
const { syncBuiltinESMExports } = require('node:module');

const refuse = (name) =>
  function refused(file) {
    const what = typeof file === 'string' ? ` '${file}'` : '';
    throw new Error(
      `child_process.${name}${what}: a quick test starts no process. If this file must, add it to ` +
        'PROCESS_UNIT_FILES in testing/test-tiers.ts (npm test runs it, npm run test:quick does not).',
    );
  };

if (process.env.NODE_TEST_CONTEXT !== undefined) {
  for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
    childProcess[name] = refuse(name);
  }
  syncBuiltinESMExports();
}
