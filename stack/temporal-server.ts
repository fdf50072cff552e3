/**
 * Starts the Temporal dev server a {@link TemporalResolution} points at (or passes an existing address through),
 * with Baton's search attributes registered, SQLite in WAL mode and the Web UI on.
 *
 * A local CLI is spawned here rather than through the SDK's `TestWorkflowEnvironment`: the SDK runs the server with
 * this process's stdout and stderr, so its banner and logs would corrupt `baton dev --json`, and it can only SIGKILL
 * the server. The SDK is used only for its own download route.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdir, open, readFile } from 'node:fs/promises';
import { connect as connectTcp, createServer, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import { TypedSearchAttributes } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { batonSearchAttributeKeys } from '../common/search-attributes';
import type { TemporalResolution } from './temporal-cli';
import { TemporalSetupError, TemporalUnavailableError } from './temporal-cli';
import { listensOn } from './port-owner';
import { ensureSearchAttributes, SearchAttributeConflictError } from './temporal-setup';

export { SearchAttributeConflictError } from './temporal-setup';

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
   * Server log level (the logs go to {@link logFile}, never to this process's output).
   * @default 'warn'
   */
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /**
   * File the CLI's output (banner and logs) is appended to, each run under a header line; its directory is
   * created. Without one, only the last lines are kept in memory, for the error when the server fails to start.
   * Ignored on the SDK download route, where the SDK decides where the output goes.
   * @default `temporal.log` beside {@link dbFilename} when that is set, else none
   */
  readonly logFile?: string;
  /**
   * Search attributes registered on the namespace, at start and again (for missing ones) on an existing database.
   * @default batonSearchAttributeKeys
   */
  readonly searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
  /** More `temporal server start-dev` arguments. */
  readonly extraArgs?: readonly string[];
  /**
   * Start with {@link LATENCY_DYNAMIC_CONFIG}. Off only to measure what it buys (`npm run bench --
   * --default-dynamic-config`).
   * @default true
   */
  readonly latencyDynamicConfig?: boolean;
  /**
   * Longest to wait for the frontend (and the Web UI) to answer. A cold start takes 1 to 3 seconds; slow disks
   * and loaded CI machines take much longer. Not applied on the SDK download route.
   * @default 60_000
   */
  readonly startTimeoutMs?: number;
  /**
   * How long `stop()` lets the server shut down after SIGINT before it is killed (SIGKILL). Killing loses no
   * acknowledged state (Temporal persists before it answers; SQLite in WAL mode is crash-safe) but skips Temporal's
   * orderly stop, which takes about 1.5 s and logs WARN lines about closed connections. `0` kills at once. On the
   * SDK download route the SDK always kills.
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
  /** Where the server's output goes, when this process started it with a log file. */
  readonly logFile?: string;
  /**
   * Stops the server (SIGINT first, see {@link StartTemporalOptions.stopGracePeriodMs}). Safe to call twice.
   *
   * A started server does not keep this process alive, and it is killed when this process exits without calling
   * `stop()` (also on an uncaught error), so it is never left running.
   */
  stop(): Promise<void>;
}

/** The dev server failed to start or to take Baton's search attributes. */
export class TemporalStartError extends TemporalSetupError {
  constructor(
    message: string,
    readonly resolution: TemporalResolution,
    /** The last lines the server printed in this run, oldest first. */
    readonly outputTail: readonly string[] = [],
    options?: { cause?: unknown },
  ) {
    super(
      outputTail.length > 0 ? `${message}\n--- last server output ---\n${outputTail.join('\n')}` : message,
      options,
    );
  }
}

/** The SQLite pragma giving the dev server's database a write-ahead log (readers do not block the writer). */
const SQLITE_WAL_ARGS = ['--sqlite-pragma', 'journal_mode=wal'] as const;

/**
 * Dynamic config the SDK's dev server sets and Baton relies on: Updates (a thread's `send` is one), and no
 * version check calling home at start.
 */
