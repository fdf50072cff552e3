/**
 * Local steps (`steps: local`): a root turn begins in its thread's workflow and runs its model calls and the tool
 * calls its activity runs as local activities, inside the thread's workflow task, and the thread's history shows each
 * of them as a local activity marker with its summary; a turn that answers there starts no workflow of its own. The
 * step mode comes from the agent, else the world (`BATON_STEPS`), else the worker. A model call longer than the
 * workflow task timeout keeps its task alive, a failed call is retried inside the task, and a delegation in the middle
 * of a local-step turn makes the turn a workflow of its own, which goes on from there.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { THREAD_TASK_TIMEOUT_MS } from '../../common/thread-start';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { threadDispatches, turnDispatches } from '../../testing/turn-dispatches';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'local-steps-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('quick', 'steps: local\n'),
  agent('plain'),
  agent('pinned', 'steps: activity\n'),
  agent('slow', 'steps: local\n'),
  agent('flaky', 'steps: local\n'),
  agent('lead', 'steps: local\ncapabilities: [helper]\n'),
  agent('helper'),
]);

/**
 * Longer than the thread's workflow task timeout (THREAD_TASK_TIMEOUT_MS, 5 s) by 2 s: without the SDK's renewal at 80%
 * of it (4 s) the task would time out at 5 s, while the local call still holds it, and the history would show it; with the
 * renewal, the task completes once (at 4 s) and a new one carries on. One renewal is what the test checks, so 7 s
 * proves what a longer call would, a few seconds sooner; the status query, answered at that renewal, still comes about
 * 3 s before the reply.
 */
const SLOW_CALL_MS = 7_000;

