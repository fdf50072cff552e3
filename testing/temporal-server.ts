/**
 * Starts the Temporal dev server a {@link TemporalResolution} points at (or passes an existing address through),
 * with Baton's search attributes registered, SQLite in WAL mode and the Web UI on.
 */
import { createServer } from 'node:net';
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { batonSearchAttributeKeys } from '../common/search-attributes';
import type { TemporalResolution } from './temporal-cli';
import { TemporalSetupError, TemporalUnavailableError } from './temporal-cli';

/** Inputs of {@link startTemporal}. */
export interface StartTemporalOptions {
  /** Where the server comes from, as returned by `resolveTemporal`. */
  readonly resolution: TemporalResolution;
  /**
   * SQLite file the dev server keeps its state in (its directory is created), e.g. `.baton/temporal.db` for
   * `baton dev` or a fresh temporary path in tests. Unset, the server keeps state in memory only.
   */
  readonly dbFilename?: string;
  /**
   * Namespace the server creates at start (and the one returned for an existing address).
   * @default 'default'
   */
  readonly namespace?: string;
  /**
   * Address the frontend and the Web UI bind to.
   * @default '127.0.0.1'
   */
  readonly ip?: string;
  /**
   * Preferred frontend gRPC port, used when free; otherwise a free port is picked. `0` always picks a free port.
   * @default 7233
   */
  readonly port?: number;
  /**
   * Preferred Web UI port, used when free; otherwise a free port is picked. `0` always picks a free port.
   * @default 8233
   */
  readonly uiPort?: number;
  /**
   * Serve the Web UI.
   * @default true
   */
  readonly ui?: boolean;
  /**
   * Server log level (server logs go to this process's stderr).
   * @default 'warn'
   */
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /**
   * Search attributes registered on the namespace, at start and again (for missing ones) on an existing database.
   * @default batonSearchAttributeKeys
   */
  readonly searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
  /** More `temporal server start-dev` arguments. */
  readonly extraArgs?: readonly string[];
  /**
   * How long `stop()` lets the server shut down after SIGINT before the SDK's teardown kills it (SIGKILL). Killing
   * loses no acknowledged state (Temporal persists before it answers; SQLite in WAL mode is crash-safe) but skips
   * Temporal's orderly stop, which takes about 1.5 s and logs a dozen WARN lines about closed connections. `0` kills
   * at once. The server process is found through `/proc`, so elsewhere than Linux `stop()` always kills.
   * @default 10_000 with a `dbFilename` (state worth an orderly close), else 0 (in-memory state dies either way)
   */
  readonly stopGracePeriodMs?: number;
}

/** A Temporal server to connect to; `stop()` shuts down what {@link startTemporal} started (and only that). */
export interface TemporalServerHandle {
  /** `host:port` of the frontend gRPC service. */
  readonly address: string;
  readonly namespace: string;
  /** Web UI base URL, when this process started a server with the UI on. */
  readonly uiUrl?: string;
  /** The SDK environment owning the started server and its connections; absent for an existing address. */
  readonly env?: TestWorkflowEnvironment;
  /**
   * Stops the server (SIGINT first, see {@link StartTemporalOptions.stopGracePeriodMs}) and closes the connections.
   * Safe to call twice.
   */
  stop(): Promise<void>;
}

