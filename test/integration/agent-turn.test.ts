import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
import { BatonSearchAttributes } from '../../common/search-attributes';
import { buildSystemPrompt } from '../../common/system-context';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseScript } from '../../scripted-model';
import { parseAgentFile } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'agent-turn-'));
const modelLog = path.join(workDir, 'model.jsonl');

const greeterBody = 'You greet people. Answer in one sentence.';
const greeterSystemPrompt = buildSystemPrompt(greeterBody, {
  name: 'greeter',
  declared: [],
  universal: UNIVERSAL_CAPABILITIES,
  hasEnvData: false,
});
const agents = new Map(
  [
    parseAgentFile(`---\nname: greeter\ndescription: Greets people.\n---\n${greeterBody}\n`, 'greeter.md'),
    parseAgentFile('---\nname: flaky\ndescription: Its model fails once.\n---\nYou are flaky.\n', 'flaky.md'),
    parseAgentFile('---\nname: short\ndescription: Its script runs out.\n---\nYou are short.\n', 'short.md'),
    parseAgentFile('---\nname: caller\ndescription: Calls a tool it lacks.\n---\nYou call tools.\n', 'caller.md'),
  ].map((agent) => [agent.name, agent]),
);
const script = parseScript(
  `
agents:
  greeter:
    - say: "Hello, human."
    - say: "Hello again."
  flaky:
    - fail: 503
      times: 1
    - say: "Recovered."
  short:
    - say: "Only one answer."
  caller:
    - call: load_arc_task
      args: { task_id: "007bbfb7" }
    - say: "No tools, so I answer directly."
`,
  'inline',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('agent-turn', {
    agents,
    script,
    modelLogFile: modelLog,
  });
});

after(async () => {
  await harness?.close();
});

test('agent turn: a human message gets the scripted reply, and both messages are stored', async () => {
  const threadId = uniqueThreadId('greet');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  const result = await thread.send('Hi there');

  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Hello, human.');
  assert.equal(result.threadId, threadId);
  assert.equal(result.turn, 1);
  assert.ok(result.usage.totalTokens > 0, 'usage comes from the model reply');

  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((m) => [m.seq, m.role, m.agent, m.content]),
    [
      [1, 'user', 'greeter', 'Hi there'],
      [2, 'assistant', 'greeter', 'Hello, human.'],
    ],
  );

  const requests = harness.modelRequests().filter((r) => r.thread === threadId);
  assert.equal(requests.length, 1);
  const [request] = requests;
  assert.deepEqual(request?.headers, {
    'x-baton-agent': 'greeter',
    'x-baton-thread': threadId,
    'x-baton-root-thread': threadId,
    'x-baton-provider': 'default',
  });
  assert.deepEqual(request?.messages, [
    { role: 'system', content: greeterSystemPrompt },
    { role: 'user', content: 'Hi there' },
  ]);
  assert.deepEqual(
    (request?.tools as { function: { name: string } }[]).map((tool) => tool.function.name),
    [...UNIVERSAL_CAPABILITIES],
    'the universal capabilities are offered as tools',
  );
  await thread.end();
});

test('thread: a second message continues the same transcript in a second turn', async () => {
  const threadId = uniqueThreadId('again');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  await thread.send('Hi');
  const second = await thread.send('Hi again');

  assert.equal(second.turn, 2);
  assert.equal(second.reply, 'Hello again.');
  const requests = harness.modelRequests().filter((r) => r.thread === threadId);
  assert.deepEqual(
    requests[1]?.messages.map((m) => [m.role, m.content]),
    [
      ['system', greeterSystemPrompt],
      ['user', 'Hi'],
      ['assistant', 'Hello, human.'],
      ['user', 'Hi again'],
    ],
  );
  assert.deepEqual(await thread.status(), {
    rootThreadId: threadId,
    agent: 'greeter',
    turns: 2,
    busy: false,
    runs: 1,
    waits: [],
  });
  await thread.end();
});

