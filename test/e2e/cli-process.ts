/**
 * Running the `baton` CLI as a user does, for the e2e tests: real `node bin/baton.js` processes against the stack
 * `npm test` booted (`TEMPORAL_ADDRESS`/`DATABASE_URL` point `baton dev` at it, so it starts no servers of its own).
 * Every test file is its own process, so each gets its own working directory.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runCli } from '../../cli/program';
import type { TreeNode } from '../../client';
import { createPool } from '../../db/pool';
import { findDemoProblems, formatDemoProblem } from '../../dev/demo-check';
import { readTestEnv } from '../../testing/test-env';

export const ROOT = path.resolve(__dirname, '..', '..');
const BATON = path.join(ROOT, 'bin', 'baton.js');
export const env = readTestEnv();
/** The working directory of every `baton` process this test file starts. */
export const workDir = fs.mkdtempSync(path.join(env.stateDir, 'cli-'));

/** Bounds on every wait: a `baton dev` given no bundle bundles the workflows before its worker polls (seconds). */
export const STACK_UP_TIMEOUT_MS = 120_000;
export const COMMAND_TIMEOUT_MS = 90_000;
export const SIGINT_GRACE_MS = 30_000;

/** Settings a developer may have exported that would point the child somewhere other than where the test says. */
const INHERITED_SETTINGS = [
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'BATON_MODEL',
  'BATON_PROVIDERS',
  'BATON_MODEL_LOG',
  'BATON_FILES_ROOT',
  'BATON_ARC_DIR',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'BATON_TASK_QUEUE',
  'DATABASE_URL',
  'BATON_WORKFLOW_BUNDLE',
] as const;

export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_SETTINGS) delete base[name];
  return { ...base, ...extra };
}

/**
 * The test stack's servers, so `baton dev` and `baton demo` start none of their own, and the workflow bundle `npm test`
 * built, so their workers start without bundling again (seconds of webpack each).
 */
export const stackEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv =>
  childEnv({
    TEMPORAL_ADDRESS: env.temporalAddress,
    DATABASE_URL: env.databaseUrl,
    BATON_WORKFLOW_BUNDLE: env.workflowBundlePath,
    ...extra,
  });

export interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CollectedOutput {
  stdout: () => string;
  stderr: () => string;
}

export function spawnBaton(args: readonly string[], childEnvironment: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, [BATON, ...args], {
    cwd: workDir,
    env: childEnvironment,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function collect(child: ChildProcess): CollectedOutput {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return { stdout: () => stdout, stderr: () => stderr };
}

/** Resolves when `child` has exited (with its code or signal), or with `undefined` after `timeoutMs`. */
export function exited(
  child: ChildProcess,
  timeoutMs: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(undefined);
    }, timeoutMs);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      resolve({ code, signal });
    };
    child.once('exit', onExit);
  });
}

/** A `baton …` process running in the background, e.g. a `run` that waits for a human answer. */
export interface BackgroundCommand {
  readonly child: ChildProcess;
  readonly output: CollectedOutput;
  /** Waits for the exit and the drained output; SIGKILLs the process and fails when it outlives `timeoutMs`. */
  finished(timeoutMs?: number): Promise<CommandResult>;
}

export function startBaton(args: readonly string[], childEnvironment: NodeJS.ProcessEnv): BackgroundCommand {
  const child = spawnBaton(args, childEnvironment);
  const output = collect(child);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return {
    child,
    output,
    async finished(timeoutMs = COMMAND_TIMEOUT_MS) {
      const exit = await exited(child, timeoutMs);
      if (!exit) {
        child.kill('SIGKILL');
        await exited(child, 5_000);
        assert.fail(`\`baton ${args.join(' ')}\` did not finish within ${timeoutMs} ms; stderr:\n${output.stderr()}`);
      }
      // 'close' follows 'exit' once the pipes are drained, so the output is complete.
      await closed;
      return { ...exit, stdout: output.stdout(), stderr: output.stderr() };
    },
  };
}

/**
 * Runs one `baton …` command line in this process (`runCli`: the commands of `bin/baton.js`, their argument parsing,
 * output and exit code) with `childEnvironment` and this file's working directory, for a command that needs no
 * process of its own: a starting process costs a second or more of CPU through tsx. A command that serves until a
 * signal, or whose process behaviour is what a test checks, runs with `baton` instead. The binary differs from this
 * only in cli/main.ts, which hands `runCli` the process's streams; the tests that start `baton` processes (`cli.test.ts`,
 * `live-cli.test.ts`, the approvals, MCP, env-paging and package files) keep that path tested. Fails when it outlives
 * `timeoutMs`.
 */
export async function batonInProcess(
  args: readonly string[],
  childEnvironment: NodeJS.ProcessEnv,
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<CommandResult> {
  let stdout = '';
  let stderr = '';
  const running = runCli(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: childEnvironment,
    cwd: workDir,
  });
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    running,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new Error(`\`baton ${args.join(' ')}\` did not finish within ${timeoutMs} ms; stderr:\n${stderr}`)),
        timeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  return { code, signal: null, stdout, stderr };
}

