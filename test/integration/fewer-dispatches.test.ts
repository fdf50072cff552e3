/**
 * A turn's dispatches: its start and end run as local activities, and a reply whose tool calls are all run by the
 * activity itself has them run with the next model call, in one activity. The transcript must read exactly as it did
 * with one activity per call, and a retry of the combined activity must not run a tool twice.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { waitFor } from '../chaos/waiting';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'fewer-dispatches-'));
const modelLog = path.join(workDir, 'model.jsonl');
const runsFile = path.join(workDir, 'runs.txt');

function agent(name: string, capabilities: string[], extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('thinker', ['load_arc_task']),
  agent('scribe', ['shell']),
  agent('mixer', []),
]);

const script = parseScript(
  `
agents:
  thinker:
    - { call: think, args: { thought: "one" } }
    - calls:
        - { call: think, args: { thought: "two" } }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - say: "Thought it through."
  scribe:
    - call: shell
      args: { command: "echo ran >> runs.txt" }
    - fail: 503
      times: 1
    - say: "Wrote it once."
  mixer:
    - calls:
        - { call: think, args: { thought: "before asking" } }
        - { call: ask_human, args: { question: "Go on?" } }
    - { call: think, args: { thought: "after the answer" } }
    - say: "Went on."
`,
  'fewer-dispatches',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('fewer-dispatches', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

/**
 * What a turn dispatched, in order: activity types, local ones prefixed `local:`. Its thread's history first (the
 * thread begins the turn), without the thread's own opening, then the turn workflow's.
 */
async function dispatches(threadId: string): Promise<string[]> {
  const { workflow } = harness.client.temporal;
  const events = [
    ...((await workflow.getHandle(`baton/${threadId}`).fetchHistory()).events ?? []),
    ...((await workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory()).events ?? []),
  ];
  return events.flatMap((event: temporal.api.history.v1.IHistoryEvent) => {
    const scheduled = event.activityTaskScheduledEventAttributes?.activityType?.name;
    if (scheduled) return [scheduled];
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_local_activity') return [];
    const data = marker.details?.data?.payloads?.[0]?.data;
    const type = (JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { activity_type?: string }).activity_type;
    return type === 'ensureThread' ? [] : [`local:${type ?? '?'}`];
  });
}

/** How many times a turn's history started attempts of `activityType`. */
async function attempts(threadId: string, activityType: string): Promise<number[]> {
  const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  const events = history.events ?? [];
  const scheduledIds = new Set(
    events
      .filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === activityType)
      .map((event) => Number(event.eventId)),
  );
  return events
    .filter((event) => scheduledIds.has(Number(event.activityTaskStartedEventAttributes?.scheduledEventId ?? -1)))
    .map((event) => event.activityTaskStartedEventAttributes?.attempt ?? 0);
}

test('fewer dispatches: a tool step runs with the next model call, the turn starts locally and ends with its answer', async () => {
  const threadId = uniqueThreadId('thinker');
  const thread = await harness.client.startThread({ agent: 'thinker', threadId });
  const result = await thread.send('Think twice.');

  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Thought it through.');
  assert.equal(result.steps, 3);
  assert.deepEqual(await dispatches(threadId), [
    'local:beginTurn',
    'callModel',
    'runToolsThenCallModel',
    'runToolsThenCallModel',
  ]);

  // The transcript reads as with one activity per call: every call's result right after its reply, in call order.
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((message) => [message.role, message.toolCallId ?? message.toolCalls?.length ?? null]),
    [
      ['user', null],
      ['assistant', 1],
      ['tool', 'call_thinker_1_0'],
      ['assistant', 2],
      ['tool', 'call_thinker_2_0'],
      ['tool', 'call_thinker_2_1'],
      ['assistant', null],
    ],
  );
  assert.deepEqual(
    transcript.map((message) => message.seq),
    transcript.map((_, index) => index + 1),
  );
  const last = harness.modelRequests().filter((request) => request.thread === threadId)[2];
  const results = last?.messages.filter((message) => message.role === 'tool').map((m) => m.tool_call_id);
  assert.deepEqual(results, ['call_thinker_1_0', 'call_thinker_2_0', 'call_thinker_2_1']);
  assert.match(transcript[5]?.content ?? '', /007bbfb7/);
  await thread.end();
});

test('fewer dispatches: a retry after the model call failed does not run the step’s tool again', async () => {
  const threadId = uniqueThreadId('scribe');
  // The shell works in its world's working_directory, and only there.
  const world = `fewer-dispatches-${threadId}`;
  await harness.client.world(world).set({ working_directory: workDir });
  const thread = await harness.client.startThread({ agent: 'scribe', threadId, world });
  const result = await thread.send('Write once.');

  assert.equal(result.reply, 'Wrote it once.');
  assert.deepEqual(await attempts(threadId, 'runToolsThenCallModel'), [2], 'the combined activity ran twice');
  assert.equal(harness.modelRequests().filter((request) => request.thread === threadId).length, 3);
  assert.equal(fs.readFileSync(runsFile, 'utf8'), 'ran\n', 'the shell command ran once');
  const tools = (await listMessages(harness.pool, threadId)).filter((message) => message.role === 'tool');
  assert.equal(tools.length, 1);
  await thread.end();
});

test('fewer dispatches: a reply mixing a tool with ask_human runs call by call, and the answer closes it once', async () => {
  const threadId = uniqueThreadId('mixer');
  const thread = await harness.client.startThread({ agent: 'mixer', threadId });
  const sent = thread.send('Ask me.');
  const question = await waitFor('the question', 15_000, async () => (await thread.questions())[0]);
  await thread.answer(question.questionId, 'Yes');
  const result = await sent;

  assert.equal(result.reply, 'Went on.');
  // The answer closes the question once (before the patch an answered question was closed again as expired).
  assert.deepEqual(await dispatches(threadId), [
    'local:beginTurn',
    'callModel',
    'executeToolCall',
    'local:openQuestion',
    'closeQuestion',
    'local:recordMessage',
    'callModel',
    'runToolsThenCallModel',
  ]);
  await thread.end();
});
