/**
 * Run by `shell-sandbox.test.ts` in place of a worker: a process started with secrets in its launch environment
 * (what `/proc/<pid>/environ` shows) that runs one command through the shell tool as a worker does (the sandbox
 * probed from its settings, PATH, HOME and LANG taken from its environment). Prints `{"pid"}` as one JSON line when
 * it starts and `{"result"}` or `{"error"}` when the command is done. Arguments: <working directory> <command>.
 */
import { createShellTool } from '../../activities/tools/shell';
import { probeShellSandbox } from '../../activities/tools/shell-sandbox';
import { fakeToolContext } from '../../testing/tool-context';
import { readToolsConfig } from '../../worker/config';

async function main(): Promise<void> {
  const [workingDirectory, command] = process.argv.slice(2);
  if (workingDirectory === undefined || command === undefined) {
    throw new Error('usage: shell-sandbox-child.ts <working directory> <command>');
  }
  process.stdout.write(`${JSON.stringify({ pid: process.pid })}\n`);
  const config = readToolsConfig(process.env, process.cwd());
  const tool = createShellTool({ env: config.shellEnv, sandbox: await probeShellSandbox(config.sandbox, process.env) });
  const context = fakeToolContext({ world: { name: 'w', variables: { working_directory: workingDirectory } } });
  try {
    const result = await tool.run?.(tool.parameters.parse({ command, timeout_s: 120 }), context);
    process.stdout.write(`${JSON.stringify({ result })}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ error: error instanceof Error ? error.message : String(error) })}\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
