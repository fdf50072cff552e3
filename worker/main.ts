/** `baton worker`: a production worker configured entirely by environment variables. */
import { NativeConnection } from '@temporalio/worker';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { createAgentCatalog } from './agent-catalog';
import { readWorkerConfig } from './config';
import { createBatonWorker } from './create-worker';
import { createModelClient } from './model-client';

/**
 * Reads the configuration, applies migrations, and runs a worker until SIGINT/SIGTERM (the Temporal runtime
 * installs those handlers and drains in-flight tasks before `run()` resolves).
 * @throws ConfigError, AgentConfigError at start-up, before anything is opened.
 */
export async function runWorkerFromEnv(env: Record<string, string | undefined>): Promise<void> {
  const config = readWorkerConfig(env);
  const catalog = createAgentCatalog({ agents: config.agentsDir, ...config.tools });
  const pool = createPool({ connectionString: config.databaseUrl, applicationName: 'baton-worker' });
  try {
    await migrate(pool);
    const connection = await NativeConnection.connect({ address: config.temporalAddress });
    try {
      const worker = await createBatonWorker({
        connection,
        namespace: config.namespace,
        taskQueue: config.taskQueue,
        pool,
        openai: createModelClient(config.model),
        model: config.model.model,
        catalog,
        maxEnvValueBytes: config.tools.maxEnvValueBytes,
      });
      process.stderr.write(
        `baton worker: polling task queue '${config.taskQueue}' on ${config.temporalAddress} (${catalog.agents().size} agents)\n`,
      );
      await worker.run();
    } finally {
      await connection.close();
    }
  } finally {
    await pool.end();
  }
}
