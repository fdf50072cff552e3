/**
 * The workflow code a worker runs: the entry it bundles, and the check that a pre-built bundle (`baton bundle`,
 * `BATON_WORKFLOW_BUNDLE`) still matches it. Kept apart from create-worker.ts so configuration can check a bundle
 * without loading the Temporal worker.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { BundleOptions } from '@temporalio/worker';

/** Path of the workflows entry, resolved so it works from TypeScript sources (tsx) and compiled output alike. */
export const WORKFLOWS_PATH = require.resolve('../workflows');

/** The checkout the workflows entry belongs to: bundle sources are compared relative to it. */
const SOURCE_ROOT = path.dirname(path.dirname(WORKFLOWS_PATH));

/** The workflows entry relative to its checkout, with `/` (`workflows/index.ts`): how it is found among sources. */
const ENTRY = path.relative(SOURCE_ROOT, WORKFLOWS_PATH).split(path.sep).join('/');

type WebpackConfig = Parameters<NonNullable<BundleOptions['webpackConfigHook']>>[0];

/**
 * How Baton bundles its workflows (every bundle: `baton bundle`, a worker bundling at start, replay). The SDK's bundler
 * follows each JavaScript file's source map back to its original; compiled workflows (an installed package's
 * `dist/`) would then be named in the bundle by TypeScript files the package does not ship, so they are bundled as
 * the JavaScript that runs, and `workflowBundleProblem` compares a bundle with the files this worker has.
 *
 * Its ES modules are concatenated into one scope each where webpack can (`concatenateModules`, which the SDK's
 * development-mode build leaves off): the worker evaluates the bundle's modules again for every workflow it creates (a
 * new thread, each turn, fork task and delegation), and without it each module pays webpack's require and a getter
 * per export there. `npm run bench -- langgraph` times a new thread's first model call, which waits for its creation.
 */
export const WORKFLOW_BUNDLER_OPTIONS = {
  webpackConfigHook: (config: WebpackConfig): WebpackConfig =>
    withConcatenatedModules(
      withoutSourceMapsUnder(
        WORKFLOWS_PATH.endsWith('.ts') ? UNSHIPPED_SOURCES : [...UNSHIPPED_SOURCES, SOURCE_ROOT],
        config,
      ),
    ),
} satisfies Pick<BundleOptions, 'webpackConfigHook'>;

/** `config` with webpack's module concatenation on (the semantics of the modules are kept; only their wrapping goes). */
function withConcatenatedModules(config: WebpackConfig): WebpackConfig {
  return { ...config, optimization: { ...config.optimization, concatenateModules: true } };
}

/**
 * Packages whose source maps name TypeScript sources their npm package does not ship (OpenTelemetry's, in the
 * workflow code through `workflows/spans.ts` and the tracing interceptors): bundled as the JavaScript that runs, so
 * `workflowBundleProblem` finds each file the bundle names.
 */
const UNSHIPPED_SOURCES = [/[\\/]node_modules[\\/]@opentelemetry[\\/]/];

/** `config` with the SDK's source-map-loader rule not applied to files under `excluded`. */
function withoutSourceMapsUnder(excluded: readonly (string | RegExp)[], config: WebpackConfig): WebpackConfig {
  const rules = config.module?.rules?.map((rule) => {
    if (!rule || typeof rule !== 'object' || !Array.isArray(rule.use)) return rule;
    const loadsSourceMaps = rule.use.some((use) => typeof use === 'string' && use.includes('source-map-loader'));
    return loadsSourceMaps ? { ...rule, exclude: [...excluded] } : rule;
  });
  return rules ? { ...config, module: { ...config.module, rules } } : config;
}

/** Files named at most in a stale bundle's message; the count says how many more differ. */
const MAX_NAMED_FILES = 5;

/**
 * Checks that a bundle `baton bundle` wrote was built from the sources this worker has. The bundle's inline source
 * map (which the Temporal worker itself requires) names every file it was built from, with the file's text: each one
 * under the checkout it was built in (Baton's sources and the packages in its node_modules) must read the same here,
 * so a bundle left over from other code cannot run in place of this worker's workflows (it would run old workflow
 * code, which breaks replay of the histories the current code writes).
 * @param sourceRoot the checkout to compare with (this worker's own; tests pass another)
 * @returns a problem to report, or undefined when the bundle matches
 */
export function workflowBundleProblem(file: string, sourceRoot = SOURCE_ROOT): string | undefined {
  const rewrite = 'write it again with `baton bundle <file>`';
  const sourceMap = inlineSourceMap(fs.readFileSync(file, 'utf8'));
  if (sourceMap === undefined) {
    return `${file} is not a workflow bundle written by \`baton bundle\` (it has no inline source map); ${rewrite}`;
  }
  const builtEntry = sourceMap.sources.find((source) => source.endsWith(`/${ENTRY}`));
  if (builtEntry === undefined) {
    return `${file} is not a bundle of Baton's workflows (${ENTRY} is not among its sources); ${rewrite}`;
  }
  const builtRoot = builtEntry.slice(0, -ENTRY.length);
  // The SDK's bundler writes a temporary entry file beside the workflows entry and deletes it after.
  const generatedEntry = `${ENTRY.replace(/\.[^./]+$/, '')}-autogenerated-entrypoint.cjs`;
  const changed: string[] = [];
  sourceMap.sources.forEach((source, index) => {
    if (!source.startsWith(builtRoot)) return;
    const relative = source.slice(builtRoot.length);
    if (relative === generatedEntry) return;
    const current = readIfFile(path.join(sourceRoot, ...relative.split('/')));
    if (current !== sourceMap.sourcesContent[index]) changed.push(relative);
  });
  if (changed.length === 0) return undefined;
  const named = changed.slice(0, MAX_NAMED_FILES).join(', ');
  const more = changed.length > MAX_NAMED_FILES ? ` and ${changed.length - MAX_NAMED_FILES} more` : '';
  return (
    `${file} was built from other sources than this worker's (changed or missing here: ${named}${more}); ` +
    `${rewrite}`
  );
}

interface SourceMap {
  sources: string[];
  sourcesContent: (string | null)[];
}

/** The source map a bundle carries in its last `//# sourceMappingURL=data:…;base64,` comment, as the SDK reads it. */
function inlineSourceMap(code: string): SourceMap | undefined {
  const comment = code.lastIndexOf('//# sourceMappingURL=data:');
  const base64 = comment < 0 ? -1 : code.indexOf('base64,', comment);
  if (base64 < 0) return undefined;
  try {
    const map = JSON.parse(Buffer.from(code.slice(base64 + 'base64,'.length).trimEnd(), 'base64').toString()) as {
      sources?: unknown;
      sourcesContent?: unknown;
    };
    if (!Array.isArray(map.sources) || !Array.isArray(map.sourcesContent)) return undefined;
    return { sources: map.sources.map(String), sourcesContent: map.sourcesContent as (string | null)[] };
  } catch {
    return undefined;
  }
}

function readIfFile(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
