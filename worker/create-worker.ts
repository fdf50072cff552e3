import fs from 'node:fs';
import { Client } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  Worker,
  type NativeConnection,
  type WorkflowBundle,
  type WorkflowBundleOption,
} from '@temporalio/worker';
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import { createActivities } from '../activities';
import { publishAgentVersions } from '../activities/agent-store';
import type { McpServers } from '../activities/tools/mcp-servers';
import type { ToolDefinition } from '../activities/tools/types';
import { prepareUserTools } from '../activities/tools/user-tools';
import type { AgentRegistry, StepMode } from '../common/agent-definition';
import { createAgentCatalog, type AgentCatalog } from './agent-catalog';
import { checkModels } from './agents';
import { DEFAULT_ARC_DATA_DIR } from './config';
import type { ModelLimits } from '../activities/model-limits';
import type { ModelPrices } from '../activities/model-prices';
import { checkProviderNames, type ModelProviders } from '../activities/model-providers';
import { WORKFLOW_BUNDLER_OPTIONS, WORKFLOWS_PATH } from './workflow-bundle';
import { DEFAULT_WATCH_SWEEP_SECONDS } from '../activities/watchers';
import { startWatchSweep } from './watch-sweep';
import { startWaitingMetrics } from './waiting-metrics';
import { createActivityMetrics } from '../activities/metrics';
import { noopMetricMeter } from '@temporalio/common';
import { accessTokenProblem } from '../stack/access-token';
import { TRACING_MODULE_MARK, tracedWorkerParts, WORKFLOW_TRACING_MODULES, type BatonWorkerTracing } from './tracing';

export interface BatonWorkerOptions {
  pool: Pool;
  /** An `openai` client constructed with `maxRetries: 0` (see `createModelClient`). */
  openai: OpenAI;
  /** Model name sent when an agent names none. */
  model: string;
  /**
   * The agents and tools the worker runs: a catalog (`createAgentCatalog`), or `agents` (a directory or loaded
   * agents) with optional `tools`, from which the worker builds one.
   */
  catalog?: AgentCatalog;
  /** The agents, when no `catalog` is given: a directory of agent files, or loaded agents. */
  agents?: string | AgentRegistry;
  /**
   * Your own tools (made with `defineTool`), beside Baton's, when no `catalog` is given; a catalog brings its own
   * (`createAgentCatalog({ userTools })`).
   */
  tools?: readonly ToolDefinition[];
  /**
   * MCP servers whose tools agents call (`connectMcpServers`, or `startMcpServers` for a configuration file), when
   * no `catalog` is given; the caller closes them after the worker stops.
   */
  mcp?: McpServers;
  /** The directory `read_file` and `list_files` are confined to, when no `catalog` is given. @default the working directory */
  filesRoot?: string;
  /**
   * Directories no tool shows the model, when no `catalog` is given (`createAgentCatalog({ hiddenDirectories })`):
   * name any that hold secrets inside `filesRoot` or a world's working directory. @default none
   */
  hiddenDirectories?: readonly string[];
  /**
   * More endpoints, by provider name, that an agent's `model` names as `provider/model` (the name after the `/` is
   * sent); each an `openai` client with `maxRetries: 0` (see `createProviderClients`). Give the catalog the same
   * names. @default none
   */
  providers?: ModelProviders;
  /**
   * Limits on model calls, by provider (`default` for the default endpoint) or `provider/model`, that every worker
   * of the task queue shares through Postgres: give every worker the same (`readModelLimits` reads
   * `BATON_MODEL_LIMITS`). @default none
   */
  modelLimits?: ModelLimits;
  /**
   * What model calls cost, by provider or `provider/model`, for budgets in dollars: give every worker the same
   * (`readModelPrices` reads `BATON_MODEL_PRICES`). Without a price for a model, a turn under a dollar budget does not
   * call it. @default none
   */
  modelPrices?: ModelPrices;
  /**
   * Providers (`default` for the default endpoint) whose endpoints take `response_format: json_schema`: a typed
   * agent's calls there ask for its `output` that way, elsewhere through a `final_output` tool
   * (`readStructuredOutput` reads `BATON_STRUCTURED_OUTPUT`). @default none
   */
  structuredOutput?: readonly string[];
  /**
   * Answer the calls of root threads an experiment replays from their records (`baton eval replay`): for the workers
   * of an evaluation's own task queue only. @default false
   */
  evalReplays?: boolean;
  /** Largest env-data value, as JSON. @default 100 KiB */
  maxEnvValueBytes?: number;
  /** Ask every endpoint for streamed replies and assemble them (`BATON_MODEL_STREAM=on`). @default false */
  modelStream?: boolean;
  /**
   * Where turns run their steps when neither their agent (`steps`) nor their world (`BATON_STEPS`) says
   * (`BATON_STEPS`). @default 'activity'
   */
  steps?: StepMode;
  /** Faults a test injects (`BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL`). @default none */
  watchFaults?: { killBeforeSignalForKey?: string; failSignalForKey?: string };
  /**
   * Seconds between the worker's watch sweeps (`BATON_WATCH_SWEEP_SECONDS`), which signal the watchers of changes no
   * signal told them about (a writer died between its commit and the signal, Temporal refused it), once such a change
   * is that old: how late such a wake-up comes at most, about twice this. From 1 to 3600. @default 10
   */
  watchSweepSeconds?: number;
  /**
   * The deployment's decision key (`BATON_DECISION_KEY`, at least 32 characters): the worker writes an approval's
   * decision only when it carries a proof made with this key, which clients connected with the same `decisionKey`
   * attach. Give every worker of the task queue the same one. @default none: any decision is written, whoever sent
   * it (anyone who reaches the Temporal namespace)
   */
  decisionKey?: string;
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** A pre-built workflow bundle (tests share one); bundled from `workflows/` when omitted. */
  workflowBundle?: WorkflowBundleOption;
  /** Concurrency, cache and identity (`baton worker` reads them from the environment); the SDK's defaults else. */
  tuning?: Partial<WorkerTuningOptions>;
  /**
   * Trace every run this worker takes part in (docs/guides/observing-runs.md): your OpenTelemetry SDK tracer provider, or the
   * one `startTracing` built from the `OTEL_*` variables. A `workflowBundle` must then hold Temporal's tracing
   * interceptors (`bundleBatonWorkflows({ tracing: true })`, `baton bundle --tracing`). @default none: nothing traced
   */
  tracing?: BatonWorkerTracing;
}

