/**
 * Builds Temporal's Go programs once into the user cache (`${XDG_CACHE_HOME:-~/.cache}/baton/<name>-<version>/`),
 * the way docs/architecture.md §6 asks: `go install` under a lock so concurrent first runs build once, progress
 * while it runs (the first build takes minutes), a temporary GOBIN renamed into place so a killed build never leaves
 * a half-written binary where the cache route would find it, and reuse of whatever an earlier build left.
 *
 * The Temporal CLI (`temporal-cli.ts`) and the production topology's `temporal-server` and `temporal-sql-tool`
 * (`temporal-server-binaries.ts`) are both built through {@link buildGoBinariesOnce}.
 */
import { spawn } from 'node:child_process';
import { access, mkdir, open, readFile, readdir, rename, rm, unlink } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { constants as fsConstants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** A stream progress lines go to; `isTTY` and `columns` pick between one updating line and periodic lines. */
export interface ProgressStream {
  write(chunk: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** Base of the errors raised while finding, building or starting a Temporal server. */
export class TemporalSetupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** `go install` of a Temporal program failed, timed out or was aborted. */
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

/** One program a build produces. */
export interface GoBinary {
  /** The Go package, without a version, e.g. `go.temporal.io/server/cmd/server`. */
  readonly goPackage: string;
  /** The file `go install` writes (the package's last path element), e.g. `server`. */
  readonly builtName: string;
  /** The file name in the cache, e.g. `temporal-server`. */
  readonly name: string;
}

/** What to build and where it lives. */
export interface GoBuildTarget {
  /** For messages: `the Temporal CLI`. */
  readonly label: string;
  /** For the progress line: `building <progressName> <version>: …`. */
  readonly progressName: string;
  /** The module version every package is installed at, e.g. `v1.29.1`. */
  readonly version: string;
  readonly binaries: readonly GoBinary[];
  /** The cache directory the binaries are renamed into (see {@link batonCacheDir}). */
  readonly cacheDir: string;
  /**
   * Build in a scratch module (`go get -tool <module>@<version>`, then `go build` each package) instead of
   * `go install <package>@<version>`, which refuses a module whose go.mod has `replace` directives. @default false
   */
  readonly viaScratchModule?: boolean;
}

/** Inputs of {@link buildGoBinariesOnce}. */
export interface GoBuildOptions {
  /** The `go` executable. */
  readonly goPath: string;
  /** The environment `go` runs with (GOBIN and CGO_ENABLED are set on top). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Why a build is needed, the start of the first progress line: `No Temporal CLI found`. */
  readonly reason: string;
  /**
   * Whether binaries already at the target paths (built by whoever held the lock before) work and can be kept.
   * Called with the cache path of each binary, by name.
   */
  readonly reuse: (paths: Readonly<Record<string, string>>) => Promise<boolean>;
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
   * Longest a build may run before it is killed and fails.
   * @default 1_800_000 (30 minutes)
   */
  readonly buildTimeoutMs?: number;
  /**
   * Longest to wait for another process's build (it holds the lock) before giving up.
   * @default 2_400_000 (40 minutes)
   */
  readonly lockWaitTimeoutMs?: number;
  /** Aborts a build or a wait for one. */
  readonly signal?: AbortSignal;
}

/** What {@link buildGoBinariesOnce} produced: each binary's path by name; `cache` when another process built it. */
export interface GoBuildResult {
  readonly paths: Readonly<Record<string, string>>;
  readonly source: 'built' | 'cache';
}

/**
 * `${XDG_CACHE_HOME:-~/.cache}/baton/<subdir>`. A relative `XDG_CACHE_HOME` is ignored, as the XDG spec asks.
 */
export function batonCacheDir(
  options: { readonly env: Readonly<Record<string, string | undefined>>; readonly homeDir?: string },
  subdir: string,
): string {
  const xdg = nonEmpty(options.env.XDG_CACHE_HOME);
  const cacheHome =
    xdg !== undefined && isAbsolute(xdg)
      ? xdg
      : join(options.homeDir ?? nonEmpty(options.env.HOME) ?? homedir(), '.cache');
  return join(cacheHome, 'baton', subdir);
}

/** The cache path of each binary of `target`, by name. */
export function cachedBinaryPaths(target: GoBuildTarget): Record<string, string> {
  return Object.fromEntries(target.binaries.map((binary) => [binary.name, join(target.cacheDir, binary.name)]));
}

/**
 * Builds `target` into its cache directory under a lock, so concurrent first runs build once: the others wait and
 * reuse it. The build goes to a temporary GOBIN inside the cache directory and each binary is renamed into place.
 *
 * @throws {TemporalBuildError} when `go install` fails, times out or is aborted.
 * @throws {TemporalSetupError} when another process holds the lock past `lockWaitTimeoutMs`.
 */
export async function buildGoBinariesOnce(target: GoBuildTarget, options: GoBuildOptions): Promise<GoBuildResult> {
  const { cacheDir } = target;
  const paths = cachedBinaryPaths(target);
  const progress = options.progress === undefined ? process.stderr : options.progress;
  await mkdir(cacheDir, { recursive: true });

  const release = await acquireLock(join(cacheDir, 'build.lock'), {
    timeoutMs: options.lockWaitTimeoutMs ?? 2_400_000,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onWait: (holder) =>
      progress?.write(`Waiting for another process (${holder}) that is building ${target.label} into ${cacheDir}\n`),
  });
  try {
    // Whoever held the lock before us may have finished the build.
    if (await options.reuse(paths)) return { paths, source: 'cache' };
    await removeStaleBuildDirs(cacheDir);
    const gobin = join(cacheDir, `.build-${process.pid}-${Date.now()}`);
    await mkdir(gobin);
    try {
      await (target.viaScratchModule === true ? runGoBuildInScratchModule : runGoInstall)(target, {
        ...options,
        gobin,
        progress,
      });
      for (const binary of target.binaries) await rename(join(gobin, binary.builtName), join(cacheDir, binary.name));
    } finally {
      await rm(gobin, { recursive: true, force: true });
    }
    return { paths, source: 'built' };
  } finally {
    await release();
  }
}

type GoRunOptions = GoBuildOptions & { readonly gobin: string; readonly progress: ProgressStream | null };

async function runGoInstall(target: GoBuildTarget, options: GoRunOptions): Promise<void> {
  const packages = target.binaries.map((binary) => `${binary.goPackage}@${target.version}`);
  await runGoSteps(target, options, `go install ${packages.join(' ')}`, [
    // `-v` names each package as it compiles, which is the only sign of life during a long link-free stretch.
    { args: ['install', '-v', ...packages], cwd: undefined },
  ]);
}

/**
 * Builds each binary in a scratch module inside GOBIN: `go mod init`, `go get -tool <package>@<version>` (which
 * resolves the module's dependencies as its go.mod asks), then `go build -o` each one.
 */
async function runGoBuildInScratchModule(target: GoBuildTarget, options: GoRunOptions): Promise<void> {
  const scratch = join(options.gobin, 'module');
  await mkdir(scratch);
  const tools = target.binaries.map((binary) => `${binary.goPackage}@${target.version}`);
  await runGoSteps(target, options, `go get -tool ${tools.join(' ')} && go build`, [
    { args: ['mod', 'init', 'baton.local/build'], cwd: scratch },
    { args: ['get', '-tool', ...tools], cwd: scratch },
    ...target.binaries.map((binary) => ({
      args: ['build', '-v', '-o', join(options.gobin, binary.builtName), binary.goPackage],
      cwd: scratch,
    })),
  ]);
}

/** Runs `go` once per step, in order, with progress; fails at the first step that fails. */
async function runGoSteps(
  target: GoBuildTarget,
  options: GoRunOptions,
  described: string,
  steps: readonly { readonly args: readonly string[]; readonly cwd: string | undefined }[],
): Promise<void> {
  const timeoutMs = options.buildTimeoutMs ?? 1_800_000;
  const reporter = new BuildProgress(
    options.progress,
    options.progressIntervalMs ?? 10_000,
    `${target.progressName} ${target.version}`,
  );
  reporter.begin(
    `${options.reason}; building it once with \`${described}\` into ${target.cacheDir} ` +
      '(takes a few minutes on first run).',
  );
  const deadline = Date.now() + timeoutMs;
  try {
    for (const step of steps) {
      await runGo(step.args, step.cwd, options, reporter, Math.max(1, deadline - Date.now()), timeoutMs);
    }
    const built = target.binaries.map((binary) => join(target.cacheDir, binary.name)).join(', ');
    reporter.end(`Built ${target.label} in ${formatDuration(reporter.elapsedMs())}: ${built}`);
  } catch (error) {
    reporter.end(`Building ${target.label} failed after ${formatDuration(reporter.elapsedMs())}.`);
    throw error;
  }
}

async function runGo(
  args: readonly string[],
  cwd: string | undefined,
  options: GoRunOptions,
  reporter: BuildProgress,
  remainingMs: number,
  timeoutMs: number,
): Promise<void> {
  // CGO_ENABLED=0 matches the official release builds (SQLite is pure Go) and needs no C toolchain.
  const child = spawn(options.goPath, args, {
    env: { ...options.env, GOBIN: options.gobin, CGO_ENABLED: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd === undefined ? {} : { cwd }),
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
  const timer = setTimeout(() => kill(`timed out after ${formatDuration(timeoutMs)}`), remainingMs);
  const onAbort = (): void => kill('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const command = `go ${args[0] ?? ''}`;
  try {
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve(code));
    });
    if (killedFor !== undefined) throw new TemporalBuildError(`${command} ${killedFor}`, exitCode, [...tail]);
    if (exitCode !== 0) {
      const last = tail.slice(-5).join(' | ');
      throw new TemporalBuildError(`${command} exited with code ${String(exitCode)}: ${last}`, exitCode, [...tail]);
    }
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
    /** `temporal v1.5.1`. */
    private readonly what: string,
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
    const text = `  building ${this.what}: ${formatDuration(this.elapsedMs())}  ${this.#latest}`;
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

function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk.toString('utf8');
    const lines = pending.split(/\r?\n/);
    pending = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') onLine(line.trim());
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

/** Whether `error` is a Node system error with this `code` (`ENOENT`, `EEXIST`, …). */
export function isErrnoCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}

/** `3m21s`, `45s`, `1.2s`. */
export function formatDuration(ms: number): string {
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  return minutes === 0 ? `${seconds}s` : `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
}

/** The first executable `name` on `pathVariable`, or `undefined`. */
export async function findExecutable(name: string, pathVariable: string | undefined): Promise<string | undefined> {
  for (const dir of (pathVariable ?? '').split(delimiter).filter((entry) => entry !== '')) {
    const candidate = join(dir, name);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}