test('agent turn: workflows carry derived ids, Baton search attributes and summaries', async () => {
  const threadId = uniqueThreadId('ids');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  await thread.send('Hello from the search-attribute test\nsecond line');

  const turn = harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`);
  const description = await turn.describe();
  // A root turn its thread began runs under a type of its own (an older worker would begin it again).
  assert.equal(description.type, 'rootTurnWorkflow');
  assert.equal(description.typedSearchAttributes.get(BatonSearchAttributes.rootThreadId), threadId);
  assert.equal(description.typedSearchAttributes.get(BatonSearchAttributes.threadId), threadId);
  assert.equal(description.typedSearchAttributes.get(BatonSearchAttributes.agent), 'greeter');
  assert.equal(await description.staticSummary(), 'greeter: Hello from the search-attribute test');

  const root = await thread.workflow.describe();
  assert.equal(root.workflowId, `baton/${threadId}`);
  assert.equal(root.typedSearchAttributes.get(BatonSearchAttributes.rootThreadId), threadId);

  // What the Web UI does for `BatonRootThreadId="<id>"`: both workflows of the conversation are found.
  const listed = await eventually(async () => {
    const ids: string[] = [];
    for await (const execution of harness.client.temporal.workflow.list({
      query: `BatonRootThreadId="${threadId}"`,
    })) {
      ids.push(execution.workflowId);
    }
    return ids.length === 2 ? ids.sort() : undefined;
  });
  assert.deepEqual(listed, [`baton/${threadId}`, `baton/${threadId}/turn-1`]);

  // Local activities (the thread's opening, the turn's start, which the thread runs) carry their summaries on their
  // markers; the patch markers have none. The model call that got the answer recorded the turn completed: no step
  // ends it.
  const summaries = async (handle: typeof turn) =>
    ((await handle.fetchHistory()).events ?? [])
      .filter((event) => event.activityTaskScheduledEventAttributes || event.markerRecordedEventAttributes)
      .map((event) => Buffer.from(event.userMetadata?.summary?.data ?? []).toString('utf8'))
      .filter((summary) => summary !== '');
  // The thread's opening is a local activity of its first task unless the message came with that task: its turn's
  // beginning then opened it.
  const threadSummaries = await summaries(thread.workflow);
  const opening = threadSummaries.length === 2 ? [`"thread: open ${threadId}"`] : [];
  assert.deepEqual(threadSummaries, [...opening, '"turn 1: greeter starts, message from human"']);
  assert.deepEqual(await summaries(turn), ['"model: greeter step 1"']);
  await thread.end();
});

test('model activity: a transient 503 is retried by Temporal and the reply is stored once', async () => {
  const threadId = uniqueThreadId('flaky');
  const thread = await harness.client.startThread({ agent: 'flaky', threadId });
  const result = await thread.send('Try');

  assert.equal(result.reply, 'Recovered.');
  assert.equal(harness.modelRequests().filter((r) => r.thread === threadId).length, 2, 'one failed, one answered');
  const assistantRows = (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'assistant');
  assert.equal(assistantRows.length, 1);

  // The retry was Temporal's: one model call scheduled, completed on its attempt 2 after a failure that carried the
  // 503. Two requests from the openai client's own retries would show one scheduled call started at attempt 1.
  const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  const events = history.events ?? [];
  const scheduled = events.filter(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel',
  );
  assert.equal(scheduled.length, 1, 'the workflow scheduled one model call');
  const started = events.find(
    (event) =>
      Number(event.activityTaskStartedEventAttributes?.scheduledEventId ?? -1) === Number(scheduled[0]?.eventId),
  )?.activityTaskStartedEventAttributes;
  assert.equal(started?.attempt, 2, 'the call completed on its second attempt');
  assert.match(started?.lastFailure?.message ?? '', /503/, 'the first attempt failed with the 503');
  await thread.end();
});

test('agent turn: a script that runs out fails the turn with Model.ScriptExhausted, without retries', async () => {
  const threadId = uniqueThreadId('short');
  const thread = await harness.client.startThread({ agent: 'short', threadId });
  await thread.send('First');
  const failure = await thread.send('Second').then(
    () => assert.fail('the second turn should fail'),
    (error: unknown) => error,
  );
  assert.ok(failure instanceof WorkflowUpdateFailedError);
  const root = rootCause(failure);
  assert.equal((root as { type?: string }).type, 'Model.ScriptExhausted');
  assert.match(root.message, /agent 'short' has no step 2/);
  assert.equal(harness.modelRequests().filter((r) => r.thread === threadId).length, 2, 'non-retryable: one request');
  await thread.end();
});

test('agent turn: a tool call the agent cannot make comes back as a tool error and the turn goes on', async () => {
  const threadId = uniqueThreadId('caller');
  const thread = await harness.client.startThread({ agent: 'caller', threadId });
  const result = await thread.send('Load the task');

  assert.equal(result.reply, 'No tools, so I answer directly.');
  assert.equal(result.steps, 2);
  const second = harness.modelRequests().filter((r) => r.thread === threadId)[1];
  const toolMessage = second?.messages.find((m) => m.role === 'tool');
  assert.equal(toolMessage?.tool_call_id, 'call_caller_1_0');
  assert.equal(
    toolMessage?.content,
    `Error: 'load_arc_task' is not one of your capabilities. You can call: ${UNIVERSAL_CAPABILITIES.join(', ')}.`,
  );
  await thread.end();
});

/** Polls `probe` until it returns a value: visibility (the list API) is eventually consistent. */
async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`no result within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function rootCause(error: unknown): Error {
  let current = error as Error;
  while (current.cause instanceof Error) current = current.cause;
  return current;
}