/** The Worker options `baton worker` exposes as environment variables (see `WorkerTuning` in config.ts). */
export interface WorkerTuningOptions {
  maxConcurrentActivityTaskExecutions: number;
  maxConcurrentWorkflowTaskExecutions: number;
  maxCachedWorkflows: number;
  identity: string;
  /** Milliseconds running activities get to finish after a shutdown signal before they are cancelled. */
  shutdownGraceTime: number;
}

/**
 * Bundles Baton's workflow code once (webpack takes seconds), for reuse across workers; `tracing: true` adds
 * Temporal's tracing interceptors, which a worker with `tracing` needs.
 */
export function bundleBatonWorkflows(options: { readonly tracing?: boolean } = {}): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    ...WORKFLOW_BUNDLER_OPTIONS,
    ...(options.tracing === true ? { workflowInterceptorModules: WORKFLOW_TRACING_MODULES } : {}),
    logger: new DefaultLogger('WARN'),
  });
}

/** Whether a bundle holds Temporal's tracing interceptors (its code names their module). */
function bundleTraces(bundle: WorkflowBundleOption): boolean {
  const code = 'code' in bundle ? bundle.code : fs.readFileSync(bundle.codePath, 'utf8');
  return code.includes(TRACING_MODULE_MARK);
}

/**
 * The catalog of `createBatonWorker({ agents, tools })`.
 * @throws ToolDefinitionError for a bad tool; AgentConfigError for a bad agent; Error when both a catalog and tools
 * are given, or neither a catalog nor agents
 */
function catalogFrom(options: BatonWorkerOptions): AgentCatalog {
  if (options.agents === undefined) {
    throw new Error('createBatonWorker needs either `catalog` or `agents` (an agents directory or loaded agents)');
  }
  return createAgentCatalog({
    agents: options.agents,
    filesRoot: options.filesRoot ?? process.cwd(),
    ...(options.hiddenDirectories === undefined ? {} : { hiddenDirectories: options.hiddenDirectories }),
    arcDataDir: DEFAULT_ARC_DATA_DIR,
    userTools: prepareUserTools(options.tools ?? [], 'createBatonWorker({ tools })'),
    providers: Object.keys(options.providers ?? {}),
    ...(options.mcp === undefined ? {} : { mcp: options.mcp }),
  });
}

/**
 * A Temporal worker running Baton's workflows and activities on one task queue.
 * @throws Error for a bad provider name, or an invalid mix of options; AgentConfigError for an agent whose `model`
 * names a provider not given; ToolDefinitionError for a bad tool.
 */