const DYNAMIC_CONFIG = [
  'frontend.enableUpdateWorkflowExecution=true',
  'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
  'frontend.enableServerVersionCheck=false',
] as const;

/**
 * Dynamic config for a latency-sensitive workload: an agent step is a few activity and workflow task dispatches in
 * a row, so how often the server's queue processors poll for new tasks bounds every step. Measured with
 * `npm run bench` (bench/step.bench.ts, docs/performance.md); `--default-dynamic-config` there runs without these.
 *
 * - `history.transferProcessorMaxPollRPS=1000`: the transfer queue (which hands new workflow and activity tasks to
 *   matching) is polled at most 20 times a second by default, so tasks go out on a 50 ms grid and every dispatch
 *   waits half of that on average. Raised, a Baton step took 2.3× less time.
 * - `system.enableActivityEagerExecution=true`: when a workflow task schedules an activity, the server may hand it
 *   straight back to the worker that completed the task (the SDK asks for it by default), saving a trip through
 *   matching per activity: 7-19 % off a Baton step in three paired runs. A worker with no free slot gets the
 *   activity through the task queue as before.
 * - `matching.forwarderMaxRatePerSecond=1000`: a task queue has 4 partitions; a task written to a partition where no
 *   poller waits is forwarded to the root partition at most 10 times a second by default. A fork of 32 children made
 *   the first workflow task of some of them wait 2 s (4 of 12 plain Temporal fan-outs of 32, 3 of 4 Baton forks of
 *   32 in `npm run bench -- fork-join --quick`); raised, none did in 16 and 4 runs.
 *
 * Tried and not kept (no change beyond the noise): one task-queue partition (`matching.numTaskqueue*Partitions=1`),
 * and raising `history.timerProcessorMaxPollRPS` and `history.visibilityProcessorMaxPollRPS`.
 */
export const LATENCY_DYNAMIC_CONFIG = [
  'history.transferProcessorMaxPollRPS=1000',
  'system.enableActivityEagerExecution=true',
  'matching.forwarderMaxRatePerSecond=1000',
] as const;

/** Lines of server output kept for error messages. */
const OUTPUT_TAIL_LINES = 50;

/**
 * Starts before giving up when the server exits because a port was taken: a free port can be claimed by another
 * process between choosing it and the server binding it.
 */
const PORT_ATTEMPTS = 3;

/** What the server prints when a port it was given is taken (`listen tcp …: bind: address already in use`). */
const PORT_TAKEN = /address already in use/i;

const POLL_INTERVAL_MS = 50;

/** Each readiness call's own deadline, so a hung call cannot eat the whole start timeout. */
const PROBE_TIMEOUT_MS = 5_000;

/** How long to wait for the process to disappear after SIGKILL; only a process stuck in the kernel takes longer. */
const KILL_WAIT_MS = 5_000;

/**
 * Starts (or, for `kind: 'address'`, just describes) a Temporal server.
 *
 * The dev server registers search attributes only when it creates the namespace, so on a database from an earlier
 * run any that are missing are added through the operator service right after start.
 *
 * @throws {TemporalUnavailableError} when the SDK download route fails (its message lists every route tried).
 * @throws {TemporalStartError} when the CLI does not start or search attributes cannot be registered; its message
 *   ends with the server's last output.
 * @throws {SearchAttributeConflictError} when a Baton attribute exists with another type.
 */
export async function startTemporal(options: StartTemporalOptions): Promise<TemporalServerHandle> {
  const { resolution } = options;
  const namespace = options.namespace ?? 'default';
  if (resolution.kind === 'address') {
    return { address: resolution.address, namespace, stop: () => Promise.resolve() };
  }
  if (options.dbFilename !== undefined) await mkdir(dirname(options.dbFilename), { recursive: true });
  return resolution.kind === 'cli'
    ? startCliServer(options, resolution, namespace)
    : startSdkServer(options, resolution, namespace);
}

/**
 * Link to the Web UI's workflow list filtered by a visibility query, e.g.
 * `webUiWorkflowsUrl('http://127.0.0.1:8233', 'default', 'BatonRootThreadId="abc"')`.
 */
