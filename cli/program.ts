/**
 * The `baton` CLI's commands: a thin layer over the client SDK and the local stack. Every command takes `--json`.
 * This is an edge: a run reads its environment (`process.env` for the `baton` binary, cli/main.ts) once and passes
 * configuration down as options. `runCli` runs one command line with streams, environment and working directory of
 * its own, so tests run the commands that need no process of their own in theirs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import {
  checkWorldName,
  connect,
  connectWorlds,
  findConnection,
  OVERLAP_POLICIES,
  type BatonClient,
  type OverlapPolicy,
  type ConnectOptions,
  type EnvEvent,
  type SendOptions,
  type ThreadHandle,
  type WorldHandle,
} from '../client';
import { traceparentProblem } from '../common/traceparent';
import { envAssignmentProblem, envTextProblem, parseEnvText } from '../common/env-text';
import { describeError } from '../client/errors';
import { newThreadId } from '../client/thread-ids';
import { threadIdProblem } from '../common/ids';
import { MAX_BUDGET_TOKENS, MAX_BUDGET_USD } from '../common/budgets';
import {
  describeTurn,
  formatEnvEvent,
  formatScheduleDetails,
  formatScheduleList,
  formatEnvManifest,
  formatApprovals,
  formatQuestions,
  formatTranscript,
  formatProposals,
  formatRefusedWrites,
  formatStatus,
  formatTree,
  formatUsage,
  formatWake,
  formatWatchers,
  formatWatchEvents,
} from '../client/format';
import { DEFAULT_STATE_DIR, readStackFile } from '../stack/stack-file';
import { addEvalCommands } from './eval-commands';
import {
  outputForSend,
  outputForWatch,
  sendShowingEvents,
  watchEvents,
  type EventOutput,
  type OutputFlags,
  type OutputStream,
} from './live-view';
import { runDemo, runDev } from '../dev/commands';
import { hiddenStateDirectories } from '../dev/local-stack';
import {
  formatReplay,
  installReplayRuntime,
  readHistoryFile,
  replayHistories,
  type ReplayInput,
} from '../worker/replay';
import {
  AccessTokenError,
  DEFAULT_EXPLORER_HOST,
  DEFAULT_EXPLORER_PORT,
  exposedHostWarning,
  resolveAccessToken,
  shownToken,
  startExplorer,
  traceUrlProblem,
  type AccessToken,
} from '../explorer';
import {
  ClientSource,
  createBatonMcpServer,
  DEFAULT_ACCEPT_WAIT_SECONDS,
  DEFAULT_MCP_PORT,
  DEFAULT_STATUS_WAIT_SECONDS,
  MAX_WAIT_SECONDS,
  serveStdio,
  startMcpHttpServer,
} from '../mcp-server';
import { runSetupFromEnv, runWorkerFromEnv, writeWorkflowBundle } from '../worker/main';
import { checkConnectionVariables } from '../worker/config';
import { installRuntime, parseLogLevel } from '../worker/runtime';
import { formatMcpServers, mcpServerJson, startMcpServers } from '../worker/mcp';

/** What one run of the CLI reads and writes instead of the process's own. */
export interface CliIo {
  /** A terminal (`isTTY`) gets the live tree of `baton run`, `send` and `watch`; anything else plain lines. */
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  /** The environment the run reads its configuration from. */
  readonly env: NodeJS.ProcessEnv;
  /** The directory relative paths (the state directory, files named on the command line) are resolved against. */
  readonly cwd: string;
}

/**
 * Runs one `baton` command line (`args`, without node and the script) with `io`, and resolves with its exit code: the
 * arguments parsed, the output and the errors (one line `baton: …`, or commander's own for a bad argument) as the
 * `baton` binary has them, which runs it with the process's own streams (cli/main.ts). Commands that serve until a
 * signal (`dev`, `demo`, `worker`, `watch`, `explorer`, `mcp serve`, `env --watch`) listen for the process's signals.
 */
export async function runCli(args: readonly string[], io: CliIo): Promise<number> {
  const exit = { code: 0 };
  const program = createProgram(io, exit);
  try {
    await program.parseAsync(watchThreadArgument(args), { from: 'user' });
    return exit.code;
  } catch (error) {
    // A bad argument, or the help asked for: commander has written its own lines.
    if (error instanceof CommanderError) return error.exitCode;
    io.stderr.write(`baton: ${describeError(error)}\n`);
    if (io.env.BATON_DEBUG && error instanceof Error) io.stderr.write(`${error.stack}\n`);
    return 1;
  }
}

/**
 * The `baton` program's commands, arguments and options, never run: what the generated reference
 * (docs/reference/cli.md, `npm run docs`) is written from.
 */
export function describeProgram(): Command {
  const silent = { write: () => true };
  return createProgram({ stdout: silent, stderr: silent, env: {}, cwd: '.' }, { code: 0 });
}

class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * `baton watch <thread>` shows a thread live; `add`, `list` and `remove` are its subcommands, so a root thread that has
 * one of those names is watched with `baton watch -- <thread>` (read as `--thread <thread>`).
 */
const WATCH_SUBCOMMANDS = ['add', 'list', 'remove'];

/**
 * `baton watch -- <thread>`: the thread, whatever its name, read as `--thread <thread>` (commander would take a name
 * after `--` for a subcommand).
 */
function watchThreadArgument(args: readonly string[]): string[] {
  const [command, separator, threadId, ...rest] = args;
  if (command === 'watch' && separator === '--' && threadId !== undefined && WATCH_SUBCOMMANDS.includes(threadId)) {
    return [command, '--thread', threadId, ...rest];
  }
  return [...args];
}

