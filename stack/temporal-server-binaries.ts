/**
 * Finds or builds the two programs of the production topology: `temporal-server` (a real Temporal server, here on
 * Postgres) and `temporal-sql-tool` (creates and upgrades its schemas), from the Go module `go.temporal.io/server`.
 * They are cached beside the Temporal CLI (`${XDG_CACHE_HOME:-~/.cache}/baton/temporal-server-v1.29.1/`) and built
 * once, the same way (see `temporal-build.ts`).
 */
import { execFile } from 'node:child_process';
import {
  batonCacheDir,
  buildGoBinariesOnce,
  cachedBinaryPaths,
  findExecutable,
  TemporalSetupError,
  type GoBuildTarget,
  type ProgressStream,
} from './temporal-build';

/**
 * The Temporal server release Baton builds: the newest whose go.mod asks for a Go these machines have, and whose
 * `go install …@version` works (its go.mod has no `replace` directive).
 */
export const TEMPORAL_SERVER_VERSION = 'v1.29.1';

/** The Go module both programs come from. */
export const TEMPORAL_SERVER_GO_MODULE = 'go.temporal.io/server';

/** The two programs, as named in the cache (and in Temporal's own release archives and Docker images). */
export const TEMPORAL_SERVER_BINARIES = {
  server: 'temporal-server',
  sqlTool: 'temporal-sql-tool',
} as const;

/** Where the programs came from: the cache, or this call built them. */
export type TemporalServerBinariesSource = 'cache' | 'built';

/** Paths of the two programs. */
export interface TemporalServerBinaries {
  readonly server: string;
  readonly sqlTool: string;
  readonly source: TemporalServerBinariesSource;
  /** `1.29.1`, as the server reports it. */
  readonly version: string;
}

/** Inputs of {@link resolveTemporalServerBinaries}. */
export interface ResolveTemporalServerBinariesOptions {
  /** The environment: `PATH`, `XDG_CACHE_HOME` and `HOME` are read from it, and `go` inherits it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** @default env.HOME, else `os.homedir()` */
  readonly homeDir?: string;
  /**
   * Build the programs when they are not cached and `go` is on the PATH.
   * @default true
   */
  readonly allowBuild?: boolean;
  /**
   * Where build progress goes; `null` silences it.
   * @default process.stderr
   */
  readonly progress?: ProgressStream | null;
  /** @default 10_000 (see `GoBuildOptions.progressIntervalMs`) */
  readonly progressIntervalMs?: number;
  /**
   * Longest the build may run.
   * @default 2_700_000 (45 minutes; a cold build of the server takes 10 to 20 minutes on two cores)
   */
  readonly buildTimeoutMs?: number;
  /** Aborts a build or a wait for one. */
  readonly signal?: AbortSignal;
}

/** The cache directory of the programs: `${XDG_CACHE_HOME:-~/.cache}/baton/temporal-server-v1.29.1`. */
export function temporalServerCacheDir(options: {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly homeDir?: string;
}): string {
  return batonCacheDir(options, `temporal-server-${TEMPORAL_SERVER_VERSION}`);
}

function serverBuild(cacheDir: string): GoBuildTarget {
  return {
    label: 'temporal-server and temporal-sql-tool',
    progressName: 'temporal-server',
    version: TEMPORAL_SERVER_VERSION,
    binaries: [
      {
        goPackage: `${TEMPORAL_SERVER_GO_MODULE}/cmd/server`,
        builtName: 'server',
        name: TEMPORAL_SERVER_BINARIES.server,
      },
      {
        goPackage: `${TEMPORAL_SERVER_GO_MODULE}/cmd/tools/sql`,
        builtName: 'sql',
        name: TEMPORAL_SERVER_BINARIES.sqlTool,
      },
    ],
    cacheDir,
  };
}

/**
 * The cached programs, built first when missing (minutes, with progress; concurrent callers build once).
 *
 * @throws {TemporalSetupError} when they are not cached and cannot be built (no `go`, or `allowBuild: false`),
 *   or when a cached or built program does not answer `--version` with the expected release.
 * @throws {TemporalBuildError} when the build fails.
 */
export async function resolveTemporalServerBinaries(
  options: ResolveTemporalServerBinariesOptions,
): Promise<TemporalServerBinaries> {
  const { env } = options;
  const target = serverBuild(
    temporalServerCacheDir({ env, ...(options.homeDir === undefined ? {} : { homeDir: options.homeDir }) }),
  );
  const cached = cachedBinaryPaths(target);
  const check = async (paths: Readonly<Record<string, string>>): Promise<string | undefined> => {
    try {
      const versions = await Promise.all(target.binaries.map((binary) => versionOf(paths[binary.name] ?? '', env)));
      const wanted = TEMPORAL_SERVER_VERSION.replace(/^v/, '');
      return versions.every((version) => version === wanted) ? wanted : undefined;
    } catch {
      return undefined;
    }
  };
  const found = await check(cached);
  if (found !== undefined) return toResult(cached, 'cache', found);

  if (options.allowBuild === false) {
    throw new TemporalSetupError(
      `temporal-server ${TEMPORAL_SERVER_VERSION} is not built in ${target.cacheDir} and building is disabled`,
    );
  }
  const go = await findExecutable('go', env.PATH);
  if (go === undefined) {
    throw new TemporalSetupError(
      `temporal-server ${TEMPORAL_SERVER_VERSION} is not built in ${target.cacheDir} and \`go\` is not on the PATH ` +
        'to build it: install Go (1.24 or newer) and run again',
    );
  }
  const built = await buildGoBinariesOnce(target, {
    goPath: go,
    env,
    reason: `No temporal-server ${TEMPORAL_SERVER_VERSION} in the cache`,
    reuse: async (paths) => (await check(paths)) !== undefined,
    buildTimeoutMs: options.buildTimeoutMs ?? 2_700_000,
    ...(options.progress === undefined ? {} : { progress: options.progress }),
    ...(options.progressIntervalMs === undefined ? {} : { progressIntervalMs: options.progressIntervalMs }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  const version = await check(built.paths);
  if (version === undefined) {
    throw new TemporalSetupError(`the programs built into ${target.cacheDir} do not report ${TEMPORAL_SERVER_VERSION}`);
  }
  return toResult(built.paths, built.source, version);
}

function toResult(
  paths: Readonly<Record<string, string>>,
  source: TemporalServerBinariesSource,
  version: string,
): TemporalServerBinaries {
  return {
    server: paths[TEMPORAL_SERVER_BINARIES.server] ?? '',
    sqlTool: paths[TEMPORAL_SERVER_BINARIES.sqlTool] ?? '',
    source,
    version,
  };
}

/** `1.29.1` from `temporal version 1.29.1` or `temporal-sql-tool version 1.29.1`. @throws when it does not run. */
function versionOf(path: string, env: Readonly<Record<string, string | undefined>>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(path, ['--version'], { env, timeout: 15_000, encoding: 'utf8' }, (error, stdout) => {
      if (error) return reject(new Error(`${path} --version failed: ${error.message}`));
      const match = / version (\S+)/.exec(stdout);
      if (match?.[1] === undefined) return reject(new Error(`${path} --version printed "${stdout.trim()}"`));
      resolve(match[1]);
    });
  });
}
