/**
 * The `baton` CLI as a user runs it: real `node bin/baton.js` processes against the stack `npm test` booted
 * (`TEMPORAL_ADDRESS`/`DATABASE_URL` point `baton dev` at it, so it starts no servers of its own).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';

const ROOT = path.resolve(__dirname, '..', '..');
const BATON = path.join(ROOT, 'bin', 'baton.js');
const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'cli-'));

/** Bounds on every wait: `baton dev` bundles the workflows before its worker polls, which takes a few seconds. */
const STACK_UP_TIMEOUT_MS = 120_000;
const COMMAND_TIMEOUT_MS = 90_000;
const SIGINT_GRACE_MS = 30_000;

/** Settings a developer may have exported that would point the child somewhere other than where the test says. */
const INHERITED_SETTINGS = [
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'BATON_MODEL',
  'BATON_MODEL_LOG',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'BATON_TASK_QUEUE',
  'DATABASE_URL',
] as const;

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_SETTINGS) delete base[name];
  return { ...base, ...extra };
}

/** The test stack's servers, so `baton dev` and `baton demo` start none of their own. */
const stackEnv = (): NodeJS.ProcessEnv =>
  childEnv({ TEMPORAL_ADDRESS: env.temporalAddress, DATABASE_URL: env.databaseUrl });

interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function spawnBaton(args: readonly string[], childEnvironment: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, [BATON, ...args], {
    cwd: workDir,
    env: childEnvironment,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function collect(child: ChildProcess): { stdout: () => string; stderr: () => string } {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return { stdout: () => stdout, stderr: () => stderr };
}

/** Resolves when `child` has exited (with its code or signal), or with `undefined` after `timeoutMs`. */
function exited(
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

/** Runs one `baton …` command to completion; SIGKILLs it and fails when it outlives `timeoutMs`. */
async function baton(
  args: readonly string[],
  childEnvironment: NodeJS.ProcessEnv,
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<CommandResult> {
  const child = spawnBaton(args, childEnvironment);
  const output = collect(child);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exit = await exited(child, timeoutMs);
  if (!exit) {
    child.kill('SIGKILL');
    await exited(child, 5_000);
    assert.fail(`\`baton ${args.join(' ')}\` did not finish within ${timeoutMs} ms; stderr:\n${output.stderr()}`);
  }
  // 'close' follows 'exit' once the pipes are drained, so the output is complete.
  await closed;
  return { ...exit, stdout: output.stdout(), stderr: output.stderr() };
}

function describeRun(result: CommandResult): string {
  return `exit ${result.code ?? result.signal}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}

/** `stdout` as exactly one JSON document (JSON.parse refuses anything before or after it). */
function parseJson(result: CommandResult): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(result.stdout);
  } catch (error) {
    assert.fail(`stdout is not one JSON document (${String(error)}):\n${describeRun(result)}`);
  }
  assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'a JSON object');
  return parsed as Record<string, unknown>;
}

function freshDir(name: string): string {
  return fs.mkdtempSync(path.join(workDir, `${name}-`));
}

const AGENT = 'concierge';
const SCRIPTED_REPLY = 'Welcome! I am the concierge, answering from the e2e test script.';

function writeAgentsDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, `${AGENT}.md`),
    `---\nname: ${AGENT}\ndescription: Welcomes whoever writes to it.\n---\n\nYou welcome people in one sentence.\n`,
  );
  fs.writeFileSync(
    path.join(dir, 'model-script.yaml'),
    YAML.stringify({ agents: { [AGENT]: [{ say: SCRIPTED_REPLY }] } }),
  );
}

describe('with `baton dev` running on the test stack', () => {
  const stateDir = freshDir('dev-state');
  const agentsDir = freshDir('dev-agents');
  const stackFile = path.join(stateDir, 'stack.json');
  const taskQueue = uniqueTaskQueue('cli');
  let dev: ChildProcess | undefined;
  let devOutput: { stdout: () => string; stderr: () => string } | undefined;
  /** `baton run` finds the stack through stack.json: no TEMPORAL_ADDRESS, so it cannot take a shortcut. */
  const runEnv = childEnv();
  const run = (...args: string[]) => baton(['--state-dir', stateDir, 'run', ...args], runEnv);

  before(async () => {
    writeAgentsDir(agentsDir);
    dev = spawnBaton(['--state-dir', stateDir, 'dev', '--agents', agentsDir, '--task-queue', taskQueue], stackEnv());
    devOutput = collect(dev);
    const deadline = Date.now() + STACK_UP_TIMEOUT_MS;
    while (!fs.existsSync(stackFile)) {
      if (dev.exitCode !== null || dev.signalCode !== null) {
        assert.fail(
          `baton dev exited (${dev.exitCode ?? dev.signalCode}) before writing stack.json:\n${devOutput.stderr()}`,
        );
      }
      if (Date.now() > deadline) {
        assert.fail(`baton dev wrote no ${stackFile} within ${STACK_UP_TIMEOUT_MS} ms:\n${devOutput.stderr()}`);
      }
      await sleep(100);
    }
  });

  after(async () => {
    // Normally the SIGINT test below has stopped it; this is the safety net when a test failed first.
    if (!dev || dev.exitCode !== null || dev.signalCode !== null) return;
    dev.kill('SIGINT');
    if (await exited(dev, SIGINT_GRACE_MS)) return;
    dev.kill('SIGKILL');
    await exited(dev, 5_000);
  });

  test('cli: baton dev describes the stack it uses in stack.json', () => {
    const stack = JSON.parse(fs.readFileSync(stackFile, 'utf8')) as Record<string, unknown>;
    assert.equal(stack.temporalAddress, env.temporalAddress);
    assert.equal(stack.databaseUrl, env.databaseUrl);
    assert.equal(stack.taskQueue, taskQueue);
    assert.equal(stack.scriptedModel, true);
    assert.equal(stack.pid, dev?.pid);
  });

  test('cli: run --json prints one JSON document with the thread, its workflow id and the scripted reply', async () => {
    const result = await run(AGENT, 'Hello there', '--json');
    assert.equal(result.code, 0, describeRun(result));
    const output = parseJson(result);
    const { threadId } = output;
    assert.ok(typeof threadId === 'string' && threadId !== '', `a thread id, not ${String(threadId)}`);
    assert.equal(output.workflowId, `baton/${threadId}`);
    assert.equal(output.reply, SCRIPTED_REPLY);
    assert.equal(output.status, 'completed');
    assert.equal(output.turn, 1);
  });

  test('cli: run without --json prints the reply text', async () => {
    const result = await run(AGENT, 'Hello again');
    assert.equal(result.code, 0, describeRun(result));
    assert.equal(result.stdout, `${SCRIPTED_REPLY}\n`);
  });

  test('cli: run --thread uses that id, and a second run with the same id fails saying the thread exists', async () => {
    const threadId = uniqueThreadId('my-id');
    const first = await run(AGENT, 'First', '--thread', threadId, '--json');
    assert.equal(first.code, 0, describeRun(first));
    const output = parseJson(first);
    assert.equal(output.threadId, threadId);
    assert.equal(output.workflowId, `baton/${threadId}`);
    assert.equal(output.reply, SCRIPTED_REPLY);

    const second = await run(AGENT, 'Second', '--thread', threadId);
    assert.equal(second.code, 1, describeRun(second));
    assert.equal(second.stdout, '');
    assert.match(second.stderr, new RegExp(`thread '${threadId.replaceAll('.', '\\.')}' already exists`));
  });

  test('cli: run with an agent the worker does not define fails naming the agent', async () => {
    const result = await run('nosuchagent', 'hi');
    assert.equal(result.code, 1, describeRun(result));
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /agent 'nosuchagent' is not defined/);
  });

  test('cli: baton dev exits 0 on SIGINT and removes its stack.json', async () => {
    assert.ok(dev, 'baton dev was started');
    dev.kill('SIGINT');
    const exit = await exited(dev, SIGINT_GRACE_MS);
    assert.ok(exit, `baton dev did not stop within ${SIGINT_GRACE_MS} ms of SIGINT:\n${devOutput?.stderr()}`);
    assert.deepEqual(exit, { code: 0, signal: null }, devOutput?.stderr());
    assert.equal(fs.existsSync(stackFile), false, 'stack.json is removed');
  });
});

test('cli: run without a running stack tells the user to start baton dev', async () => {
  const stateDir = freshDir('no-stack');
  const result = await baton(['--state-dir', stateDir, 'run', AGENT, 'hi'], childEnv());
  assert.equal(result.code, 1, describeRun(result));
  assert.equal(result.stdout, '');
  assert.match(result.stderr, /no Baton stack is running/);
  assert.match(result.stderr, /baton dev/);
});

test('cli: dev with a bad agent file exits non-zero naming the file and the reason, and writes no stack.json', async () => {
  const stateDir = freshDir('bad-agent-state');
  const agentsDir = freshDir('bad-agents');
  const badFile = path.join(agentsDir, 'nameless.md');
  fs.writeFileSync(badFile, '---\nname: nameless\n---\n\nI have no description.\n');
  fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), 'agents: {}\n');

  const result = await baton(
    ['--state-dir', stateDir, 'dev', '--agents', agentsDir, '--task-queue', uniqueTaskQueue('cli-bad')],
    stackEnv(),
  );
  assert.notEqual(result.code, 0, describeRun(result));
  assert.equal(result.signal, null, describeRun(result));
  assert.ok(result.stderr.includes(badFile), `stderr names ${badFile}:\n${result.stderr}`);
  assert.match(result.stderr, /missing required field 'description'/);
  assert.equal(fs.existsSync(path.join(stateDir, 'stack.json')), false);
});

test('cli: demo --exit --json prints the greeter’s first scripted reply as one JSON document', async () => {
  const script = YAML.parse(fs.readFileSync(path.join(ROOT, 'agents', 'model-script.yaml'), 'utf8')) as {
    agents: Record<string, { say?: string }[]>;
  };
  const expected = script.agents.greeter?.[0]?.say;
  assert.ok(expected, "agents/model-script.yaml has the greeter's first reply");

  const stateDir = freshDir('demo-state');
  const result = await baton(['--state-dir', stateDir, 'demo', '--exit', '--json'], stackEnv(), STACK_UP_TIMEOUT_MS);
  assert.equal(result.code, 0, describeRun(result));
  const output = parseJson(result);
  assert.equal(output.reply, expected);
  assert.equal(output.status, 'completed');
  assert.equal(fs.existsSync(path.join(stateDir, 'stack.json')), false, 'demo --exit leaves no stack.json');
});
