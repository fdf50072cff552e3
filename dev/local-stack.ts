/**
 * The local stack behind `baton dev`, the demo and the tests: Postgres (`DATABASE_URL` or embedded), a Temporal
 * server (`TEMPORAL_ADDRESS` or a dev server the CLI starts), the model (an OpenAI-compatible endpoint, or the
 * scripted model without an API key; `BATON_PROVIDERS` go where they are configured either way) and a Baton worker. Everything it starts it stops in `close()`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { connect } from '../client';
import { writeStackFile, removeStackFile, type StackFile } from '../stack/stack-file';
import { DEFAULT_EXPLORER_PORT, resolveAccessToken, shownToken, startExplorer, traceUrlProblem } from '../explorer';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { createAgentCatalog } from '../worker/agent-catalog';
import type { AgentRegistry } from '../worker/agents';
import { createBatonWorker } from '../worker/create-worker';
import { readTracingSettings, startTracing } from '../worker/tracing';
import { publishAgentVersions } from '../activities/agent-store';
import { describeShellSandbox, probeShellSandbox } from '../activities/tools/shell-sandbox';
import { createModelClient, createProviderClients, describeModelRoutes } from '../worker/model-client';
import {
  checkConnectionVariables,
  describeDecisionSigning,
  readDecisionKey,
  readModelStream,
  stackDecisionKey,
  readStepMode,
  readModelLimits,
  readModelPrices,
  readStructuredOutput,
  readProviders,
  readTemporalConnection,
  readToolsConfig,
  readWorkflowBundle,
  type ModelConfig,
} from '../worker/config';
import { describeUserTools, loadToolModules } from '../worker/tool-modules';
import { relocatedPostgresHomes, resolveDatabase } from '../stack/local-postgres';
import { loadScript, startScriptedModelServer } from '../scripted-model';
import { resolveTemporal, type ProgressStream } from '../stack/temporal-cli';
import { startTemporal, webUiWorkflowsUrl } from '../stack/temporal-server';
import { describeMcpServers, startMcpServers } from '../worker/mcp';
import { connectTemporal } from '../worker/connection';

export interface LocalStackOptions {
  /** State directory: embedded Postgres data, the Temporal database, `stack.json`. */
  stateDir: string;
  agentsDir: string;
  /** Users' tool modules (`--tools`); `BATON_TOOLS` from `env` when omitted. */
  toolModules?: readonly string[];
  /** The MCP servers' configuration file (`--mcp`); `BATON_MCP_CONFIG` from `env` when omitted. */
  mcpConfig?: string;
  /** Scripted model script, used when no API key is configured. @default `<agentsDir>/model-script.yaml` */
  modelScript?: string;
  /** @default 'baton' */
  taskQueue?: string;
  /** The environment (`process.env` at the edge): database, Temporal and model settings are read from it. */
  env: Readonly<Record<string, string | undefined>>;
  /** Progress and status lines. */
  log: (line: string) => void;
  /** Where a Temporal CLI build shows progress. @default process.stderr */
  progress?: ProgressStream;
  /**
   * Reload the agents directory when its files change (`baton dev`), logging `agents: reloaded (…)` or
   * `agents: not reloaded: <file:line: reason>`; a bad set keeps the previous one. Stops on `close()`.
   * @default false
   */
  watchAgents?: boolean;
  /**
   * Serve the thread explorer on loopback (its URL is logged and recorded as `explorerUrl` in stack.json), on
   * `port`, or on DEFAULT_EXPLORER_PORT and a free port when that one is taken. Omitted: no explorer. Its token is
   * `BATON_EXPLORER_TOKEN` from `env` when set, else the state directory's `token` file (made on first use); the
   * logged address carries the latter.
   */
  explorer?: { port?: number };
  /** Answer the calls of root threads an experiment replays from their records (an evaluation's worker). */
  evalReplays?: boolean;
  /** Write `stack.json` in `stateDir` for other CLI commands. @default true */
  writeStackFile?: boolean;
}

/** The explorer a local stack serves. */
export interface LocalExplorer {
  /** `http://127.0.0.1:<port>`, as `explorerUrl` in stack.json. */
  readonly url: string;
  /** The token every request carries (`Authorization: Bearer`, or the cookie of the address with the token). */
  readonly token: string;
  /**
   * The address a person opens: `path` with `?token=<token>` when the token is the stack's own; without it when it is
   * one the operator configured (`BATON_EXPLORER_TOKEN`), which is theirs to know and never printed.
   */
  link(path?: string): string;
}