export function webUiWorkflowsUrl(uiUrl: string, namespace: string, query: string): string {
  const base = uiUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows?query=${encodeURIComponent(query)}`;
}

type CliResolution = Extract<TemporalResolution, { kind: 'cli' }>;

async function startCliServer(
  options: StartTemporalOptions,
  resolution: CliResolution,
  namespace: string,
): Promise<TemporalServerHandle> {
  const ip = options.ip ?? '127.0.0.1';
  const ui = options.ui ?? true;
  const searchAttributes = options.searchAttributes ?? batonSearchAttributeKeys;
  const logFile =
    options.logFile ??
    (options.dbFilename === undefined ? undefined : join(dirname(options.dbFilename), 'temporal.log'));
  if (logFile !== undefined) await mkdir(dirname(logFile), { recursive: true });
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  const grace = options.stopGracePeriodMs ?? (options.dbFilename === undefined ? 0 : 10_000);
  const withLog = (message: string): string => (logFile === undefined ? message : `${message} (log: ${logFile})`);

  for (let attempt = 1; ; attempt++) {
    const port = await choosePort(ip, options.port ?? 7233);
    const uiPort = ui ? await choosePort(ip, options.uiPort ?? 8233, [port]) : undefined;
    const args = devServerArgs({ ...options, ip, port, uiPort, namespace, searchAttributes });
    const server = await DevServerProcess.spawn(resolution.path, args, logFile);
    const address = `${hostForUrl(ip)}:${port}`;
    const ready = await waitUntilServing(server, { ip, port, uiPort, address, namespace }, deadline);
    if (!ready.ok) {
      await server.stop(0);
      const tail = await server.outputTail();
      // Only an exit (not a timeout) can be the port race; the server names the port it could not bind.
      if (ready.exited && attempt < PORT_ATTEMPTS && (await server.portWasTaken())) {
        continue;
      }
      throw new TemporalStartError(
        withLog(`\`${resolution.path} server start-dev\` on ${address} ${ready.reason}`),
        resolution,
        tail,
      );
    }

    // What answered may be another stack's server that won the race for the port (`listensOn`): ours then exits on
    // its failed bind, and the other goes when its stack does. Where the system cannot tell, the answer is taken.
    if (!server.running || (await listensOn(server.pid, uiPort === undefined ? [port] : [port, uiPort])) === false) {
      await ready.connection.close();
      await server.stop(0);
      if (attempt < PORT_ATTEMPTS) continue;
      throw new TemporalStartError(
        withLog(`\`${resolution.path} server start-dev\` on ${address}: another process holds its ports`),
        resolution,
        await server.outputTail(),
      );
    }

    const stop = (): Promise<void> => server.stop(grace);
    try {
      await ensureSearchAttributes(ready.connection, namespace, searchAttributes);
    } catch (error) {
      await stop();
      if (error instanceof SearchAttributeConflictError) throw error;
      throw new TemporalStartError(
        withLog(`Registering search attributes failed: ${errorText(error)}`),
        resolution,
        await server.outputTail(),
        { cause: error },
      );
    } finally {
      await ready.connection.close();
    }
    return {
      address,
      namespace,
      ...(uiPort === undefined ? {} : { uiUrl: `http://${hostForUrl(ip)}:${uiPort}` }),
      ...(logFile === undefined ? {} : { logFile }),
      stop,
    };
  }
}

