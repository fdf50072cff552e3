/**
 * Which test files a run takes, and how they run: the tiers of `npm test` (testing/run-tests.ts).
 *
 * - `quick` (`npm run test:quick`): the unit and replay files that start no process, need no server and no system
 *   tool. A preload (testing/no-child-processes.cjs) fails any test of this tier that starts a child process, so a
 *   file that does belongs in {@link PROCESS_UNIT_FILES}.
 * - `default` (`npm test`): every file except the campaigns.
 * - `campaign` (`npm run test:campaign`, run by `.ci/run` after `npm test`): the long runs, each with a stack of its
 *   own.
 *
 * Paths here are relative to the repository root, with `/` separators.
 */
import path from 'node:path';

/** The folders under `test/` that hold test files. */
export const SUITES = ['unit', 'integration', 'replay', 'e2e', 'chaos'] as const;

/** Suites whose files need no Temporal server or Postgres (replay tests replay recorded histories in-process). */
export const STACKLESS_SUITES: readonly string[] = ['unit', 'replay'];

export const TIERS = ['quick', 'default', 'campaign'] as const;
export type Tier = (typeof TIERS)[number];

/**
 * Unit files that start processes (shells, bubblewrap, git), so they stay out of the quick tier; each with why.
 * They need no server and run in `npm test`.
 */
export const PROCESS_UNIT_FILES: Readonly<Record<string, string>> = {
  'test/unit/shell-tool.test.ts': 'runs shell commands and kills their process trees',
  'test/unit/shell-sandbox.test.ts': 'runs commands under bubblewrap and slirp4netns',
  'test/unit/shell-orphans.test.ts': 'starts and kills process groups to test the orphan sweep',
  'test/unit/file-tools.test.ts': 'runs a bubblewrap sandbox and a process that swaps a path under the tool',
  'test/unit/temporal-cli.test.ts': 'starts scripts that stand in for the Temporal CLI and for go',
  'test/unit/temporal-server-binaries.test.ts': 'starts scripts that stand in for temporal-server and for go',
  'test/unit/repository-paths.test.ts': 'lists the repository with `git ls-files`',
  'test/unit/system-tools-install.test.ts': 'runs the system-tools step and npm test against stub apt-get and sudo',
  // No process: TypeDoc runs in the test's own, but reads the whole package (about 30 s of CPU), too slow for quick.
  'test/unit/docs-reference.test.ts': 'generates docs/reference/, TypeDoc over the whole package included (~30 s CPU)',
};

/**
 * The campaigns: two seeded chaos rounds in each step mode, each mode booting a stack of its own (Postgres, a Temporal
 * dev server, two workers, a fault proxy) and running for minutes, and the production topology, whose first run builds
 * temporal-server from Go (minutes of both cores). `.ci/run` runs them after `npm test`.
 */
export const CAMPAIGN_FILES: Readonly<Record<string, string>> = {
  'test/integration/production-topology.test.ts':
    'temporal-server on Postgres with two workers; its first run builds temporal-server and its SQL tool from Go',
  'test/integration/temporal-mtls.test.ts':
    "temporal-server with mTLS on its frontend; shares the production topology's temporal-server build",
  'test/integration/traces.test.ts':
    'traces read back from Jaeger; its first run builds Jaeger from Go (about 7 minutes of both cores)',
  'test/chaos/chaos-rounds.test.ts': 'two chaos rounds with steps as activities, on a stack of their own',
  'test/chaos/chaos-rounds-local-steps.test.ts': 'two chaos rounds with local steps, on a stack of their own',
  'test/chaos/chaos-rounds-batched-steps.test.ts': 'two chaos rounds with batched steps, on a stack of their own',
};

/**
 * Files that mostly wait (a SIGKILLed worker's heartbeat or task timeout runs out while the test sleeps), so they run
 * beside the others in a group of their own at a higher concurrency: their waits overlap instead of queuing.
 */
export const IDLE_BOUND = /^test\/chaos\/.*kill\.test\.ts$/;

/**
 * How many idle-bound files run at once, beside the {@link CPU_CONCURRENCY} others. Each starts its worker processes
 * (with MCP servers and sandboxes) in its first minute, when the files are not idle yet: with 4 at once, CI on 2 cores
 * saw a worker take over a minute to poll and a replacement worker's local steps re-run as its workflow tasks timed
 * out. Their waits still overlap at 2, inside the time the main group takes.
 */
export const IDLE_CONCURRENCY = 2;

/**
 * The files that run a user's project as its page says (the examples and the getting-started project): each installs
 * Baton from a tarball and starts a whole `baton dev` of its own (Postgres, a Temporal dev server, a worker bundling
 * its workflows), minutes of both cores. Several at once starved each other past their waits, so they run one at a
 * time, in a group of their own beside the others.
 */
export const USER_PROJECT_BOUND = /^test\/e2e\/(example-[a-z-]+|getting-started)\.test\.ts$/;
/**
 * How many other files run at once. Measured on a 2-core machine: with 2 at a time `npm test` took 528 s, with 3 it took
 * 428 s (its files wait on servers and processes part of the time, which a third file fills).
 */