export interface LocalStack {
  readonly stack: StackFile;
  /** The agents the worker runs (as last loaded). */
  agents(): AgentRegistry;
  /** The worker's default model and its providers' names. */
  readonly model: { model: string; providers: string[] };
  readonly worker: Worker;
  /** Settles when the worker stops (on `close()`, or by itself on a fatal error). */
  readonly workerRun: Promise<void>;
  /** Web UI link listing the workflows that match a visibility query, when the UI runs. */
  workflowsUrl(query: string): string | undefined;
  /** The thread explorer, when `explorer` was asked for. */
  readonly explorer: LocalExplorer | undefined;
  /**
   * The key the worker checks approvals' decisions with, which a client of this stack connects with
   * (`connect({ decisionKey })`): `BATON_DECISION_KEY` or `BATON_DECISION_KEY_FILE`, else the state directory's
   * token (the one the CLI finds beside `stack.json`).
   */
  readonly decisionKey: string;
  close(): Promise<void>;
}

/**
 * What no tool shows the model of a stack kept in `stateDir`: the directory (stack.json with the database password,
 * the embedded Postgres, token files) and wherever its Postgres cluster was moved to (its credentials).
 */
export function hiddenStateDirectories(stateDir: string): string[] {
  return [path.resolve(stateDir), ...relocatedPostgresHomes(path.join(stateDir, 'pg'))];
}