/**
 * Writes to `target` the workflow bundle at `source` as if built before workflows/thread.ts last changed: its source
 * map carries an older text of that file, which the bundle check compares with the worker's own sources.
 */
export function writeStaleBundle(source: string, target: string): void {
  const code = fs.readFileSync(source, 'utf8');
  const marker = 'base64,';
  const at = code.lastIndexOf(marker) + marker.length;
  const map = JSON.parse(Buffer.from(code.slice(at).trimEnd(), 'base64').toString()) as {
    sources: string[];
    sourcesContent: string[];
  };
  const thread = map.sources.findIndex((file) => file.endsWith('/workflows/thread.ts'));
  assert.ok(thread >= 0, 'the bundle names workflows/thread.ts among its sources');
  map.sourcesContent[thread] += '// an older version\n';
  fs.writeFileSync(target, code.slice(0, at) + Buffer.from(JSON.stringify(map)).toString('base64') + '\n');
}

/** Runs one `baton …` command to completion; SIGKILLs it and fails when it outlives `timeoutMs`. */
export function baton(
  args: readonly string[],
  childEnvironment: NodeJS.ProcessEnv,
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<CommandResult> {
  return startBaton(args, childEnvironment).finished(timeoutMs);
}

export function describeRun(result: CommandResult): string {
  return `exit ${result.code ?? result.signal}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}

/** `stdout` as exactly one JSON document (JSON.parse refuses anything before or after it). */
function parseStdout(result: CommandResult): unknown {
  try {
    return JSON.parse(result.stdout) as unknown;
  } catch (error) {
    assert.fail(`stdout is not one JSON document (${String(error)}):\n${describeRun(result)}`);
  }
}

/** `stdout` as exactly one JSON object. */
export function parseJson(result: CommandResult): Record<string, unknown> {
  const parsed = parseStdout(result);
  assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'a JSON object');
  return parsed as Record<string, unknown>;
}

/** `stdout` as exactly one JSON array of objects. */
export function parseJsonArray(result: CommandResult): Record<string, unknown>[] {
  const parsed = parseStdout(result);
  assert.ok(Array.isArray(parsed), `a JSON array:\n${describeRun(result)}`);
  return parsed as Record<string, unknown>[];
}

export function freshDir(name: string): string {
  return fs.mkdtempSync(path.join(workDir, `${name}-`));
}

/** Resolves once `condition()` holds; fails with `describe()` when `timeoutMs` passes or `child` exits first. */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  options: { timeoutMs: number; child?: ChildProcess; describe?: () => string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  const details = () => (options.describe ? `:\n${options.describe()}` : '');
  for (;;) {
    if (await condition()) return;
    const { child } = options;
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      assert.fail(`waiting for ${what}: the process exited (${child.exitCode ?? child.signalCode})${details()}`);
    }
    if (Date.now() > deadline) assert.fail(`waiting for ${what}: nothing after ${options.timeoutMs} ms${details()}`);
    await sleep(100);
  }
}

/** A `baton dev` in the background, up once it has written its stack.json. */
export interface DevProcess {
  readonly child: ChildProcess;
  readonly output: CollectedOutput;
  readonly stackFile: string;
  /** SIGINT, then SIGKILL after the grace period; nothing when it has already exited. */
  stop(): Promise<void>;
}

/** Starts `baton --state-dir <stateDir> dev <args>` on the test stack and waits until it has written stack.json. */
export async function startDev(options: {
  stateDir: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
}): Promise<DevProcess> {
  const stackFile = path.join(options.stateDir, 'stack.json');
  const child = spawnBaton(['--state-dir', options.stateDir, 'dev', ...options.args], options.env ?? stackEnv());
  const output = collect(child);
  const dev: DevProcess = {
    child,
    output,
    stackFile,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      if (await exited(child, SIGINT_GRACE_MS)) return;
      child.kill('SIGKILL');
      await exited(child, 5_000);
    },
  };
  try {
    await waitFor(`baton dev to write ${stackFile}`, () => fs.existsSync(stackFile), {
      timeoutMs: STACK_UP_TIMEOUT_MS,
      child,
      describe: output.stderr,
    });
  } catch (error) {
    await dev.stop();
    throw error;
  }
  return dev;
}

/**
 * Every failed turn and every tool result starting with `Error:` in the tree `baton tree --json` printed, one line
 * each (the demo's own check): a team run is right only when none of its calls went wrong, whatever it replied.
 */
export async function problemsInTree(tree: TreeNode): Promise<string[]> {
  const pool = createPool({ connectionString: env.databaseUrl, applicationName: 'baton-e2e-tree-check' });
  try {
    return (await findDemoProblems(pool, tree)).map(formatDemoProblem);
  } finally {
    await pool.end();
  }
}