/** `temporal server start-dev` arguments, the same set the SDK's dev server passes plus Baton's. */
function devServerArgs(
  options: StartTemporalOptions & {
    readonly ip: string;
    readonly port: number;
    readonly uiPort: number | undefined;
    readonly namespace: string;
    readonly searchAttributes: readonly SearchAttributeKey<SearchAttributeType>[];
  },
): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    options.ip,
    '--port',
    String(options.port),
    ...(options.uiPort === undefined ? ['--headless'] : ['--ui-port', String(options.uiPort)]),
    '--namespace',
    options.namespace,
    ...(options.dbFilename === undefined ? [] : ['--db-filename', options.dbFilename]),
    '--log-level',
    options.logLevel ?? 'warn',
    '--log-format',
    'text',
    // The output goes to a file or a buffer, where colour escapes are noise.
    '--color',
    'never',
    ...options.searchAttributes.flatMap((key) => [
      '--search-attribute',
      `${key.name}=${TypedSearchAttributes.toMetadataType(key.type)}`,
    ]),
    ...SQLITE_WAL_ARGS,
    ...dynamicConfigArgs(options.latencyDynamicConfig ?? true, DYNAMIC_CONFIG),
    ...(options.extraArgs ?? []),
  ];
}

/** `--dynamic-config-value` pairs for `base`, plus {@link LATENCY_DYNAMIC_CONFIG} when `latency` is on. */
function dynamicConfigArgs(latency: boolean, base: readonly string[]): string[] {
  return [...base, ...(latency ? LATENCY_DYNAMIC_CONFIG : [])].flatMap((value) => ['--dynamic-config-value', value]);
}

type Readiness =
  | { readonly ok: true; readonly connection: Connection }
  | { readonly ok: false; readonly exited: boolean; readonly reason: string };

/**
 * Waits until the frontend answers for `namespace` and the Web UI port accepts connections, or the server exits,
 * or `deadline` passes.
 *
 * Plain TCP probes come first: a gRPC channel whose first connect is refused backs off for a second and more
 * before it tries again, which would add that much to every start.
 */
async function waitUntilServing(
  server: DevServerProcess,
  target: { ip: string; port: number; uiPort: number | undefined; address: string; namespace: string },
  deadline: number,
): Promise<Readiness> {
  const notServing = (): Readiness | undefined => {
    if (!server.running) return { ok: false, exited: true, reason: server.describeExit() };
    if (Date.now() > deadline) {
      return { ok: false, exited: false, reason: `was not serving after ${(server.ageMs() / 1000).toFixed(1)} s` };
    }
    return undefined;
  };
  for (const port of target.uiPort === undefined ? [target.port] : [target.port, target.uiPort]) {
    while (!(await canConnect(target.ip, port))) {
      const failure = notServing();
      if (failure !== undefined) return failure;
      await server.exitOrPause(POLL_INTERVAL_MS);
    }
  }

  // No retry interceptor: this loop retries itself, and stops at once when the server exits.
  const connection = Connection.lazy({ address: target.address, interceptors: [] });
  for (;;) {
    try {
      await connection.withDeadline(Math.min(Date.now() + PROBE_TIMEOUT_MS, deadline), () =>
        connection.workflowService.describeNamespace({ namespace: target.namespace }),
      );
      return { ok: true, connection };
    } catch {
      // Not serving yet, or the namespace is not created yet.
    }
    const failure = notServing();
    if (failure !== undefined) {
      await connection.close();
      return failure;
    }
    await server.exitOrPause(POLL_INTERVAL_MS);
  }
}

interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Why the process could not be started at all. */
  readonly error?: Error;
}

/**
 * A running `temporal server start-dev` (or `temporal-server start`, see `stack/production.ts`): its output (in a
 * log file or the last lines in memory), its exit, and a stop that interrupts before it kills.
 */
