// Preloaded into every test process (`node --require`): quiet Temporal SDK logs unless BATON_LOG_LEVEL asks for
// more. Plain CommonJS, and main thread only, because the SDK's workflow threads inherit the preload flags and
// must neither load TypeScript nor install a second runtime.
const { isMainThread } = require('node:worker_threads');

if (isMainThread) {
  require('tsx/cjs');
  const { installRuntime, parseLogLevel } = require('../worker/runtime.ts');
  installRuntime(parseLogLevel(process.env.BATON_LOG_LEVEL));
}
