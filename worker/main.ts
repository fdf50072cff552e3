/** `baton worker` and `baton setup`: a production worker and its one-time preparation, configured by the environment. */
import fs from 'node:fs';
import path from 'node:path';
import { migrate } from '../db/migrate';
import { sweepOrphanedShellProcesses } from '../activities/tools/shell';
import { describeShellSandbox, probeShellSandbox } from '../activities/tools/shell-sandbox';
import { createPool } from '../db/pool';
import { assertSearchAttributes, describeSetup, setupBaton, type SetupResult } from '../stack/temporal-setup';
import { loadScript, startScriptedModelServer } from '../scripted-model';
import { createAgentCatalog } from './agent-catalog';
import { describeDecisionSigning, readSetupConfig, readWorkerConfig } from './config';
import { connectTemporal } from './connection';
import { bundleBatonWorkflows, createBatonWorker } from './create-worker';
import { startTracing } from './tracing';
import { startHealthServer } from './health';
import { createModelClient, createProviderClients, describeModelRoutes } from './model-client';
import { installRuntime } from './runtime';
import { describeUserTools, loadToolModules } from './tool-modules';
import { describeMcpServers, startMcpServers } from './mcp';

/** The line a supervisor (or a test) can wait for: the worker is polling. */
export const WORKER_READY_PREFIX = 'baton worker: polling';

/** What `runWorkerFromEnv` takes besides the environment. */
export interface RunWorkerOptions {
  /**
   * Directories no tool shows the model, even inside the files root or a world's working directory: the shell's
   * sandbox masks them and the file tools refuse them. `baton worker` names its state directory (`--state-dir`,
   * `.baton` by default), where a `baton dev` in the same directory keeps the stack file and its database password.
   * @default none
   */
  hiddenDirectories?: readonly string[];
}

/**
 * Reads the configuration, checks the namespace was set up, applies migrations, and runs a worker until
 * SIGINT/SIGTERM (the Temporal runtime installs those handlers and drains in-flight tasks before `run()` resolves).
 * @throws ConfigError, AgentConfigError, ToolDefinitionError at start-up, before anything is opened.
 * @throws SetupRequiredError when the namespace lacks Baton's search attributes (run `baton setup`).
 */
