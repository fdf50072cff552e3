/**
 * Boots what the tests run against, once: Postgres (`DATABASE_URL` or embedded) with a fresh migrated database,
 * a Temporal dev server (`TEMPORAL_ADDRESS` or one the CLI starts, in memory), and the workflow bundle. Used by
 * `npm test` and by `npm run record-histories`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { migrate } from '../db/migrate';
import { bundleBatonWorkflows } from '../worker/create-worker';
import { createDatabase, dropDatabase, removeLocalPostgresData, resolveDatabase } from '../stack/local-postgres';
import { resolveTemporal } from '../stack/temporal-cli';
import { startTemporal } from '../stack/temporal-server';
import { TEST_ENV, type TestEnv } from './test-env';

export interface TestStack extends TestEnv {
  /** The variables that hand this stack to test processes (see `readTestEnv`). */
  variables: Record<string, string>;
  stop(): Promise<void>;
}

/** How {@link startTestStack} starts its Temporal server; tests use the defaults, benchmarks vary them. */
export interface TestStackOptions {
  /** See `StartTemporalOptions.latencyDynamicConfig`. @default true */
  readonly latencyDynamicConfig?: boolean;
  /** More `temporal server start-dev` arguments (e.g. `--dynamic-config-value KEY=VALUE` to measure). */
  readonly temporalExtraArgs?: readonly string[];
}

/**
 * @param root the project root; state goes under `<root>/.baton/test/`.
 * @param env the environment (`process.env` at the edge).
 */
export async function startTestStack(
  root: string,
  env: Readonly<Record<string, string | undefined>>,
  log: (line: string) => void,
  options: TestStackOptions = {},
): Promise<TestStack> {
  const cleanups: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`));
    }
  };
  try {
    const stateDir = path.join(root, '.baton', 'test', `run-${process.pid}`);
    fs.mkdirSync(stateDir, { recursive: true });
    cleanups.push(() => fs.promises.rm(stateDir, { recursive: true, force: true }));

    const pgDataDir = path.join(stateDir, 'pg');
    const database = await resolveDatabase({
      ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
      // A cluster per run (initdb takes under a second), so concurrent `npm test` runs never share one.
      dataDir: pgDataDir,
      log: (line) => {
        if (line.startsWith('[baton]')) log(line);
      },
    });
    cleanups.push(() => database.stop());
    // Runs after the server stopped: a cluster moved out of the project (as root) is this run's alone too.
    cleanups.splice(-1, 0, () => removeLocalPostgresData(pgDataDir));
    const dbName = `baton_test_${process.pid}_${Date.now().toString(36)}`;
    const databaseUrl = await createDatabase(database.databaseUrl, dbName);
    cleanups.push(() => dropDatabase(database.databaseUrl, dbName));
    await migrate(databaseUrl);
    log(`postgres: ${database.embedded ? 'embedded' : 'DATABASE_URL'}, database ${dbName}`);

    const resolution = await resolveTemporal({ env });
    const temporal = await startTemporal({
      resolution,
      port: 0,
      ui: false,
      ...(options.latencyDynamicConfig === undefined ? {} : { latencyDynamicConfig: options.latencyDynamicConfig }),
      ...(options.temporalExtraArgs === undefined ? {} : { extraArgs: options.temporalExtraArgs }),
    });
    cleanups.push(() => temporal.stop());
    log(`temporal: ${temporal.address} (${resolution.kind === 'cli' ? resolution.path : resolution.kind})`);

    const workflowBundlePath = path.join(stateDir, 'workflow-bundle.js');
    fs.writeFileSync(workflowBundlePath, (await bundleBatonWorkflows()).code);

    const temporalCli = resolution.kind === 'cli' ? resolution.path : undefined;
    const variables: Record<string, string> = {
      [TEST_ENV.temporalAddress]: temporal.address,
      [TEST_ENV.databaseUrl]: databaseUrl,
      [TEST_ENV.workflowBundle]: workflowBundlePath,
      [TEST_ENV.stateDir]: stateDir,
      ...(temporalCli ? { [TEST_ENV.temporalCli]: temporalCli } : {}),
    };
    return {
      temporalAddress: temporal.address,
      databaseUrl,
      workflowBundlePath,
      stateDir,
      ...(temporalCli ? { temporalCli } : {}),
      variables,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A Temporal dev server of a test's own, from the CLI the test run started its shared server with, with dynamic config
 * settings (`KEY=VALUE`) on top: for a test of Baton under a server setting the shared server does not have.
 */
export function startOwnTemporal(
  temporalCli: string,
  dynamicConfig: readonly string[],
): ReturnType<typeof startTemporal> {
  return startTemporal({
    resolution: { kind: 'cli', path: temporalCli, source: 'cache', attempts: [] },
    port: 0,
    ui: false,
    extraArgs: dynamicConfig.flatMap((setting) => ['--dynamic-config-value', setting]),
  });
}
