import {
  bundleWorkflowCode,
  DefaultLogger,
  Worker,
  type NativeConnection,
  type WorkflowBundle,
  type WorkflowBundleOption,
} from '@temporalio/worker';
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import { createActivities } from '../activities';
import { publishAgentVersions } from '../activities/agent-store';
import type { AgentCatalog } from './agent-catalog';
import { WORKFLOW_BUNDLER_OPTIONS, WORKFLOWS_PATH } from './workflow-bundle';

export interface BatonWorkerOptions {
  pool: Pool;
  /** An `openai` client constructed with `maxRetries: 0` (see `createModelClient`). */
  openai: OpenAI;
  /** Model name sent when an agent names none. */
  model: string;
  catalog: AgentCatalog;
  /** Largest env-data value, as JSON. @default 100 KiB */
  maxEnvValueBytes?: number;
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** A pre-built workflow bundle (tests share one); bundled from `workflows/` when omitted. */
  workflowBundle?: WorkflowBundleOption;
  /** Concurrency, cache and identity (`baton worker` reads them from the environment); the SDK's defaults else. */
  tuning?: Partial<WorkerTuningOptions>;
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

/** Bundles Baton's workflow code once (webpack takes seconds), for reuse across workers. */
export function bundleBatonWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    ...WORKFLOW_BUNDLER_OPTIONS,
    logger: new DefaultLogger('WARN'),
  });
}

/** A Temporal worker running Baton's workflows and activities on one task queue. */
export async function createBatonWorker(options: BatonWorkerOptions): Promise<Worker> {
  const { connection, namespace, taskQueue, workflowBundle, catalog, pool, openai, model, maxEnvValueBytes } = options;
  // Before polling: a client that sees this worker's agents known can schedule them.
  await publishAgentVersions(pool, catalog.agents());
  return Worker.create({
    connection,
    namespace,
    taskQueue,
    ...options.tuning,
    activities: createActivities({
      pool,
      openai,
      model,
      agents: () => catalog.agents(),
      tools: catalog.tools,
      ...(maxEnvValueBytes === undefined ? {} : { maxEnvValueBytes }),
    }),
    ...(workflowBundle
      ? { workflowBundle }
      : { workflowsPath: WORKFLOWS_PATH, bundlerOptions: WORKFLOW_BUNDLER_OPTIONS }),
  });
}
