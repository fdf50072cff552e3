/**
 * The `baton` CLI as a user runs it: real `node bin/baton.js` processes against the stack `npm test` booted
 * (`TEMPORAL_ADDRESS`/`DATABASE_URL` point `baton dev` at it, so it starts no servers of its own).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import { summarizeArcTask } from '../../dev/demo-check';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import {
  ROOT,
  STACK_UP_TIMEOUT_MS,
  SIGINT_GRACE_MS,
  COMMAND_TIMEOUT_MS,
  baton,
  childEnv,
  describeRun,
  env,
  exited,
  freshDir,
  parseJson,
  stackEnv,
  startDev,
  writeStaleBundle,
  type DevProcess,
} from './cli-process';

const AGENT = 'concierge';
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
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
  /** A project's `.baton`, where `connect()` with no options looks from the project's directory. */
  const projectDir = freshDir('dev-project');
  const stateDir = path.join(projectDir, '.baton');
  const agentsDir = freshDir('dev-agents');
  const stackFile = path.join(stateDir, 'stack.json');
  const taskQueue = uniqueTaskQueue('cli');
  let dev: DevProcess | undefined;
  /** `baton run` finds the stack through stack.json: no TEMPORAL_ADDRESS, so it cannot take a shortcut. */
  const runEnv = childEnv();
  const run = (...args: string[]) => baton(['--state-dir', stateDir, 'run', ...args], runEnv);

  before(async () => {
    writeAgentsDir(agentsDir);
    dev = await startDev({ stateDir, args: ['--agents', agentsDir, '--task-queue', taskQueue] });
  });

  after(async () => {
    // Normally the SIGINT test below has stopped it; this is the safety net when a test failed first.
    await dev?.stop();
  });

  test('cli: baton dev describes the stack it uses in stack.json', () => {
    const stack = JSON.parse(fs.readFileSync(stackFile, 'utf8')) as Record<string, unknown>;
    assert.equal(stack.temporalAddress, env.temporalAddress);
    assert.equal(stack.databaseUrl, env.databaseUrl);
    assert.equal(stack.taskQueue, taskQueue);
    assert.equal(stack.scriptedModel, true);
    assert.equal(stack.pid, dev?.child.pid);
    // Its worker started from the run's bundle (BATON_WORKFLOW_BUNDLE), not from a webpack build of its own.
    assert.match(
      dev?.output.stderr() ?? '',
      new RegExp(
        `^worker: task queue '${taskQueue}', .*, workflows from ${escape(env.workflowBundlePath)} \\(BATON_WORKFLOW_BUNDLE\\)$`,
        'm',
      ),
    );
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

  test('sdk: connect() with no options finds the baton dev of the working directory and says so', async () => {
    // A program as a user writes it, run from the project's directory with no Baton variable set.
    const program = path.join(projectDir, 'connect.ts');
    fs.writeFileSync(
      program,
      [
        `import { connect } from ${JSON.stringify(path.join(ROOT, 'index.ts'))};`,
        'void (async () => {',
        '  const client = await connect();',
        '  try {',
        "    const { result } = await client.run({ agent: 'concierge', message: 'Hello from connect()' });",
        '    const { status, reply } = result;',
        '    console.log(JSON.stringify({ connectedVia: client.connectedVia, status, reply }));',
        '  } finally {',
        '    await client.close();',
        '  }',
        '})();',
        '',
      ].join('\n'),
    );
    const result = await promisify(execFile)(process.execPath, ['--import', 'tsx', program], {
      cwd: projectDir,
      env: childEnv(),
      timeout: COMMAND_TIMEOUT_MS,
    });
    const stack = JSON.parse(fs.readFileSync(stackFile, 'utf8')) as { pid: number };
    assert.deepEqual(JSON.parse(result.stdout), {
      connectedVia: `the baton dev in ${stateDir} (pid ${stack.pid}, Temporal at ${env.temporalAddress})`,
      status: 'completed',
      reply: SCRIPTED_REPLY,
    });
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

  test('cli: run --thread --message-id is safe to run again: the same reply, one turn', async () => {
    const threadId = uniqueThreadId('retried');
    const first = await run(AGENT, 'Once', '--thread', threadId, '--message-id', 'once-1', '--json');
    assert.equal(first.code, 0, describeRun(first));
    const again = await run(AGENT, 'Once', '--thread', threadId, '--message-id', 'once-1', '--json');
    assert.equal(again.code, 0, describeRun(again));
    assert.deepEqual(parseJson(again), parseJson(first));
    assert.equal(parseJson(again).turn, 1);

    const alone = await run(AGENT, 'Once', '--message-id', 'once-2');
    assert.equal(alone.code, 1, describeRun(alone));
    assert.match(alone.stderr, /--message-id needs --thread/);
  });

  test('cli: run with an agent the worker does not define fails naming the agent', async () => {
    const result = await run('nosuchagent', 'hi');
    assert.equal(result.code, 1, describeRun(result));
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /agent 'nosuchagent' is not defined/);
  });

  test('cli: baton dev exits 0 on SIGINT and removes its stack.json', async () => {
    assert.ok(dev, 'baton dev was started');
    dev.child.kill('SIGINT');
    const exit = await exited(dev.child, SIGINT_GRACE_MS);
    assert.ok(exit, `baton dev did not stop within ${SIGINT_GRACE_MS} ms of SIGINT:\n${dev.output.stderr()}`);
    assert.deepEqual(exit, { code: 0, signal: null }, dev.output.stderr());
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

test('cli: dev refuses a BATON_WORKFLOW_BUNDLE built from other sources, naming what changed, and starts nothing', async () => {
  const stateDir = freshDir('stale-bundle-state');
  const agentsDir = freshDir('stale-bundle-agents');
  writeAgentsDir(agentsDir);
  // The run's bundle, as if built before workflows/thread.ts last changed.
  const stale = path.join(stateDir, 'stale.js');
  writeStaleBundle(env.workflowBundlePath, stale);

  const result = await baton(
    ['--state-dir', stateDir, 'dev', '--agents', agentsDir, '--task-queue', uniqueTaskQueue('cli-stale')],
    stackEnv({ BATON_WORKFLOW_BUNDLE: stale }),
  );
  assert.equal(result.code, 1, describeRun(result));
  assert.match(
    result.stderr,
    /BATON_WORKFLOW_BUNDLE: .*stale\.js was built from other sources than this worker's \(changed or missing here: workflows\/thread\.ts\); write it again with `baton bundle <file>`/,
  );
  assert.equal(fs.existsSync(path.join(stateDir, 'stack.json')), false);
});

test('cli: demo --exit --json runs the ARC walkthrough and prints its reply, tree and env data as one JSON document', async () => {
  const script = YAML.parse(
    fs.readFileSync(path.join(ROOT, 'examples', 'arc-team', 'agents', 'model-script.yaml'), 'utf8'),
  ) as {
    agents: Record<string, { say?: string }[]>;
  };
  const expected = script.agents.coordinator?.at(-1)?.say;
  assert.ok(expected, "the ARC team's model script has the coordinator's final reply");

  const stateDir = freshDir('demo-state');
  const result = await baton(['--state-dir', stateDir, 'demo', '--exit', '--json'], stackEnv(), STACK_UP_TIMEOUT_MS);
  assert.equal(result.code, 0, describeRun(result));
  const output = parseJson(result);
  assert.equal(output.reply, expected);
  assert.equal(output.status, 'completed');
  const tree = output.tree as { agent: string; children: { agent: string; children: { agent: string }[] }[] };
  assert.deepEqual(
    [tree.agent, tree.children[0]?.agent, tree.children[0]?.children[0]?.agent],
    ['coordinator', 'solver', 'observer'],
  );
  const env = output.env as { key: string; storedBy: { agent: string } }[];
  assert.deepEqual(
    env.map((entry) => [entry.key, entry.storedBy.agent]),
    [
      ['arc_task', 'solver'],
      ['observed_patterns', 'observer'],
    ],
  );
  assert.equal(fs.existsSync(path.join(stateDir, 'stack.json')), false, 'demo --exit leaves no stack.json');
  // The figures come from the stored value, and they are the real task's.
  const task = JSON.parse(fs.readFileSync(path.join(DEFAULT_ARC_DATA_DIR, '007bbfb7.json'), 'utf8')) as object;
  assert.equal(output.arcTask, summarizeArcTask({ task_id: '007bbfb7', ...task }));
  assert.match(String(output.arcTask), /^task 007bbfb7: 5 training pairs \(3x3 → 9x9\), 1 test input \(3x3\)$/);
  assert.deepEqual(output.problems, []);
});

test('cli: demo exits 1 naming the thread and the call when a tool call fails (no ARC data)', async () => {
  const stateDir = freshDir('demo-no-data');
  const missing = path.join(freshDir('demo-no-arc'), 'none');
  const result = await baton(
    ['--state-dir', stateDir, 'demo', '--exit'],
    stackEnv({ BATON_ARC_DIR: missing }),
    STACK_UP_TIMEOUT_MS,
  );
  assert.equal(result.code, 1, describeRun(result));
  // The scripted story still reads well; the demo says what went wrong underneath.
  assert.match(result.stdout, /^coordinator: The solver found the rule/m);
  assert.match(
    result.stderr,
    /The demo run went wrong \(exit code 1\):\n {2}thread \S+\/solver-1 \(solver\): load_arc_task\(\{"task_id":"007bbfb7"\}\) returned: Error: The ARC data directory is missing/,
  );
  // Each line once.
  for (const line of result.stderr.split('\n').filter((l) => l.trim() !== '')) {
    assert.equal(result.stderr.split('\n').filter((other) => other === line).length, 1, `printed once: ${line}`);
  }
});
