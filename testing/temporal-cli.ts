/**
 * Finds a Temporal server for Baton, in DESIGN §6's order: `TEMPORAL_ADDRESS`, a `temporal` CLI from
 * `TEMPORAL_CLI_PATH`, the PATH or the user cache, a one-time `go install` into that cache, and last the
 * Temporal SDK's own download (which needs internet access that many machines lack).
 *
 * Every input comes in through {@link ResolveTemporalOptions} (the environment is passed as a value), so tests
 * drive each route with fake executables in temporary directories.
 */
import { execFile, spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, open, readFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The Temporal CLI release Baton builds; v1.5.1 is the last tag whose go.mod has no `replace` directive. */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';

/** The Go package `go install` builds the Temporal CLI from. */
export const TEMPORAL_CLI_GO_PACKAGE = 'github.com/temporalio/cli/cmd/temporal';

/** Where a `temporal` CLI came from. `built` means this call built it with `go install`. */
export type TemporalCliSource = 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'built';

/** One route {@link resolveTemporal} considered, in order, and what it found. */
export interface TemporalRouteAttempt {
  readonly route: 'TEMPORAL_ADDRESS' | 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'go build' | 'SDK download';
  readonly outcome: 'used' | 'skipped' | 'failed';
  /** Why the route was used, skipped or failed, for people reading an error or a log. */
  readonly detail: string;
}

/** How to reach a Temporal server; {@link startTemporal} in `temporal-server.ts` turns it into a running one. */
export type TemporalResolution =
  | { readonly kind: 'address'; readonly address: string; readonly attempts: readonly TemporalRouteAttempt[] }
  | {
      readonly kind: 'cli';
      readonly path: string;
      readonly source: TemporalCliSource;
      /** First line of `temporal --version`, when it was checked. */
      readonly version?: string;
      readonly attempts: readonly TemporalRouteAttempt[];
    }
  | { readonly kind: 'sdk-download'; readonly attempts: readonly TemporalRouteAttempt[] };

/** A stream progress lines go to; `isTTY` and `columns` pick between one updating line and periodic lines. */
export interface ProgressStream {
  write(chunk: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** Inputs of {@link resolveTemporal}. */
export interface ResolveTemporalOptions {
  /**
   * The environment: `TEMPORAL_ADDRESS`, `TEMPORAL_CLI_PATH`, `PATH`, `XDG_CACHE_HOME` and `HOME` are read from it,
   * and the child processes (`temporal --version`, `go install`) inherit it. Pass `process.env` at the edge.
   */
  readonly env: Readonly<Record<string, string | undefined>>;
  /**
   * The home directory, for the default cache `~/.cache` when `XDG_CACHE_HOME` is unset.
   * @default env.HOME, else `os.homedir()`
   */
  readonly homeDir?: string;
  /**
   * Run `temporal --version` on a found CLI and reject it unless it answers like the Temporal CLI, so an unrelated
   * program named `temporal` on the PATH is skipped rather than started as a server.
   * @default true
   */
  readonly verifyCli?: boolean;
  /**
   * Build the CLI with `go install` when none is found and `go` is on the PATH.
   * @default true
   */
  readonly allowBuild?: boolean;
  /**
   * End with `{ kind: 'sdk-download' }` rather than throwing when no other route works.
   * @default true
   */
  readonly allowSdkDownload?: boolean;
  /**
   * Where build progress goes; `null` silences it.
   * @default process.stderr
   */
  readonly progress?: ProgressStream | null;
  /**
   * How often progress is printed when the stream is not a TTY (a TTY gets one line updated every second).
   * @default 10_000
   */
  readonly progressIntervalMs?: number;
  /**
   * Longest a build may run before it is killed and the route counts as failed.
   * @default 1_800_000 (30 minutes; a cold build takes 3 to 5 minutes on two cores)
   */
  readonly buildTimeoutMs?: number;
  /**
   * Longest to wait for another process's build (it holds the lock) before giving up on the route.
   * @default 2_400_000 (40 minutes)
   */
  readonly lockWaitTimeoutMs?: number;
  /** Aborts a build or a wait for one. */
  readonly signal?: AbortSignal;
}

/** Base of the errors raised while finding or starting a Temporal server. */
export class TemporalSetupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** No route gave a Temporal server; the message lists every route tried and why it failed. */
export class TemporalUnavailableError extends TemporalSetupError {
  constructor(
    readonly attempts: readonly TemporalRouteAttempt[],
    options?: { cause?: unknown },
  ) {
    super(describeAttempts(attempts), options);
  }
}

/** `go install` of the Temporal CLI failed, timed out or was aborted. */
export class TemporalBuildError extends TemporalSetupError {
  constructor(
    message: string,
    readonly exitCode: number | null,
    /** The last lines `go` printed, to show what broke. */
    readonly outputTail: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Finds a Temporal server, building the CLI once if needed.
 *
 * A `TEMPORAL_CLI_PATH` that does not point at a working CLI is an error rather than a reason to look elsewhere:
 * it was set on purpose, and silently starting a different binary (or a minutes-long build) would hide the mistake.
 *
 * @throws {TemporalUnavailableError} when no route works (or `TEMPORAL_CLI_PATH` is broken); the message names
 *   every route tried and why it failed.
 */
export async function resolveTemporal(options: ResolveTemporalOptions): Promise<TemporalResolution> {
  const { env } = options;
  const verify = options.verifyCli ?? true;
  const attempts: TemporalRouteAttempt[] = [];

  const address = nonEmpty(env.TEMPORAL_ADDRESS);
  if (address !== undefined) {
    attempts.push({ route: 'TEMPORAL_ADDRESS', outcome: 'used', detail: address });
    return { kind: 'address', address, attempts };
  }
  attempts.push({ route: 'TEMPORAL_ADDRESS', outcome: 'skipped', detail: 'not set' });

  const cliPath = nonEmpty(env.TEMPORAL_CLI_PATH);
  if (cliPath !== undefined) {
    const check = await checkCli(cliPath, verify, env);
    if (!check.ok) {
      attempts.push({ route: 'TEMPORAL_CLI_PATH', outcome: 'failed', detail: `${cliPath}: ${check.reason}` });
      throw new TemporalUnavailableError(attempts);
    }
    attempts.push({ route: 'TEMPORAL_CLI_PATH', outcome: 'used', detail: cliPath });
    return { kind: 'cli', path: cliPath, source: 'TEMPORAL_CLI_PATH', ...versionField(check.version), attempts };
  }
  attempts.push({ route: 'TEMPORAL_CLI_PATH', outcome: 'skipped', detail: 'not set' });

  const pathDirs = splitPath(env.PATH);
  const onPath = await findOnPath('temporal', pathDirs, verify, env);
  if (onPath.found !== undefined) {
    attempts.push({ route: 'PATH', outcome: 'used', detail: onPath.found.path });
    return { kind: 'cli', path: onPath.found.path, source: 'PATH', ...versionField(onPath.found.version), attempts };
  }
  attempts.push({ route: 'PATH', outcome: 'failed', detail: onPath.reason });

  const cacheDir = temporalCliCacheDir({ env, ...(options.homeDir === undefined ? {} : { homeDir: options.homeDir }) });
  const cached = join(cacheDir, 'temporal');
  const cacheCheck = await checkCli(cached, verify, env);
  if (cacheCheck.ok) {
    attempts.push({ route: 'cache', outcome: 'used', detail: cached });
    return { kind: 'cli', path: cached, source: 'cache', ...versionField(cacheCheck.version), attempts };
  }
  attempts.push({ route: 'cache', outcome: 'failed', detail: `${cached}: ${cacheCheck.reason}` });

  if (options.allowBuild ?? true) {
    const go = await findOnPath('go', pathDirs, false, env);
    if (go.found === undefined) {
      attempts.push({ route: 'go build', outcome: 'failed', detail: `\`go\` not found: ${go.reason}` });
    } else {
      try {
        const reuse = async (path: string): Promise<boolean> => (await checkCli(path, verify, env)).ok;
        const built = await buildTemporalCli({ ...options, goPath: go.found.path, cacheDir, reuse });
        const check = await checkCli(built.path, verify, env);
        if (!check.ok) throw new TemporalSetupError(`the built ${built.path} does not work: ${check.reason}`);
        attempts.push({ route: 'go build', outcome: 'used', detail: built.path });
        return { kind: 'cli', path: built.path, source: built.source, ...versionField(check.version), attempts };
      } catch (error) {
        if (options.signal?.aborted) throw error;
        attempts.push({ route: 'go build', outcome: 'failed', detail: `with ${go.found.path}: ${errorText(error)}` });
      }
    }
  } else {
    attempts.push({ route: 'go build', outcome: 'skipped', detail: 'disabled (allowBuild: false)' });
  }

  if (options.allowSdkDownload ?? true) {
    attempts.push({ route: 'SDK download', outcome: 'used', detail: 'TestWorkflowEnvironment.createLocal() download' });
    return { kind: 'sdk-download', attempts };
  }
  attempts.push({ route: 'SDK download', outcome: 'skipped', detail: 'disabled (allowSdkDownload: false)' });
  throw new TemporalUnavailableError(attempts);
}

/**
 * The cache directory the built CLI lives in: `${XDG_CACHE_HOME:-~/.cache}/baton/temporal-v1.5.1`.
 * A relative `XDG_CACHE_HOME` is ignored, as the XDG spec asks.
 */
export function temporalCliCacheDir(options: {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly homeDir?: string;
}): string {
  const xdg = nonEmpty(options.env.XDG_CACHE_HOME);
  const cacheHome =
    xdg !== undefined && isAbsolute(xdg)
      ? xdg
      : join(options.homeDir ?? nonEmpty(options.env.HOME) ?? homedir(), '.cache');
  return join(cacheHome, 'baton', `temporal-${TEMPORAL_CLI_VERSION}`);
}

/** Renders attempts as the message of {@link TemporalUnavailableError}. */
export function describeAttempts(attempts: readonly TemporalRouteAttempt[]): string {
  const lines = attempts.map((a) => `  - ${a.route}: ${a.outcome === 'failed' ? '' : `${a.outcome}, `}${a.detail}`);
  return [
    'No Temporal server available. Routes tried, in order:',
    ...lines,
    'Set TEMPORAL_ADDRESS to a running server, set TEMPORAL_CLI_PATH to a `temporal` CLI, ' +
      `or install Go so Baton can build one (go install ${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_VERSION}).`,
  ].join('\n');
}

type CliCheck = { ok: true; version?: string } | { ok: false; reason: string };

async function checkCli(
  path: string,
  verify: boolean,
  env: Readonly<Record<string, string | undefined>>,
): Promise<CliCheck> {
  const exec = await checkExecutable(path);
  if (exec !== undefined) return { ok: false, reason: exec };
  if (!verify) return { ok: true };
  try {
    const out = await run(path, ['--version'], env, 15_000);
    const first = out.split('\n', 1)[0]?.trim() ?? '';
    // The CLI answers `temporal version 1.5.1 (Server …, UI …)`; a `go install` build says 0.0.0-DEV.
    if (!/^temporal version /.test(first))
      return { ok: false, reason: `\`--version\` printed "${first}", not a Temporal CLI` };
    return { ok: true, version: first };
  } catch (error) {
    return { ok: false, reason: `\`--version\` failed: ${errorText(error)}` };
  }
}

/** Returns why `path` is not an executable file, or undefined when it is. */
async function checkExecutable(path: string): Promise<string | undefined> {
  try {
    const info = await stat(path);
    if (!info.isFile()) return 'not a file';
  } catch (error) {
    return isErrnoCode(error, 'ENOENT') ? 'does not exist' : errorText(error);
  }
  try {
    await access(path, fsConstants.X_OK);
    return undefined;
  } catch {
    return 'not executable';
  }
}

async function findOnPath(
  name: string,
  dirs: readonly string[],
  verify: boolean,
  env: Readonly<Record<string, string | undefined>>,
): Promise<{ found?: { path: string; version?: string }; reason: string }> {
  if (dirs.length === 0) return { reason: 'PATH is empty' };
  const rejected: string[] = [];
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if ((await checkExecutable(candidate)) !== undefined) continue;
    const check = await checkCli(candidate, verify, env);
    if (check.ok) return { found: { path: candidate, ...versionField(check.version) }, reason: '' };
    rejected.push(`${candidate} (${check.reason})`);
  }
  const none = `no executable \`${name}\` in ${dirs.length} PATH director${dirs.length === 1 ? 'y' : 'ies'}`;
  return { reason: rejected.length === 0 ? none : `${none} that works; rejected ${rejected.join(', ')}` };
}

interface BuildOptions extends ResolveTemporalOptions {
  readonly goPath: string;
  readonly cacheDir: string;
  /** Whether a CLI already at the target (built by whoever held the lock before) works and can be kept. */
  readonly reuse: (path: string) => Promise<boolean>;
}

/**
 * Builds the CLI into `cacheDir` under a lock, so concurrent first runs build once: the others wait and reuse it.
 * The build goes to a temporary GOBIN inside the cache directory and is renamed into place, so a killed build never
 * leaves a half-written binary where the cache route would find it.
 */
async function buildTemporalCli(options: BuildOptions): Promise<{ path: string; source: TemporalCliSource }> {
  const { cacheDir } = options;
  const target = join(cacheDir, 'temporal');
  const progress = options.progress === undefined ? process.stderr : options.progress;
  await mkdir(cacheDir, { recursive: true });

  const release = await acquireLock(join(cacheDir, 'build.lock'), {
    timeoutMs: options.lockWaitTimeoutMs ?? 2_400_000,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onWait: (holder) =>
      progress?.write(`Waiting for another process (${holder}) that is building the Temporal CLI into ${cacheDir}\n`),
  });
  try {
    // Whoever held the lock before us may have finished the build.
    if (await options.reuse(target)) return { path: target, source: 'cache' };
    await removeStaleBuildDirs(cacheDir);
    const gobin = join(cacheDir, `.build-${process.pid}-${Date.now()}`);
    await mkdir(gobin);
    try {
      await runGoInstall({ ...options, gobin, progress });
      await rename(join(gobin, 'temporal'), target);
    } finally {
      await rm(gobin, { recursive: true, force: true });
    }
    return { path: target, source: 'built' };
  } finally {
    await release();
  }
}

async function runGoInstall(
  options: BuildOptions & { readonly gobin: string; readonly progress: ProgressStream | null },
): Promise<void> {
  const pkg = `${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_VERSION}`;
  const timeoutMs = options.buildTimeoutMs ?? 1_800_000;
  const reporter = new BuildProgress(options.progress, options.progressIntervalMs ?? 10_000);
  reporter.begin(
    `No Temporal CLI found; building it once with \`go install ${pkg}\` into ${options.cacheDir} ` +
      '(takes a few minutes on first run).',
  );

  // `-v` names each package as it compiles, which is the only sign of life during a long link-free stretch.
  // CGO_ENABLED=0 matches the official release builds (SQLite is pure Go) and needs no C toolchain.
  const child = spawn(options.goPath, ['install', '-v', pkg], {
    env: { ...options.env, GOBIN: options.gobin, CGO_ENABLED: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail: string[] = [];
  const onData = lineSplitter((line) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
    reporter.line(line);
  });
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);

  let killedFor: string | undefined;
  const kill = (why: string): void => {
    killedFor ??= why;
    // go forwards SIGINT to the compilers it runs; SIGKILL is the fallback if it hangs.
    child.kill('SIGINT');
    setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
  };
  const timer = setTimeout(() => kill(`timed out after ${formatDuration(timeoutMs)}`), timeoutMs);
  const onAbort = (): void => kill('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });

  try {
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve(code));
    });
    if (killedFor !== undefined) throw new TemporalBuildError(`go install ${killedFor}`, exitCode, [...tail]);
    if (exitCode !== 0) {
      const last = tail.slice(-5).join(' | ');
      throw new TemporalBuildError(`go install exited with code ${String(exitCode)}: ${last}`, exitCode, [...tail]);
    }
    reporter.end(`Built the Temporal CLI in ${formatDuration(reporter.elapsedMs())}: ${options.cacheDir}/temporal`);
  } catch (error) {
    reporter.end(`Building the Temporal CLI failed after ${formatDuration(reporter.elapsedMs())}.`);
    throw error;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

/** Elapsed time and the latest `go` line: one rewritten line on a TTY, a line per interval otherwise. */
class BuildProgress {
  #started = Date.now();
  #latest = '';
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: ProgressStream | null,
    private readonly intervalMs: number,
  ) {}

  begin(message: string): void {
    if (this.stream === null) return;
    this.stream.write(`${message}\n`);
    this.#timer = setInterval(() => this.#render(), this.stream.isTTY === true ? 1_000 : this.intervalMs);
    this.#timer.unref();
  }

  line(text: string): void {
    this.#latest = text;
  }

  elapsedMs(): number {
    return Date.now() - this.#started;
  }

  end(message: string): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    if (this.stream === null) return;
    this.stream.write(`${this.stream.isTTY === true ? '\r\x1b[2K' : ''}${message}\n`);
  }

  #render(): void {
    if (this.stream === null) return;
    const text = `  building temporal ${TEMPORAL_CLI_VERSION}: ${formatDuration(this.elapsedMs())}  ${this.#latest}`;
    if (this.stream.isTTY === true) {
      const width = Math.max(20, (this.stream.columns ?? 80) - 1);
      this.stream.write(`\r\x1b[2K${text.length > width ? `${text.slice(0, width - 1)}…` : text}`);
    } else {
      this.stream.write(`${text}\n`);
    }
  }
}

interface LockOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly onWait: (holder: string) => void;
}

/** A lock older than this is taken to be left over from a crash on another host sharing the cache. */
const MAX_LOCK_AGE_MS = 2 * 60 * 60 * 1000;

/**
 * Takes an exclusive lock file (O_EXCL create). A lock whose holder process is gone (same host) or that is older
 * than {@link MAX_LOCK_AGE_MS} is stale and taken over. Returns the release function.
 */
async function acquireLock(lockPath: string, options: LockOptions): Promise<() => Promise<void>> {
  const deadline = Date.now() + options.timeoutMs;
  const me = JSON.stringify({ pid: process.pid, host: hostname(), at: Date.now() });
  let announced = false;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const handle = await open(lockPath, 'wx');
      try {
        await handle.writeFile(me);
      } finally {
        await handle.close();
      }
      return async () => {
        // Only remove the lock if it is still ours (a stale-lock takeover elsewhere may have replaced it).
        const current = await readFile(lockPath, 'utf8').catch(() => undefined);
        if (current === me) await unlink(lockPath).catch(() => undefined);
      };
    } catch (error) {
      if (!isErrnoCode(error, 'EEXIST')) throw error;
    }
    const raw = await readFile(lockPath, 'utf8').catch(() => undefined);
    if (raw === undefined) continue;
    const holder = parseLock(raw);
    if (holder === undefined || isStale(holder)) {
      // Re-read just before removing so a lock another waiter has just re-taken is left alone.
      const again = await readFile(lockPath, 'utf8').catch(() => undefined);
      if (again === raw) await unlink(lockPath).catch(() => undefined);
      continue;
    }
    if (!announced) {
      options.onWait(`pid ${holder.pid} on ${holder.host}`);
      announced = true;
    }
    if (Date.now() > deadline) {
      throw new TemporalSetupError(
        `gave up after ${formatDuration(options.timeoutMs)} waiting for pid ${holder.pid} on ${holder.host} ` +
          `to finish building (lock ${lockPath})`,
      );
    }
    await sleep(500, undefined, options.signal === undefined ? {} : { signal: options.signal });
  }
}