export class DevServerProcess {
  readonly #child: ChildProcess;
  readonly #started = Date.now();
  readonly #exited: Promise<ExitStatus>;
  #status: ExitStatus | undefined;
  #stopping: Promise<void> | undefined;
  /** The last lines printed, when there is no log file. */
  readonly #lines: string[] = [];
  /** Whether a line printed, when there is no log file, said a port was taken. */
  #portTaken = false;
  readonly #log: { readonly path: string; readonly offset: number } | undefined;
  /** Runs on `process.on('exit')`, where only synchronous calls work; SIGKILL cannot be ignored. */
  readonly #killOnExit = (): void => {
    if (this.running) this.#child.kill('SIGKILL');
  };

  private constructor(child: ChildProcess, log: { path: string; offset: number } | undefined) {
    this.#child = child;
    this.#log = log;
    this.#exited = new Promise((resolve) => {
      // 'close' rather than 'exit': it comes once the output pipes are drained, so the tail is complete.
      child.once('close', (code, signal) => resolve((this.#status = { code, signal })));
      child.on('error', (error) => {
        // Also emitted when a kill fails; only a spawn failure (no pid) means there is no process.
        if (child.pid === undefined) resolve((this.#status = { code: null, signal: null, error }));
      });
    });
    process.on('exit', this.#killOnExit);
    // The server must not keep this process alive by itself: the exit hook above takes it down with us.
    child.unref();
  }

  /**
   * Spawns the server with its output appended to `logFile`, or piped into memory. Never inherits stdio: the
   * server's banner on our stdout would break `--json` output.
   */
  static async spawn(
    executable: string,
    args: readonly string[],
    logFile: string | undefined,
    env?: Readonly<Record<string, string | undefined>>,
  ): Promise<DevServerProcess> {
    if (logFile === undefined) {
      const child = spawn(executable, args, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true, env });
      const server = new DevServerProcess(child, undefined);
      const keep = (line: string): void => {
        if (PORT_TAKEN.test(line)) server.#portTaken = true;
        server.#lines.push(line);
        if (server.#lines.length > OUTPUT_TAIL_LINES) server.#lines.shift();
      };
      for (const stream of [child.stdout, child.stderr]) {
        // One splitter per stream, so lines from stdout and stderr never merge.
        const lines = lineSplitter(keep);
        stream?.on('data', lines.push);
        // The server's last line (often the error that stopped it) has no newline.
        stream?.on('end', lines.flush);
        // A ref'd pipe would keep this process alive as surely as a ref'd child.
        if (stream instanceof Socket) stream.unref();
      }
      return server;
    }
    // The server writes straight into the file: nothing passes through this process for as long as it runs.
    const file = await open(logFile, 'a');
    try {
      await file.write(`--- ${new Date().toISOString()} ${executable} ${args.join(' ')}\n`);
      const { size } = await file.stat();
      const child = spawn(executable, args, { stdio: ['ignore', file.fd, file.fd], windowsHide: true, env });
      return new DevServerProcess(child, { path: logFile, offset: size });
    } finally {
      await file.close();
    }
  }

  get running(): boolean {
    return this.#status === undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  ageMs(): number {
    return Date.now() - this.#started;
  }

  /** Resolves when the process has exited, or after `ms`. */
  async exitOrPause(ms: number): Promise<void> {
    const timer = new AbortController();
    try {
      await Promise.race([this.#exited, sleep(ms, undefined, { signal: timer.signal }).catch(() => undefined)]);
    } finally {
      timer.abort();
    }
  }

  /** `exited with code 1`, `was killed by SIGKILL`, `could not be started: spawn … ENOENT`. */
  describeExit(): string {
    const status = this.#status;
    const code = status?.code ?? this.#child.exitCode;
    const signal = status?.signal ?? this.#child.signalCode;
    if (status?.error !== undefined) return `could not be started: ${status.error.message}`;
    const how = code !== null ? `exited with code ${code}` : `was killed by ${signal ?? 'a signal'}`;
    return `${how} before it was serving`;
  }

  /** The server's process id (`-1` if it could not be spawned). */
  get pid(): number {
    return this.#child.pid ?? -1;
  }

  /**
   * Whether the server said, anywhere in this run's output, that a port it was to listen on was taken. Not only in
   * the tail: the dev server goes on after the failed bind and panics with a stack trace longer than the tail.
   */
  async portWasTaken(): Promise<boolean> {
    if (this.#log === undefined) return this.#portTaken;
    const text = await readFile(this.#log.path).catch(() => Buffer.alloc(0));
    return PORT_TAKEN.test(text.subarray(this.#log.offset).toString('utf8'));
  }

  /** The last lines the server printed in this run (empty lines dropped), oldest first. */
  async outputTail(): Promise<string[]> {
    if (this.#log === undefined) return [...this.#lines];
    const text = await readFile(this.#log.path).catch(() => Buffer.alloc(0));
    return text
      .subarray(this.#log.offset)
      .toString('utf8')
      .split(/\r?\n/)
      .map((line) => line.trimEnd())
      .filter((line) => line !== '')
      .slice(-OUTPUT_TAIL_LINES);
  }

  /** SIGINT, up to `graceMs` for an orderly stop, then SIGKILL. Idempotent. */
  stop(graceMs: number): Promise<void> {
    return (this.#stopping ??= (async () => {
      if (this.running && graceMs > 0) {
        this.#child.kill('SIGINT');
        await this.exitOrPause(graceMs);
      }
      if (this.running) {
        this.#child.kill('SIGKILL');
        await this.exitOrPause(KILL_WAIT_MS);
      }
      process.off('exit', this.#killOnExit);
    })());
  }
}

/** The SDK's own download: it owns the process, so its output and its SIGKILL teardown are what they are. */
async function startSdkServer(
  options: StartTemporalOptions,
  resolution: Extract<TemporalResolution, { kind: 'sdk-download' }>,
  namespace: string,
): Promise<TemporalServerHandle> {
  const ip = options.ip ?? '127.0.0.1';
  const ui = options.ui ?? true;
  const port = await choosePort(ip, options.port ?? 7233);
  const uiPort = ui ? await choosePort(ip, options.uiPort ?? 8233, [port]) : undefined;
  const searchAttributes = options.searchAttributes ?? batonSearchAttributeKeys;

  let env: TestWorkflowEnvironment;
  try {
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        namespace,
        ip,
        port,
        ui,
        ...(uiPort === undefined ? {} : { uiPort }),
        ...(options.dbFilename === undefined ? {} : { dbFilename: options.dbFilename }),
        log: { format: 'pretty', level: options.logLevel ?? 'warn' },
        searchAttributes: [...searchAttributes],
        // The SDK sets the Update flags itself; the latency settings it does not.
        extraArgs: [
          ...SQLITE_WAL_ARGS,
          ...dynamicConfigArgs(options.latencyDynamicConfig ?? true, []),
          ...(options.extraArgs ?? []),
        ],
      },
    });
  } catch (error) {
    const attempts = resolution.attempts.map((a) =>
      a.route === 'SDK download' ? { ...a, outcome: 'failed' as const, detail: errorText(error) } : a,
    );
    throw new TemporalUnavailableError(attempts, { cause: error });
  }

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= env.teardown());
  try {
    await ensureSearchAttributes(env.connection, namespace, searchAttributes);
  } catch (error) {
    await stop();
    if (error instanceof SearchAttributeConflictError) throw error;
    throw new TemporalStartError(`Registering search attributes failed: ${errorText(error)}`, resolution, [], {
      cause: error,
    });
  }
  return {
    address: env.address,
    namespace,
    ...(uiPort === undefined ? {} : { uiUrl: `http://${hostForUrl(ip)}:${uiPort}` }),
    stop,
  };
}

/** Whether something accepts TCP connections on `ip:port` right now. */
function canConnect(ip: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connectTcp({ host: ip, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** The preferred port when it is free on `ip` (and not in `taken`), else one the OS hands out. */
export async function choosePort(ip: string, preferred: number, taken: readonly number[] = []): Promise<number> {
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

function lineSplitter(onLine: (line: string) => void): { push: (chunk: Buffer) => void; flush: () => void } {
  let pending = '';
  const emit = (line: string): void => {
    if (line.trim() !== '') onLine(line.trimEnd());
  };
  return {
    push: (chunk) => {
      pending += chunk.toString('utf8');
      const lines = pending.split(/\r?\n/);
      pending = lines.pop() ?? '';
      lines.forEach(emit);
    },
    flush: () => {
      emit(pending);
      pending = '';
    },
  };
}

function hostForUrl(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
