/** The `baton dev` and `baton demo` commands: the local stack in the foreground. */
import path from 'node:path';
import { connect } from '../client';
import { startLocalProductionServers } from '../stack/production';
import { startLocalStack, type LocalStack } from './local-stack';
import { findDemoProblems, formatDemoProblem, summarizeArcTask } from './demo-check';
import { describeTurn, formatEnvManifest, formatTree } from '../client/format';

export interface DevCommandOptions {
  stateDir: string;
  /**
   * `dev`: the Temporal CLI's dev server on SQLite. `production`: temporal-server on Postgres (built from Go on first
   * use) prepared by `baton setup`, as docker-compose.yml runs it. @default 'dev'
   */
  topology?: 'dev' | 'production';
  agents: string;
  /** Users' tool modules (`--tools`); `BATON_TOOLS` when none is given. */
  tools?: readonly string[];
  /** The MCP servers' configuration file (`--mcp`); `BATON_MCP_CONFIG` when none is given. */
  mcp?: string;
  modelScript?: string;
  taskQueue: string;
  env: Readonly<Record<string, string | undefined>>;
  json: boolean;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Runs the stack until SIGINT/SIGTERM or until the worker stops by itself, reloading changed agent files. */
export async function runDev(options: DevCommandOptions): Promise<void> {
  const production =
    options.topology === 'production'
      ? await startLocalProductionServers({ stateDir: options.stateDir, env: options.env, log })
      : undefined;
  let stack: LocalStack;
  try {
    stack = await startLocalStack({
      stateDir: options.stateDir,
      agentsDir: options.agents,
      ...(options.tools && options.tools.length > 0 ? { toolModules: options.tools } : {}),
      ...(options.mcp ? { mcpConfig: options.mcp } : {}),
      ...(options.modelScript ? { modelScript: options.modelScript } : {}),
      taskQueue: options.taskQueue,
      env: production ? { ...options.env, ...production.env } : options.env,
      log,
      watchAgents: true,
      explorer: {},
    });
  } catch (error) {
    await production?.stop();
    throw error;
  }
  try {
    if (production) {
      log(
        `topology: production (temporal-server ${production.topology.binaries.version} on Postgres, log ` +
          `${production.topology.logFile}); more workers: TEMPORAL_ADDRESS=${production.topology.temporalAddress} ` +
          `DATABASE_URL=${production.topology.databaseUrl} npx baton worker`,
      );
    }
    if (options.json) process.stdout.write(`${JSON.stringify(stack.stack)}\n`);
    log(
      `\nBaton is up. Try: npx baton run <agent> "<message>"${stack.stack.uiUrl ? `\nWeb UI: ${stack.stack.uiUrl}` : ''}${stack.stack.explorerUrl ? `\nThread explorer: ${stack.stack.explorerUrl}` : ''}`,
    );
    log('Press Ctrl-C to stop.');
    await untilStopped(stack);
  } finally {
    await stack.close();
    await production?.stop();
  }
}

export interface DemoOptions {
  stateDir: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Stop the stack after the reply. */
  exit: boolean;
  json: boolean;
}

/** The example agents, shipped with the package. */
const EXAMPLE_AGENTS_DIR = path.join(__dirname, '..', 'agents');
/** The ARC walkthrough: coordinator → solver → observer sharing the task and findings as env data. */
const DEMO_AGENT = 'coordinator';
const DEMO_MESSAGE = 'Solve ARC task 007bbfb7';
/** The env-data key the solver stores the task under. */
const DEMO_ENV_KEY = 'arc_task';

/** Runs the example end to end: starts the stack, sends the demo message, prints the reply and where to look. */
export async function runDemo(options: DemoOptions): Promise<void> {
  const stack = await startLocalStack({
    stateDir: options.stateDir,
    agentsDir: EXAMPLE_AGENTS_DIR,
    env: options.env,
    log,
    explorer: {},
  });
  try {
    if (stack.stack.scriptedModel) {
      log('Using the scripted model (OPENAI_API_KEY is not set): replies come from agents/model-script.yaml.');
    } else {
      log(`Using the model '${options.env.BATON_MODEL || 'gpt-4o-mini'}' with the example ARC agents.`);
    }
    const client = await connect({
      address: stack.stack.temporalAddress,
      namespace: stack.stack.namespace,
      taskQueue: stack.stack.taskQueue,
      databaseUrl: stack.stack.databaseUrl,
    });
    let threadId: string;
    try {
      const thread = await client.startThread({ agent: DEMO_AGENT });
      threadId = thread.threadId;
      log(`\nhuman → ${DEMO_AGENT}: ${DEMO_MESSAGE}`);
      const result = await thread.send(DEMO_MESSAGE);
      const webUi = stack.workflowsUrl(`BatonRootThreadId="${threadId}"`);
      const [tree, env] = await Promise.all([thread.tree(), thread.envData()]);
      // Figures from the stored value, not from the descriptions the (scripted) model wrote.
      const arcTask = env.some((entry) => entry.key === DEMO_ENV_KEY)
        ? summarizeArcTask((await thread.envGet(DEMO_ENV_KEY))?.value)
        : undefined;
      // A scripted run expects no tool error (the example script makes no call meant to fail); a real model may
      // recover from one, so there only failed turns count.
      const found = await findDemoProblems(client.database(), tree);
      const problems = stack.stack.scriptedModel ? found : found.filter((problem) => problem.kind === 'turn');
      if (result.status !== 'completed' && !problems.some((problem) => problem.threadId === threadId)) {
        problems.unshift({ kind: 'turn', threadId, agent: DEMO_AGENT, what: `turn ${result.status}` });
      }
      if (options.json) {
        const explorer = stack.stack.explorerUrl ? `${stack.stack.explorerUrl}/threads/${threadId}` : undefined;
        const summary = { ...result, workflowId: thread.workflowId, webUi, explorer, tree, env };
        const checked = { ...summary, arcTask: arcTask ?? null, problems: problems.map(formatDemoProblem) };
        process.stdout.write(`${JSON.stringify(checked, null, 2)}\n`);
      } else {
        process.stdout.write(`${DEMO_AGENT}: ${describeTurn(result)}\n`);
        log(`\nThe delegation tree (baton tree ${threadId}):\n${formatTree(tree)}`);
        log(`\nThe shared environment data (baton env ${threadId}):\n${formatEnvManifest(env)}`);
        log(`\nStored under ${DEMO_ENV_KEY}: ${arcTask ?? 'no ARC task'}`);
        if (webUi) log(`\nWeb UI, every workflow of this thread: ${webUi}`);
        if (stack.stack.explorerUrl) {
          log(`Thread explorer, this conversation: ${stack.stack.explorerUrl}/threads/${threadId}`);
        }
      }
      if (problems.length > 0) {
        const lines = problems.map((problem) => `  ${formatDemoProblem(problem)}`);
        log(`\nThe demo run went wrong (exit code 1):\n${lines.join('\n')}`);
        process.exitCode = 1;
      }
      if (options.exit) await thread.end();
    } finally {
      await client.close();
    }
    if (options.exit) return;
    log(
      `\nThe stack stays up for inspection. Continue the conversation with:\n  npx baton send ${threadId} "<message>"   (or start another: npx baton run coordinator "<message>")\nPress Ctrl-C to stop.`,
    );
    await untilStopped(stack);
  } finally {
    await stack.close();
  }
}

/** Resolves on SIGINT/SIGTERM, or when the worker stops by itself (rejecting if it failed). */
async function untilStopped(stack: LocalStack): Promise<void> {
  let onSignal: () => void = () => undefined;
  const signalled = new Promise<void>((resolve) => {
    onSignal = resolve;
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
  try {
    await Promise.race([signalled, stack.workerRun]);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