export async function runWorkerFromEnv(
  env: Record<string, string | undefined>,
  options: RunWorkerOptions = {},
): Promise<void> {
  const config = readWorkerConfig(env);
  installRuntime(config.logLevel, {
    ...(config.worker.metricsAddress ? { metricsAddress: config.worker.metricsAddress } : {}),
    ...(config.otlpMetrics === undefined ? {} : { otlpMetrics: config.otlpMetrics }),
  });
  const userTools = await loadToolModules(config.tools.toolModules);
  // One list for every tool: the sandbox masks these directories, the file tools refuse them.
  const hiddenDirectories = [...new Set(options.hiddenDirectories?.map((dir) => path.resolve(dir)) ?? [])];
  // Once, at start: every command of this worker then runs the way it says (or is refused, saying why).
  const shellSandbox = await probeShellSandbox(
    { ...config.tools.sandbox, hidden: [...(config.tools.sandbox.hidden ?? []), ...hiddenDirectories] },
    env,
  );
  const mcp =
    config.tools.mcpConfig === undefined
      ? undefined
      : await startMcpServers(config.tools.mcpConfig, env, { sandbox: shellSandbox });
  const closers: (() => Promise<void>)[] = [];
  if (mcp !== undefined) closers.push(() => mcp.close());
  try {
    const catalog = createAgentCatalog({
      agents: config.agentsDir,
      ...config.tools,
      hiddenDirectories,
      shellSandbox,
      userTools,
      providers: config.providers.map((provider) => provider.name),
      ...(mcp === undefined ? {} : { mcp }),
    });
    for (const notice of config.temporal.notices ?? []) process.stderr.write(`baton worker: ${notice}\n`);
    process.stderr.write(`baton worker: ${describeShellSandbox(shellSandbox).line}\n`);
    process.stderr.write(`baton worker: ${describeDecisionSigning(config.decisionKey)}\n`);
    // Shut down last (closers run in reverse): what the stopping worker's last spans say is sent first.
    const tracing = config.tracing === undefined ? undefined : startTracing(config.tracing);
    if (tracing !== undefined) closers.push(() => tracing.shutdown());
    const pool = createPool({
      connectionString: config.databaseUrl,
      applicationName: 'baton-worker',
      max: config.dbPoolSize,
    });
    closers.push(() => pool.end());
    await migrate(pool);
    const connection = await connectTemporal(config.temporal);
    closers.push(() => connection.close());
    await assertSearchAttributes(connection, config.namespace);

    let model = config.model;
    if (config.modelScript !== undefined) {
      const server = await startScriptedModelServer({ script: loadScript(config.modelScript) });
      closers.push(() => server.close());
      model = { ...model, baseURL: server.baseURL, model: 'baton-scripted' };
      process.stderr.write(`baton worker: scripted model (no OPENAI_API_KEY), script ${config.modelScript}\n`);
    }
    const openai = createModelClient(model);
    const providers = createProviderClients(config.providers);
    if (config.providers.length > 0) {
      process.stderr.write(
        `baton worker: ${describeModelRoutes(catalog.agents(), { openai, model: model.model }, providers)}\n`,
      );
    }
    const worker = await createBatonWorker({
      connection,
      namespace: config.namespace,
      taskQueue: config.taskQueue,
      pool,
      openai,
      model: model.model,
      providers,
      modelLimits: config.modelLimits,
      modelPrices: config.modelPrices,
      structuredOutput: config.structuredOutput,
      catalog,
      maxEnvValueBytes: config.tools.maxEnvValueBytes,
      modelStream: config.modelStream,
      steps: config.steps,
      ...(config.watchFaults === undefined ? {} : { watchFaults: config.watchFaults }),
      watchSweepSeconds: config.watchSweepSeconds,
      ...(config.decisionKey === undefined ? {} : { decisionKey: config.decisionKey.key }),
      tuning: config.worker,
      ...(config.workflowBundle === undefined ? {} : { workflowBundle: { codePath: config.workflowBundle } }),
      ...(tracing === undefined ? {} : { tracing }),
    });
    const { identity } = config.worker;
    if (config.worker.healthAddress !== undefined) {
      const health = await startHealthServer(config.worker.healthAddress, () => ({
        state: worker.getState(),
        identity,
        taskQueue: config.taskQueue,
      }));
      closers.push(() => health.close());
      process.stderr.write(`baton worker: health at http://${health.address}/healthz\n`);
    }
    if (config.tracing !== undefined) {
      process.stderr.write(
        `baton worker: traces to ${config.tracing.url} as service '${config.tracing.serviceName}'` +
          ` (sampler ${config.tracing.sampler}${config.tracing.captureContent ? ', with message content' : ''})\n`,
      );
    }
    if (config.worker.metricsAddress !== undefined) {
      process.stderr.write(`baton worker: Prometheus metrics at http://${config.worker.metricsAddress}/metrics\n`);
    } else if (config.otlpMetrics !== undefined) {
      process.stderr.write(
        `baton worker: metrics to ${config.otlpMetrics.url} every ${config.otlpMetrics.intervalMs} ms\n`,
      );
    }
    // Commands a SIGKILLed worker left running on this machine would run on forever: sweep them now and then.
    const sweeping = setInterval(() => void sweepShellOrphans(), ORPHAN_SWEEP_INTERVAL_MS);
    sweeping.unref();
    closers.push(() => Promise.resolve(clearInterval(sweeping)));
    await sweepShellOrphans();
    const running = worker.run();
    process.stderr.write(
      `${WORKER_READY_PREFIX} task queue '${config.taskQueue}' in namespace '${config.namespace}' on ` +
        `${config.temporalAddress} as '${identity}' (${catalog.agents().size} agents${describeUserTools(userTools)}` +
        `${describeMcpServers(mcp)})\n`,
    );
    await running;
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}

/** How often a worker looks for shell commands whose worker died (see `sweepOrphanedShellProcesses`). */
const ORPHAN_SWEEP_INTERVAL_MS = 15_000;

async function sweepShellOrphans(): Promise<void> {
  try {
    const killed = await sweepOrphanedShellProcesses();
    if (killed.length > 0) {
      process.stderr.write(
        `baton worker: killed ${killed.length} process(es) of shell commands whose worker died: ${killed.join(', ')}\n`,
      );
    }
  } catch (error) {
    process.stderr.write(`baton worker: sweeping orphaned shell processes failed: ${String(error)}\n`);
  }
}

/**
 * `baton bundle <file>`: writes Baton's workflow bundle, for `BATON_WORKFLOW_BUNDLE` (a worker that starts from it
 * skips seconds of webpack: worth it where workers restart often, or in an image built once).
 * @returns the bundle's size in bytes
 */
export async function writeWorkflowBundle(file: string, options: { readonly tracing?: boolean } = {}): Promise<number> {
  const { code } = await bundleBatonWorkflows(options);
  await fs.promises.mkdir(path.dirname(file), { recursive: true });
  await fs.promises.writeFile(file, code);
  return Buffer.byteLength(code);
}

/**
 * `baton setup`: creates the namespace when missing, registers Baton's search attributes and applies migrations,
 * then prints what it changed (one line each, or the result as JSON).
 * @throws ConfigError for invalid settings; what the servers answered otherwise.
 */
export async function runSetupFromEnv(
  env: Record<string, string | undefined>,
  options: { readonly json: boolean; readonly write: (text: string) => void },
): Promise<SetupResult> {
  const config = readSetupConfig(env);
  for (const notice of config.temporal.notices ?? []) process.stderr.write(`baton setup: ${notice}\n`);
  installRuntime(config.logLevel);
  const connection = await connectTemporal(config.temporal);
  try {
    const result = await setupBaton({
      connection,
      namespace: config.temporal.namespace,
      retentionDays: config.retentionDays,
      databaseUrl: config.databaseUrl,
    });
    options.write(options.json ? `${JSON.stringify(result, null, 2)}\n` : `${describeSetup(result)}\n`);
    return result;
  } finally {
    await connection.close();
  }
}