/** The dev server failed to start or to take Baton's search attributes. */
export class TemporalStartError extends TemporalSetupError {
  constructor(
    message: string,
    readonly resolution: TemporalResolution,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A search attribute Baton needs is already registered with another type. */
export class SearchAttributeConflictError extends TemporalSetupError {
  constructor(
    readonly attribute: string,
    readonly expectedType: SearchAttributeType,
    readonly registeredType: string,
  ) {
    super(`Search attribute ${attribute} is registered as ${registeredType}, but Baton needs ${expectedType}.`);
  }
}

/** The SQLite pragma giving the dev server's database a write-ahead log (readers do not block the writer). */
const SQLITE_WAL_ARGS = ['--sqlite-pragma', 'journal_mode=wal'] as const;

/**
 * Starts (or, for `kind: 'address'`, just describes) a Temporal server.
 *
 * The dev server registers search attributes only when it creates the namespace, so on a database from an earlier
 * run any that are missing are added through the operator service right after start.
 *
 * @throws {TemporalUnavailableError} when the SDK download route fails (its message lists every route tried).
 * @throws {TemporalStartError} when the CLI does not start or search attributes cannot be registered.
 * @throws {SearchAttributeConflictError} when a Baton attribute exists with another type.
 */
export async function startTemporal(options: StartTemporalOptions): Promise<TemporalServerHandle> {
  const { resolution } = options;
  const namespace = options.namespace ?? 'default';
  if (resolution.kind === 'address') {
    return { address: resolution.address, namespace, stop: () => Promise.resolve() };
  }

  const ip = options.ip ?? '127.0.0.1';
  const ui = options.ui ?? true;
  const port = await choosePort(ip, options.port ?? 7233);
  const uiPort = ui ? await choosePort(ip, options.uiPort ?? 8233, [port]) : undefined;
  const searchAttributes = options.searchAttributes ?? batonSearchAttributeKeys;
  if (options.dbFilename !== undefined) await mkdir(dirname(options.dbFilename), { recursive: true });

  let env: TestWorkflowEnvironment;
  try {
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        ...(resolution.kind === 'cli' ? { executable: { type: 'existing-path', path: resolution.path } } : {}),
        namespace,
        ip,
        port,
        ui,
        ...(uiPort === undefined ? {} : { uiPort }),
        ...(options.dbFilename === undefined ? {} : { dbFilename: options.dbFilename }),
        log: { format: 'pretty', level: options.logLevel ?? 'warn' },
        searchAttributes: [...searchAttributes],
        extraArgs: [...SQLITE_WAL_ARGS, ...(options.extraArgs ?? [])],
      },
    });
  } catch (error) {
    if (resolution.kind === 'sdk-download') {
      const attempts = resolution.attempts.map((a) =>
        a.route === 'SDK download' ? { ...a, outcome: 'failed' as const, detail: errorText(error) } : a,
      );
      throw new TemporalUnavailableError(attempts, { cause: error });
    }
    throw new TemporalStartError(
      `\`${resolution.path} server start-dev\` on ${ip}:${port} did not start: ${errorText(error)}`,
      resolution,
      { cause: error },
    );
  }

  const grace = options.stopGracePeriodMs ?? (options.dbFilename === undefined ? 0 : 10_000);
  const pid = grace > 0 ? await findDevServerPid(port) : undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (pid !== undefined && grace > 0) await interruptAndWait(pid, grace);
      await env.teardown();
    })());
  try {
    await ensureSearchAttributes(env.connection, namespace, searchAttributes);
  } catch (error) {
    await stop();
    if (error instanceof SearchAttributeConflictError) throw error;
    throw new TemporalStartError(`Registering search attributes failed: ${errorText(error)}`, resolution, {
      cause: error,
    });
  }

  return {
    address: env.address,
    namespace,
    ...(uiPort === undefined ? {} : { uiUrl: `http://${hostForUrl(ip)}:${uiPort}` }),
    env,
    stop,
  };
}

/**
 * Adds whichever of `keys` the namespace lacks; idempotent.
 *
 * @throws {SearchAttributeConflictError} when one exists with a different type.
 */
export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
  keys: readonly SearchAttributeKey<SearchAttributeType>[],
): Promise<void> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const custom = existing.customAttributes ?? {};
  const missing: Record<string, number> = {};
  for (const key of keys) {
    const wanted = encodeSearchAttributeIndexedValueType(key.type);
    if (wanted === undefined) throw new TemporalSetupError(`Unknown search attribute type ${key.type}`);
    const registered = custom[key.name];
    if (registered === undefined) missing[key.name] = wanted;
    else if (registered !== wanted) throw new SearchAttributeConflictError(key.name, key.type, String(registered));
  }
  if (Object.keys(missing).length === 0) return;
  await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
}

/**
 * Link to the Web UI's workflow list filtered by a visibility query, e.g.
 * `webUiWorkflowsUrl('http://127.0.0.1:8233', 'default', 'BatonRootThreadId="abc"')`.
 */
export function webUiWorkflowsUrl(uiUrl: string, namespace: string, query: string): string {
  const base = uiUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows?query=${encodeURIComponent(query)}`;
}

/**
 * The dev server's pid: our child process whose command line is `… start-dev … --port <port>`. Undefined where there
 * is no `/proc` (then `stop()` falls back to the SDK's kill).
 */
async function findDevServerPid(port: number): Promise<number | undefined> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if ((await readProcStat(Number(entry)))?.ppid !== process.pid) continue;
      const argv = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0');
      if (argv.includes('start-dev') && argv[argv.indexOf('--port') + 1] === String(port)) return Number(entry);
    } catch {
      // The process ended between readdir and read; not ours to find.
    }
  }
  return undefined;
}

/** State and parent pid from `/proc/<pid>/stat`; undefined once the process is gone. */
async function readProcStat(pid: number): Promise<{ state: string; ppid: number } | undefined> {
  const raw = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (raw === undefined) return undefined;
  // The command name in parentheses may contain spaces; fields after the last ')' are fixed.
  const [state = '', ppid = ''] = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
  return { state, ppid: Number(ppid) };
}

/**
 * SIGINT, then waits until the process has exited: it stays a zombie ('Z') until the SDK reaps it in `teardown()`.
 */
async function interruptAndWait(pid: number, timeoutMs: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const stat = await readProcStat(pid);
    if (stat === undefined || stat.state === 'Z') return;
    await sleep(50);
  }
}

/** The preferred port when it is free on `ip` (and not in `taken`), else one the OS hands out. */
async function choosePort(ip: string, preferred: number, taken: readonly number[] = []): Promise<number> {
  if (preferred !== 0 && !taken.includes(preferred) && (await canListen(ip, preferred))) return preferred;
  for (;;) {
    const port = await listenOnce(ip, 0);
    if (!taken.includes(port)) return port;
  }
}

async function canListen(ip: string, port: number): Promise<boolean> {
  try {
    await listenOnce(ip, port);
    return true;
  } catch {
    return false;
  }
}

function listenOnce(ip: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host: ip, port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : port;
      server.close(() => resolve(bound));
    });
  });
}

function hostForUrl(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
