/**
 * The context policy through the real worker and the scripted model: the request log shows what each model call
 * carried (trimmed, with its note), while the transcript in Postgres keeps every message.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { OMITTED_ASSISTANT_HEADER } from '../../common/context-policy';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const modelLog = path.join(fs.mkdtempSync(path.join(env.stateDir, 'context-policy-')), 'model.jsonl');

function agent(name: string, extra = '') {
  return parseAgentFile(
    `---\nname: ${name}\ndescription: Agent ${name}.\n${extra}---\nYou are ${name}.\n`,
    `${name}.md`,
  );
}

const agents: AgentRegistry = new Map(
  [
    agent('chatty', 'context:\n  max_messages: 4\n'),
    agent('chattybatch', 'context:\n  max_messages: 4\nsteps: batched\n'),
    agent('plain'),
  ].map((a) => [a.name, a]),
);

/** The script of both chatty agents: five thoughts over three steps, then two turns' answers. */
const chattyScript = `
    - calls:
        - { call: think, args: { thought: "one" } }
        - { call: think, args: { thought: "two" } }
    - call: think
      args: { thought: "three" }
    - calls:
        - { call: think, args: { thought: "four" } }
        - { call: think, args: { thought: "five" } }
    - say: "first answer"
    - say: "second answer"`;

const script = parseScript(
  `
agents:
  chatty:${chattyScript}
  chattybatch:${chattyScript}
  plain:
    - call: think
      args: { thought: "alpha" }
    - call: think
      args: { thought: "beta" }
    - say: "plain answer"
`,
  'context-policy',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('context-policy', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

/** A sent message as a short label: the request's shape at a glance. */
function label(message: ModelLogEntry['messages'][number]): string {
  if (message.role === 'system') return message.content?.startsWith('[Baton]') ? 'note' : 'system';
  if (message.role === 'tool') return 'result';
  if (message.tool_calls) return `call×${message.tool_calls.length}`;
  return `${message.role}:${message.content}`;
}

function requests(root: string): ModelLogEntry[] {
  return harness.modelRequests().filter((r) => r.headers['x-baton-root-thread'] === root);
}

/** Every tool result a request carries comes with the call it answers. */
function assertNoOrphanResults(request: ModelLogEntry): void {
  const calls = new Set(
    request.messages.flatMap((m) => (m.tool_calls ?? []).map((call) => (call as { id: string }).id)),
  );
  for (const message of request.messages) {
    if (message.role === 'tool') assert.ok(calls.has(message.tool_call_id ?? ''), JSON.stringify(message));
  }
}

test("context policy: the agent's max_messages trims each request, never splits a tool call, and Postgres keeps all", async () => {
  await checkTrimmedTurns('chatty');
});

test('context policy: batched steps, whose tool results are stored beside the next read, send the same requests', async () => {
  await checkTrimmedTurns('chattybatch');
});

/** Two turns of a chatty agent under its limit of 4 messages: what each request carried, and what Postgres kept. */
async function checkTrimmedTurns(agentName: string): Promise<void> {
  // The world's default is tighter; the agent's own limit wins.
  const worldName = `ctx-${uniqueThreadId('w').split('-')[1]}`;
  await harness.client.world(worldName).set({ BATON_CONTEXT_MAX_MESSAGES: '2' });
  const root = uniqueThreadId(agentName);
  const thread = await harness.client.startThread({ agent: agentName, threadId: root, world: worldName });
  assert.equal((await thread.send('Count to five.')).reply, 'first answer');
  // The second turn's scripted step is found although the request carries only some of the earlier replies.
  assert.equal((await thread.send('Again.')).reply, 'second answer');

  const sent = requests(root);
  assert.deepEqual(
    sent.map((r) => r.messages.map(label)),
    [
      ['system', 'user:Count to five.'],
      ['system', 'user:Count to five.', 'call×2', 'result', 'result'],
      ['system', 'user:Count to five.', 'note', 'call×1', 'result'],
      ['system', 'user:Count to five.', 'note', 'call×2', 'result', 'result'],
      ['system', 'user:Count to five.', 'note', 'assistant:first answer', 'user:Again.'],
    ],
  );
  const notes = sent.map((r) => r.messages.find((m) => label(m) === 'note')?.content ?? null);
  assert.deepEqual(notes, [
    null,
    null,
    "[Baton] 3 earlier messages were left out here to fit this agent's context limit (at most 4 messages); the full transcript is kept.",
    "[Baton] 5 earlier messages were left out here to fit this agent's context limit (at most 4 messages); the full transcript is kept.",
    "[Baton] 8 earlier messages were left out here to fit this agent's context limit (at most 4 messages); the full transcript is kept.",
  ]);
  assert.deepEqual(
    sent.map((r) => r.headers[OMITTED_ASSISTANT_HEADER] ?? null),
    [null, null, '1', '2', '3'],
  );
  sent.forEach(assertNoOrphanResults);

  // Postgres keeps the whole conversation, and no note.
  const stored = await listMessages(harness.pool, root);
  assert.deepEqual(
    stored.map((m) =>
      m.role === 'tool' ? 'result' : m.toolCalls ? `call×${m.toolCalls.length}` : `${m.role}:${m.content}`,
    ),
    [
      'user:Count to five.',
      'call×2',
      'result',
      'result',
      'call×1',
      'result',
      'call×2',
      'result',
      'result',
      'assistant:first answer',
      'user:Again.',
      'assistant:second answer',
    ],
  );
  await thread.end();
}

test("context policy: a world's max_tokens applies to an agent without its own; the newest message is always sent", async () => {
  const worldName = `ctx-${uniqueThreadId('w').split('-')[1]}`;
  await harness.client.world(worldName).set({ BATON_CONTEXT_MAX_TOKENS: '1' });
  const root = uniqueThreadId('plain');
  const thread = await harness.client.startThread({ agent: 'plain', threadId: root, world: worldName });
  assert.equal((await thread.send('Think twice.')).reply, 'plain answer');

  const sent = requests(root);
  assert.deepEqual(
    sent.map((r) => r.messages.map(label)),
    [
      // Nothing can be left out: sent whole although over the limit.
      ['system', 'user:Think twice.'],
      ['system', 'user:Think twice.', 'call×1', 'result'],
      ['system', 'user:Think twice.', 'note', 'call×1', 'result'],
    ],
  );
  assert.equal(
    sent[2]?.messages.find((m) => label(m) === 'note')?.content,
    "[Baton] 2 earlier messages were left out here to fit this agent's context limit (about 1 token); the newest message is always sent, so this request is still over the limit.",
  );
  // The newest call is the one sent: the second thought.
  assert.match(JSON.stringify(sent[2]?.messages), /beta/);
  assert.doesNotMatch(JSON.stringify(sent[2]?.messages), /alpha/);
  sent.forEach(assertNoOrphanResults);
  assert.equal((await listMessages(harness.pool, root)).length, 6);
  await thread.end();
});
