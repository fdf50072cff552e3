/**
 * A tool whose `timeout_s` is over 840 s (`MAX_CARRIED_TOOL_SECONDS`) runs as an activity of its own, in local and
 * batched steps too: it does not fit beside a model call in a step activity's 25 minutes, nor in a local activity
 * that holds its workflow task. A tool at exactly 840 s still goes with the next model call. Read from each turn's
 * history on the real stack: the long call is a scheduled `executeToolCall` with its own timeout, never a local
 * activity's marker nor part of one.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import type { BegunTurn, RunStepsResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import {
  afterOpening,
  eventSummary,
  localActivityResults,
  turnDispatches,
  threadDispatches,
  workflowHistory,
} from '../../testing/turn-dispatches';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const tools = [
  defineTool({
    name: 'long_report',
    description: 'A report that may take a quarter of an hour.',
    parameters: z.object({}),
    timeout_s: 900,
    run: () => 'long report done',
  }),
  defineTool({
    name: 'edge_report',
    description: 'A report that may take 14 minutes.',
    parameters: z.object({}),
    timeout_s: 840,
    run: () => 'edge report done',
  }),
];

function agent(name: string, steps: string): [string, ReturnType<typeof parseAgentFile>] {
  const text =
    `---\nname: ${name}\ndescription: Test agent ${name}.\nsteps: ${steps}\n` +
    `capabilities: [long_report, edge_report]\n---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([agent('localer', 'local'), agent('batcher', 'batched')]);

const steps = `
    - { call: edge_report, args: {} }
    - { call: long_report, args: {} }
    - say: "Reported."`;
const script = parseScript(`agents:\n  localer:${steps}\n  batcher:${steps}\n`, 'long-tool-calls');

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('long-tool-calls', { agents, script, tools });
});

after(async () => {
  await harness?.close();
});

const history = (workflowId: string) => workflowHistory(harness.client.temporal, workflowId);

/** The `executeToolCall` activities a history scheduled: their summary and start-to-close timeout in seconds. */
function scheduledToolCalls(events: readonly temporal.api.history.v1.IHistoryEvent[]) {
  return events
    .filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'executeToolCall')
    .map((event) => ({
      summary: eventSummary(event),
      timeoutS: Number(event.activityTaskScheduledEventAttributes?.startToCloseTimeout?.seconds ?? 0),
    }));
}

/** Each tool result of the thread, in order, with the tool that made it. */
async function toolResults(threadId: string): Promise<[string, string | null][]> {
  const transcript = await listMessages(harness.pool, threadId);
  const names = new Map(transcript.flatMap((message) => (message.toolCalls ?? []).map((call) => [call.id, call.name])));
  return transcript
    .filter((message) => message.role === 'tool')
    .map((message) => [names.get(message.toolCallId ?? '') ?? '?', message.content]);
}

test('long tool calls: in local steps, a tool over 840 s runs as a scheduled activity of its own; one at 840 s goes with the model call', async () => {
  const threadId = uniqueThreadId('localer');
  const result = await (await harness.client.startThread({ agent: 'localer', threadId })).send('Report.');
  assert.equal(result.reply, 'Reported.');
  // The 840 s call went with the next model call, inside the thread's task; the reply asking for the 900 s call
  // made the turn a workflow of its own.
  assert.deepEqual(await threadDispatches(harness.client.temporal, threadId), [
    'local:beginTurn (turn 1: localer starts, message from human)',
    'local:callModel (model: localer step 1)',
    'local:runToolsThenCallModel (step: localer runs edge_report, then model step 2)',
    'child:rootTurnWorkflow',
  ]);
  const turn = await history(`baton/${threadId}/turn-1`);
  assert.deepEqual(turnDispatches(turn), ['executeToolCall', 'local:callModel (model: localer step 3)']);
  // Its own activity, under its own timeout (the tool's 900 s and a minute to record the outcome).
  assert.deepEqual(scheduledToolCalls(turn), [{ summary: 'tool: long_report', timeoutS: 960 }]);
  assert.deepEqual(await toolResults(threadId), [
    ['edge_report', 'edge report done'],
    ['long_report', 'long report done'],
  ]);
});

test('long tool calls: in batched steps, a batch stops at a tool over 840 s, which runs as a scheduled activity of its own', async () => {
  const threadId = uniqueThreadId('batcher');
  const result = await (await harness.client.startThread({ agent: 'batcher', threadId })).send('Report.');
  assert.equal(result.reply, 'Reported.');
  const thread = await history(`baton/${threadId}`);
  assert.deepEqual(afterOpening(turnDispatches(thread), threadId), [
    'local:beginTurn (turn 1: batcher starts, message from human)',
    'child:rootTurnWorkflow',
  ]);
  // The first batch ran the 840 s call with the model call of step 2, and handed back the reply asking for the
  // 900 s call, which no batch ran.
  const firstBatches = localActivityResults(thread, 'beginTurn').flatMap(
    (begun) => (begun as BegunTurn).firstBatch ?? [],
  );
  assert.deepEqual(
    firstBatches.map((batch) => batch.steps.map(({ step, ranTools }) => ({ step: step + 1, ranTools }))),
    [
      [
        { step: 1, ranTools: [] },
        { step: 2, ranTools: ['edge_report'] },
      ],
    ],
  );
  const turn = await history(`baton/${threadId}/turn-1`);
  const laterBatches = localActivityResults(turn, 'runSteps') as RunStepsResult[];
  assert.ok(
    laterBatches.every((batch) => batch.steps.every(({ ranTools }) => !ranTools.includes('long_report'))),
    'no batch ran the long call',
  );
  assert.equal(turnDispatches(turn)[0], 'executeToolCall', 'the turn ran the long call first, as an activity');
  assert.deepEqual(scheduledToolCalls(turn), [{ summary: 'tool: long_report', timeoutS: 960 }]);
  assert.deepEqual(await toolResults(threadId), [
    ['edge_report', 'edge report done'],
    ['long_report', 'long report done'],
  ]);
});
