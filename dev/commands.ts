/** The `baton dev` and `baton demo` commands: the local stack in the foreground. */
import path from 'node:path';
import { connect, type ThreadHandle } from '../client';
import { startLocalProductionServers } from '../stack/production';
import { readToolsConfig } from '../worker/config';
import { startLocalStack, type LocalStack } from './local-stack';
import {
  CANDIDATES_PREFIX,
  findDemoProblems,
  formatCandidateReview,
  formatDemoProblem,
  reviewVerdicts,
  summarizeArcTask,
  type CandidateReview,
  type DemoProblem,
} from './demo-check';
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
    if (options.json) {
      const explorer = stack.explorer ? { explorerToken: stack.explorer.token } : {};
      process.stdout.write(`${JSON.stringify({ ...stack.stack, ...explorer })}\n`);
    }
    log(
      `\nBaton is up. Try: npx baton run <agent> "<message>"${stack.stack.uiUrl ? `\nWeb UI: ${stack.stack.uiUrl}` : ''}${stack.explorer ? `\nThread explorer: ${stack.explorer.link()}` : ''}`,
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
  /**
   * Run the reactive ARC team instead: a verifier watcher checks every candidate rule the lead stores, and the demo
   * waits for its wake-ups and checks the verdicts. @default false
   */
  reactive?: boolean;
}

/** The example ARC team's agents (examples/arc-team), shipped with the package for the demo. */
const EXAMPLE_AGENTS_DIR = path.join(__dirname, '..', 'examples', 'arc-team', 'agents');
/** The ARC walkthrough: coordinator → solver → observer sharing the task and findings as env data. */
const DEMO_AGENT = 'coordinator';
const DEMO_MESSAGE = 'Solve ARC task 007bbfb7';
/** The env-data key the solver stores the task under. */
const DEMO_ENV_KEY = 'arc_task';
/**
 * `--reactive`: the lead stores candidate rules under `arc/candidates/`, and a verifier watcher checks each against
 * the training pairs (check_arc_candidate) and stores its verdict under `arc/verdicts/`.
 */
const REACTIVE_AGENT = 'arc_verified_lead';
const REACTIVE_MESSAGE = 'Solve ARC task 007bbfb7 and have every candidate rule verified.';
const VERIFIER_AGENT = 'verifier';
/** The scripted run's candidates and the verdicts they must get. */
const SCRIPTED_VERDICTS = { fractal: 'holds', scaling: 'fails' } as const;
/** How long the demo waits for the verifier's wake-ups after the lead's reply. */
const WAKEUPS_TIMEOUT_MS = 180_000;

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
      log(
        'Using the scripted model (OPENAI_API_KEY is not set): replies come from examples/arc-team/agents/model-script.yaml.',
      );
    } else {
      log(`Using the model '${options.env.BATON_MODEL || 'gpt-4o-mini'}' with the example ARC agents.`);
    }
    const client = await connect({
      address: stack.stack.temporalAddress,
      namespace: stack.stack.namespace,
      taskQueue: stack.stack.taskQueue,
      databaseUrl: stack.stack.databaseUrl,
      decisionKey: stack.decisionKey,
    });
    let threadId: string;
    try {
      const agent = options.reactive ? REACTIVE_AGENT : DEMO_AGENT;
      const message = options.reactive ? REACTIVE_MESSAGE : DEMO_MESSAGE;
      log(`\nhuman → ${agent}: ${message}`);
      const { thread, result } = await client.run({ agent, message });
      threadId = thread.threadId;
      // The verifier's wake-ups run after the reply: their threads and verdicts are part of what the demo shows.
      const reactive = options.reactive
        ? await verifyReactive(thread, {
            arcDataDir: readToolsConfig(options.env, process.cwd()).arcDataDir,
            scripted: Boolean(stack.stack.scriptedModel),
          })
        : undefined;
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
        problems.unshift({ kind: 'turn', threadId, agent, what: `turn ${result.status}` });
      }
      if (reactive) problems.push(...reactive.problems);
      if (options.json) {
        const explorer = stack.explorer?.link(`/threads/${threadId}`);
        const summary = { ...result, workflowId: thread.workflowId, webUi, explorer, tree, env };
        const checked = {
          ...summary,
          arcTask: arcTask ?? null,
          ...(reactive ? { wakeups: reactive.wakeups, verdicts: reactive.reviews } : {}),
          problems: problems.map(formatDemoProblem),
        };
        process.stdout.write(`${JSON.stringify(checked, null, 2)}\n`);
      } else {
        process.stdout.write(`${agent}: ${describeTurn(result)}\n`);
        log(`\nThe delegation tree (baton tree ${threadId}):\n${formatTree(tree)}`);
        log(`\nThe shared environment data (baton env ${threadId}):\n${formatEnvManifest(env)}`);
        log(`\nStored under ${DEMO_ENV_KEY}: ${arcTask ?? 'no ARC task'}`);
        if (reactive) {
          const woke = reactive.wakeups.map((w) => `${w.threadId} (${w.status}, ${w.keys.join(', ')})`);
          log(`\nThe verifier's wake-ups (baton watch list ${threadId}):\n  ${woke.join('\n  ') || 'none'}`);
          const lines = reactive.reviews.map((review) => `  ${formatCandidateReview(review)}`);
          process.stdout.write(`\nVerdicts, read from env data:\n${lines.join('\n') || '  none'}\n`);
        }
        if (webUi) log(`\nWeb UI, every workflow of this thread: ${webUi}`);
        if (stack.explorer) log(`Thread explorer, this conversation: ${stack.explorer.link(`/threads/${threadId}`)}`);
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
      `\nThe stack stays up for inspection. Continue the conversation with:\n  npx baton send ${threadId} "<message>"   (or start another: npx baton run ${options.reactive ? REACTIVE_AGENT : DEMO_AGENT} "<message>")\nPress Ctrl-C to stop.`,
    );
    await untilStopped(stack);
  } finally {
    await stack.close();
  }
}

