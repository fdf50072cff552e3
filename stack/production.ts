/**
 * The production topology without Docker: `temporal-server` (built from Go, see `temporal-server-binaries.ts`) with
 * Postgres persistence and visibility, its schemas created by `temporal-sql-tool` through the same script and the
 * same config file docker-compose.yml uses (`deploy/temporal/`), and `baton setup` applied. Workers are started by
 * the caller (`baton dev --topology production` runs one in-process; the production-topology test runs two
 * `baton worker` processes). Everything it starts it stops in `stop()`.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { delimiter, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection, type TLSConfig } from '@temporalio/client';
import pg from 'pg';
import { resolveDatabase } from './local-postgres';
import { choosePort, DevServerProcess } from './temporal-server';
import { TemporalSetupError, type ProgressStream } from './temporal-build';
import { resolveTemporalServerBinaries, type TemporalServerBinaries } from './temporal-server-binaries';
import { setupBaton, type SetupResult } from './temporal-setup';

/** `deploy/temporal/` in the repository: the server config and the schema script docker-compose.yml mounts. */
export const TEMPORAL_DEPLOY_DIR = resolve(__dirname, '..', 'deploy', 'temporal');

/**
 * The dynamic config production.yaml points temporal-server at (`DYNAMIC_CONFIG_FILE_PATH`; docker-compose.yml mounts
 * the same file): the latency settings the dev server starts with.
 */
export const TEMPORAL_DYNAMIC_CONFIG_FILE = join(TEMPORAL_DEPLOY_DIR, 'dynamicconfig.yaml');

/** The environment name temporal-server loads its config by: `deploy/temporal/production.yaml`. */
const CONFIG_ENV = 'production';

/** Database names of the topology, all on one Postgres server. */
export interface ProductionDatabases {
  /** @default 'temporal' */
  readonly temporal: string;
  /** @default 'temporal_visibility' */
  readonly visibility: string;
  /** @default 'baton' */
  readonly baton: string;
}

/** Inputs of {@link startProductionTopology}. */
export interface ProductionTopologyOptions {
  /**
   * A Postgres server, as a URL whose role may create databases (`postgres://user:password@host:port/db`; the
   * database in it is only used to connect).
   */
  readonly postgresUrl: string;
  /** @default {@link ProductionDatabases} defaults */
  readonly databases?: Partial<ProductionDatabases>;
  /** Where the server's log goes (`temporal-server.log`). */
  readonly stateDir: string;
  /** The environment (`PATH`, cache location, `go`'s settings); `process.env` at the edge. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** @default 'default' */
  readonly namespace?: string;
  /** Retention of the namespace `baton setup` creates. @default 1 */
  readonly retentionDays?: number;
  /** Where a first build shows progress; `null` silences it. @default process.stderr */
  readonly progress?: ProgressStream | null;
  /** Progress lines of the start itself. */
  readonly log?: (line: string) => void;
  /** Longest to wait for the server to serve. @default 120_000 */
  readonly startTimeoutMs?: number;
  /**
   * mTLS on the frontend (production.yaml's `FRONTEND_TLS_*`): the server's PEM certificate and key (allowing client
   * authentication too: the server's system worker presents it), and the CA that signed the clients' certificates and
   * the server's. Set up here with the server's own certificate as the client's. @default plaintext
   */
  readonly tls?: ProductionTls;
}

/** The PEM files of {@link ProductionTopologyOptions.tls}. */
export interface ProductionTls {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
  /** The name in the server's certificate that clients check. @default 'localhost' */
  readonly serverName?: string;
}

/** A running production topology (minus workers). */
export interface ProductionTopology {
  /** `127.0.0.1:<port>` of the Temporal frontend. */
  readonly temporalAddress: string;
  readonly namespace: string;
  /** Baton's database. */
  readonly databaseUrl: string;
  readonly databases: ProductionDatabases;
  readonly binaries: TemporalServerBinaries;
  readonly logFile: string;
  /** What `baton setup` did. */
  readonly setup: SetupResult;
  /** Stops the server (SIGINT, then SIGKILL after 10 s). Safe to call twice; databases are kept. */
  stop(): Promise<void>;
}

/** The server failed to start, or a step before it (schemas, databases) failed. */
export class ProductionTopologyError extends TemporalSetupError {}

/**
 * Builds the programs when needed, creates the databases and Temporal's schemas, starts `temporal-server` on
 * loopback ports and runs `baton setup` against it.
 *
 * @throws {ProductionTopologyError} naming the step that failed (and the server's last output).
 * @throws {TemporalBuildError} when the first build fails.
 */
