/**
 * The production topology (stack/production.ts) for one test file: temporal-server built from Go on first use, its
 * own Temporal and Baton databases on the test stack's Postgres server, and their removal at the end. Without Go and
 * without a cached build there is nothing to start: the file's tests then skip, except under CI, where they fail
 * (`skipUnlessCi`).
 */
import { randomBytes } from 'node:crypto';
import { dropDatabase } from '../stack/local-postgres';
import { startProductionTopology, type ProductionTls, type ProductionTopology } from '../stack/production';
import { TemporalSetupError } from '../stack/temporal-build';
import { resolveTemporalServerBinaries } from '../stack/temporal-server-binaries';
import { readTestEnv } from './test-env';

/** A cold build of temporal-server takes 10 to 20 minutes on two cores: a file's set-up waits this long for it. */
export const TOPOLOGY_SETUP_TIMEOUT_MS = 60 * 60 * 1000;

/** A topology of a test file's own, or why there is none. */
export type TestTopology =
  | { readonly topology: ProductionTopology; readonly skipReason?: undefined; stop(): Promise<void> }
  | { readonly topology?: undefined; readonly skipReason: string; stop(): Promise<void> };

/**
 * Builds temporal-server when needed (progress on stderr), then starts the topology on fresh databases named after
 * `prefix`, logging its lines as `[<label>] …`. `stop()` stops the server and drops the databases.
 */
export async function startTestTopology(options: {
  readonly prefix: string;
  readonly label: string;
  readonly stateDir: string;
  readonly tls?: ProductionTls;
}): Promise<TestTopology> {
  try {
    await resolveTemporalServerBinaries({ env: process.env, progress: process.stderr, progressIntervalMs: 30_000 });
  } catch (error) {
    if (error instanceof TemporalSetupError && /`go` is not on the PATH/.test(error.message)) {
      return { skipReason: error.message, stop: () => Promise.resolve() };
    }
    throw error;
  }
  const serverUrl = new URL(readTestEnv().databaseUrl);
  serverUrl.pathname = '/postgres';
  const suffix = `${process.pid}_${randomBytes(3).toString('hex')}`;
  const databases = {
    temporal: `${options.prefix}_${suffix}_temporal`,
    visibility: `${options.prefix}_${suffix}_visibility`,
    baton: `${options.prefix}_${suffix}_baton`,
  };
  const topology = await startProductionTopology({
    postgresUrl: serverUrl.toString(),
    databases,
    stateDir: options.stateDir,
    env: process.env,
    ...(options.tls === undefined ? {} : { tls: options.tls }),
    log: (line) => process.stderr.write(`[${options.label}] ${line}\n`),
  });
  return {
    topology,
    stop: async () => {
      await topology.stop();
      for (const name of Object.values(databases)) {
        await dropDatabase(serverUrl.toString(), name).catch(() => undefined);
      }
    },
  };
}