export const CPU_CONCURRENCY = 3;

/** One `node --test` process of a run. */
export interface TestGroup {
  readonly name: 'main' | 'idle' | 'projects';
  readonly files: readonly string[];
  readonly concurrency: number;
}

/** A run's files, as {@link selectTestFiles} picked them. */
export interface TestSelection {
  readonly tier: Tier;
  /** Relative paths, sorted. */
  readonly files: readonly string[];
  /** Files the selection named (by suite or folder) that another tier runs. */
  readonly leftOut: readonly string[];
}

/** A command line that names something no tier can run. */
export class TestSelectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TestSelectionError';
  }
}

/** The tier a file belongs to (the smallest that runs it; `npm test` also runs every quick file). */
export function tierOf(file: string): Tier {
  if (file in CAMPAIGN_FILES) return 'campaign';
  if (file in PROCESS_UNIT_FILES) return 'default';
  return STACKLESS_SUITES.some((suite) => file.startsWith(`test/${suite}/`)) ? 'quick' : 'default';
}

/** Whether `tier` runs `file`. */
export function tierRuns(tier: Tier, file: string): boolean {
  const own = tierOf(file);
  if (tier === 'campaign') return own === 'campaign';
  if (tier === 'default') return own !== 'campaign';
  return own === 'quick';
}

/**
 * Picks a run's files from every test file of the repository.
 *
 * With no selection, the tier's files. A suite name (`unit`) or a folder takes its files that the tier runs (the rest
 * are reported in `leftOut`). A file named by its path runs whatever its tier, except in `quick`, which refuses it:
 * that tier promises no processes and no servers.
 *
 * @param allFiles every `*.test.ts` file, relative to the root with `/` separators
 * @param selections the command line's suites, folders and files, relative to the root
 * @throws {TestSelectionError} for a name that is no suite, folder or test file, a non-quick file in `quick`, or a
 *   selection that leaves no file
 */
export function selectTestFiles(allFiles: readonly string[], tier: Tier, selections: readonly string[]): TestSelection {
  const chosen = new Set<string>();
  const leftOut = new Set<string>();
  const byGroup = (matches: readonly string[]) => {
    for (const file of matches) (tierRuns(tier, file) ? chosen : leftOut).add(file);
  };
  if (selections.length === 0) byGroup(allFiles);
  for (const raw of selections) {
    const selection = raw.split(path.sep).join('/').replace(/\/+$/, '');
    if ((SUITES as readonly string[]).includes(selection)) {
      byGroup(allFiles.filter((file) => file.startsWith(`test/${selection}/`)));
    } else if (allFiles.includes(selection)) {
      if (!tierRuns(tier, selection) && tier === 'quick') {
        throw new TestSelectionError(
          `'${selection}' is not a quick test (${PROCESS_UNIT_FILES[selection] ?? 'it needs the servers'}): ` +
            `run it with npm test -- ${selection}`,
        );
      }
      chosen.add(selection);
    } else if (allFiles.some((file) => file.startsWith(`${selection}/`))) {
      byGroup(allFiles.filter((file) => file.startsWith(`${selection}/`)));
    } else {
      throw new TestSelectionError(`'${raw}' is neither a suite (${SUITES.join(', ')}), a folder nor a test file`);
    }
  }
  for (const file of chosen) leftOut.delete(file);
  if (chosen.size === 0) {
    const named = selections.length > 0 ? ` for: ${selections.join(' ')}` : '';
    throw new TestSelectionError(`no ${tier} test files${named}`);
  }
  return { tier, files: [...chosen].sort(), leftOut: [...leftOut].sort() };
}

/** Whether any of the files needs the test stack (Temporal and Postgres). */
export function needsStack(files: readonly string[]): boolean {
  return files.some((file) => !STACKLESS_SUITES.some((suite) => file.startsWith(`test/${suite}/`)));
}

/**
 * Splits a run into `node --test` processes that run at once: the idle-bound files in a group of their own at
 * {@link IDLE_CONCURRENCY}, the user-project files in one of their own one at a time, the rest at
 * {@link CPU_CONCURRENCY}. A run of one group's files only is one process.
 */
export function testGroups(files: readonly string[]): TestGroup[] {
  const idle = files.filter((file) => IDLE_BOUND.test(file));
  const projects = files.filter((file) => USER_PROJECT_BOUND.test(file));
  const main = files.filter((file) => !IDLE_BOUND.test(file) && !USER_PROJECT_BOUND.test(file));
  const groups: TestGroup[] = [];
  if (main.length > 0) groups.push({ name: 'main', files: main, concurrency: CPU_CONCURRENCY });
  if (idle.length > 0) groups.push({ name: 'idle', files: idle, concurrency: IDLE_CONCURRENCY });
  if (projects.length > 0) groups.push({ name: 'projects', files: projects, concurrency: 1 });
  return groups;
}
