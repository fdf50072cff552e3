import {
  bundleWorkflowCode,
  DefaultLogger,
  Worker,
  type NativeConnection,
  type WorkflowBundle,
  type WorkflowBundleOption,
} from '@temporalio/worker';
import { createActivities, type ActivityDependencies } from '../activities';

export interface BatonWorkerOptions extends ActivityDependencies {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** A pre-built workflow bundle (tests share one); bundled from `workflows/` when omitted. */
  workflowBundle?: WorkflowBundleOption;
}

/** Path of the workflows entry, resolved so it works from TypeScript sources (tsx) and compiled output alike. */
export const WORKFLOWS_PATH = require.resolve('../workflows');

/** Bundles Baton's workflow code once (webpack takes seconds), for reuse across workers. */
export function bundleBatonWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: new DefaultLogger('WARN') });
}

/** A Temporal worker running Baton's workflows and activities on one task queue. */
export async function createBatonWorker(options: BatonWorkerOptions): Promise<Worker> {
  const { connection, namespace, taskQueue, workflowBundle, ...deps } = options;
  return Worker.create({
    connection,
    namespace,
    taskQueue,
    activities: createActivities(deps),
    ...(workflowBundle ? { workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
  });
}
