/**
 * `npm test`: boots the stack once (a Temporal dev server and Postgres, as docs/architecture.md §6 resolves them),
 * creates a fresh database, bundles the workflows once, runs the suites with Node's test runner, and tears everything
 * down.
 *
 *   npm test                      every suite
 *   npm test -- unit replay       some suites
 *   npm test -- test/e2e/x.test.ts  some files
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
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

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? walk(full) : [full];
  });
}

async function main(): Promise<number> {
  const files = testFiles(process.argv.slice(2));
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
      log(`stack ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files`);
    } else {
      log(`running ${files.length} test files (no stack needed)`);
    }
    return await runNodeTests(files, env);
  } finally {
    await stack?.stop();
    log(`done in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  }
}

function runNodeTests(files: string[], env: Record<string, string | undefined>): Promise<number> {
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
