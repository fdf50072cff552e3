import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'agent-loop-'));
const modelLog = path.join(workDir, 'model.jsonl');
const filesRoot = path.join(workDir, 'files');
fs.mkdirSync(filesRoot);
fs.writeFileSync(path.join(filesRoot, 'notes.txt'), 'grid notes: rotate then mirror\n');

function agent(name: string, capabilities: string[], extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('reader', ['read_file', 'load_arc_task']),
  agent('clumsy', ['read_file']),
  agent('looper', [], 'max_steps: 3\n'),
  agent('asker', []),
  agent('impatient', []),
  agent('chatty', []),
]);

const script = parseScript(
  `
agents:
  reader:
    - calls:
        - { call: read_file, args: { path: notes.txt } }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: think, args: { thought: "two tools at once" } }
    - say: "Read both."
  clumsy:
    - calls:
        - { call: read_file, args: '{"path": ' }
        - { call: read_file, args: { path: 42 } }
        - { call: read_file, args: { path: notes.txt, scope: other-root } }
        - { call: teleport, args: {} }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: read_file, args: { path: ../../etc/passwd } }
    - say: "I will be more careful."
  looper:
    - { call: think, args: { thought: "1" } }
    - { call: think, args: { thought: "2" } }
    - { call: think, args: { thought: "3" } }
    - say: "never reached"
  asker:
    - call: ask_human
      args: { question: "Which colour should the border be?" }
    - say: "Using the colour you chose."
  impatient:
    - call: ask_human
      args: { question: "Quick, yes or no?", timeout_s: 1 }
    - say: "No answer, going on."
  chatty:
    - say: "one"
    - say: "two"
    - say: "three"
    - say: "four"
    - say: "five"
`,
  'agent-loop',
);

let harness: AgentHarness;

function startHarness(taskQueue: string): Promise<AgentHarness> {
  return startTestHarness('agent-loop', { taskQueue, agents, script, modelLogFile: modelLog, filesRoot });
}

before(async () => {
  harness = await startHarness(uniqueTaskQueue('agent-loop'));
});

after(async () => {
  await harness?.close();
});

function requests(threadId: string) {
  return harness.modelRequests().filter((request) => request.thread === threadId);
}

function toolResults(threadId: string, requestIndex: number): Record<string, string> {
  const messages = requests(threadId)[requestIndex]?.messages ?? [];
  return Object.fromEntries(
    messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id ?? '', m.content ?? '']),
  );
}

async function until<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('agent loop: all tool calls of one reply run and the model sees every result', async () => {
  const threadId = uniqueThreadId('reader');
  const thread = await harness.client.startThread({ agent: 'reader', threadId });
  const result = await thread.send('Read the notes and the task.');

  assert.equal(result.reply, 'Read both.');
  assert.equal(result.steps, 2);
  const results = toolResults(threadId, 1);
  assert.equal(results.call_reader_1_0, 'grid notes: rotate then mirror\n');
  const task = JSON.parse(results.call_reader_1_1 ?? '{}') as { task_id: string; train: number[][][][] };
  assert.equal(task.task_id, '007bbfb7');
  assert.equal(results.call_reader_1_2, 'Thought recorded.');
  const tools = (requests(threadId)[0]?.tools ?? []) as { function: { name: string } }[];
  assert.deepEqual(
    tools.map((t) => t.function.name),
    [...UNIVERSAL_CAPABILITIES, 'read_file', 'load_arc_task'],
  );
  await thread.end();
});

test('agent loop: bad tool calls come back as errors the model can act on, and the turn goes on', async () => {
  const threadId = uniqueThreadId('clumsy');
  const thread = await harness.client.startThread({ agent: 'clumsy', threadId });
  const result = await thread.send('Try some tools.');

  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'I will be more careful.');
  const can = `You can call: ${['read_file', ...UNIVERSAL_CAPABILITIES].join(', ')}.`;
  assert.deepEqual(toolResults(threadId, 1), {
    call_clumsy_1_0:
      "Error: The arguments of 'read_file' are not valid JSON (Unexpected end of JSON input). Send them as one JSON object.",
    call_clumsy_1_1:
      "Error: Invalid arguments for 'read_file': 'path' Invalid input: expected string, received number.",
    call_clumsy_1_2: "Error: Invalid arguments for 'read_file': unknown argument 'scope'.",
    call_clumsy_1_3: `Error: Unknown tool or agent 'teleport'. ${can}`,
    call_clumsy_1_4: `Error: 'load_arc_task' is not one of your capabilities. ${can}`,
    call_clumsy_1_5: toolResults(threadId, 1).call_clumsy_1_5,
  });
  assert.match(toolResults(threadId, 1).call_clumsy_1_5 ?? '', /^Error: .*outside the allowed directory/);
  // Nothing but the conversation itself was stored: the user message, the reply with six calls, six results, the answer.
  const rows = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    rows.map((row) => row.role),
    ['user', 'assistant', ...Array<string>(6).fill('tool'), 'assistant'],
  );
  await thread.end();
});

