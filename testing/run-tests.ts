/**
 * `npm test`: boots the stack once (a Temporal dev server and Postgres, as docs/architecture.md §6 resolves them),
 * creates a fresh database, bundles the workflows once, runs the suites with Node's test runner, and tears everything
 * down. Which files a tier runs is testing/test-tiers.ts; what a run's counts mean, testing/test-report.ts.
 *
 *   npm test                      every file but the campaigns
 *   npm run test:quick            the pure unit and replay files: no servers, no processes (`--tier quick`)
 *   npm run test:campaign         the campaigns: a chaos round in each step mode (`--tier campaign`)
 *   npm test -- unit replay       some suites (of the tier)
 *   npm test -- test/e2e/x.test.ts  some files (any tier's)
 *   npm test -- test/e2e/x.test.ts --test-name-pattern "<regex>"
 *                                 only the tests whose name matches (node's own filter; repeatable): runs one test
 *                                 alone, with its file's hooks, to prove it does not lean on an earlier test
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveJaeger } from '../stack/jaeger';
import { resolveTemporalServerBinaries } from '../stack/temporal-server-binaries';
import { isCi } from './ci';
import { judgeRun, mergeCounts, slowestFilesTable, type TestCounts } from './test-report';
import { ensureSystemTools } from './system-tools';
import { startTestStack, type TestStack } from './test-stack';
import {
  needsStack,
  selectTestFiles,
  TestSelectionError,
  testGroups,
  TIERS,
  type TestGroup,
  type Tier,
} from './test-tiers';

const ROOT = path.resolve(__dirname, '..');
const log = (line: string) => process.stderr.write(`[npm test] ${line}\n`);

/** How many files a run names when it says which of the selected ones another tier runs. */
const MAX_NAMED_LEFT_OUT = 8;

/**
 * Per test, and per file as well (node --test holds each file to it as a whole): the quick tier's pure code answers in
 * seconds, but its replay file replays every recorded history (about 20 s alone, over 30 s beside the others on two
 * cores); a stack test may wait out minutes of timeouts, and an example's file packs or installs Baton before its
 * first test, which takes minutes on two busy cores.
 */
const TEST_TIMEOUT_MS: Record<Tier, number> = { quick: 90_000, default: 600_000, campaign: 600_000 };

/** What the command line asks for: a tier, suites or files, and the test-name filters passed on to `node --test`. */
function parseArgs(args: readonly string[]): { tier: Tier; selections: string[]; namePatterns: string[] } {
  const selections: string[] = [];
  const namePatterns: string[] = [];
  let tier: Tier = 'default';
  const valueOf = (option: string, index: number): string => {
    const arg = args[index] ?? '';
    const value = arg.startsWith(`${option}=`) ? arg.slice(option.length + 1) : args[index + 1];
    if (value === undefined || value === '') throw new TestSelectionError(`${option} needs a value`);
    return value;
  };
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? '';
    if (arg === '--test-name-pattern' || arg.startsWith('--test-name-pattern=')) {
      namePatterns.push(valueOf('--test-name-pattern', index));
      if (arg === '--test-name-pattern') index += 1;
    } else if (arg === '--tier' || arg.startsWith('--tier=')) {
      const value = valueOf('--tier', index);
      if (!(TIERS as readonly string[]).includes(value)) {
        throw new TestSelectionError(`--tier takes ${TIERS.join(', ')}, got '${value}'`);
      }
      tier = value as Tier;
      if (arg === '--tier') index += 1;
    } else if (arg.startsWith('-')) {
      throw new TestSelectionError(
        `unknown option '${arg}': npm test takes suites, files, --tier <${TIERS.join('|')}> and --test-name-pattern <regex>`,
      );
    } else {
      selections.push(path.isAbsolute(arg) ? path.relative(ROOT, arg) : path.relative(ROOT, path.resolve(arg)));
    }
  }
  return { tier, selections, namePatterns };
}

/** Every `*.test.ts` file under `test/`, relative to the root with `/` separators. */
function allTestFiles(): string[] {
  const walk = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      return entry.isDirectory() ? walk(full) : [full];
    });
  return walk(path.join(ROOT, 'test'))
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.relative(ROOT, file).split(path.sep).join('/'));
}