export async function startProductionTopology(options: ProductionTopologyOptions): Promise<ProductionTopology> {
  const log = options.log ?? (() => undefined);
  const namespace = options.namespace ?? 'default';
  const databases: ProductionDatabases = {
    temporal: options.databases?.temporal ?? 'temporal',
    visibility: options.databases?.visibility ?? 'temporal_visibility',
    baton: options.databases?.baton ?? 'baton',
  };
  const binaries = await resolveTemporalServerBinaries({
    env: options.env,
    ...(options.progress === undefined ? {} : { progress: options.progress }),
  });
  log(`temporal-server ${binaries.version}: ${binaries.server} (${binaries.source})`);

  const server = new URL(options.postgresUrl);
  const sqlEnv = {
    SQL_HOST: server.hostname,
    SQL_PORT: server.port || '5432',
    SQL_USER: decodeURIComponent(server.username),
    SQL_PASSWORD: decodeURIComponent(server.password),
  };
  await createSchemas(binaries, {
    ...options.env,
    ...sqlEnv,
    DBNAME: databases.temporal,
    VISIBILITY_DBNAME: databases.visibility,
  });
  log(`temporal schemas: ${databases.temporal}, ${databases.visibility} up to date`);
  const databaseUrl = await ensureDatabase(options.postgresUrl, databases.baton);

  const ip = '127.0.0.1';
  const ports: number[] = [];
  const port = async (): Promise<string> => {
    const chosen = await freeMembershipSafePort(ip, ports);
    ports.push(chosen);
    return String(chosen);
  };
  const serverEnv: Record<string, string | undefined> = {
    ...options.env,
    POSTGRES_SEEDS: server.hostname,
    DB_PORT: sqlEnv.SQL_PORT,
    POSTGRES_USER: sqlEnv.SQL_USER,
    POSTGRES_PWD: sqlEnv.SQL_PASSWORD,
    DBNAME: databases.temporal,
    VISIBILITY_DBNAME: databases.visibility,
    BIND_ON_IP: ip,
    TEMPORAL_BROADCAST_ADDRESS: ip,
    FRONTEND_GRPC_PORT: await port(),
    FRONTEND_HTTP_PORT: await port(),
    FRONTEND_MEMBERSHIP_PORT: await port(),
    HISTORY_GRPC_PORT: await port(),
    HISTORY_MEMBERSHIP_PORT: await port(),
    MATCHING_GRPC_PORT: await port(),
    MATCHING_MEMBERSHIP_PORT: await port(),
    WORKER_GRPC_PORT: await port(),
    WORKER_MEMBERSHIP_PORT: await port(),
    TEMPORAL_VERSION_CHECK_DISABLED: '1',
    DYNAMIC_CONFIG_FILE_PATH: TEMPORAL_DYNAMIC_CONFIG_FILE,
    ...(options.tls === undefined
      ? {}
      : {
          FRONTEND_TLS_CERT_FILE: options.tls.certFile,
          FRONTEND_TLS_KEY_FILE: options.tls.keyFile,
          FRONTEND_TLS_CA_FILE: options.tls.caFile,
          FRONTEND_TLS_SERVER_NAME: options.tls.serverName ?? 'localhost',
        }),
  };
  const address = `${ip}:${serverEnv.FRONTEND_GRPC_PORT}`;
  const logFile = join(options.stateDir, 'temporal-server.log');
  await mkdir(dirname(logFile), { recursive: true });
  const args = ['--root', '/', '--config', TEMPORAL_DEPLOY_DIR, '--env', CONFIG_ENV, '--allow-no-auth', 'start'];
  const serverProcess = await DevServerProcess.spawn(binaries.server, args, logFile, serverEnv);
  const stop = (): Promise<void> => serverProcess.stop(10_000);
  try {
    const tls = options.tls === undefined ? undefined : await clientTls(options.tls);
    const connection = await waitUntilServing(
      serverProcess,
      address,
      namespace,
      options.startTimeoutMs ?? 120_000,
      tls,
    );
    try {
      log(`temporal-server: serving on ${address} (log: ${logFile})`);
      const setup = await setupBaton({
        connection,
        namespace,
        retentionDays: options.retentionDays ?? 1,
        databaseUrl,
      });
      return { temporalAddress: address, namespace, databaseUrl, databases, binaries, logFile, setup, stop };
    } finally {
      await connection.close();
    }
  } catch (error) {
    const tail = await serverProcess.outputTail();
    await stop();
    throw new ProductionTopologyError(
      `Starting temporal-server on ${address} failed: ${error instanceof Error ? error.message : String(error)}` +
        `\n--- last server output (${logFile}) ---\n${tail
          .slice(-8)
          .map((line) => (line.length > 400 ? `${line.slice(0, 400)}…` : line))
          .join('\n')}`,
      { cause: error },
    );
  }
}

/**
 * A free port below 32768: Temporal stores membership ports in a Postgres `smallint`, so the OS's ephemeral ports
 * (32768 and up) make the server fail at start.
 */
