/**
 * Finds or builds Jaeger (v2, the all-in-one: an OTLP receiver, an in-memory store and its query API), the trace
 * backend the tracing tests export to and query. Built from its Go module like the Temporal CLI and cached beside it
 * (`${XDG_CACHE_HOME:-~/.cache}/baton/jaeger-v1.76.0/jaeger`), once, under the same lock (see `temporal-build.ts`).
 * Its go.mod has `replace` directives, which `go install …@version` refuses, so it is built in a scratch module.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  batonCacheDir,
  buildGoBinariesOnce,
  cachedBinaryPaths,
  findExecutable,
  TemporalSetupError,
  type GoBuildTarget,
  type ProgressStream,
} from './temporal-build';

/** The Jaeger release built. */
export const JAEGER_VERSION = 'v1.76.0';

/** The Go package of Jaeger's all-in-one program. */
export const JAEGER_GO_PACKAGE = 'github.com/jaegertracing/jaeger/cmd/jaeger';

/** Inputs of {@link resolveJaeger}. */
export interface ResolveJaegerOptions {
  /** `PATH`, `XDG_CACHE_HOME` and `HOME` are read from it, and `go` inherits it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Where build progress goes; `null` silences it. @default process.stderr */
  readonly progress?: ProgressStream | null;
  readonly signal?: AbortSignal;
}

function jaegerBuild(env: Readonly<Record<string, string | undefined>>): GoBuildTarget {
  return {
    label: 'Jaeger',
    progressName: 'jaeger',
    version: JAEGER_VERSION,
    binaries: [{ goPackage: JAEGER_GO_PACKAGE, builtName: 'jaeger', name: 'jaeger' }],
    cacheDir: batonCacheDir({ env }, `jaeger-${JAEGER_VERSION}`),
    viaScratchModule: true,
  };
}

/**
 * The cached Jaeger program, built first when missing (about 7 minutes cold on two cores, 120 MB).
 * @throws {TemporalSetupError} when it is not cached and `go` is not on the PATH
 * @throws {TemporalBuildError} when the build fails
 */
export async function resolveJaeger(options: ResolveJaegerOptions): Promise<string> {
  const target = jaegerBuild(options.env);
  const path = cachedBinaryPaths(target).jaeger ?? '';
  const works = async (candidate: string): Promise<boolean> => {
    try {
      await promisify(execFile)(candidate, ['version'], { env: { ...options.env }, timeout: 30_000 });
      return true;
    } catch {
      return false;
    }
  };
  if (await works(path)) return path;
  const go = await findExecutable('go', options.env.PATH);
  if (go === undefined) {
    throw new TemporalSetupError(
      `Jaeger ${JAEGER_VERSION} is not built in ${target.cacheDir} and \`go\` is not on the PATH to build it`,
    );
  }
  const built = await buildGoBinariesOnce(target, {
    goPath: go,
    env: options.env,
    reason: `No Jaeger ${JAEGER_VERSION} in the cache`,
    reuse: async (paths) => works(paths.jaeger ?? ''),
    buildTimeoutMs: 2_700_000,
    ...(options.progress === undefined ? {} : { progress: options.progress }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  return built.paths.jaeger ?? path;
}
