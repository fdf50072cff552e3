/**
 * The worker an evaluation runs its agents on (`baton eval run`, `baton eval replay`): the agents directory under test,
 * with the model, tools and MCP servers a `baton dev` would have, on a task queue of the experiment's own, against the
 * Temporal server and Postgres the CLI finds (the running `baton dev`, or `TEMPORAL_ADDRESS` and `DATABASE_URL`). It
 * starts no server and writes no `stack.json`; the state directory stays out of its tools' view as `baton dev`'s does.
 */
import { connect, type BatonClient, type ConnectOptions } from '../client';
import type { AgentRegistry } from '../common/agent-definition';
import { defineScorer, type Scorer } from '../evals';
import { exportedList, importModule } from '../worker/tool-modules';
import { startLocalStack } from './local-stack';
import path from 'node:path';
import fs from 'node:fs';

export interface EvalWorkerOptions {
  /** Where the CLI connects (`findConnection`); Postgres is required. */
  connection: ConnectOptions & { databaseUrl: string };
  /** The experiment the worker serves: its task queue is `baton-eval-<id>`. */
  experimentId: string;
  agentsDir: string;
  /** The state directory of the project's `baton dev` (hidden from the tools). */
  stateDir: string;
  env: Readonly<Record<string, string | undefined>>;
  /** @default `<agentsDir>/model-script.yaml` without OPENAI_API_KEY */
  modelScript?: string;
  toolModules?: readonly string[];
  mcpConfig?: string;
  /** Answer replayed threads from their records. */
  replays: boolean;
  log: (line: string) => void;
}

export interface EvalWorker {
  /** A client of the experiment's task queue. */
  client: BatonClient;
  agents(): AgentRegistry;
  model: { model: string; providers: string[] };
  close(): Promise<void>;
}

/** The task queue of an experiment's worker. */
export function evalTaskQueue(experimentId: string): string {
  return `baton-eval-${experimentId}`;
}

export async function startEvalWorker(options: EvalWorkerOptions): Promise<EvalWorker> {
  const { connection } = options;
  const taskQueue = evalTaskQueue(options.experimentId);
  const stack = await startLocalStack({
    stateDir: options.stateDir,
    agentsDir: options.agentsDir,
    taskQueue,
    env: {
      ...options.env,
      TEMPORAL_ADDRESS: connection.address,
      ...(connection.namespace === undefined ? {} : { TEMPORAL_NAMESPACE: connection.namespace }),
      DATABASE_URL: connection.databaseUrl,
    },
    log: options.log,
    ...(options.modelScript === undefined ? {} : { modelScript: options.modelScript }),
    ...(options.toolModules === undefined ? {} : { toolModules: options.toolModules }),
    ...(options.mcpConfig === undefined ? {} : { mcpConfig: options.mcpConfig }),
    evalReplays: options.replays,
    writeStackFile: false,
  });
  let client: BatonClient;
  try {
    client = await connect({ ...connection, taskQueue, decisionKey: stack.decisionKey });
  } catch (error) {
    await stack.close();
    throw error;
  }
  return {
    client,
    agents: () => stack.agents(),
    model: stack.model,
    async close() {
      await client.close();
      await stack.close();
    },
  };
}

/**
 * Loads scorer modules (`--scorers FILE`): each a JavaScript or TypeScript file whose default export, or `scorers`
 * export, is an array of scorers made with `defineScorer`.
 * @throws Error naming the file: not found, failed to load, no scorers exported, a bad scorer
 */
export async function loadScorerModules(files: readonly string[]): Promise<Scorer[]> {
  const loaded: Scorer[] = [];
  for (const file of files) {
    const source = path.resolve(file);
    if (!fs.existsSync(source)) throw new Error(`${source}: scorer module not found`);
    let namespace: unknown;
    try {
      namespace = await importModule(source);
    } catch (error) {
      throw new Error(`${source}: the module failed to load: ${(error as Error).message.split('\n')[0] ?? ''}`);
    }
    const exported = exportedList(namespace, 'scorers');
    if (!Array.isArray(exported) || exported.length === 0) {
      throw new Error(
        `${source}: the module exports no scorers: export an array of scorers made with defineScorer, as its default ` +
          'export or as `scorers`',
      );
    }
    for (const scorer of exported as Scorer[]) {
      try {
        loaded.push(defineScorer(scorer));
      } catch (error) {
        throw new Error(`${source}: ${(error as Error).message}`);
      }
    }
  }
  return loaded;
}