async function freeMembershipSafePort(ip: string, taken: readonly number[]): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const candidate = 20_000 + Math.floor(Math.random() * 12_000);
    if (!taken.includes(candidate) && (await choosePort(ip, candidate, taken)) === candidate) return candidate;
  }
  throw new ProductionTopologyError(`no free port between 20000 and 32000 on ${ip}`);
}

/** Runs `deploy/temporal/create-schemas.sh` with the built `temporal-sql-tool` first on the PATH. */
function createSchemas(
  binaries: TemporalServerBinaries,
  env: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      'sh',
      [join(TEMPORAL_DEPLOY_DIR, 'create-schemas.sh')],
      {
        env: { ...env, PATH: `${dirname(binaries.sqlTool)}${delimiter}${env.PATH ?? ''}` },
        timeout: 300_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, _stdout, stderr) => {
        if (!error) return resolvePromise();
        const tail = `${stderr}`.trim().split('\n').slice(-10).join('\n');
        reject(new ProductionTopologyError(`Creating Temporal's schemas failed: ${error.message}\n${tail}`));
      },
    );
  });
}

/** Creates `name` on the server of `serverUrl` unless it exists; returns its URL. */
async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl, application_name: 'baton-topology' });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${encodeURIComponent(name)}`;
  return url.toString();
}

/** The server's own certificate as the client's, trusting the CA: how setup reaches an mTLS frontend. */
async function clientTls(tls: ProductionTls): Promise<TLSConfig> {
  return {
    serverNameOverride: tls.serverName ?? 'localhost',
    serverRootCACertificate: await readFile(tls.caFile),
    clientCertPair: { crt: await readFile(tls.certFile), key: await readFile(tls.keyFile) },
  };
}

/** Waits until the frontend answers `getSystemInfo`, or the server exits, or the timeout passes. */
async function waitUntilServing(
  server: DevServerProcess,
  address: string,
  namespace: string,
  timeoutMs: number,
  tls: TLSConfig | undefined,
): Promise<Connection> {
  const deadline = Date.now() + timeoutMs;
  // No retry interceptor: this loop retries itself, and stops at once when the server exits.
  const connection = Connection.lazy({ address, interceptors: [], ...(tls === undefined ? {} : { tls }) });
  for (;;) {
    try {
      await connection.withDeadline(Math.min(Date.now() + 5_000, deadline), () =>
        connection.workflowService.getSystemInfo({}),
      );
      return connection;
    } catch {
      // Not serving yet.
    }
    if (!server.running) {
      await connection.close();
      throw new ProductionTopologyError(`temporal-server ${server.describeExit()}`);
    }
    if (Date.now() > deadline) {
      await connection.close();
      throw new ProductionTopologyError(
        `temporal-server was not serving namespace '${namespace}' after ${Math.round(timeoutMs / 1000)} s`,
      );
    }
    await sleep(250);
  }
}

/** What `baton dev --topology production` runs its worker against. */
export interface LocalProductionServers {
  readonly topology: ProductionTopology;
  /** `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` and `DATABASE_URL` of the topology, to lay over the environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Stops the server and the embedded Postgres, when one was started. */
  stop(): Promise<void>;
}

/**
 * The production topology on this machine for `baton dev --topology production`: Postgres from `DATABASE_URL` (its
 * role must be able to create databases) or the embedded one under `<stateDir>/pg`, and temporal-server on it, its
 * state kept across restarts in the databases `temporal`, `temporal_visibility` and `baton`.
 */
export async function startLocalProductionServers(options: {
  readonly stateDir: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly log: (line: string) => void;
  readonly progress?: ProgressStream | null;
}): Promise<LocalProductionServers> {
  const database = await resolveDatabase({
    ...(options.env.DATABASE_URL ? { databaseUrl: options.env.DATABASE_URL } : {}),
    dataDir: join(options.stateDir, 'pg'),
    log: (line) => {
      if (line.startsWith('[baton]')) options.log(line.replace('[baton] ', 'postgres: '));
    },
  });
  try {
    const topology = await startProductionTopology({
      postgresUrl: database.databaseUrl,
      stateDir: join(options.stateDir, 'production'),
      env: options.env,
      log: options.log,
      retentionDays: 7,
      ...(options.progress === undefined ? {} : { progress: options.progress }),
    });
    return {
      topology,
      env: {
        TEMPORAL_ADDRESS: topology.temporalAddress,
        TEMPORAL_NAMESPACE: topology.namespace,
        DATABASE_URL: topology.databaseUrl,
      },
      stop: async () => {
        await topology.stop();
        await database.stop();
      },
    };
  } catch (error) {
    await database.stop();
    throw error;
  }
}
