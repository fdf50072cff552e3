/**
 * What `npm test` makes of a run's counts (testing/count-reporter.mjs writes them): the slowest-files table printed
 * at the end of every run, and the verdict on what ran. A run in which nothing was tested fails whatever the runner's
 * exit code (zero tests executed, or every one skipped); under CI so does a run with a skipped test that
 * {@link CI_ALLOWED_SKIPS} does not name: a missing browser, Go or Temporal CLI must not pass CI as a row of skips.
 */
import path from 'node:path';

/** One skipped test (or skipped suite, whose tests the runner does not report). */
export interface SkippedTest {
  readonly file: string | null;
  readonly name: string;
  /** The reason the test gave, or `true` when it gave none. */
  readonly reason: string | true;
}

/** One test file's wall time, as the runner measured it around the file's process. */
export interface FileTime {
  readonly file: string;
  readonly seconds: number;
}

/** What the counting reporter saw (testing/count-reporter.mjs), for one `node --test` process or a whole run. */
export interface TestCounts {
  readonly executed: number;
  readonly skipped: number;
  readonly todo: number;
  readonly failed: number;
  /** Test files whose every test skipped. */
  readonly onlySkipped: readonly string[];
  readonly skips: readonly SkippedTest[];
  readonly files: readonly FileTime[];
}

/** A skip CI accepts: the file it is in and its reason, and why it is not a gap. */
export interface AllowedSkip {
  /** Relative to the repository root, `/` separators. */
  readonly file: string;
  readonly reason: RegExp;
  readonly why: string;
}

/**
 * The skips CI accepts. Keep this short: each entry is a test that cannot apply to some CI machines, never one whose
 * dependency is merely missing (those fail under CI: install the dependency).
 */
export const CI_ALLOWED_SKIPS: readonly AllowedSkip[] = [
  {
    file: 'test/e2e/explorer-browser.test.ts',
    reason: /^the test stack runs on TEMPORAL_ADDRESS\b/,
    why:
      'the Web UI link is a feature of the dev server `npm test` starts; a CI that points the tests at its own ' +
      'Temporal server (TEMPORAL_ADDRESS) has no Web UI of ours to open',
  },
  {
    file: 'test/integration/local-postgres.test.ts',
    reason: /^only applies when running as root$/,
    why: 'how embedded Postgres runs as root (it drops to a `postgres` user); a CI running as a user has no root case',
  },
  {
    file: 'test/integration/local-postgres.test.ts',
    reason: /^'postgres' may not enter /,
    why:
      'as root in a checkout the `postgres` user may not enter (a mode-700 home, as CI clones make), every ' +
      'cluster moves out of its data directory, so the in-place case does not arise; the test beside it covers the move',
  },
];

/** Node's reason for a test that `--test-name-pattern` filtered out: not a skip of the test's own. */
const NAME_FILTERED = 'test name does not match pattern';

/** Adds up the counts of the `node --test` processes of one run. */
export function mergeCounts(parts: readonly TestCounts[]): TestCounts {
  return {
    executed: parts.reduce((sum, part) => sum + part.executed, 0),
    skipped: parts.reduce((sum, part) => sum + part.skipped, 0),
    todo: parts.reduce((sum, part) => sum + part.todo, 0),
    failed: parts.reduce((sum, part) => sum + part.failed, 0),
    onlySkipped: parts.flatMap((part) => part.onlySkipped),
    skips: parts.flatMap((part) => part.skips),
    files: parts.flatMap((part) => part.files),
  };
}

/** The `count` slowest files, slowest first: one line each, seconds right-aligned, paths relative to `root`. */
export function slowestFilesTable(files: readonly FileTime[], root: string, count = 15): string[] {
  const slowest = [...files].sort((a, b) => b.seconds - a.seconds).slice(0, count);
  if (slowest.length === 0) return [];
  const total = files.reduce((sum, file) => sum + file.seconds, 0);
  return [
    `the ${slowest.length} slowest of ${files.length} test files (seconds each, ${total.toFixed(0)} s in all files):`,
    ...slowest.map((entry) => `${entry.seconds.toFixed(1).padStart(7)}  ${relative(root, entry.file)}`),
  ];
}

/** Skips CI does not accept: neither name-filtered nor on {@link CI_ALLOWED_SKIPS}. */
export function disallowedSkips(
  skips: readonly SkippedTest[],
  root: string,
  allowed: readonly AllowedSkip[] = CI_ALLOWED_SKIPS,
): SkippedTest[] {
  return skips.filter((skip) => {
    if (skip.reason === NAME_FILTERED) return false;
    const file = skip.file === null ? '' : relative(root, skip.file);
    const reason = skip.reason === true ? '' : skip.reason;
    return !allowed.some((entry) => entry.file === file && entry.reason.test(reason));
  });
}

/** What a run's counts say: the lines to print and whether the run passes. */
export interface RunVerdict {
  readonly lines: string[];
  readonly ok: boolean;
}

/**
 * Judges a run from its counts (the runner's exit code is judged apart: a failed test fails the run anyway).
 * @param ci whether the run is under CI (testing/ci.ts)
 */
export function judgeRun(counts: TestCounts, options: { ci: boolean; root: string }): RunVerdict {
  const { ci, root } = options;
  const lines = [
    `${counts.executed} tests executed, ${counts.skipped} skipped, ${counts.todo} todo, ${counts.failed} failed`,
  ];
  if (counts.executed === 0) {
    lines.push(counts.skipped > 0 ? 'every test was skipped: nothing was tested' : 'no test was executed');
    return { lines, ok: false };
  }
  const onlySkipped = counts.onlySkipped.map((file) => relative(root, file));
  if (ci) {
    const refused = disallowedSkips(counts.skips, root);
    if (refused.length > 0) {
      lines.push(
        `under CI a skipped test fails the run unless testing/test-report.ts allows its skip (CI_ALLOWED_SKIPS); ` +
          `${refused.length} skipped:`,
        ...refused.map((skip) => `  ${describeSkip(skip, root)}`),
      );
      return { lines, ok: false };
    }
  } else if (onlySkipped.length > 0) {
    lines.push(`every test was skipped in: ${onlySkipped.join(', ')}`);
  }
  return { lines, ok: true };
}

function describeSkip(skip: SkippedTest, root: string): string {
  const file = skip.file === null ? '(no file)' : relative(root, skip.file);
  return `${file}: '${skip.name}'${skip.reason === true ? '' : ` (${skip.reason})`}`;
}

function relative(root: string, file: string): string {
  return (path.isAbsolute(file) ? path.relative(root, file) : file).split(path.sep).join('/');
}