test('agent loop: a turn that reaches max_steps ends with a typed outcome instead of hanging', async () => {
  const threadId = uniqueThreadId('looper');
  const thread = await harness.client.startThread({ agent: 'looper', threadId });
  const result = await thread.send('Think forever.');

  assert.equal(result.status, 'max_steps');
  assert.equal(result.steps, 3);
  assert.equal(result.reply, '');
  assert.equal(requests(threadId).length, 3, 'exactly max_steps model calls');
  await thread.end();
});

test('ask_human: the question is stored, the turn waits, and the answer resumes it after a worker restart', async () => {
  const taskQueue = uniqueTaskQueue('asker');
  let first: AgentHarness | undefined = await startHarness(taskQueue);
  let second: AgentHarness | undefined;
  try {
    const threadId = uniqueThreadId('asker');
    const thread = await first.client.startThread({ agent: 'asker', threadId });
    const reply = thread.send('Draw a border.');
    reply.catch(() => undefined);

    const [question] = await until(async () => {
      const open = await thread.questions();
      return open.length > 0 ? open : undefined;
    }, 'the question');
    assert.equal(question?.questionId, 'q1');
    assert.equal(question?.question, 'Which colour should the border be?');
    assert.equal(question?.agent, 'asker');
    assert.equal(question?.workflowId, `baton/${threadId}/turn-1`);
    // What the Web UI shows as the turn's current details.
    const metadata = await first.client.temporal.workflow
      .getHandle(question?.workflowId ?? '')
      .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    assert.match(
      metadata.currentDetails ?? '',
      /^Waiting for a human to answer q1: "Which colour should the border be\?"/,
    );
    assert.match(metadata.currentDetails ?? '', new RegExp(`baton answer ${threadId} q1`));

    // The worker goes away while the turn waits; a new one takes over and receives the answer.
    await first.close();
    first = undefined;
    second = await startHarness(taskQueue);
    await second.client.thread(threadId).answer('q1', 'Blue, please.');
    const result = await reply;

    assert.equal(result.reply, 'Using the colour you chose.');
    assert.equal(toolResults(threadId, 1).call_asker_1_0, 'The human answered: Blue, please.');
    const [closed] = await second.client.thread(threadId).questions({ all: true });
    assert.deepEqual([closed?.status, closed?.answer], ['answered', 'Blue, please.']);
    assert.deepEqual(await second.client.thread(threadId).questions(), [], 'nothing left open');
    await assert.rejects(second.client.thread(threadId).answer('q1', 'again'), /question 'q1' is already answered/);
    await second.client.thread(threadId).end();
  } finally {
    await first?.close();
    await second?.close();
  }
});

test('ask_human: an unanswered question expires after its timeout and the turn goes on', async () => {
  const threadId = uniqueThreadId('impatient');
  const thread = await harness.client.startThread({ agent: 'impatient', threadId });
  const result = await thread.send('Ask me something.');

  assert.equal(result.reply, 'No answer, going on.');
  assert.equal(
    toolResults(threadId, 1).call_impatient_1_0,
    'Error: the human did not answer within 1 seconds. Go on without the answer.',
  );
  const [question] = await thread.questions({ all: true });
  assert.equal(question?.status, 'expired');
  await assert.rejects(thread.answer('q1', 'too late'), /question 'q1' is already expired/);
  await thread.end();
});

test('thread: continue-as-new every 2 turns keeps the whole transcript and the turn count', async () => {
  const threadId = uniqueThreadId('chatty');
  const thread = await harness.client.startThread({ agent: 'chatty', threadId, continueAsNewAfterTurns: 2 });
  const replies: string[] = [];
  for (const message of ['a', 'b', 'c', 'd', 'e']) replies.push((await thread.send(message)).reply);

  assert.deepEqual(replies, ['one', 'two', 'three', 'four', 'five']);
  const status = await thread.status();
  assert.deepEqual([status.turns, status.runs], [5, 3]);
  const transcript = await thread.transcript();
  assert.deepEqual(
    transcript.map((m) => m.content),
    ['a', 'one', 'b', 'two', 'c', 'three', 'd', 'four', 'e', 'five'],
  );
  const lastRequest = requests(threadId)[4];
  assert.equal(lastRequest?.messages.length, 10, 'the fifth call saw the system prompt and all nine messages');
  const usage = await thread.usage();
  assert.equal(usage.modelCalls, 5);
  assert.ok(usage.totalTokens > 0);
  await thread.end();
  assert.deepEqual(await thread.result(), { ...status, busy: false });
});

test('a message sent again with the same messageId is delivered once and returns the same turn', async () => {
  const thread = await harness.client.startThread({ agent: 'chatty', threadId: uniqueThreadId('message-id') });
  const first = await thread.send('Count.', { messageId: 'count-1' });
  const again = await thread.send('Count.', { messageId: 'count-1' });
  assert.deepEqual(again, first, 'the retry got the first delivery’s outcome');
  const next = await thread.send('Count.', { messageId: 'count-2' });
  assert.equal(next.turn, first.turn + 1, 'a new id is a new message');
  const roles = (await listMessages(harness.pool, thread.threadId)).map((m) => [m.role, m.content]);
  assert.deepEqual(roles, [
    ['user', 'Count.'],
    ['assistant', 'one'],
    ['user', 'Count.'],
    ['assistant', 'two'],
  ]);
  await thread.end();
});