export async function createBatonWorker(options: BatonWorkerOptions): Promise<Worker> {
  if (
    options.catalog !== undefined &&
    (options.tools !== undefined || options.agents !== undefined || options.mcp !== undefined)
  ) {
    throw new Error(
      'createBatonWorker takes either `catalog` or `agents` with `tools`, not both: give the catalog its tools instead',
    );
  }
  const { connection, namespace, taskQueue, workflowBundle, pool, openai, model, maxEnvValueBytes } = options;
  const catalog = options.catalog ?? catalogFrom(options);
  const providers = options.providers ?? {};
  checkProviderNames(providers);
  // The catalog checked its agents against the providers it was given; these are the ones the calls will use.
  checkModels(catalog.agents(), Object.keys(providers));
  if (options.decisionKey !== undefined) {
    const problem = accessTokenProblem(options.decisionKey);
    if (problem !== undefined) throw new Error(`decisionKey ${problem}`);
  }
  const watchSweepSeconds = options.watchSweepSeconds ?? DEFAULT_WATCH_SWEEP_SECONDS;
  if (!Number.isFinite(watchSweepSeconds) || watchSweepSeconds < 1 || watchSweepSeconds > 3600) {
    throw new Error(`watchSweepSeconds must be from 1 to 3600 seconds, not ${watchSweepSeconds}`);
  }
  const traced = options.tracing === undefined ? undefined : tracedWorkerParts(options.tracing);
  if (traced !== undefined && workflowBundle !== undefined && !bundleTraces(workflowBundle)) {
    throw new Error(
      'createBatonWorker({ tracing }) needs a workflow bundle holding the tracing interceptors: build it with ' +
        '`bundleBatonWorkflows({ tracing: true })` or `baton bundle --tracing` (the image has ' +
        '/app/workflow-bundle-traced.js), or give no bundle',
    );
  }
  // The runtime's meter: a no-op unless the runtime exports metrics (`BATON_METRICS_ADDRESS`).
  const meter = Runtime.instance().metricMeter;
  // Before polling: a client that sees this worker's agents known can schedule them.
  await publishAgentVersions(pool, catalog.agents());
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue,
    ...options.tuning,
    activities: createActivities({
      pool,
      openai,
      model,
      providers,
      ...(options.modelLimits === undefined ? {} : { modelLimits: options.modelLimits }),
      ...(options.modelPrices === undefined ? {} : { modelPrices: options.modelPrices }),
      ...(options.structuredOutput === undefined ? {} : { structuredOutput: options.structuredOutput }),
      ...(options.evalReplays === true ? { evalReplays: true } : {}),
      agents: () => catalog.agents(),
      tools: catalog.tools,
      ...(maxEnvValueBytes === undefined ? {} : { maxEnvValueBytes }),
      ...(options.modelStream === undefined ? {} : { modelStream: options.modelStream }),
      ...(options.steps === undefined ? {} : { steps: options.steps }),
      ...(options.watchFaults === undefined ? {} : { watchFaults: options.watchFaults }),
      watchSweepSeconds,
      ...(options.decisionKey === undefined ? {} : { decisionKey: options.decisionKey }),
      ...(traced === undefined ? {} : { tracing: traced.activityTracing }),
      metrics: createActivityMetrics(meter),
    }),
    ...(workflowBundle
      ? { workflowBundle }
      : { workflowsPath: WORKFLOWS_PATH, bundlerOptions: WORKFLOW_BUNDLER_OPTIONS }),
    // A bundle holds its workflow interceptors already (the SDK ignores, and warns about, modules given beside one).
    ...(traced === undefined
      ? {}
      : {
          interceptors: workflowBundle ? { activity: traced.interceptors.activity } : traced.interceptors,
          sinks: traced.sinks,
        }),
  });
  // The watch sweep runs while the worker does (`runUntil` runs `run` too), in every worker of the task queue.
  const run = worker.run.bind(worker);
  worker.run = async () => {
    const logger = Runtime.instance().logger;
    const sweep = startWatchSweep({
      pool,
      temporal: new Client({ connection, namespace }),
      taskQueue,
      intervalSeconds: watchSweepSeconds,
      warn: (message, attributes) => {
        logger.warn(message, attributes);
      },
    });
    const waiting =
      meter === noopMetricMeter
        ? undefined
        : startWaitingMetrics({
            pool,
            meter,
            warn: (message, attributes) => {
              logger.warn(message, attributes);
            },
          });
    try {
      await run();
    } finally {
      await sweep.stop();
      await waiting?.stop();
    }
  };
  return worker;
}
