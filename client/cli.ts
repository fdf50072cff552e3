/**
 * The `baton` CLI: a thin layer over the client SDK and the local stack. Every command takes `--json`.
 * This is an edge: it reads `process.env` once and passes configuration down as options.
 */
import path from 'node:path';
import { Command } from 'commander';
import { connect, type ConnectOptions } from '.';
import { describeError } from './errors';
import { DEFAULT_STATE_DIR, readStackFile } from './stack-file';
import { runDemo, runDev } from './dev';
import { runWorkerFromEnv } from '../worker/main';
import { installRuntime, parseLogLevel } from '../worker/runtime';

interface GlobalOptions {
  stateDir: string;
}

const program = new Command('baton')
  .description('Run teams of LLM agents as durable Temporal workflows.')
  .option('--state-dir <dir>', 'where the local stack keeps its state and stack.json', DEFAULT_STATE_DIR)
  .showHelpAfterError();

function globals(): GlobalOptions {
  return program.opts<GlobalOptions>();
}

/** Where the Temporal server and task queue are: the environment first, else the running `baton dev`. */
function connectOptions(): ConnectOptions {
  const env = process.env;
  if (env.TEMPORAL_ADDRESS) {
    return {
      address: env.TEMPORAL_ADDRESS,
      namespace: env.TEMPORAL_NAMESPACE || 'default',
      taskQueue: env.BATON_TASK_QUEUE || 'baton',
    };
  }
  const stack = readStackFile(globals().stateDir);
  if (!stack) {
    throw new CliError(
      `no Baton stack is running (no live ${path.join(globals().stateDir, 'stack.json')}): start one with \`baton dev\`, or set TEMPORAL_ADDRESS`,
    );
  }
  return { address: stack.temporalAddress, namespace: stack.namespace, taskQueue: stack.taskQueue };
}

class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

program
  .command('run')
  .description('start a root thread with <agent>, send it <message> and wait for the reply')
  .argument('<agent>', 'the agent that answers')
  .argument('<message>', 'the first message')
  .option('--thread <id>', 'a thread id of your own (default: a new one)')
  .option('--json', 'print {threadId, workflowId, reply, ...} as JSON')
  .action(async (agent: string, message: string, options: { thread?: string; json?: boolean }) => {
    const client = await connect(connectOptions());
    try {
      const thread = await client.startThread({ agent, ...(options.thread ? { threadId: options.thread } : {}) });
      const result = await thread.send(message);
      print(
        Boolean(options.json),
        { ...result, workflowId: thread.workflowId },
        result.status === 'completed'
          ? result.reply
          : `(the turn ended without an answer: ${result.status} after ${result.steps} steps)`,
      );
    } finally {
      await client.close();
    }
  });

program
  .command('dev')
  .description('start the local stack (Temporal, Postgres, model) and a worker in the foreground')
  .option('--agents <dir>', 'agents directory', 'agents')
  .option('--model-script <file>', 'scripted model script (default: <agents>/model-script.yaml without OPENAI_API_KEY)')
  .option('--task-queue <name>', 'task queue of the worker', 'baton')
  .option('--json', 'print the stack description as one JSON line once it is up')
  .action(async (options: { agents: string; modelScript?: string; taskQueue: string; json?: boolean }) => {
    await runDev({ ...options, stateDir: globals().stateDir, env: process.env, json: Boolean(options.json) });
  });

program
  .command('demo')
  .description('run the example agents end to end on the local stack')
  .option('--exit', 'stop the stack after the reply instead of keeping it up for inspection')
  .option('--json', 'print the result as JSON')
  .action(async (options: { exit?: boolean; json?: boolean }) => {
    await runDemo({
      stateDir: globals().stateDir,
      env: process.env,
      exit: Boolean(options.exit),
      json: Boolean(options.json),
    });
  });

program
  .command('worker')
  .description('run a production worker configured by environment variables (see the README)')
  .action(async () => {
    await runWorkerFromEnv(process.env);
  });

installRuntime(parseLogLevel(process.env.BATON_LOG_LEVEL));
program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`baton: ${describeError(error)}\n`);
  if (process.env.BATON_DEBUG && error instanceof Error) process.stderr.write(`${error.stack}\n`);
  process.exitCode = 1;
});
