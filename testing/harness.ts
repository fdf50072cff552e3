/**
 * A Baton worker wired to the scripted model, for testing agents deterministically against a real Temporal
 * server and a real Postgres (what our own integration tests use, and what users use for theirs).
 */
import fs from 'node:fs';
import { NativeConnection, type Worker, type WorkflowBundleOption } from '@temporalio/worker';
import type { Pool } from 'pg';
import { connect, type BatonClient } from '../client';
import type { McpServers } from '../activities/tools/mcp-servers';
import type { ToolDefinition } from '../activities/tools/types';
import { prepareUserTools } from '../activities/tools/user-tools';
import { createPool } from '../db/pool';
import { DEFAULT_ARC_DATA_DIR } from '../worker/config';
import type { ModelLimits } from '../activities/model-limits';
import type { ModelPrices } from '../activities/model-prices';
import type { ModelProviders } from '../activities/model-providers';
import { createModelClient } from '../worker/model-client';
import { createBatonWorker } from '../worker/create-worker';
import type { BatonWorkerTracing } from '../worker/tracing';
import type { AgentRegistry } from '../worker/agents';
import type { StepMode } from '../common/agent-definition';
import { createAgentCatalog } from '../worker/agent-catalog';
import { loadScript, startScriptedModelServer, type Script, type ScriptedModelServer } from '../scripted-model';
import { readTestEnv, uniqueTaskQueue } from './test-env';
import { generateAccessToken } from '../stack/access-token';

export interface AgentHarnessOptions {
  /** Temporal frontend `host:port`. */
  temporalAddress: string;
  /** @default 'default' */
  namespace?: string;
  /** Postgres URL of a migrated Baton database. */
  databaseUrl: string;
  /** The task queue of this harness's worker; give each test its own. */
  taskQueue: string;
  /** An agents directory, or loaded agents. */
  agents: string | AgentRegistry;
  /** A model script file, or a parsed script. */
  script: string | Script;
  /** Where the scripted model appends every request it receives (one JSON line each). */
  modelLogFile?: string;
  /** The directory `read_file` and `list_files` are confined to. @default the working directory */
  filesRoot?: string;
  /** ARC task files for `load_arc_task`. @default DEFAULT_ARC_DATA_DIR */
  arcDataDir?: string;
  /** A pre-built workflow bundle, to skip bundling per harness. */
  workflowBundle?: WorkflowBundleOption;
  /** Trace the worker's runs (`createBatonWorker({ tracing })`); give a bundle with tracing, or none. @default none */
  tracing?: BatonWorkerTracing;
  /** Your own tools (made with `defineTool`), beside Baton's. */
  tools?: readonly ToolDefinition[];
  /**
   * More endpoints (say, other scripted models) that agents name as `provider/model`; the harness's own scripted
   * model is the default endpoint. @default none
   */
  providers?: ModelProviders;
  /** Limits on model calls every worker shares (`BATON_MODEL_LIMITS`). @default none */
  modelLimits?: ModelLimits;
  /** What model calls cost, for budgets in dollars (`BATON_MODEL_PRICES`). @default none */
  modelPrices?: ModelPrices;
  /** Providers whose endpoints a typed agent asks for structured output (`BATON_STRUCTURED_OUTPUT`). @default none */
  structuredOutput?: readonly string[];
  /** Answer the calls of threads an experiment replays from their records (`runExperiment({ replay })`). @default false */
  evalReplays?: boolean;
  /** MCP servers whose tools agents call (`connectMcpServers`, `startMcpServers`); the caller closes them. */
  mcp?: McpServers;
  /** Ask the scripted model for streamed replies (`BATON_MODEL_STREAM=on`). @default false */
  modelStream?: boolean;
  /** Where turns run their steps when their agent and world set none (`BATON_STEPS`). @default 'activity' */
  steps?: StepMode;
  /** Seconds between the worker's watch sweeps (`BATON_WATCH_SWEEP_SECONDS`). @default 10 */
  watchSweepSeconds?: number;
  /** Faults injected into the worker's watcher signals (tests of watchers). @default none */
  watchFaults?: { killBeforeSignalForKey?: string; failSignalForKey?: string };
  /**
   * The decision key of the harness's worker and client (`BATON_DECISION_KEY`): `harness.client` signs every
   * decision with it, and the worker writes none without such a proof. `false`: neither has one, and the worker
   * takes any decision. @default a key generated for this harness
   */
  decisionKey?: string | false;
}

export interface AgentHarness {
  client: BatonClient;
  /** The key the worker checks decisions with and `client` signs them with (`undefined` with `decisionKey: false`). */
  decisionKey: string | undefined;
  pool: Pool;
  model: ScriptedModelServer;
  worker: Worker;
  taskQueue: string;
  /** The requests the scripted model received, parsed from its log (empty without `modelLogFile`). */
  modelRequests(): ModelLogEntry[];
  /** Stops the worker and closes everything the harness opened. */
  close(): Promise<void>;
}

