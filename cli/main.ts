/**
 * The `baton` binary (bin/baton.js): one command line run with the process's own streams, environment and working
 * directory. The commands are cli/program.ts.
 */
import { runCli } from './program';

void runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
}).then((code) => {
  // Left as it is on success: `baton demo` sets it itself when its run went wrong.
  if (code !== 0) process.exitCode = code;
});