/** Starts the local stack and a worker; writes `stack.json` for other CLI commands. */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const { env, log, stateDir } = options;
  const taskQueue = options.taskQueue ?? 'baton';
  checkConnectionVariables(env);
  const tools = readToolsConfig(env, process.cwd());
  // A person watches a local stack: its replies stream unless BATON_MODEL_STREAM=off says otherwise.
  const modelStream = readModelStream(env, 'on');
  const steps = readStepMode(env);
  const providerConfigs = readProviders(env);
  // Limits and prices as a production worker reads them: a budget in dollars needs the prices here too.
  const modelLimits = readModelLimits(env, providerConfigs);
  const modelPrices = readModelPrices(env, providerConfigs);
  const structuredOutput = readStructuredOutput(env, providerConfigs);
  // A bundle `baton bundle` wrote spares the worker's start seconds of webpack (checked against these sources).
  const workflowBundle = readWorkflowBundle(env, process.cwd());
  // Traces go where the standard OTEL_* variables say, when they name an endpoint.
  const tracingSettings = readTracingSettings(env);
  // Where the explorer links each thread's traces (a trace UI's search), checked before anything starts.
  const traceUrl = env.BATON_TRACE_URL?.trim() || undefined;
  const traceUrlError = traceUrl === undefined ? undefined : traceUrlProblem(traceUrl);
  if (traceUrlError !== undefined) throw new Error(`BATON_TRACE_URL: ${traceUrlError}`);
  // Decisions are always signed on a local stack: with the configured key, else the stack's own secret, which the
  // CLI beside it reads too, so nothing needs configuring.
  const decision = readDecisionKey(env, process.cwd()) ?? stackDecisionKey(stateDir);
  const toolModules = options.toolModules?.map((file) => path.resolve(file)) ?? tools.toolModules;
  const userTools = await loadToolModules(toolModules);
  // Once, at start. The state directory (stack.json, the embedded Postgres, token files) stays out of every tool's
  // view, even in a world whose working directory holds it: the sandbox masks it and the file tools refuse it.
  const hiddenDirectories = hiddenStateDirectories(stateDir);
  const shellSandbox = await probeShellSandbox({ ...tools.sandbox, hidden: hiddenDirectories }, env);
  const mcpConfig = options.mcpConfig === undefined ? tools.mcpConfig : path.resolve(options.mcpConfig);
  const mcp =
    mcpConfig === undefined ? undefined : await startMcpServers(mcpConfig, env, { log, sandbox: shellSandbox });
  let catalog: ReturnType<typeof createAgentCatalog>;
  try {
    catalog = createAgentCatalog({
      agents: options.agentsDir,
      ...tools,
      hiddenDirectories,
      shellSandbox,
      userTools,
      providers: providerConfigs.map((provider) => provider.name),
      ...(mcp === undefined ? {} : { mcp }),
    });
  } catch (error) {
    await mcp?.close();
    throw error;
  }
  if (userTools.length > 0) log(`tools:${describeUserTools(userTools).replace(/^; tools/, '')}`);
  if (mcp !== undefined) log(`MCP:${describeMcpServers(mcp).replace(/^; MCP/, '')} from ${mcp.source}`);
  log(describeShellSandbox(shellSandbox).line);
  log(describeDecisionSigning(decision));
  const opened: (() => Promise<void>)[] = mcp === undefined ? [] : [() => mcp.close()];
  const closeAll = async () => {
    for (const close of opened.splice(0).reverse()) {
      await close().catch((error: unknown) => log(`while stopping: ${String(error)}`));
    }
  };
  try {
    fs.mkdirSync(stateDir, { recursive: true });
    const database = await resolveDatabase({
      ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
      dataDir: path.join(stateDir, 'pg'),
      // Only Baton's own lines: initdb and server chatter stay out of the way (a failed start carries its tail).
      log: (line) => {
        if (line.startsWith('[baton]')) log(line.replace('[baton] ', 'postgres: '));
      },
    });
    opened.push(() => database.stop());
    // A cluster moved out of the project was named in the line that said why; one line says where.
    if (!database.embedded) log('postgres: DATABASE_URL');
    else if (database.home === undefined || database.home === path.resolve(stateDir, 'pg')) {
      log(`postgres: embedded, data in ${path.join(stateDir, 'pg')}`);
    }
    const pool = createPool({ connectionString: database.databaseUrl, applicationName: 'baton-dev' });
    opened.push(() => pool.end());
    const { applied } = await migrate(pool);
    if (applied.length > 0) log(`postgres: applied migrations ${applied.join(', ')}`);

    const resolution = await resolveTemporal({ env, progress: options.progress ?? process.stderr });
    // With TEMPORAL_ADDRESS, the worker and the explorer reach that server as every client does: with the namespace,
    // TLS and API key of Temporal's variables or profile (worker/temporal-settings.ts).
    const external = resolution.kind === 'address' ? readTemporalConnection(env, process.cwd()) : undefined;
    const temporal = await startTemporal({
      resolution,
      dbFilename: path.resolve(stateDir, 'temporal.db'),
      ...(external === undefined ? {} : { namespace: external.namespace }),
    });
    opened.push(() => temporal.stop());
    for (const notice of external?.notices ?? []) log(`temporal: ${notice}`);
    log(
      resolution.kind === 'address'
        ? `temporal: ${temporal.address} (TEMPORAL_ADDRESS)`
        : `temporal: dev server on ${temporal.address}${temporal.uiUrl ? `, Web UI ${temporal.uiUrl}` : ''}`,
    );

    let model: ModelConfig;
    let modelBaseURL: string | undefined;
    const scripted = !env.OPENAI_API_KEY;
    if (scripted) {
      const scriptPath = options.modelScript ?? path.join(options.agentsDir, 'model-script.yaml');
      if (!fs.existsSync(scriptPath)) {
        throw new Error(
          `OPENAI_API_KEY is not set and there is no model script at ${scriptPath}: set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint), or pass --model-script FILE`,
        );
      }
      const server = await startScriptedModelServer({
        script: loadScript(scriptPath),
        ...(env.BATON_MODEL_LOG ? { logFile: env.BATON_MODEL_LOG } : {}),
      });
      opened.push(() => server.close());
      modelBaseURL = server.baseURL;
      model = { baseURL: server.baseURL, apiKey: 'scripted', model: 'baton-scripted' };
      log(
        `model: scripted (no OPENAI_API_KEY), script ${scriptPath} (read once; restart to change it), serving ${server.baseURL}`,
      );
    } else {
      modelBaseURL = env.OPENAI_BASE_URL;
      model = {
        baseURL: env.OPENAI_BASE_URL,
        apiKey: env.OPENAI_API_KEY ?? '',
        model: env.BATON_MODEL || 'gpt-4o-mini',
      };
      log(`model: ${model.model} at ${env.OPENAI_BASE_URL ?? 'the OpenAI API'}`);
    }
    const openai = createModelClient(model);
    const providers = createProviderClients(providerConfigs);
    const logModelRoutes = (agents: AgentRegistry) => {
      if (providerConfigs.length > 0) log(describeModelRoutes(agents, { openai, model: model.model }, providers));
    };

    const connection =
      external === undefined
        ? await NativeConnection.connect({ address: temporal.address })
        : await connectTemporal(external);
    opened.push(() => connection.close());
    // Closed after the worker (in reverse order): its last spans are sent.
    const tracing = tracingSettings === undefined ? undefined : startTracing(tracingSettings);
    if (tracing !== undefined) {
      opened.push(() => tracing.shutdown());
      log(`traces: to ${tracingSettings?.url ?? ''} as service '${tracingSettings?.serviceName ?? ''}'`);
    }
    const worker = await createBatonWorker({
      connection,
      namespace: temporal.namespace,
      taskQueue,
      pool,
      openai,
      model: model.model,
      providers,
      modelLimits,
      modelPrices,
      structuredOutput,
      catalog,
      maxEnvValueBytes: tools.maxEnvValueBytes,
      modelStream,
      steps,
      decisionKey: decision.key,
      ...(options.evalReplays === true ? { evalReplays: true } : {}),
      ...(workflowBundle === undefined ? {} : { workflowBundle: { codePath: workflowBundle } }),
      ...(tracing === undefined ? {} : { tracing }),
    });
    const workerRun = worker.run();
    opened.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await workerRun.catch(() => undefined);
    });
    log(
      `worker: task queue '${taskQueue}', agents ${[...catalog.agents().keys()].join(', ')}` +
        (workflowBundle === undefined ? '' : `, workflows from ${workflowBundle} (BATON_WORKFLOW_BUNDLE)`),
    );
    logModelRoutes(catalog.agents());
    if (options.watchAgents) {
      const unwatch = catalog.watch((outcome) => {
        log(
          'agents' in outcome
            ? `agents: reloaded (${[...outcome.agents.keys()].join(', ')})`
            : `agents: not reloaded: ${outcome.error instanceof Error ? outcome.error.message : String(outcome.error)}`,
        );
        if ('agents' in outcome) {
          logModelRoutes(outcome.agents);
          publishAgentVersions(pool, outcome.agents).catch((error: unknown) =>
            log(`agents: not stored: ${error instanceof Error ? error.message : String(error)}`),
          );
        }
      });
      opened.push(() => Promise.resolve(unwatch()));
    }

    let explorer: LocalExplorer | undefined;
    if (options.explorer) {
      // Read before anything is served, so a token that cannot be used stops the start.
      const access = resolveAccessToken({
        variable: { name: 'BATON_EXPLORER_TOKEN', value: env.BATON_EXPLORER_TOKEN },
        stateDir,
      });
      const client = await connect({
        address: temporal.address,
        namespace: temporal.namespace,
        ...(external?.tls === undefined ? {} : { tls: external.tls }),
        ...(external?.apiKey === undefined ? {} : { apiKey: external.apiKey }),
        ...(external?.metadata === undefined ? {} : { metadata: external.metadata }),
        taskQueue,
        databaseUrl: database.databaseUrl,
        decisionKey: decision.key,
      });
      opened.push(() => client.close());
      const server = await startExplorer({
        client,
        port: options.explorer.port ?? DEFAULT_EXPLORER_PORT,
        portFallback: options.explorer.port === undefined,
        uiUrl: temporal.uiUrl,
        ...(traceUrl === undefined ? {} : { traceUrl }),
        namespace: temporal.namespace,
        token: access.token,
      });
      opened.push(() => server.close());
      explorer = {
        url: server.url,
        token: server.token,
        link: (path = '/') => (access.printable ? server.link(path) : new URL(path, server.url).href),
      };
      log(`explorer: ${access.printable ? explorer.link() : `${server.url}/?token=${shownToken(access)}`}`);
    }
    const explorerUrl = explorer?.url;

    const stack: StackFile = {
      temporalAddress: temporal.address,
      namespace: temporal.namespace,
      taskQueue,
      databaseUrl: database.databaseUrl,
      ...(temporal.uiUrl ? { uiUrl: temporal.uiUrl } : {}),
      ...(explorerUrl ? { explorerUrl } : {}),
      ...(modelBaseURL ? { modelBaseURL } : {}),
      scriptedModel: scripted,
      pid: process.pid,
      startedAt: new Date().toISOString(),
    };
    if (options.writeStackFile !== false) {
      writeStackFile(stateDir, stack);
      opened.push(() => Promise.resolve(removeStackFile(stateDir, process.pid)));
    }

    return {
      stack,
      agents: () => catalog.agents(),
      model: { model: model.model, providers: providerConfigs.map((provider) => provider.name) },
      worker,
      workerRun,
      workflowsUrl: (query) =>
        temporal.uiUrl ? webUiWorkflowsUrl(temporal.uiUrl, temporal.namespace, query) : undefined,
      explorer,
      decisionKey: decision.key,
      close: closeAll,
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}
