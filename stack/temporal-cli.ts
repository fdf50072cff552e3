/**
 * Finds a Temporal server for Baton, in the order of docs/architecture.md §6: `TEMPORAL_ADDRESS`, a `temporal` CLI from
 * `TEMPORAL_CLI_PATH`, the PATH or the user cache, a one-time `go install` into that cache, and last the
 * Temporal SDK's own download (which needs internet access that many machines lack).
 *
 * Every input comes in through {@link ResolveTemporalOptions} (the environment is passed as a value), so tests
 * drive each route with fake executables in temporary directories.
 */
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import {
  batonCacheDir,
  buildGoBinariesOnce,
  isErrnoCode,
  TemporalSetupError,
  type GoBuildTarget,
  type ProgressStream,
} from './temporal-build';

export { TemporalBuildError, TemporalSetupError, type ProgressStream } from './temporal-build';

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

/** No route gave a Temporal server; the message lists every route tried and why it failed. */
export class TemporalUnavailableError extends TemporalSetupError {
  constructor(
    readonly attempts: readonly TemporalRouteAttempt[],
    options?: { cause?: unknown },
  ) {
    super(describeAttempts(attempts), options);
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
        const reuse = async (paths: Readonly<Record<string, string>>): Promise<boolean> =>
          (await checkCli(paths.temporal ?? cached, verify, env)).ok;
        const built = await buildGoBinariesOnce(temporalCliBuild(cacheDir), {
          ...options,
          goPath: go.found.path,
          reason: 'No Temporal CLI found',
          reuse,
        });
        const path = built.paths.temporal ?? cached;
        const check = await checkCli(path, verify, env);
        if (!check.ok) throw new TemporalSetupError(`the built ${path} does not work: ${check.reason}`);
        attempts.push({ route: 'go build', outcome: 'used', detail: path });
        return { kind: 'cli', path, source: built.source, ...versionField(check.version), attempts };
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
  return batonCacheDir(options, `temporal-${TEMPORAL_CLI_VERSION}`);
}

/** The Temporal CLI as {@link buildGoBinariesOnce} builds it into `cacheDir`. */
function temporalCliBuild(cacheDir: string): GoBuildTarget {
  return {
    label: 'the Temporal CLI',
    progressName: 'temporal',
    version: TEMPORAL_CLI_VERSION,
    binaries: [{ goPackage: TEMPORAL_CLI_GO_PACKAGE, builtName: 'temporal', name: 'temporal' }],
    cacheDir,
  };
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

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