/** The `baton` program for one run: its commands write to `io` and set `exit.code` when they fail softly. */
function createProgram(io: CliIo, exit: { code: number }): Command {
  interface GlobalOptions {
    stateDir: string;
    profile?: string;
  }

  const program = new Command('baton')
    .description('Run teams of LLM agents as durable Temporal workflows.')
    .option('--state-dir <dir>', 'where the local stack keeps its state and stack.json', DEFAULT_STATE_DIR)
    .option(
      '--profile <name>',
      'the temporal.toml profile to reach Temporal with (address, namespace, API key, TLS), as TEMPORAL_PROFILE',
    )
    .showHelpAfterError()
    // Thrown, not exited, so a run ends with its code (runCli); subcommands inherit both settings.
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
    });

  function globals(): GlobalOptions {
    return program.opts<GlobalOptions>();
  }

  /** The state directory resolved against the run's working directory, for reading the files a stack keeps there. */
  function stateDirPath(): string {
    return path.resolve(io.cwd, globals().stateDir);
  }

  /**
   * Where the commands go, as `connect()` finds it (client/find-connection.ts): the environment first
   * (`TEMPORAL_ADDRESS`, with `DATABASE_URL` for commands that read Postgres), else the `baton dev` running from
   * `--state-dir`; decisions signed with `BATON_DECISION_KEY`, else with that `baton dev`'s token.
   */
  function connectOptions(needs: { database?: boolean } = {}): ConnectOptions {
    // `source` is for a person reading `connectedVia`; the commands name where they went only when it fails.
    const {
      source: _source,
      notices,
      ...found
    } = findConnection({
      env: io.env,
      cwd: io.cwd,
      stateDir: globals().stateDir,
      needsDatabase: needs.database === true,
      ...(globals().profile === undefined ? {} : { profile: globals().profile }),
    });
    for (const notice of notices ?? []) io.stderr.write(`baton: ${notice}\n`);
    return { ...found, ...scheduleMinimum() };
  }

  /** The environment with `--profile` as `TEMPORAL_PROFILE`, for the commands that read their settings from it. */
  function profileEnv(): Record<string, string | undefined> {
    const profile = globals().profile;
    return profile === undefined ? io.env : { ...io.env, TEMPORAL_PROFILE: profile };
  }

  /**
   * `BATON_SCHEDULE_MIN_INTERVAL_S` lowers the shortest `--every` a schedule may have. For tests only: a schedule
   * firing more often than once a minute floods its threads with turns.
   */
  function scheduleMinimum(): Pick<ConnectOptions, 'scheduleMinimumIntervalSeconds'> {
    const value = io.env.BATON_SCHEDULE_MIN_INTERVAL_S;
    if (value === undefined || value === '') return {};
    if (!/^[1-9]\d{0,5}$/.test(value)) {
      throw new CliError(`BATON_SCHEDULE_MIN_INTERVAL_S must be a whole number of seconds, not '${value}'`);
    }
    return { scheduleMinimumIntervalSeconds: Number(value) };
  }

  /** Who decides an approval from this terminal: the login name, as the record of who approved what. */
  function defaultDecider(): string {
    try {
      return os.userInfo().username || 'a person';
    } catch {
      return 'a person';
    }
  }

  /** Connects, runs `use` and closes the client whatever happens. */
  async function withClient<T>(needs: { database?: boolean }, use: (client: BatonClient) => Promise<T>): Promise<T> {
    const client = await connect(connectOptions(needs));
    try {
      return await use(client);
    } finally {
      await client.close();
    }
  }

  function print(json: boolean, value: unknown, text: string): void {
    io.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
  }

  /** The flags `run` and `send` share for what is shown while the turn runs. */
  function withOutputOptions(command: Command, jsonHelp: string): Command {
    return command
      .option('--json', jsonHelp)
      .addOption(
        new Option(
          '--stream',
          'print the events as they happen: one plain line each, or with --json one JSON event a line, then the result',
        ).conflicts('quiet'),
      )
      .option('--quiet', 'on a terminal too, print only the reply (no live tree)');
  }

  /**
   * What is shown while the turn runs (`live-view.ts`). The live tree on a terminal needs Baton's database; without it
   * (TEMPORAL_ADDRESS and no DATABASE_URL) the reply alone is printed, as before, with a note saying why.
   */
  function sendOutput(flags: OutputFlags): EventOutput | undefined {
    const output = outputForSend(flags, io.stdout, io.env);
    if (output !== 'live' || !io.env.TEMPORAL_ADDRESS || io.env.DATABASE_URL) return output;
    io.stderr.write(
      "baton: the run is not shown live: that reads Baton's database; set DATABASE_URL as well as TEMPORAL_ADDRESS (--quiet: no note)\n",
    );
    return undefined;
  }

  /** The result: today's text or JSON, or with `--json --stream` one last JSON line `{"type":"result", …}`. */
  function printResult(output: EventOutput | undefined, json: boolean, result: object, text: string): void {
    if (output === 'json') return void io.stdout.write(`${JSON.stringify({ type: 'result', ...result })}\n`);
    // A blank line between the events shown and the reply.
    if (output !== undefined) io.stdout.write('\n');
    print(json, result, text);
  }

  /** `baton run`'s options. */
  type RunFlags = OutputFlags & {
    thread?: string;
    world: string;
    messageId?: string;
    traceparent?: string;
    budgetTokens?: number;
    budgetUsd?: number;
  };

  /** `--traceparent`, else `TRACEPARENT` (the variable OpenTelemetry's environment carrier names): checked. */
  function traceparentOf(options: { traceparent?: string }): { traceparent?: string } {
    const traceparent = options.traceparent ?? (io.env.TRACEPARENT?.trim() || undefined);
    if (traceparent === undefined) return {};
    const problem = traceparentProblem(traceparent);
    if (problem !== undefined) {
      throw new CliError(`${options.traceparent === undefined ? 'TRACEPARENT' : '--traceparent'}: ${problem}`);
    }
    return { traceparent };
  }
  const TRACEPARENT_HELP =
    "a W3C traceparent to continue: a traced worker's spans of this run go under it (default: TRACEPARENT)";

  withOutputOptions(
    program
      .command('run')
      .description(
        'start a root thread with <agent>, send it <message> and wait for the reply (on a terminal, showing the tree live)',
      )
      .argument('<agent>', 'the agent that answers')
      .argument('<message>', 'the first message')
      .option('--thread <id>', 'a thread id of your own (default: a new one)')
      .option('--world <name>', 'the world the conversation runs in (its variables fill prompts)', 'default')
      .option(
        '--message-id <id>',
        'with --thread: safe to run again with the same ids (after a lost connection): the thread is started once and its message delivered once',
      )
      .option('--traceparent <traceparent>', TRACEPARENT_HELP)
      .option(
        '--budget-tokens <n>',
        "tokens the whole run may spend (every agent's model calls below it); over the world's BATON_BUDGET_TOKENS",
        parseBudgetTokens,
      )
      .option(
        '--budget-usd <amount>',
        "US dollars the whole run may spend, at the workers' prices (BATON_MODEL_PRICES); over the world's BATON_BUDGET_USD",
        parseBudgetUsd,
      ),
    'print {threadId, workflowId, reply, output, ...} as JSON (output: the object of an agent with an output schema)',
  ).action(async (agent: string, message: string, options: RunFlags) => {
    const output = sendOutput(options);
    // Without a thread id of the caller's own, every run makes a new thread: a repeat would be a second conversation.
    if (options.messageId !== undefined && options.thread === undefined) {
      throw new CliError('--message-id needs --thread: without it every run starts a new thread');
    }
    const traceparent = traceparentOf(options);
    await withClient({ database: output !== undefined }, async (client) => {
      // The thread and its first message go out in one call; its id, chosen here, is shown before the reply comes.
      const threadId = options.thread ?? newThreadId();
      const thread = client.thread(threadId);
      const start = {
        agent,
        world: options.world,
        threadId,
        ...(options.messageId === undefined ? {} : { messageId: options.messageId }),
        ...(options.budgetTokens === undefined && options.budgetUsd === undefined
          ? {}
          : { limits: { budget: { tokens: options.budgetTokens, usd: options.budgetUsd } } }),
        ...traceparent,
      };
      // On stderr, so the reply alone stays on stdout; the id is what `tree`, `transcript` and `send` take.
      if (!options.json && threadIdProblem(threadId) === undefined) io.stderr.write(`thread ${threadId}\n`);
      const run = async (text: string, send: SendOptions) =>
        (await client.run({ ...start, ...send, message: text })).result;
      const result =
        output === undefined
          ? await run(message, {})
          : await sendShowingEvents(thread, message, output, {
              rootAgent: agent,
              out: io.stdout,
              env: io.env,
              send: run,
            });
      printResult(output, Boolean(options.json), { ...result, workflowId: thread.workflowId }, describeTurn(result));
    });
  });

  withOutputOptions(
    program
      .command('send')
      .description(
        'send <message> to an existing root thread and wait for the reply (the next turn; on a terminal, shown live)',
      )
      .argument('<thread>', 'the root thread id')
      .argument('<message>', 'the message')
      .option(
        '--message-id <id>',
        'deliver the message once however often this command is run with the same id (safe to retry after a lost connection)',
      )
      .option('--traceparent <traceparent>', TRACEPARENT_HELP),
    'print {threadId, reply, output, status, turn, ...} as JSON (output: the object of an agent with an output schema)',
  ).action(
    async (threadId: string, message: string, options: OutputFlags & { messageId?: string; traceparent?: string }) => {
      const output = sendOutput(options);
      const traceparent = traceparentOf(options);
      await withClient({ database: output !== undefined }, async (client) => {
        const thread = client.thread(threadId);
        const send = { ...(options.messageId === undefined ? {} : { messageId: options.messageId }), ...traceparent };
        const result =
          output === undefined
            ? await thread.send(message, send)
            : await sendShowingEvents(thread, message, output, { ...send, out: io.stdout, env: io.env });
        printResult(output, Boolean(options.json), result, describeTurn(result));
      });
    },
  );

  const watch = program
    .command('watch')
    .description(
      'attach to a root thread and show its events live (the tree on a terminal, plain lines otherwise) until Ctrl-C, which detaches and stops nothing; `baton watch add|list|remove` manage the agents that wake when its shared data changes',
    )
    .argument('[thread]', 'the root thread id (`baton watch -- <thread>` for a thread named add, list or remove)')
    .addOption(new Option('--thread <id>', 'the root thread id').hideHelp())
    .option(
      '--since <seq>',
      "show the events after this sequence number (default 0: the thread's whole feed, then what comes)",
      (value: string) => parseSeq(value),
    )
    .option('--json', 'print one JSON event a line (streamed deltas included)')
    .option('--no-deltas', 'leave out streamed text (text shows once its message is stored)')
    .action(
      async (
        argument: string | undefined,
        options: { thread?: string; since?: number; json?: boolean; deltas: boolean },
      ) => {
        const threadId = options.thread ?? argument;
        if (threadId === undefined) throw new CliError('give a root thread id: baton watch <thread>');
        const output = outputForWatch(Boolean(options.json), io.stdout, io.env);
        const { interrupted, dispose } = onInterrupt();
        const controller = new AbortController();
        void interrupted.then(() => controller.abort());
        try {
          await withClient({ database: true }, async (client) => {
            const thread = client.thread(threadId);
            const root = await thread.tree(); // an unknown thread, or a delegation thread, is an error naming its root
            io.stderr.write(`Watching thread ${threadId} (Ctrl-C to detach; nothing is stopped).\n`);
            await watchEvents(thread, output, {
              since: options.since ?? 0,
              deltas: options.deltas,
              signal: controller.signal,
              rootAgent: root.agent,
              out: io.stdout,
              env: io.env,
            });
          });
          if (controller.signal.aborted) io.stderr.write(`Detached from thread ${threadId}; it goes on.\n`);
        } finally {
          dispose();
        }
      },
    );

  /**
   * `--json` of a `baton watch` subcommand: commander hands an option `watch` itself has to `watch` wherever it stands,
   * so the subcommands read it there too.
   */
  const watchJson = (options: { json?: boolean }): boolean =>
    Boolean(options.json ?? watch.opts<{ json?: boolean }>().json);

  watch
    .command('add')
    .description(
      'add a watcher to a root thread: from now on a committed change to one of its keys wakes a turn of <agent>, in a thread of its own, told what changed',
    )
    .argument('<thread>', 'the root thread id')
    .argument('<agent>', 'the agent that wakes')
    .requiredOption(
      '--keys <pattern...>',
      "env-data key patterns: '*' one segment, '**' any number (e.g. 'findings/*')",
    )
    .option('--debounce <seconds>', 'wait this long after a change for more, handled in one wake-up', parseSeconds)
    .option('--message <text>', 'what the agent should do when it wakes')
    .option('--name <name>', "the watcher's name (default: the agent's)")
    .option('--json', 'print the watcher as JSON')
    .action(
      async (
        threadId: string,
        agent: string,
        options: { keys: string[]; debounce?: number; message?: string; name?: string; json?: boolean },
      ) => {
        await withClient({ database: true }, async (client) => {
          const watcher = await client.thread(threadId).addWatcher({
            agent,
            keys: options.keys,
            createdBy: 'cli',
            ...(options.debounce === undefined ? {} : { debounceS: options.debounce }),
            ...(options.message === undefined ? {} : { message: options.message }),
            ...(options.name === undefined ? {} : { name: options.name }),
          });
          print(
            watchJson(options),
            watcher,
            `watcher ${watcher.name} added to ${threadId}\n${formatWatchers([watcher])}`,
          );
        });
      },
    );

  watch
    .command('list')
    .description("list a root thread's watchers and their recent wake-ups (each with the changes that caused it)")
    .argument('<thread>', 'the root thread id')
    .option('--wakeups <n>', 'wake-ups to show (default 10)', (value: string) => parseCount(value), 10)
    .option('--json', 'print {watchers, wakeups} as JSON')
    .action(async (threadId: string, options: { wakeups: number; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const thread = client.thread(threadId);
        await thread.tree(); // an unknown thread is an error
        const watchers = await thread.watchers();
        const wakeups = await thread.wakeups({ limit: options.wakeups });
        print(watchJson(options), { watchers, wakeups }, formatWatchers(watchers, wakeups));
      });
    });

  watch
    .command('remove')
    .description('remove a watcher of a root thread: it wakes no more (a wake-up running finishes); its record stays')
    .argument('<thread>', 'the root thread id')
    .argument('<name>', "the watcher's name")
    .option('--json', 'print the watcher as JSON')
    .action(async (threadId: string, name: string, options: { json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const watcher = await client.thread(threadId).removeWatcher(name, { by: 'cli' });
        print(watchJson(options), watcher, `watcher ${watcher.name} removed from ${threadId}`);
      });
    });

  program
    .command('status')
    .description('print what a root thread is doing: its turns, and the waits in progress in its tree')
    .argument('<thread>', 'the root thread id')
    .option('--json', 'print {rootThreadId, agent, turns, busy, runs, waits} as JSON')
    .action(async (threadId: string, options: { json?: boolean }) => {
      await withClient({}, async (client) => {
        const status = await client.thread(threadId).status();
        print(Boolean(options.json), status, formatStatus(status));
      });
    });

  program
    .command('wake')
    .description("end every `wait` in progress in a root thread's tree early; the waiting agents go on")
    .argument('<thread>', 'the root thread id')
    .option('--json', 'print {threadId, woken: [the waits ended]} as JSON')
    .action(async (threadId: string, options: { json?: boolean }) => {
      await withClient({}, async (client) => {
        const result = await client.thread(threadId).wake();
        print(Boolean(options.json), result, formatWake(result));
      });
    });

  program
    .command('questions')
    .description("list the open questions agents of <thread>'s whole tree asked humans")
    .argument('<thread>', 'the root thread id')
    .option('--all', 'answered and expired questions too')
    .option('--json', 'print the question rows as a JSON array')
    .action(async (threadId: string, options: { all?: boolean; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const all = Boolean(options.all);
        const rows = await client.thread(threadId).questions({ all });
        print(Boolean(options.json), rows, formatQuestions(rows, all));
      });
    });

  program
    .command('answer')
    .description('answer an open question; the turn that asked it goes on')
    .argument('<thread>', 'the root thread id')
    .argument('<question-id>', 'the question, as `baton questions` lists it (q1, q2, …)')
    .argument('<text>', 'the answer')
    .option('--json', 'print {questionId, status} as JSON')
    .action(async (threadId: string, questionId: string, text: string, options: { json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const result = await client.thread(threadId).answer(questionId, text);
        print(Boolean(options.json), result, `${result.questionId} ${result.status}.`);
      });
    });

  program
    .command('approvals')
    .description("list the tool calls of <thread>'s whole tree waiting for a person's approval")
    .argument('<thread>', 'the root thread id')
    .option('--all', 'decided, expired and cancelled approvals too')
    .option('--json', 'print the approval rows as a JSON array')
    .action(async (threadId: string, options: { all?: boolean; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const all = Boolean(options.all);
        const rows = await client.thread(threadId).approvals({ all });
        print(Boolean(options.json), rows, formatApprovals(rows, all));
      });
    });

  program
    .command('approve')
    .description('approve a pending tool call; the turn waiting for it runs it')
    .argument('<thread>', 'the root thread id')
    .argument('<approval-id>', 'the approval, as `baton approvals` lists it (a1, a2, …)')
    .option('--by <name>', 'who approves, for the record', defaultDecider())
    .option('--json', 'print {approvalId, status} as JSON')
    .action(async (threadId: string, approvalId: string, options: { by: string; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const result = await client.thread(threadId).approve(approvalId, { by: options.by });
        print(Boolean(options.json), result, `${result.approvalId} ${result.status}.`);
      });
    });

  program
    .command('reject')
    .description('reject a pending tool call: it does not run, and the agent is told why')
    .argument('<thread>', 'the root thread id')
    .argument('<approval-id>', 'the approval, as `baton approvals` lists it (a1, a2, …)')
    .option('--reason <text>', 'why, told to the agent')
    .option('--by <name>', 'who rejects, for the record', defaultDecider())
    .option('--json', 'print {approvalId, status} as JSON')
    .action(async (threadId: string, approvalId: string, options: { reason?: string; by: string; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const result = await client.thread(threadId).reject(approvalId, {
          by: options.by,
          ...(options.reason === undefined ? {} : { reason: options.reason }),
        });
        print(Boolean(options.json), result, `${result.approvalId} ${result.status}.`);
      });
    });

  program
    .command('transcript')
    .description("print the root thread's messages in order")
    .argument('<thread>', 'the root thread id')
    .option('--json', 'print the full message rows as a JSON array')
    .action(async (threadId: string, options: { json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const messages = await client.thread(threadId).transcript();
        print(Boolean(options.json), messages, formatTranscript(messages));
      });
    });

  program
    .command('tree')
    .description('print the delegation tree of a root thread with statuses and token totals')
    .argument('<thread>', 'the root thread id')
    .option('--json', 'print the tree as JSON (each node with its children; the root also lists the forks)')
    .action(async (threadId: string, options: { json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const thread = client.thread(threadId);
        const tree = await thread.tree();
        const forks = await thread.forks();
        print(Boolean(options.json), { ...tree, forks }, formatTree(tree, forks));
      });
    });

  program
    .command('usage')
    .description("print a root thread's token usage (its whole tree, by provider) and its budget, if it has one")
    .argument('<thread>', 'the root thread id')
    .option('--json', 'print {promptTokens, completionTokens, totalTokens, modelCalls, byProvider, budget?} as JSON')
    .action(async (threadId: string, options: { json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const thread = client.thread(threadId);
        await thread.tree(); // refuses an unknown thread, or a delegation thread naming its root
        const usage = await thread.usage();
        print(Boolean(options.json), usage, formatUsage(usage));
      });
    });

  program
    .command('events')
    .description(
      "print every write of a root thread's tree that was refused because its turn had been reclaimed (env data, " +
        'transcript messages, questions, delegations), with thread, operation id and both epochs; then what its ' +
        'watchers did: each wake-up with the changes that caused it, pauses, chains stopped at the depth limit',
    )
    .argument('<thread>', 'the root thread id')
    .option('--since <seq>', 'only refusals after this sequence number', (value: string) => parseSeq(value))
    .option('--watchers', "only the watchers' events (with --json: a JSON array of them)")
    .option('--json', 'print the refused writes as a JSON array (with --watchers: the watcher events)')
    .action(async (threadId: string, options: { since?: number; watchers?: boolean; json?: boolean }) => {
      await withClient({ database: true }, async (client) => {
        const thread = client.thread(threadId);
        await thread.tree(); // an unknown thread, or a delegation thread, is an error naming its root
        const watchEvents = await thread.watchEvents();
        if (options.watchers) return print(Boolean(options.json), watchEvents, formatWatchEvents(watchEvents));
        const rows = await thread.refusedWrites(options.since === undefined ? {} : { since: options.since });
        const text =
          watchEvents.length === 0
            ? formatRefusedWrites(rows)
            : `${formatRefusedWrites(rows)}\n\nwatchers:\n${formatWatchEvents(watchEvents)}`;
        print(Boolean(options.json), rows, text);
      });
    });

  function parseSeq(value: string): number {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError('a sequence number (0, 1, 2, …) is expected.');
    return Number(value);
  }

  function parseCount(value: string): number {
    if (!/^[1-9]\d{0,5}$/.test(value)) throw new InvalidArgumentError('a whole number from 1 is expected.');
    return Number(value);
  }

  function parseBudgetTokens(value: string): number {
    if (!/^[1-9]\d{0,8}$/.test(value)) {
      throw new InvalidArgumentError(`a whole number of tokens from 1 to ${MAX_BUDGET_TOKENS} is expected.`);
    }
    return Number(value);
  }

  function parseBudgetUsd(value: string): number {
    const amount = /^\d{1,7}(\.\d{1,6})?$/.test(value) ? Number(value) : Number.NaN;
    if (!(amount > 0 && amount <= MAX_BUDGET_USD)) {
      throw new InvalidArgumentError(
        `an amount of dollars above 0 and up to ${MAX_BUDGET_USD} (e.g. 2.50) is expected.`,
      );
    }
    return amount;
  }

  function parseSeconds(value: string): number {
    const seconds = /^\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isFinite(seconds)) throw new InvalidArgumentError('a number of seconds (e.g. 5 or 0.5) is expected.');
    return seconds;
  }

  /** Env-data events read per query. */
  const ENV_EVENTS_PAGE = 1000;

  /** Calls `use` with each page of the env-data events of `thread` after `since`; returns the last sequence number. */
  async function readEnvEvents(
    thread: ThreadHandle,
    since: number,
    use: (events: EnvEvent[]) => void = () => undefined,
  ): Promise<number> {
    let last = since;
    for (;;) {
      const events = await thread.envEvents({ since: last, limit: ENV_EVENTS_PAGE });
      use(events);
      last = events.at(-1)?.seq ?? last;
      if (events.length < ENV_EVENTS_PAGE) return last;
    }
  }

  /** Resolves on the first SIGINT after it was called, until `dispose()`; SIGINT no longer ends the process then. */
  function onInterrupt(): { interrupted: Promise<void>; dispose: () => void } {
    let listener: () => void = () => undefined;
    const interrupted = new Promise<void>((resolve) => {
      listener = () => resolve();
      process.once('SIGINT', listener);
    });
    return { interrupted, dispose: () => process.off('SIGINT', listener) };
  }

  /**
   * Prints each env-data event of `thread` after `since` (one line, or one JSON document a line) as it commits, until
   * `interrupted` settles. @throws what ended the watch otherwise.
   */
  async function watchEnvEvents(thread: ThreadHandle, since: number, json: boolean, interrupted: Promise<void>) {
    const watch = await thread.watchEnv(
      (event) => {
        io.stdout.write(`${json ? JSON.stringify(event) : formatEnvEvent(event)}\n`);
      },
      { since },
    );
    try {
      io.stderr.write(`Watching the environment data of thread '${thread.threadId}' (Ctrl-C to stop).\n`);
      await Promise.race([watch.done, interrupted]);
    } finally {
      await watch.stop();
    }
  }

  interface EnvCommandOptions {
    json?: boolean;
    watch?: boolean;
    since?: number;
    limit?: number;
    after?: string;
  }

  /** Manifest entries `baton env` prints per page. */
  const ENV_MANIFEST_PAGE = 100;

  function parseLimit(value: string): number {
    if (!/^[1-9]\d{0,5}$/.test(value)) throw new InvalidArgumentError('a whole number from 1 to 999999 is expected.');
    return Number(value);
  }

  program
    .command('env')
    .description("show a root thread's shared environment data: the manifest, one entry's value, or the change log")
    .usage('<thread> [get <key> | events | proposals | accept <proposal>] [options]')
    .argument('<thread>', 'the root thread id')
    .argument(
      '[action]',
      '`get` prints the value under <key>; `events` prints the change log; `proposals` lists what fork workers ' +
        'proposed; `accept` applies one',
    )
    .argument('[key]', 'with `get`: the key; with `accept`: the proposal id (p1, p2, …)')
    .option('--since <seq>', 'with `events`: only events after this sequence number', parseSeq)
    .option('--limit <n>', `the manifest: entries per page (default ${ENV_MANIFEST_PAGE})`, parseLimit)
    .option('--after <key>', 'the manifest: start after this key (the cursor a previous page printed)')
    .option('--watch', 'then print each change as it commits, until Ctrl-C (not with `get`)')
    .option(
      '--json',
      'print JSON: the manifest or the events as an array, an entry as an object; with --watch, one JSON document a line',
    )
    .action(
      async (threadId: string, action: string | undefined, key: string | undefined, options: EnvCommandOptions) => {
        const json = Boolean(options.json);
        if (action !== undefined && !['get', 'events', 'proposals', 'accept'].includes(action)) {
          throw new CliError(
            `unknown env action '${action}': use \`baton env <thread>\`, \`get <key>\`, \`events\`, \`proposals\` or \`accept <proposal>\``,
          );
        }
        if (action === 'get' && key === undefined) throw new CliError('`baton env <thread> get` needs a <key>');
        if (action === 'accept' && (key === undefined || !/^p[1-9]\d*$/.test(key))) {
          throw new CliError(
            '`baton env <thread> accept` needs a proposal id such as p1 (`baton env <thread> proposals`)',
          );
        }
        if (action !== 'get' && action !== 'accept' && key !== undefined)
          throw new CliError(`unexpected argument '${key}'`);
        if ((action === 'proposals' || action === 'accept') && options.watch) {
          throw new CliError(`--watch goes with the manifest or \`events\`, not \`${action}\``);
        }
        if (action === 'get' && options.watch)
          throw new CliError('--watch goes with the manifest or `events`, not `get`');
        if (action !== 'events' && options.since !== undefined) throw new CliError('--since goes with `events`');
        const { interrupted, dispose } = options.watch ? onInterrupt() : { interrupted: undefined, dispose: () => {} };
        try {
          await withClient({ database: true }, async (client) => {
            const thread = client.thread(threadId);
            if (action === 'proposals') {
              const proposals = await thread.envProposals({ status: 'all' });
              return print(json, proposals, formatProposals(proposals));
            }
            if (action === 'accept') {
              const result = await thread.envAccept(key ?? '');
              return print(json, result, `Accepted ${key ?? ''}: '${result.key}' is now at version ${result.version}.`);
            }
            if (action === 'get') {
              const entry = await thread.envGet(key ?? '');
              if (!entry) throw new CliError(`no entry '${key}' in thread '${threadId}'`);
              print(json, entry, JSON.stringify(entry.value, null, 2));
            } else if (action === 'events') {
              const since = options.since ?? 0;
              if (interrupted) return watchEnvEvents(thread, since, json, interrupted);
              const events: EnvEvent[] = [];
              await readEnvEvents(thread, since, (page) => events.push(...page));
              print(
                json,
                events,
                events.length === 0 ? 'No environment data events.' : events.map(formatEnvEvent).join('\n'),
              );
            } else {
              // The log's end before the manifest: a change in between is printed though the manifest shows it, not lost.
              const since = interrupted ? await readEnvEvents(thread, 0) : 0;
              const page = await thread.envDataPage(
                {},
                { limit: options.limit ?? ENV_MANIFEST_PAGE, after: options.after },
              );
              const entries = page.entries;
              if (page.nextCursor !== undefined) {
                io.stderr.write(
                  `${page.more} more entries: baton env ${threadId} --after ${page.nextCursor}` +
                    `${options.limit === undefined ? '' : ` --limit ${options.limit}`}\n`,
                );
              }
              if (!interrupted) return print(json, entries, formatEnvManifest(entries));
              io.stdout.write(`${json ? JSON.stringify(entries) : formatEnvManifest(entries)}\n`);
              return watchEnvEvents(thread, since, json, interrupted);
            }
          });
        } finally {
          dispose();
        }
      },
    );

  const schedule = program
    .command('schedule')
    .description(
      'run an agent on a schedule (Temporal Schedules): create, list, describe, pause, trigger, … (docs/guides/durable-jobs.md)',
    );

  interface ScheduleTimingFlags {
    cron?: string;
    every?: string;
    timezone?: string;
    jitter?: string;
    until?: string;
    json?: boolean;
  }

  const overlapOption = () =>
    new Option(
      '--overlap <policy>',
      'a run due while the previous one still works: skip it, buffer one, or run both',
    ).choices(Object.keys(OVERLAP_POLICIES));

  /** The timing and policy options `create` and `update` share. */
  function withTimingOptions(command: Command): Command {
    return command
      .option('--cron <expression>', 'five-field cron (minute hour day month weekday) or @daily, @hourly, …')
      .option('--every <interval>', 'an interval such as 15m, 1h or 1d (at least 1m)')
      .option('--timezone <zone>', 'IANA time zone of --cron (default UTC)')
      .addOption(overlapOption())
      .option('--catchup <window>', 'after an outage, still take runs missed within this window (e.g. 1h)')
      .option('--jitter <max>', 'delay each run by a random amount up to this (e.g. 30s)')
      .option('--until <time>', 'take no run after this time (e.g. 2025-12-31T00:00:00Z)')
      .option('--world <name>', 'the world new threads run in');
  }

  withTimingOptions(
    schedule
      .command('create')
      .description('create a schedule that sends <agent> a message at every run, in one thread or a new one each time')
      .argument('<name>', 'the schedule name (lowercase letters, digits, _ and -)')
      .option('--agent <name>', "the agent (with --thread: the thread's agent, which it may leave out)")
      .requiredOption('--message <text>', 'the message each run sends')
      .option('--thread <id>', 'post every run into this root thread (a standing conversation)')
      .option('--new-thread', 'start a new root thread at every run')
      .option('--paused', 'create it paused')
      .option('--note <text>', 'with --paused: why'),
  )
    .option('--json', 'print the schedule as `describe --json` does')
    .action(
      async (
        name: string,
        options: ScheduleTimingFlags & {
          agent?: string;
          message: string;
          thread?: string;
          newThread?: boolean;
          world?: string;
          overlap?: OverlapPolicy;
          catchup?: string;
          paused?: boolean;
          note?: string;
        },
      ) => {
        await withClient({ database: Boolean(options.newThread) }, async (client) => {
          const { json, ...create } = options;
          const handle = await client.schedules.create({ name, ...create });
          const details = await handle.describe();
          print(Boolean(json), details, `Created schedule ${name}.\n${formatScheduleDetails(details)}`);
        });
      },
    );

  schedule
    .command('list')
    .description("list Baton's schedules")
    .option('--json', 'print the schedules as a JSON array')
    .action(async (options: { json?: boolean }) => {
      await withClient({}, async (client) => {
        const rows = await client.schedules.list();
        print(Boolean(options.json), rows, formatScheduleList(rows));
      });
    });

  schedule
    .command('describe')
    .description('show a schedule: its timing and policies, next runs, and recent runs with their threads and outcomes')
    .argument('<name>', 'the schedule')
    .option('--json', 'print the schedule as JSON')
    .action(async (name: string, options: { json?: boolean }) => {
      await withClient({}, async (client) => {
        const details = await client.schedules.get(name).describe();
        print(Boolean(options.json), details, formatScheduleDetails(details));
      });
    });

  for (const [action, verb] of [
    ['pause', 'paused'],
    ['unpause', 'unpaused'],
  ] as const) {
    schedule
      .command(action)
      .description(action === 'pause' ? 'stop taking runs until unpaused' : 'take runs again')
      .argument('<name>', 'the schedule')
      .option('--note <text>', 'why (shown by describe and the Web UI)')
      .option('--json', 'print {name, paused, note} as JSON')
      .action(async (name: string, options: { note?: string; json?: boolean }) => {
        await withClient({}, async (client) => {
          const handle = client.schedules.get(name);
          await handle[action](options.note);
          const details = await handle.describe();
          print(
            Boolean(options.json),
            { name, paused: details.paused, note: details.note ?? null },
            `Schedule ${name} ${verb}${details.note ? ` (${details.note})` : ''}.`,
          );
        });
      });
  }

  schedule
    .command('trigger')
    .description(
      'take a run now (under its overlap policy unless --overlap: with skip, not while a run is still working)',
    )
    .argument('<name>', 'the schedule')
    .addOption(overlapOption())
    .option('--json', 'print {name, triggered} as JSON')
    .action(async (name: string, options: { overlap?: OverlapPolicy; json?: boolean }) => {
      await withClient({}, async (client) => {
        await client.schedules.get(name).trigger(options.overlap ? { overlap: options.overlap } : {});
        print(
          Boolean(options.json),
          { name, triggered: true },
          `Triggered ${name}; \`baton schedule describe ${name}\` shows the run and its thread.`,
        );
      });
    });

  schedule
    .command('backfill')
    .description(
      'take the runs scheduled between <from> and <to> now, one after another; a time already run makes no second thread',
    )
    .argument('<name>', 'the schedule')
    .argument('<from>', 'start time, e.g. 2025-01-01T00:00:00Z')
    .argument('<to>', 'end time')
    .addOption(overlapOption())
    .option('--json', 'print {name, from, to} as JSON')
    .action(async (name: string, from: string, to: string, options: { overlap?: OverlapPolicy; json?: boolean }) => {
      await withClient({}, async (client) => {
        await client.schedules.get(name).backfill(from, to, options.overlap ? { overlap: options.overlap } : {});
        print(Boolean(options.json), { name, from, to }, `Backfilling ${name} from ${from} to ${to}.`);
      });
    });

  withTimingOptions(
    schedule
      .command('update')
      .description("change a schedule's message, timing, world or policies (its agent and target stay)")
      .argument('<name>', 'the schedule')
      .option('--message <text>', 'the message each run sends'),
  )
    .option('--json', 'print the schedule as `describe --json` does')
    .action(
      async (
        name: string,
        options: ScheduleTimingFlags & { message?: string; world?: string; overlap?: OverlapPolicy; catchup?: string },
      ) => {
        await withClient({}, async (client) => {
          const { json, ...update } = options;
          const handle = client.schedules.get(name);
          await handle.update(update);
          const details = await handle.describe();
          print(Boolean(json), details, `Updated schedule ${name}.\n${formatScheduleDetails(details)}`);
        });
      },
    );

  schedule
    .command('delete')
    .description('delete a schedule (runs already started finish; their threads stay)')
    .argument('<name>', 'the schedule')
    .option('--json', 'print {name, deleted} as JSON')
    .action(async (name: string, options: { json?: boolean }) => {
      await withClient({}, async (client) => {
        await client.schedules.get(name).delete();
        print(Boolean(options.json), { name, deleted: true }, `Deleted schedule ${name}.`);
      });
    });

  const world = program
    .command('world')
    .description("a world's variables, one .env-style text: get, set, unset, import, dir (docs/guides/worlds.md)");

  interface WorldOptions {
    world: string;
    json?: boolean;
  }

  /**
   * Runs `use` on a world over Baton's database alone: worlds live only in Postgres, so `baton world` never dials
   * Temporal and works while it is down. The world name is checked before anything is connected.
   */
  async function withWorld<T>(name: string, use: (handle: WorldHandle) => Promise<T>): Promise<T> {
    checkWorldName(name);
    const databaseUrl = io.env.DATABASE_URL || readStackFile(stateDirPath())?.databaseUrl;
    if (!databaseUrl) {
      throw new CliError(
        `\`baton world\` reads Baton's database: set DATABASE_URL, or start the local stack with \`baton dev\``,
      );
    }
    const worlds = connectWorlds(databaseUrl);
    try {
      return await use(worlds.world(name));
    } finally {
      await worlds.close();
    }
  }

  world
    .command('get')
    .description('print the variables text, or one variable')
    .argument('[key]', 'one variable')
    .option('--world <name>', 'the world', 'default')
    .option('--json', 'print {world, variables, text} (or {world, key, value}) as JSON')
    .action(async (key: string | undefined, options: WorldOptions) => {
      await withWorld(options.world, async (handle) => {
        if (key !== undefined) {
          const value = await handle.getEnvValue(key);
          if (value === undefined && !options.json)
            throw new CliError(`world '${handle.name}' has no variable '${key}'`);
          print(Boolean(options.json), { world: handle.name, key, value: value ?? null }, value ?? '');
          return;
        }
        const text = await handle.getVariablesText();
        const variables = await handle.getEnvMap();
        print(
          Boolean(options.json),
          { world: handle.name, variables, text: text ?? null },
          text === undefined || text === '' ? `(world '${handle.name}' has no variables)` : text.replace(/\n$/, ''),
        );
      });
    });

  world
    .command('set')
    .description('set variables, keeping the rest of the text as it is')
    .argument('<assignments...>', 'KEY=VALUE pairs')
    .option('--world <name>', 'the world', 'default')
    .option('--json', 'print {world, set} as JSON')
    .action(async (assignments: string[], options: WorldOptions) => {
      const parsed: Record<string, string> = {};
      for (const assignment of assignments) {
        const index = assignment.indexOf('=');
        if (index <= 0) throw new CliError(`'${assignment}' is not KEY=VALUE; nothing was changed`);
        const name = assignment.slice(0, index).trim();
        const value = assignment.slice(index + 1);
        const problem = envAssignmentProblem(name, value);
        if (problem !== undefined) throw new CliError(`${problem}; nothing was changed`);
        parsed[name] = value;
      }
      await withWorld(options.world, async (handle) => {
        await handle.set(parsed);
        print(
          Boolean(options.json),
          { world: handle.name, set: parsed },
          `Set ${Object.keys(parsed).join(', ')} in world '${handle.name}'.`,
        );
      });
    });

  world
    .command('unset')
    .description('remove a variable (every assignment of it)')
    .argument('<key>', 'the variable')
    .option('--world <name>', 'the world', 'default')
    .option('--json', 'print {world, key, removed} as JSON')
    .action(async (key: string, options: WorldOptions) => {
      const problem = envAssignmentProblem(key, '');
      if (problem !== undefined) throw new CliError(problem);
      await withWorld(options.world, async (handle) => {
        const removed = await handle.unset(key);
        print(
          Boolean(options.json),
          { world: handle.name, key, removed },
          removed ? `Removed ${key} from world '${handle.name}'.` : `World '${handle.name}' had no variable '${key}'.`,
        );
      });
    });

  world
    .command('import')
    .description('replace the variables text with the contents of a .env file')
    .argument('<file>', 'the file')
    .option('--world <name>', 'the world', 'default')
    .option('--json', 'print {world, variables, ignoredLines} as JSON')
    .action(async (file: string, options: WorldOptions) => {
      let text: string;
      try {
        text = fs.readFileSync(path.resolve(io.cwd, file), 'utf8');
      } catch (error) {
        throw new CliError(`cannot read ${file}: ${(error as Error).message}; nothing was changed`);
      }
      const problem = envTextProblem(text);
      if (problem !== undefined) throw new CliError(`${file}: ${problem}; nothing was changed`);
      const ignored: { line: number; reason: string }[] = [];
      const variables = parseEnvText(text, { onInvalidLine: (line, _text, reason) => ignored.push({ line, reason }) });
      await withWorld(options.world, async (handle) => {
        await handle.setVariablesText(text);
        const notes = ignored.map((entry) => `\n  ${file}:${entry.line} ignored: ${entry.reason}`).join('');
        print(
          Boolean(options.json),
          { world: handle.name, variables: { ...variables }, ignoredLines: ignored },
          `Imported ${Object.keys(variables).length} variable(s) into world '${handle.name}'.${notes}`,
        );
      });
    });

  world
    .command('dir')
    .description(
      "set the world's working_directory (where shell, read_file and list_files work) to an existing directory",
    )
    .argument('<path>', 'the directory')
    .option('--world <name>', 'the world', 'default')
    .option('--json', 'print {world, working_directory} as JSON')
    .action(async (directory: string, options: WorldOptions) => {
      await withWorld(options.world, async (handle) => {
        const absolute = await handle.setWorkingDirectory(path.resolve(io.cwd, directory));
        print(
          Boolean(options.json),
          { world: handle.name, working_directory: absolute },
          `World '${handle.name}' works in ${absolute}.`,
        );
      });
    });

  program
    .command('dev')
    .description('start the local stack (Temporal, Postgres, model) and a worker in the foreground')
    .option('--agents <dir>', 'agents directory', 'agents')
    .option(
      '--tools <file>',
      'a module of your own tools (JavaScript or TypeScript; repeat for several; default: BATON_TOOLS)',
      (file: string, files: string[] = []) => [...files, file],
    )
    .option('--mcp <file>', 'a JSON file of MCP servers whose tools agents call (default: BATON_MCP_CONFIG)')
    .option(
      '--model-script <file>',
      'scripted model script (default: <agents>/model-script.yaml without OPENAI_API_KEY)',
    )
    .option('--task-queue <name>', 'task queue of the worker', 'baton')
    .addOption(
      new Option(
        '--topology <kind>',
        'dev: the Temporal dev server on SQLite; production: temporal-server on Postgres with baton setup (built from Go on first use)',
      )
        .choices(['dev', 'production'])
        .default('dev'),
    )
    .option('--json', 'print the stack description as one JSON line once it is up')
    .action(
      async (options: {
        agents: string;
        tools?: string[];
        mcp?: string;
        modelScript?: string;
        taskQueue: string;
        topology: 'dev' | 'production';
        json?: boolean;
      }) => {
        await runDev({ ...options, stateDir: globals().stateDir, env: io.env, json: Boolean(options.json) });
      },
    );

  program
    .command('demo')
    .description('run the example agents end to end on the local stack')
    .option('--exit', 'stop the stack after the reply instead of keeping it up for inspection')
    .option('--json', 'print the result as JSON')
    .option(
      '--reactive',
      'run the reactive ARC team instead: a verifier watcher checks every candidate rule the lead stores against the ' +
        'training pairs; prints the verdicts',
    )
    .action(async (options: { exit?: boolean; json?: boolean; reactive?: boolean }) => {
      await runDemo({
        stateDir: globals().stateDir,
        env: io.env,
        exit: Boolean(options.exit),
        json: Boolean(options.json),
        reactive: Boolean(options.reactive),
      });
    });

  function parsePort(value: string): number {
    if (!/^\d{1,5}$/.test(value) || Number(value) > 65_535)
      throw new InvalidArgumentError('a port (0-65535) is expected.');
    return Number(value);
  }

  interface ExplorerCommandOptions {
    port: number;
    host: string;
    uiUrl?: string;
    traceUrl?: string;
    tokenFile?: string;
    json?: boolean;
  }

  /** The token of `baton explorer` or `baton mcp serve --http`, or a CliError saying why it cannot be used. */
  function accessToken(
    tokenFile: string | undefined,
    variable: { name: string; value: string | undefined },
  ): AccessToken {
    try {
      return resolveAccessToken({ tokenFile, variable, stateDir: globals().stateDir });
    } catch (error) {
      if (error instanceof AccessTokenError) throw new CliError(error.message);
      throw error;
    }
  }

  program
    .command('explorer')
    .description('serve the thread explorer: threads, delegation trees, transcripts, live env data and questions')
    .option('--port <port>', 'port to listen on (0: any free port)', parsePort, DEFAULT_EXPLORER_PORT)
    .option(
      '--host <host>',
      'address to listen on; beyond loopback its token travels in clear, so put a proxy with TLS in front',
      DEFAULT_EXPLORER_HOST,
    )
    .option('--ui-url <url>', "the Temporal Web UI, for links to workflows (default: the stack's, or TEMPORAL_UI_URL)")
    .option(
      '--trace-url <template>',
      "a trace UI's search for a thread's traces, {rootThreadId} where its id goes (default: BATON_TRACE_URL)",
    )
    .option(
      '--token-file <file>',
      "a file holding the token every request must carry (default: BATON_EXPLORER_TOKEN, else the state directory's " +
        "'token', made on first use)",
    )
    .option('--json', 'print {url, token, openUrl} as one JSON line once it listens')
    .action(async (options: ExplorerCommandOptions) => {
      const access = accessToken(options.tokenFile, {
        name: 'BATON_EXPLORER_TOKEN',
        value: io.env.BATON_EXPLORER_TOKEN,
      });
      const connection = connectOptions({ database: true });
      const stack = io.env.TEMPORAL_ADDRESS ? undefined : readStackFile(stateDirPath());
      const uiUrl = options.uiUrl ?? (io.env.TEMPORAL_UI_URL || stack?.uiUrl);
      const traceUrl = options.traceUrl ?? (io.env.BATON_TRACE_URL?.trim() || undefined);
      const traceProblem = traceUrl === undefined ? undefined : traceUrlProblem(traceUrl);
      if (traceProblem !== undefined) {
        throw new CliError(`${options.traceUrl === undefined ? 'BATON_TRACE_URL' : '--trace-url'}: ${traceProblem}`);
      }
      const warning = exposedHostWarning(options.host);
      if (warning) io.stderr.write(`baton: ${warning}\n`);
      const { interrupted, dispose } = onInterrupt();
      const terminated = new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
      const client = await connect(connection);
      try {
        const explorer = await startExplorer({
          client,
          host: options.host,
          port: options.port,
          uiUrl,
          ...(traceUrl === undefined ? {} : { traceUrl }),
          token: access.token,
          ...(connection.namespace ? { namespace: connection.namespace } : {}),
        });
        try {
          // One line either way, so a script can read the URL as soon as it is printed. A configured token is the
          // operator's: the line shows where it came from, not the token.
          io.stdout.write(
            options.json
              ? `${JSON.stringify({ url: explorer.url, token: explorer.token, openUrl: explorer.link() })}\n`
              : `Thread explorer: ${access.printable ? explorer.link() : `${explorer.url}/?token=${shownToken(access)}`}  (Ctrl-C to stop)\n`,
          );
          await Promise.race([interrupted, terminated]);
        } finally {
          await explorer.close();
        }
      } finally {
        dispose();
        await client.close();
      }
    });

  const mcp = program
    .command('mcp')
    .description("the Model Context Protocol: MCP servers' tools for agents, and Baton as an MCP server");

  mcp
    .command('list')
    .description('start each MCP server of a configuration file, list its tools the way agents get them, and stop it')
    .option('--config <file>', 'the MCP configuration file (default: BATON_MCP_CONFIG)')
    .option('--json', 'print the servers as JSON')
    .action(async (options: { config?: string; json?: boolean }) => {
      const configured = options.config ?? io.env.BATON_MCP_CONFIG?.trim();
      const file = configured ? path.resolve(io.cwd, configured) : configured;
      if (!file) throw new CliError('give the MCP configuration file with --config <file>, or set BATON_MCP_CONFIG');
      const servers = await startMcpServers(file, io.env, {
        strict: false,
        log: () => undefined,
        hiddenDirectories: hiddenStateDirectories(globals().stateDir),
      });
      try {
        const status = servers.status();
        if (options.json) {
          io.stdout.write(
            `${JSON.stringify({ source: servers.source, servers: status.map(mcpServerJson) }, null, 2)}\n`,
          );
        } else {
          io.stdout.write(formatMcpServers(servers.source, status));
        }
        if (status.some((server) => server.state === 'failed')) exit.code = 1;
      } finally {
        await servers.close();
      }
    });

  interface McpServeOptions {
    http?: boolean;
    port?: number;
    tokenFile?: string;
    json?: boolean;
    acceptWait: number;
    statusWait: number;
  }

  /** A wait of `baton mcp serve`: whole seconds, within the bound every call's wait has. */
  function parseWaitSeconds(value: string): number {
    if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > MAX_WAIT_SECONDS) {
      throw new InvalidArgumentError(`a whole number of seconds from 1 to ${MAX_WAIT_SECONDS} is expected.`);
    }
    return Number(value);
  }

  mcp
    .command('serve')
    .description(
      'serve Baton to MCP clients on stdio (or Streamable HTTP on loopback with --http): agents, threads, replies, ' +
        'transcripts, questions, approvals and env data',
    )
    .option('--http', `serve Streamable HTTP at http://127.0.0.1:<port>/mcp instead of stdio`)
    .option('--port <port>', `with --http: the port (default ${DEFAULT_MCP_PORT}; 0: any free port)`, parsePort)
    .option(
      '--token-file <file>',
      "with --http: a file holding the token every request must carry as 'Authorization: Bearer <token>' (default: " +
        "BATON_MCP_TOKEN, else the state directory's 'token', made on first use)",
    )
    .option('--json', 'with --http: print {url, token, headers} as one JSON line once it listens')
    .option(
      '--accept-wait <seconds>',
      'how long start_thread and send_message wait for a worker to accept the message before saying none did',
      parseWaitSeconds,
      DEFAULT_ACCEPT_WAIT_SECONDS,
    )
    .option(
      '--status-wait <seconds>',
      "how long get_thread waits for the thread's worker to answer before saying none did",
      parseWaitSeconds,
      DEFAULT_STATUS_WAIT_SECONDS,
    )
    .action(async (options: McpServeOptions) => {
      if (!options.http && (options.port !== undefined || options.json || options.tokenFile !== undefined)) {
        throw new CliError(
          `${options.json ? '--json' : options.port !== undefined ? '--port' : '--token-file'} goes with --http`,
        );
      }
      // Read before anything starts, so a bad token stops the server at once.
      const access = options.http
        ? accessToken(options.tokenFile, { name: 'BATON_MCP_TOKEN', value: io.env.BATON_MCP_TOKEN })
        : undefined;
      // Checked now, so a bad variable stops the server at once; where Baton runs is read again at every call.
      checkConnectionVariables(io.env);
      const clients = new ClientSource(() => connectOptions({ database: true }));
      const createServer = () =>
        createBatonMcpServer({
          client: () => clients.get(),
          acceptWaitSeconds: options.acceptWait,
          statusWaitSeconds: options.statusWait,
        });
      const stopped = new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
      try {
        if (!options.http) {
          // stdout carries the protocol alone: a stray console.log would break the client's connection.
          console.log = console.info = console.debug = console.error;
          io.stderr.write(`baton mcp: serving on stdio; ${await whereBatonRuns(clients)}\n`);
          await serveStdio(createServer(), { stop: stopped });
          return;
        }
        if (!access) return;
        const server = await startMcpHttpServer({
          createServer,
          port: options.port ?? DEFAULT_MCP_PORT,
          token: access.token,
        });
        try {
          io.stderr.write(`baton mcp: ${await whereBatonRuns(clients)}\n`);
          io.stdout.write(
            options.json
              ? `${JSON.stringify({ url: server.url, token: access.token, headers: server.headers })}\n`
              : `Baton MCP server: ${server.url} with the header 'Authorization: Bearer ${shownToken(access)}'  (Ctrl-C to stop)\n`,
          );
          await stopped;
        } finally {
          await server.close();
        }
      } finally {
        await clients.close();
      }
    });

  /** One line on where the MCP server finds Baton, or why it cannot yet (its calls say so until it can). */
  async function whereBatonRuns(clients: ClientSource): Promise<string> {
    try {
      const client = await clients.get();
      return `Baton at ${connectOptions().address}, task queue '${client.taskQueue}'`;
    } catch (error) {
      return `Baton is not reachable yet (${describeError(error)}); every call says so until it is`;
    }
  }

  program
    .command('replay')
    .description(
      'replay workflow histories against the local workflow code, to check a deploy breaks no running conversation',
    )
    .argument('<sources...>', 'workflow ids (their history is fetched from the server) or exported history .json files')
    .option('--workflows <path>', "the workflow code to replay against (default: Baton's workflows/)")
    .option('--json', 'print each outcome as a JSON array')
    .action(async (sources: string[], options: { workflows?: string; json?: boolean }) => {
      const inputs: ReplayInput[] = [];
      const ids: string[] = [];
      for (const source of sources) {
        if (!fs.existsSync(path.resolve(io.cwd, source)) && !source.endsWith('.json')) {
          ids.push(source);
          continue;
        }
        try {
          inputs.push({
            workflowId: path.basename(source),
            source,
            history: readHistoryFile(path.resolve(io.cwd, source)),
          });
        } catch (error) {
          throw new CliError(`cannot read the history ${source}: ${(error as Error).message}`);
        }
      }
      if (ids.length > 0) {
        await withClient({}, async (client) => {
          for (const workflowId of ids) {
            try {
              const history = await client.temporal.workflow.getHandle(workflowId).fetchHistory();
              inputs.push({ workflowId, source: 'server', history });
            } catch (error) {
              throw new CliError(`cannot fetch the history of '${workflowId}': ${describeError(error)}`);
            }
          }
        });
      }
      installReplayRuntime();
      const outcomes = await replayHistories(
        inputs,
        options.workflows ? { workflowsPath: path.resolve(io.cwd, options.workflows) } : {},
      );
      print(Boolean(options.json), outcomes, formatReplay(outcomes));
      if (outcomes.some((replayed) => !replayed.ok)) exit.code = 1;
    });

  addEvalCommands(program, {
    io,
    exit,
    connectOptions,
    withClient,
    print,
    stateDirPath,
    fail: (message) => new CliError(message),
  });

  program
    .command('worker')
    .description('run a production worker configured by environment variables (docs/deploy.md, docs/configuration.md)')
    .action(async () => {
      // A `baton dev` in this directory keeps its stack file (the database password) there: no tool shows it.
      await runWorkerFromEnv(profileEnv(), { hiddenDirectories: hiddenStateDirectories(globals().stateDir) });
    });

  program
    .command('bundle')
    .description('write the workflow bundle to <file>, for BATON_WORKFLOW_BUNDLE (workers then start without webpack)')
    .argument('<file>', 'where to write the bundle (JavaScript)')
    .option('--tracing', "hold Temporal's tracing interceptors, for workers that export traces (OTEL_* set)")
    .option('--json', 'print {file, bytes, tracing} as JSON')
    .action(async (file: string, options: { json?: boolean; tracing?: boolean }) => {
      const target = path.resolve(io.cwd, file);
      const tracing = options.tracing === true;
      const bytes = await writeWorkflowBundle(target, { tracing });
      print(
        Boolean(options.json),
        { file: target, bytes, tracing },
        `wrote ${target} (${bytes} bytes${tracing ? ', with tracing' : ''})`,
      );
    });

  program
    .command('setup')
    .description(
      "prepare TEMPORAL_ADDRESS and DATABASE_URL for Baton: the namespace, Baton's search attributes, migrations (idempotent)",
    )
    .option('--json', 'print {namespace, searchAttributes, migrations, changed} as JSON')
    .action(async (options: { json?: boolean }) => {
      await runSetupFromEnv(profileEnv(), { json: Boolean(options.json), write: (text) => io.stdout.write(text) });
    });

  // `worker` and `setup` install the runtime themselves, from their validated configuration (metrics included);
  // `replay` installs one that keeps the core's replay warnings off stdout (the top-level command: `eval replay` runs
  // a worker and takes the runtime here, at BATON_LOG_LEVEL). Only `dev` and `demo` run a worker here that keeps
  // running: every other command leaves the signals alone, so Ctrl-C or a `kill` ends it at the first signal (the
  // runtime's handlers would take that one to shut down workers it does not have, and the process would go on).
  program.hook('preAction', (_program, command) => {
    const installsItsOwn = command.parent === program && ['worker', 'setup', 'replay'].includes(command.name());
    if (!installsItsOwn) {
      const runsWorker = command.name() === 'dev' || command.name() === 'demo';
      installRuntime(parseLogLevel(io.env.BATON_LOG_LEVEL), runsWorker ? {} : { shutdownSignals: [] });
    }
  });
  return program;
}