/** One line of the scripted model's request log. */
export interface ModelLogEntry {
  time: string;
  /** When the request was received, in ms since the epoch with a fraction (`ScriptedModelLogEntry.receivedMs`). */
  receivedMs: number;
  agent: string;
  thread: string;
  headers: Record<string, string>;
  model: string;
  messages: { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: unknown[];
  /** Whether the request asked for a streamed reply. */
  stream: boolean;
  /** The request's `response_format`, when it had one. */
  response_format?: unknown;
}

/** Starts a scripted model server and a Baton worker polling `taskQueue`, plus a client for it. */
export async function startAgentHarness(options: AgentHarnessOptions): Promise<AgentHarness> {
  const catalog = createAgentCatalog({
    agents: options.agents,
    filesRoot: options.filesRoot ?? process.cwd(),
    arcDataDir: options.arcDataDir ?? DEFAULT_ARC_DATA_DIR,
    userTools: prepareUserTools(options.tools ?? [], 'startAgentHarness({ tools })'),
    providers: Object.keys(options.providers ?? {}),
    ...(options.mcp === undefined ? {} : { mcp: options.mcp }),
  });
  const script = typeof options.script === 'string' ? loadScript(options.script) : options.script;
  const namespace = options.namespace ?? 'default';
  const decisionKey = options.decisionKey === false ? undefined : (options.decisionKey ?? generateAccessToken());
  const opened: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    for (const close of opened.reverse()) await close();
  };
  try {
    const model = await startScriptedModelServer({
      script,
      ...(options.modelLogFile ? { logFile: options.modelLogFile } : {}),
    });
    opened.push(() => model.close());
    const pool = createPool({ connectionString: options.databaseUrl, applicationName: 'baton-harness' });
    opened.push(() => pool.end());
    const connection = await NativeConnection.connect({ address: options.temporalAddress });
    opened.push(() => connection.close());
    const worker = await createBatonWorker({
      connection,
      namespace,
      taskQueue: options.taskQueue,
      pool,
      openai: createModelClient({ baseURL: model.baseURL, apiKey: 'scripted', model: 'baton-scripted' }),
      model: 'baton-scripted',
      providers: options.providers,
      catalog,
      ...(options.modelStream === undefined ? {} : { modelStream: options.modelStream }),
      ...(options.modelLimits === undefined ? {} : { modelLimits: options.modelLimits }),
      ...(options.modelPrices === undefined ? {} : { modelPrices: options.modelPrices }),
      ...(options.structuredOutput === undefined ? {} : { structuredOutput: options.structuredOutput }),
      ...(options.evalReplays === true ? { evalReplays: true } : {}),
      ...(options.steps === undefined ? {} : { steps: options.steps }),
      ...(options.watchSweepSeconds === undefined ? {} : { watchSweepSeconds: options.watchSweepSeconds }),
      ...(options.watchFaults === undefined ? {} : { watchFaults: options.watchFaults }),
      ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : {}),
      ...(decisionKey === undefined ? {} : { decisionKey }),
      ...(options.tracing === undefined ? {} : { tracing: options.tracing }),
    });
    const running = worker.run();
    opened.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    });
    const client = await connect({
      address: options.temporalAddress,
      namespace,
      taskQueue: options.taskQueue,
      databaseUrl: options.databaseUrl,
      ...(decisionKey === undefined ? {} : { decisionKey }),
    });
    opened.push(() => client.close());
    return {
      client,
      decisionKey,
      pool,
      model,
      worker,
      taskQueue: options.taskQueue,
      modelRequests: () => readModelLog(options.modelLogFile),
      close: closeAll,
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** Parses a scripted model request log; a missing file is an empty log. */
export function readModelLog(file: string | undefined): ModelLogEntry[] {
  if (!file || !fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as ModelLogEntry);
}

/**
 * The model step (from 1) a logged request asks for, read from the transcript it carries, as the scripted model picks
 * its answer. A step run again without finding its stored reply would carry the later transcript and count as a later
 * step, so per-step counts show both a step asked twice and a stored step asked again.
 */
export const requestStep = (request: ModelLogEntry): number =>
  request.messages.filter((message) => message.role === 'assistant').length + 1;

/** How many requests the log `file` holds for each model step of `threadId`, by step (from 1). */
export function requestsPerStep(file: string, threadId: string): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const request of readModelLog(file).filter((entry) => entry.thread === threadId)) {
    const step = requestStep(request);
    counts[step] = (counts[step] ?? 0) + 1;
  }
  return counts;
}

/**
 * A harness on the stack `npm test` booted (see `readTestEnv`): its Temporal server, database and pre-built
 * workflow bundle, on a task queue of its own unless `taskQueue` names one (to restart a worker on the same queue).
 */
export function startTestHarness(
  name: string,
  options: Omit<AgentHarnessOptions, 'temporalAddress' | 'databaseUrl' | 'taskQueue' | 'workflowBundle'> & {
    taskQueue?: string;
  },
): Promise<AgentHarness> {
  const env = readTestEnv();
  return startAgentHarness({
    ...options,
    temporalAddress: env.temporalAddress,
    databaseUrl: env.databaseUrl,
    taskQueue: options.taskQueue ?? uniqueTaskQueue(name),
    workflowBundle: { codePath: env.workflowBundlePath },
  });
}
