/**
 * The design note's "After" walkthrough, step by step, with the shipped example agents and their model script on
 * the real ARC task 007bbfb7: the solver stores the task once; the observer, whose message carries no grid, finds it
 * in the manifest, reads it and stores its findings; the solver reads them.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { EnvStore } from '../../db/env-data';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';

const env = readTestEnv();
const ROOT = path.resolve(__dirname, '..', '..');
const modelLog = path.join(fs.mkdtempSync(path.join(env.stateDir, 'arc-')), 'model.jsonl');
const task = JSON.parse(fs.readFileSync(path.join(DEFAULT_ARC_DATA_DIR, '007bbfb7.json'), 'utf8')) as {
  train: { input: number[][]; output: number[][] }[];
};

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('arc', {
    agents: path.join(ROOT, 'examples', 'arc-team', 'agents'),
    script: path.join(ROOT, 'examples', 'arc-team', 'agents', 'model-script.yaml'),
    modelLogFile: modelLog,
  });
});

after(async () => {
  await harness?.close();
});

function requests(root: string, agent: string): ModelLogEntry[] {
  return harness.modelRequests().filter((r) => r.headers['x-baton-root-thread'] === root && r.agent === agent);
}

/** The result the agent received for its call to `tool` (the latest one), parsed when it is JSON. */
function resultOf(root: string, agent: string, tool: string): string | undefined {
  for (const request of requests(root, agent).reverse()) {
    const calls = request.messages.flatMap((m) => (m.tool_calls ?? []) as { id: string; function: { name: string } }[]);
    const call = calls.filter((c) => c.function.name === tool).at(-1);
    const result = request.messages.find((m) => m.role === 'tool' && m.tool_call_id === call?.id);
    if (result) return result.content ?? undefined;
  }
  return undefined;
}

test('arc walkthrough: agents share the task and their findings through env data, not messages', async () => {
  const root = uniqueThreadId('arc');
  const thread = await harness.client.startThread({ agent: 'coordinator', threadId: root });
  const result = await thread.send('Solve ARC task 007bbfb7');
  assert.equal(result.status, 'completed');
  const solverThread = `${root}/solver-1`;
  const observerThread = `${root}/observer-1`;
  const store = new EnvStore(harness.pool);

  // 1-4. The solver loads the task and stores it once, as arc_task.
  const loaded = JSON.parse(resultOf(root, 'solver', 'load_arc_task') ?? '{}') as typeof task;
  assert.deepEqual(loaded.train, task.train, 'the real ARC data was loaded');
  assert.equal(resultOf(root, 'solver', 'store_env_data'), "Stored 'arc_task' in environment data.");
  const arcTask = await store.get(root, 'arc_task');
  assert.deepEqual((arcTask?.value as typeof task).train, task.train);
  assert.deepEqual(arcTask?.storedBy, { agent: 'solver', thread: solverThread });

  // 5. The solver delegates with a message about intent: no grid in it, but the preamble points to the data.
  const [firstObserverRequest] = requests(root, 'observer');
  const delegated = firstObserverRequest?.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
  assert.ok(delegated.endsWith('\n\nWhat patterns do you notice in the current task?'));
  assert.doesNotMatch(delegated, /\[\[/, 'no grid is smuggled through the message');
  assert.match(delegated, /Shared environment data is available — call list_env_data\(\)/);
  assert.match(delegated, /\n- arc_task: The current ARC puzzle: task 007bbfb7/);
  assert.match(firstObserverRequest?.messages[0]?.content ?? '', /call list_env_data\(\) to see what has been stored/);
  assert.doesNotMatch(
    requests(root, 'solver')[0]?.messages[0]?.content ?? '',
    /list_env_data\(\)/,
    'no hint before data exists',
  );

  // 6. The observer lists the manifest: descriptions and who stored them, never values.
  const manifest = JSON.parse(resultOf(root, 'observer', 'list_env_data') ?? '[]') as Record<string, unknown>[];
  assert.deepEqual(
    manifest.map((entry) => [entry.key, entry.stored_by, entry.version, 'value' in entry]),
    [['arc_task', 'solver', 1, false]],
  );

  // 7. It reads arc_task: the same grids.
  const read = JSON.parse(resultOf(root, 'observer', 'get_env_data') ?? '{}') as typeof task;
  assert.deepEqual(read.train, task.train);

  // 8. It stores its findings.
  const findings = await store.get(root, 'observed_patterns');
  assert.deepEqual(findings?.storedBy, { agent: 'observer', thread: observerThread });
  assert.equal(findings?.type, 'finding');

  // 10. The solver reads the findings.
  assert.deepEqual(JSON.parse(resultOf(root, 'solver', 'get_env_data') ?? 'null'), findings?.value);

  // stored_by is right on every entry and every event.
  const events = await store.events(root);
  assert.deepEqual(
    events.map((event) => [event.action, event.key, event.actor.agent, event.actor.thread, event.version]),
    [
      ['stored', 'arc_task', 'solver', solverThread, 1],
      ['stored', 'observed_patterns', 'observer', observerThread, 1],
    ],
  );
  assert.deepEqual(
    (await store.list(root)).map((entry) => [entry.key, entry.storedBy.agent]),
    [
      ['arc_task', 'solver'],
      ['observed_patterns', 'observer'],
    ],
  );
  await thread.end();
});