/** What `--reactive` found: the verifier's wake-ups, each candidate's verdict, and what went wrong. */
interface ReactiveOutcome {
  wakeups: { threadId: string; status: string; keys: string[] }[];
  reviews: CandidateReview[];
  problems: DemoProblem[];
}

/**
 * Waits until the verifier's watchers have looked past the last candidate written and no wake-up of theirs is
 * running, then checks the verdicts (`reviewVerdicts`). The scripted run must also have its two known candidates,
 * the fractal rule holding and the scaling rule failing.
 */
async function verifyReactive(
  thread: ThreadHandle,
  options: { arcDataDir: string; scripted: boolean },
): Promise<ReactiveOutcome> {
  const problems: DemoProblem[] = [];
  const problem = (what: string) =>
    problems.push({ kind: 'verdict', threadId: thread.threadId, agent: VERIFIER_AGENT, what });
  const candidateWrites = (await thread.envEvents()).filter(
    (event) =>
      event.scope === '' &&
      event.key.startsWith(CANDIDATES_PREFIX) &&
      ['stored', 'updated', 'deleted'].includes(event.action),
  );
  const lastWrite = Math.max(0, ...candidateWrites.map((event) => event.seq));
  const watcherNames = (await thread.watchers())
    .filter((watcher) => watcher.agent === VERIFIER_AGENT)
    .map((watcher) => watcher.name);
  if (watcherNames.length === 0) problem(`no watcher of agent '${VERIFIER_AGENT}' was set (watch_env_data)`);
  else if (candidateWrites.length > 0) {
    log(`\nWaiting for the verifier's wake-up(s) (watchers: ${watcherNames.join(', ')}) …`);
    const deadline = Date.now() + WAKEUPS_TIMEOUT_MS;
    for (;;) {
      const watchers = (await thread.watchers()).filter((watcher) => watcherNames.includes(watcher.name));
      const running = (await thread.wakeups()).filter(
        (wakeup) => watcherNames.includes(wakeup.watcher) && wakeup.status === 'running',
      );
      const behind = watchers.filter((watcher) => watcher.cursor < lastWrite && watcher.status === 'active');
      if (behind.length === 0 && running.length === 0) break;
      if (Date.now() > deadline) {
        problem(`the verifier's wake-ups did not finish within ${WAKEUPS_TIMEOUT_MS / 1000} s`);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  const wakeups = (await thread.wakeups())
    .filter((wakeup) => watcherNames.includes(wakeup.watcher))
    .reverse()
    .map((wakeup) => ({
      threadId: wakeup.threadId,
      status: wakeup.status,
      keys: wakeup.changes.map((change) => change.key),
    }));
  if (watcherNames.length > 0 && candidateWrites.length > 0 && wakeups.length === 0) {
    problem('the verifier never woke up for the candidates');
  }
  const review = await reviewVerdicts(thread, {
    arcDataDir: options.arcDataDir,
    threadId: thread.threadId,
    ...(options.scripted ? { expect: SCRIPTED_VERDICTS } : {}),
  });
  return { wakeups, reviews: review.reviews, problems: [...problems, ...review.problems] };
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
