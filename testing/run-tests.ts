/**
 * `npm test`: boots the stack once (a Temporal dev server and Postgres, as docs/architecture.md §6 resolves them),
 * creates a fresh database, bundles the workflows once, runs the suites with Node's test runner, and tears everything
 * down.
 *
 *   npm test                      every suite
 *   npm test -- unit replay       some suites
 *   npm test -- test/e2e/x.test.ts  some files
 *   npm test -- test/e2e/x.test.ts --test-name-pattern "<regex>"
 *                                 only the tests whose name matches (node's own filter; repeatable): runs one test
 *                                 alone, with its file's hooks, to prove it does not lean on an earlier test
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveTemporalServerBinaries } from '../stack/temporal-server-binaries';
import { isCi } from './ci';
import { ensureSystemTools } from './system-tools';
import { startTestStack, type TestStack } from './test-stack';

const ROOT = path.resolve(__dirname, '..');
const SUITES = ['unit', 'integration', 'replay', 'e2e', 'chaos'] as const;
/** Suites that run without servers (replay tests replay recorded histories in-process). */
const STACKLESS_SUITES = ['unit', 'replay'];
const log = (line: string) => process.stderr.write(`[npm test] ${line}\n`);

function testFiles(args: string[]): string[] {
  const selected = args.length > 0 ? args : [...SUITES];
  const files: string[] = [];
  for (const arg of selected) {
    if ((SUITES as readonly string[]).includes(arg)) {
      const dir = path.join(ROOT, 'test', arg);
      if (fs.existsSync(dir)) files.push(...walk(dir).filter((file) => file.endsWith('.test.ts')));
    } else if (fs.existsSync(arg) && fs.statSync(arg).isDirectory()) {
      files.push(...walk(path.resolve(arg)).filter((file) => file.endsWith('.test.ts')));
    } else if (fs.existsSync(arg)) {
      files.push(path.resolve(arg));
    } else {
      throw new Error(`'${arg}' is neither a suite (${SUITES.join(', ')}) nor a test file`);
    }
  }
  if (files.length === 0) throw new Error(`no test files found for: ${selected.join(' ')}`);
  return files.sort();
}

/** What the command line asks for: suites or files, and the test-name filters passed on to `node --test`. */
function parseArgs(args: readonly string[]): { selections: string[]; namePatterns: string[] } {
  const selections: string[] = [];
  const namePatterns: string[] = [];
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? '';
    if (arg === '--test-name-pattern') {
      const pattern = args[index + 1];
      if (pattern === undefined || pattern === '') throw new Error('--test-name-pattern needs a regular expression');
      namePatterns.push(pattern);
      index += 1;
    } else if (arg.startsWith('--test-name-pattern=')) {
      const pattern = arg.slice('--test-name-pattern='.length);
      if (pattern === '') throw new Error('--test-name-pattern needs a regular expression');
      namePatterns.push(pattern);
    } else if (arg.startsWith('-')) {
      throw new Error(`unknown option '${arg}': npm test takes suites, files and --test-name-pattern <regex>`);
    } else {
      selections.push(arg);
    }
  }
  return { selections, namePatterns };
}

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? walk(full) : [full];
  });
}

async function main(): Promise<number> {
  const { selections, namePatterns } = parseArgs(process.argv.slice(2));
  const files = testFiles(selections);
  // The system tools these files need (bubblewrap, Chromium, tmux…), installed before anything boots when missing
  // (testing/system-tools.ts).
  if (!(await ensureSystemTools(files, { log }))) return 1;
  const needsStack = files.some(
    (file) => !STACKLESS_SUITES.some((suite) => file.includes(`${path.sep}test${path.sep}${suite}${path.sep}`)),
  );
  const env: Record<string, string | undefined> = { ...process.env };
  const started = Date.now();
  let stack: TestStack | undefined;
  try {
    if (needsStack) {
      stack = await startTestStack(ROOT, process.env, log);
      Object.assign(env, stack.variables);
      await prebuildTemporalServer(files);
      log(`stack ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files`);
    } else {
      log(`running ${files.length} test files (no stack needed)`);
    }
    const countsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-test-counts-')), 'counts.json');
    const code = await runNodeTests(files, namePatterns, env, countsFile);
    return checkCounts(code, countsFile);
  } finally {
    await stack?.stop();
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

/** What the counting reporter saw (testing/count-reporter.ts). */
interface TestCounts {
  executed: number;
  skipped: number;
  todo: number;
  failed: number;
  /** Test files whose every test skipped. */
  onlySkipped: string[];
}

/**
 * A run in which nothing was tested fails, whatever the runner's exit code: zero tests executed, or every one
 * skipped (a suite whose dependency is missing must not pass as a row of skips). Under CI, so does a run in which one
 * test file skipped every test: a browser suite without its browser, say.
 */
function checkCounts(code: number, countsFile: string): number {
  let counts: TestCounts;
  try {
    counts = JSON.parse(fs.readFileSync(countsFile, 'utf8')) as TestCounts;
  } catch (error) {
    log(`could not read the test counts (${error instanceof Error ? error.message : String(error)})`);
    return code === 0 ? 1 : code;
  } finally {
    fs.rmSync(path.dirname(countsFile), { recursive: true, force: true });
  }
  log(`${counts.executed} tests executed, ${counts.skipped} skipped, ${counts.todo} todo, ${counts.failed} failed`);
  if (counts.executed === 0) {
    log(counts.skipped > 0 ? 'every test was skipped: nothing was tested' : 'no test was executed');
    return code === 0 ? 1 : code;
  }
  const skippedFiles = counts.onlySkipped.map((file) => path.relative(ROOT, file));
  if (isCi() && skippedFiles.length > 0) {
    log(`under CI every test of a file was skipped, which fails the run: ${skippedFiles.join(', ')}`);
    return code === 0 ? 1 : code;
  }
  if (skippedFiles.length > 0) log(`every test was skipped in: ${skippedFiles.join(', ')}`);
  return code;
}

function runNodeTests(
  files: string[],
  namePatterns: readonly string[],
  env: Record<string, string | undefined>,
  countsFile: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--require',
        './testing/test-setup.cjs',
        '--test',
        '--test-concurrency=2',
        '--test-timeout=300000',
        `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`,
        '--test-reporter-destination=stdout',
        `--test-reporter=${path.join(ROOT, 'testing', 'count-reporter.mjs')}`,
        `--test-reporter-destination=${countsFile}`,
        ...namePatterns.map((pattern) => `--test-name-pattern=${pattern}`),
        ...files,
      ],
      { cwd: ROOT, env, stdio: 'inherit' },
    );
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    log(`could not run the tests: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