const script = parseScript(
  `
agents:
  quick:
    - { call: think, args: { thought: "one" } }
    - { call: think, args: { thought: "two" } }
    - say: "Quick."
  plain:
    - { call: think, args: { thought: "plain" } }
    - say: "Plain."
  pinned:
    - { call: think, args: { thought: "pinned" } }
    - say: "Pinned."
  slow:
    - { say: "Slow.", delay_ms: ${SLOW_CALL_MS} }
  flaky:
    - { fail: 500, times: 2 }
    - say: "Got there."
  lead:
    - { call: think, args: { thought: "before" } }
    - { call: helper, args: { message: "Help." } }
    - { call: think, args: { thought: "after" } }
    - say: "Led."
  helper:
    - say: "Helped."
`,
  'local-steps',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('local-steps', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

/** The history of the thread's workflow, or (`turn`) of its first turn's own workflow. */
async function history(
  threadId: string,
  of: 'thread' | 'turn' = 'thread',
): Promise<temporal.api.history.v1.IHistoryEvent[]> {
  const workflowId = of === 'thread' ? `baton/${threadId}` : `baton/${threadId}/turn-1`;
  const fetched = await harness.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  return fetched.events ?? [];
}

/**
 * What a history dispatched, in order: activity types, local ones as `local:<type> (<summary>)`, children; the
 * thread's after its opening (`threadDispatches`), which is not the turn's.
 */
async function dispatches(threadId: string, of: 'thread' | 'turn' = 'thread'): Promise<string[]> {
  if (of === 'thread') return threadDispatches(harness.client.temporal, threadId);
  return turnDispatches(await history(threadId, of));
}

/** Whether the thread's first turn ran a workflow of its own. */
async function turnWorkflowExists(threadId: string): Promise<boolean> {
  try {
    await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** Requests the scripted model received for `agent`, from its log. */
function modelRequests(agentName: string): number {
  return fs
    .readFileSync(modelLog, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => (JSON.parse(line) as { agent?: string }).agent === agentName).length;
}

test('local steps: model calls and tool runs are local activity markers with their summaries; the transcript is whole', async () => {
  const threadId = uniqueThreadId('quick');
  const thread = await harness.client.startThread({ agent: 'quick', threadId });
  const result = await thread.send('Go.');
  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Quick.');
  assert.deepEqual(await dispatches(threadId), [
    'local:beginTurn (turn 1: quick starts, message from human)',
    'local:callModel (model: quick step 1)',
    'local:runToolsThenCallModel (step: quick runs think, then model step 2)',
    'local:runToolsThenCallModel (step: quick runs think, then model step 3)',
  ]);
  assert.equal(await turnWorkflowExists(threadId), false, 'the turn answered in the thread: no workflow of its own');
  // Each reply once, each tool result once, right after the reply that asked for it.
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'],
  );
  for (const at of [2, 4]) assert.equal(transcript[at]?.toolCallId, transcript[at - 1]?.toolCalls?.[0]?.id);
  assert.equal(transcript.at(-1)?.content, 'Quick.');
  // The last model call recorded the turn completed (no step of its own for that).
  const { rows } = await harness.pool.query<{ status: string }>('SELECT status FROM threads WHERE thread_id = $1', [
    threadId,
  ]);
  assert.equal(rows[0]?.status, 'completed');
});

test('local steps: the world’s BATON_STEPS sets the mode of an agent that sets none; an agent’s own steps win', async () => {
  const world = `local-${Date.now().toString(36)}`;
  await harness.client.world(world).set({ BATON_STEPS: 'local' });
  const plain = uniqueThreadId('plain');
  assert.equal(
    (await (await harness.client.startThread({ agent: 'plain', threadId: plain, world })).send('Go.')).reply,
    'Plain.',
  );
  assert.deepEqual(await dispatches(plain), [
    'local:beginTurn (turn 1: plain starts, message from human)',
    'local:callModel (model: plain step 1)',
    'local:runToolsThenCallModel (step: plain runs think, then model step 2)',
  ]);
  const pinned = uniqueThreadId('pinned');
  assert.equal(
    (await (await harness.client.startThread({ agent: 'pinned', threadId: pinned, world })).send('Go.')).reply,
    'Pinned.',
  );
  // Steps as activities: the thread begins the turn, whose own workflow runs them.
  assert.deepEqual(await dispatches(pinned), [
    'local:beginTurn (turn 1: pinned starts, message from human)',
    'child:rootTurnWorkflow',
  ]);
  assert.deepEqual(await dispatches(pinned, 'turn'), ['callModel', 'runToolsThenCallModel']);
  // In the default world, the worker's default (activity) applies.
  const elsewhere = uniqueThreadId('plain');
  await (await harness.client.startThread({ agent: 'plain', threadId: elsewhere })).send('Go.');
  assert.deepEqual(await dispatches(elsewhere, 'turn'), ['callModel', 'runToolsThenCallModel']);
});

test('local steps: a model call longer than the workflow task timeout keeps its task alive, and runs once', async () => {
  const threadId = uniqueThreadId('slow');
  const thread = await harness.client.startThread({ agent: 'slow', threadId });
  const sending = thread.send('Take your time.');
  // While the call runs in the thread's task, the thread still answers: the SDK renews the task at 80% of the
  // thread's task timeout (5 s), and a query waits for that, not for the call.
  await waitFor('the slow model request', 30_000, () =>
    Promise.resolve(modelRequests('slow') === 1 ? true : undefined),
  );
  assert.equal((await thread.status()).busy, true, 'the thread answered while the turn ran');
  assert.deepEqual(
    (await listMessages(harness.pool, threadId)).map((message) => message.role),
    ['user'],
    'the model call had not returned when the thread answered',
  );
  const described = await thread.workflow.describe();
  assert.deepEqual(
    described.raw.executionConfig?.defaultWorkflowTaskTimeout?.seconds?.toString(),
    String(THREAD_TASK_TIMEOUT_MS / 1000),
  );
  const result = await sending;
  assert.equal(result.reply, 'Slow.');
  const events = await history(threadId);
  const types = events.map((event) => String(event.eventType));
  assert.ok(
    !events.some((event) => event.workflowTaskTimedOutEventAttributes || event.workflowTaskFailedEventAttributes),
    `no workflow task timed out or failed: ${types.join(', ')}`,
  );
  const completedTasks = events.filter((event) => event.workflowTaskCompletedEventAttributes).length;
  // The SDK completes the task before its timeout and carries on in a new one while the call runs (one more task).
  assert.ok(completedTasks >= 2, `the task was kept alive while the call ran (${completedTasks} completed tasks)`);
  assert.equal(modelRequests('slow'), 1, 'the model was called once');
});

test('local steps: a failed model call is retried inside the task, and its reply stored once', async () => {
  const threadId = uniqueThreadId('flaky');
  const thread = await harness.client.startThread({ agent: 'flaky', threadId });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Got there.');
  assert.equal(modelRequests('flaky'), 3, 'two failures, then the reply');
  const markers = (await dispatches(threadId)).filter((entry) => entry.startsWith('local:callModel'));
  assert.equal(markers.length, 1, 'one marker for the call, whatever its attempts');
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((message) => message.role),
    ['user', 'assistant'],
  );
});

test('local steps: local steps, a delegation that leaves the task, then local steps again', async () => {
  const threadId = uniqueThreadId('lead');
  const thread = await harness.client.startThread({ agent: 'lead', threadId });
  const result = await thread.send('Lead.');
  assert.equal(result.reply, 'Led.');
  // The thread runs the turn's local steps until the delegation, then the turn's own workflow goes on from there.
  assert.deepEqual(await dispatches(threadId), [
    'local:beginTurn (turn 1: lead starts, message from human)',
    'local:callModel (model: lead step 1)',
    'local:runToolsThenCallModel (step: lead runs think, then model step 2)',
    'child:rootTurnWorkflow',
  ]);
  assert.deepEqual(await dispatches(threadId, 'turn'), [
    'local:openDelegation (delegate: lead → helper)',
    'child:agentTurnWorkflow',
    'local:recordMessage (tool: helper result)',
    'local:callModel (model: lead step 3)',
    'local:runToolsThenCallModel (step: lead runs think, then model step 4)',
  ]);
  // The helper sets no steps: its own turn runs its model call as an activity.
  const helperTurn = (await listMessages(harness.pool, `${threadId}/helper-1`)).map((message) => message.role);
  assert.deepEqual(helperTurn, ['user', 'assistant']);
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool', 'assistant'],
  );
});
