/**
 * Batched steps (`steps: batched`): a turn runs its consecutive steps (each model call and the tool calls it carries)
 * in one local activity, `runSteps`, and is called back only when it must act: at the answer, at a call the workflow
 * carries out (here a delegation), or at the agent's `max_steps`. A turn begun in its thread runs its first batch in
 * its `beginTurn`. The Web UI shows one marker per batch, whose result lists the steps it ran. A model error inside a
 * batch fails it and the next batch finds every earlier step stored; a model
 * call longer than the workflow task timeout keeps its task alive; and the transcript is the one a turn of steps one
 * by one writes, under the same operation ids.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import type { BegunTurn, RunStepsResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import {
  requestsPerStep as requestsOfSteps,
  requestStep,
  startTestHarness,
  type AgentHarness,
  type ModelLogEntry,
} from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { localActivityResults, turnDispatches, threadDispatches, workflowHistory } from '../../testing/turn-dispatches';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'batched-steps-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\nsteps: batched\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('batch'),
  agent('shaky'),
  agent('slowbatch'),
  agent('capped', 'max_steps: 3\n'),
  agent('leader', 'capabilities: [aide]\n'),
  agent('delegator', 'capabilities: [helper]\n'),
  agent('helper'),
  agent('observed'),
  ['aide', parseAgentFile('---\nname: aide\ndescription: Test agent aide.\n---\nYou are aide.\n', 'aide.md')] as const,
]);

/**
 * Longer than the thread's workflow task timeout (THREAD_TASK_TIMEOUT_MS, 5 s) by 2 s: without the SDK's renewal at 80%
 * of it (4 s) the task would time out at 5 s, while the batch still holds it, and the history would show it; with the
 * renewal, the task completes once (at 4 s) and a new one carries on. One renewal is what the test checks, so 7 s
 * proves what a longer call would, a few seconds sooner.
 */
const SLOW_CALL_MS = 7_000;