function parseLock(raw: string): { pid: number; host: string; at: number } | undefined {
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value !== 'object' || value === null) return undefined;
    const { pid, host, at } = value as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof host !== 'string' || typeof at !== 'number') return undefined;
    return { pid, host, at };
  } catch {
    return undefined;
  }
}

function isStale(holder: { pid: number; host: string; at: number }): boolean {
  if (Date.now() - holder.at > MAX_LOCK_AGE_MS) return true;
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    // EPERM means the process exists but belongs to someone else.
    return !isErrnoCode(error, 'EPERM');
  }
}

/** Temporary GOBIN directories left by builds that were killed; only called while holding the lock. */
async function removeStaleBuildDirs(cacheDir: string): Promise<void> {
  for (const entry of await readdir(cacheDir)) {
    if (entry.startsWith('.build-')) await rm(join(cacheDir, entry), { recursive: true, force: true });
  }
}

function run(
  file: string,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { env, timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) {
        const said = `${stderr}`.trim().split('\n').slice(-1)[0];
        reject(new Error(said ? `${error.message.split('\n', 1)[0]}: ${said}` : error.message, { cause: error }));
      } else {
        resolve(stdout);
      }
    });
  });
}

function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk.toString('utf8');
    const lines = pending.split(/\r?\n/);
    pending = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') onLine(line.trim());
  };
}

function splitPath(value: string | undefined): string[] {
  return (value ?? '').split(delimiter).filter((dir) => dir !== '');
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

function versionField(version: string | undefined): { version?: string } {
  return version === undefined ? {} : { version };
}

function isErrnoCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `3m21s`, `45s`, `1.2s`. */
export function formatDuration(ms: number): string {
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  return minutes === 0 ? `${seconds}s` : `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
}