async function main(): Promise<number> {
  const { tier, selections, namePatterns } = parseArgs(process.argv.slice(2));
  const { files, leftOut } = selectTestFiles(allTestFiles(), tier, selections);
  // The system tools these files need (bubblewrap, Chromium, tmux…), installed before anything boots when missing
  // (testing/system-tools.ts); the quick tier needs none and never installs.
  if (tier !== 'quick' && !(await ensureSystemTools(files, { log }))) return 1;
  if (leftOut.length > 0) {
    const runsThem = tier === 'default' ? 'npm run test:campaign' : 'npm test';
    // Named when they are few (the campaigns `npm test` leaves out); a tier that leaves out most files says how many.
    const named = leftOut.length <= MAX_NAMED_LEFT_OUT ? `: ${leftOut.join(', ')}` : '';
    log(`${leftOut.length} files are not in the ${tier} tier (${runsThem} runs them)${named}`);
  }
  const env: Record<string, string | undefined> = { ...process.env };
  const started = Date.now();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-test-counts-'));
  let stack: TestStack | undefined;
  try {
    if (needsStack(files)) {
      stack = await startTestStack(ROOT, process.env, log);
      Object.assign(env, stack.variables);
      await prebuildTemporalServer(files);
      await prebuildJaeger(files);
      log(`stack ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files`);
    } else {
      log(`running ${files.length} ${tier === 'quick' ? 'quick ' : ''}test files (no stack needed)`);
    }
    const groups = testGroups(files);
    const results = await Promise.all(
      groups.map((group) => runGroup(group, { tier, namePatterns, env, scratch, alone: groups.length === 1 })),
    );
    const code = results.find((result) => result.code !== 0)?.code ?? 0;
    return report(code, results);
  } finally {
    await stack?.stop();
    fs.rmSync(scratch, { recursive: true, force: true });
    log(`done in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  }
}

/**
 * Builds temporal-server and temporal-sql-tool before the tests start when the production-topology test is among
 * them: a cold build keeps both cores busy for minutes, which would starve tests running beside it. Without Go the
 * test itself skips (fails under CI); here that is only logged.
 */
async function prebuildTemporalServer(files: readonly string[]): Promise<void> {
  if (!files.some((file) => path.basename(file) === 'production-topology.test.ts')) return;
  try {
    const binaries = await resolveTemporalServerBinaries({ env: process.env, progress: process.stderr });
    log(`temporal-server ${binaries.version}: ${binaries.server} (${binaries.source})`);
  } catch (error) {
    log(`temporal-server is not available: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Builds Jaeger before the tests start when the tracing test is among them, for the reason above (a cold build takes
 * about 7 minutes of both cores). A failure is only logged: the test's own start then says why.
 */
async function prebuildJaeger(files: readonly string[]): Promise<void> {
  if (!files.some((file) => path.basename(file) === 'traces.test.ts')) return;
  try {
    log(`jaeger: ${await resolveJaeger({ env: process.env, progress: process.stderr })}`);
  } catch (error) {
    log(`jaeger is not available: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** One `node --test` process's outcome: its exit code and its counts file. */
interface GroupResult {
  readonly group: TestGroup;
  readonly code: number;
  readonly countsFile: string;
}

/** Prints the slowest files and the counts, and turns them into the run's exit code. */
function report(code: number, results: readonly GroupResult[]): number {
  const parts: TestCounts[] = [];
  for (const { group, countsFile } of results) {
    try {
      parts.push(JSON.parse(fs.readFileSync(countsFile, 'utf8')) as TestCounts);
    } catch (error) {
      log(`could not read the ${group.name} test counts (${error instanceof Error ? error.message : String(error)})`);
      return code === 0 ? 1 : code;
    }
  }
  const counts = mergeCounts(parts);
  for (const line of slowestFilesTable(counts.files, ROOT)) log(line);
  const verdict = judgeRun(counts, { ci: isCi(), root: ROOT });
  for (const line of verdict.lines) log(line);
  return verdict.ok || code !== 0 ? code : 1;
}

/**
 * Runs one group's files in a `node --test` process. Of groups running at once, the first writes to this terminal
 * as it goes; the others' reports are kept and printed whole when they end, so two reports never interleave.
 */
function runGroup(
  group: TestGroup,
  options: {
    tier: Tier;
    namePatterns: readonly string[];
    env: Record<string, string | undefined>;
    scratch: string;
    alone: boolean;
  },
): Promise<GroupResult> {
  const { tier, namePatterns, env, scratch, alone } = options;
  const countsFile = path.join(scratch, `${group.name}-counts.json`);
  const reportFile = path.join(scratch, `${group.name}-report.txt`);
  const live = alone || group.name === 'main';
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--require',
        './testing/test-setup.cjs',
        // The quick tier promises no child processes: one fails its test.
        ...(tier === 'quick' ? ['--require', './testing/no-child-processes.cjs'] : []),
        '--test',
        `--test-concurrency=${group.concurrency}`,
        `--test-timeout=${TEST_TIMEOUT_MS[tier]}`,
        `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`,
        `--test-reporter-destination=${live ? 'stdout' : reportFile}`,
        `--test-reporter=${path.join(ROOT, 'testing', 'count-reporter.mjs')}`,
        `--test-reporter-destination=${countsFile}`,
        ...namePatterns.map((pattern) => `--test-name-pattern=${pattern}`),
        ...group.files,
      ],
      { cwd: ROOT, env, stdio: 'inherit' },
    );
    if (!alone) {
      log(
        `${group.name} group: ${group.files.length} files, ${group.concurrency} at a time${live ? '' : ' (its report follows when it ends)'}`,
      );
    }
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      if (!live && fs.existsSync(reportFile)) {
        log(`the ${group.name} group's report:`);
        process.stdout.write(fs.readFileSync(reportFile));
      }
      resolve({ group, code: code ?? (signal ? 1 : 0), countsFile });
    });
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof TestSelectionError) log(error.message);
    else log(`could not run the tests: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