const script = parseScript(
  `
agents:
  batch:
    - { call: think, args: { thought: "one" } }
    - calls:
        - { call: think, args: { thought: "two" } }
        - { call: think, args: { thought: "three" } }
    - { call: think, args: { thought: "four" } }
    - say: "Batched."
  shaky:
    - { call: think, args: { thought: "stored before the failure" } }
    - { fail: 500, times: 2 }
    - say: "Got there."
  slowbatch:
    - { call: think, args: { thought: "quick first" } }
    - { say: "Slow.", delay_ms: ${SLOW_CALL_MS} }
  capped:
    - { call: think, args: { thought: "a" } }
    - { call: think, args: { thought: "b" } }
    - { call: think, args: { thought: "c" } }
    - say: "Never reached."
  leader:
    - { call: think, args: { thought: "before" } }
    - { call: aide, args: { message: "Help." } }
    - { call: think, args: { thought: "after" } }
    - say: "Led."
  aide:
    - say: "Helped."
  delegator:
    - { call: helper, args: { message: "Think, then answer." } }
    - say: "Delegated."
  helper:
    - { call: think, args: { thought: "in my first batch" } }
    - say: "Helped in one batch."
  observed:
    - calls:
        - { call: think, args: { thought: "left" }, id: left }
        - { call: think, args: { thought: "right" }, id: right }
    - { say: "Seen.", hold: "observed-answer" }
`,
  'batched-steps',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('batched-steps', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

const history = (workflowId: string) => workflowHistory(harness.client.temporal, workflowId);

/** The batches of a workflow's history, in order: a turn's first one, run by its `beginTurn`, and each `runSteps`. */
function batchesOf(events: temporal.api.history.v1.IHistoryEvent[]): RunStepsResult[] {
  const firstBatches = localActivityResults(events, 'beginTurn').flatMap(
    (begun) => (begun as BegunTurn).firstBatch ?? [],
  );
  return [...firstBatches, ...(localActivityResults(events, 'runSteps') as RunStepsResult[])];
}

/** What each batch of a workflow's history ran: the steps (from 1) and the tools each ran first. */
async function batches(workflowId: string): Promise<{ step: number; ranTools: string[] }[][]> {
  return batchesOf(await history(workflowId)).map((batch) =>
    batch.steps.map(({ step, ranTools }) => ({ step: step + 1, ranTools })),
  );
}

/** How many requests the scripted model received for each step of `threadId`'s turn, by step (from 1). */
const requestsPerStep = (threadId: string) => requestsOfSteps(modelLog, threadId);

test('batched steps: a turn of four steps is one local activity marker, its beginning’s, whose result lists them; the transcript is whole', async () => {
  const threadId = uniqueThreadId('batch');
  const thread = await harness.client.startThread({ agent: 'batch', threadId });
  const result = await thread.send('Go.');
  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Batched.');
  assert.equal(result.steps, 4);
  // The turn begins and runs its steps in one local activity: the workflow is called back once, with the answer.
  assert.deepEqual(await threadDispatches(harness.client.temporal, threadId), [
    'local:beginTurn (turn 1: batch starts, message from human)',
  ]);
  assert.deepEqual(await batches(`baton/${threadId}`), [
    [
      { step: 1, ranTools: [] },
      { step: 2, ranTools: ['think'] },
      { step: 3, ranTools: ['think', 'think'] },
      { step: 4, ranTools: ['think'] },
    ],
  ]);
  assert.deepEqual(requestsPerStep(threadId), { 1: 1, 2: 1, 3: 1, 4: 1 });
  // Each reply once, each tool result once, after the reply that asked for it, under the step's operation ids.
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant'],
  );
  const operations = transcript.map((message) => message.operationId.split(':').slice(1).join(':'));
  // A step's tool calls run at once and each result is recorded as its call finishes: step 2's two land in either order.
  assert.deepEqual(
    [...operations.slice(0, 4), ...operations.slice(4, 6).sort(), ...operations.slice(6)],
    ['in', 'model:0', 'tool:0:0', 'model:1', 'tool:1:0', 'tool:1:1', 'model:2', 'tool:2:0', 'model:3'].map(
      (step) => `turn:1:${step}`,
    ),
  );
  const { rows } = await harness.pool.query<{ status: string }>('SELECT status FROM threads WHERE thread_id = $1', [
    threadId,
  ]);
  assert.equal(rows[0]?.status, 'completed', 'the answer recorded the turn completed');
});

test('batched steps: a step’s tool results are stored before the model is asked again', async () => {
  const threadId = uniqueThreadId('observed');
  const thread = await harness.client.startThread({ agent: 'observed', threadId });
  const sent = thread.send('Look.');
  try {
    // The second model call's reply is held: by the time its request reaches the model, the results it carries must be
    // in Postgres, as a worker that died now would need them.
    const deadline = Date.now() + 30_000;
    let asked: ModelLogEntry | undefined;
    while (asked === undefined) {
      asked = harness.modelRequests().find((request) => request.thread === threadId && requestStep(request) === 2);
      if (asked === undefined) {
        assert.ok(Date.now() < deadline, 'the second model call never came');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const stored = await listMessages(harness.pool, threadId);
    assert.deepEqual(
      stored.map((message) => message.role),
      ['user', 'assistant', 'tool', 'tool'],
    );
    const storedResults = stored.filter((message) => message.role === 'tool').map((message) => message.toolCallId);
    assert.deepEqual([...storedResults].sort(), ['left', 'right']);
    assert.deepEqual(
      asked.messages.filter((message) => message.role === 'tool').map((message) => message.tool_call_id),
      storedResults,
      'the request carried them as stored',
    );
  } finally {
    // Released whatever was seen: a reply left held would keep the worker from shutting down.
    harness.model.release('observed-answer');
  }
  assert.equal((await sent).reply, 'Seen.');
});

test('batched steps: a model error fails the first batch, and the batches after it ask the model only for the step that failed', async () => {
  const threadId = uniqueThreadId('shaky');
  const thread = await harness.client.startThread({ agent: 'shaky', threadId });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Got there.');
  // The first step's reply and tool result were stored by the turn's first batch (in its `beginTurn`), which met the
  // first failure; the turn's own batch met the second, and its retry found the first step stored.
  assert.deepEqual(requestsPerStep(threadId), { 1: 1, 2: 3 });
  assert.deepEqual(await threadDispatches(harness.client.temporal, threadId), [
    'local:beginTurn (turn 1: shaky starts, message from human)',
    'local:runSteps (steps: shaky model steps from 1)',
  ]);
  const events = await history(`baton/${threadId}`);
  assert.equal((localActivityResults(events, 'beginTurn')[0] as BegunTurn).firstBatch, undefined, 'it failed');
  const [batch] = batchesOf(events);
  assert.deepEqual(
    batch?.steps.map(({ step, reused }) => ({ step, reused })),
    [
      { step: 0, reused: true },
      { step: 1, reused: false },
    ],
    'the attempt that completed found the first step stored',
  );
  assert.deepEqual(
    (await listMessages(harness.pool, threadId)).map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant'],
  );
});

test('batched steps: a model call longer than the workflow task timeout keeps the batch’s task alive, and runs once', async () => {
  const threadId = uniqueThreadId('slowbatch');
  const thread = await harness.client.startThread({ agent: 'slowbatch', threadId });
  const result = await thread.send('Take your time.');
  assert.equal(result.reply, 'Slow.');
  const events = await history(`baton/${threadId}`);
  assert.ok(
    !events.some((event) => event.workflowTaskTimedOutEventAttributes || event.workflowTaskFailedEventAttributes),
    `no workflow task timed out or failed: ${events.map((event) => String(event.eventType)).join(', ')}`,
  );
  const completedTasks = events.filter((event) => event.workflowTaskCompletedEventAttributes).length;
  assert.ok(completedTasks >= 2, `the task was kept alive while the batch ran (${completedTasks} completed tasks)`);
  assert.deepEqual(requestsPerStep(threadId), { 1: 1, 2: 1 }, 'each step asked the model once');
  assert.deepEqual((await batches(`baton/${threadId}`)).length, 1, 'both steps in one batch');
});

test('batched steps: a batch takes no step past max_steps; the turn ends there', async () => {
  const threadId = uniqueThreadId('capped');
  const thread = await harness.client.startThread({ agent: 'capped', threadId });
  const result = await thread.send('Go on and on.');
  assert.equal(result.status, 'max_steps');
  assert.equal(result.steps, 3);
  assert.deepEqual(requestsPerStep(threadId), { 1: 1, 2: 1, 3: 1 });
  assert.deepEqual(
    (await batches(`baton/${threadId}`)).map((batch) => batch.map(({ step }) => step)),
    [[1, 2, 3]],
  );
});

test('batched steps: a batch, a delegation that leaves the task, then a batch again', async () => {
  const threadId = uniqueThreadId('leader');
  const thread = await harness.client.startThread({ agent: 'leader', threadId });
  const result = await thread.send('Lead.');
  assert.equal(result.reply, 'Led.');
  // The first batch stops at the reply that delegates; the turn's own workflow carries the delegation out and
  // batches on.
  assert.deepEqual(await threadDispatches(harness.client.temporal, threadId), [
    'local:beginTurn (turn 1: leader starts, message from human)',
    'child:rootTurnWorkflow',
  ]);
  const turnId = `baton/${threadId}/turn-1`;
  assert.deepEqual(turnDispatches(await history(turnId)), [
    'local:openDelegation (delegate: leader → aide)',
    'child:agentTurnWorkflow',
    'local:recordMessage (tool: aide result)',
    'local:runSteps (steps: leader model steps from 3)',
  ]);
  assert.deepEqual(
    (await batches(`baton/${threadId}`)).map((batch) => batch.map(({ step }) => step)),
    [[1, 2]],
  );
  assert.deepEqual(
    (await batches(turnId)).map((batch) => batch.map(({ step }) => step)),
    [[3, 4]],
  );
  // The aide sets no steps: its own turn runs its model call as an activity.
  assert.deepEqual(
    (await listMessages(harness.pool, `${threadId}/aide-1`)).map((message) => message.role),
    ['user', 'assistant'],
  );
  assert.deepEqual(
    (await listMessages(harness.pool, threadId)).map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool', 'assistant'],
  );
});

test('batched steps: a delegated turn runs its first batch in its beginTurn, in its own workflow', async () => {
  const threadId = uniqueThreadId('delegator');
  const thread = await harness.client.startThread({ agent: 'delegator', threadId });
  const result = await thread.send('Delegate.');
  assert.equal(result.reply, 'Delegated.');
  const { rows } = await harness.pool.query<{ threadId: string; workflowId: string }>(
    `SELECT thread_id AS "threadId", workflow_id AS "workflowId" FROM delegations WHERE root_thread_id = $1`,
    [threadId],
  );
  const [delegation] = rows;
  assert.ok(delegation, 'the delegation was recorded');
  // The helper's whole turn (a think call, then its answer) is the one local activity of its turn workflow.
  assert.deepEqual(turnDispatches(await history(delegation.workflowId)), [
    'local:beginTurn (turn: helper starts, message from delegator)',
  ]);
  assert.deepEqual(await batches(delegation.workflowId), [
    [
      { step: 1, ranTools: [] },
      { step: 2, ranTools: ['think'] },
    ],
  ]);
  assert.deepEqual(requestsPerStep(delegation.threadId), { 1: 1, 2: 1 });
  assert.deepEqual(
    (await listMessages(harness.pool, delegation.threadId)).map((message) => message.role),
    ['user', 'assistant', 'tool', 'assistant'],
  );
});
