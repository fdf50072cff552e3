import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BatonSearchAttributes } from '../../common/search-attributes';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'delegation-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, description: string, capabilities: string[] = [], extra = '') {
  const text = `---\nname: ${name}\ndescription: ${description}\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('coordinator', 'Orchestrates ARC solving by delegating to specialists.', ['solver']),
    agent('solver', 'Solves ARC-AGI puzzles by finding transformation rules.', ['observer']),
    agent('observer', 'Describes patterns in grids.'),
    agent('prober', 'Probes detail levels.', ['min_obs', 'verb_obs', 'no_obs']),
    agent('min_obs', 'Minimal.', [], 'delegation_context: minimal\n'),
    agent('verb_obs', 'Verbose.', [], 'delegation_context: verbose\n'),
    agent('no_obs', 'No preamble.', [], 'delegation_context: false\n'),
    agent('ping', 'Calls pong.', ['pong']),
    agent('pong', 'Calls ping.', ['ping']),
    agent('memo', 'Talks to keeper twice.', ['keeper']),
    agent('keeper', 'Keeps a number.'),
    agent('batcher', 'Calls vault twice in one reply.', ['vault']),
    agent('vault', 'Keeps a number.'),
    agent('twin', 'Clones itself.', ['copy']),
    agent('copy', 'A copy.'),
    agent('boss', 'Delegates to broken and sleepy.', ['broken', 'sleepy']),
    agent('broken', 'Its model refuses it.'),
    agent('sleepy', 'Too slow.', [], 'timeout_s: 1\n'),
  ].map((a) => [a.name, a]),
);

const script = parseScript(
  `
agents:
  coordinator:
    - call: solver
      args: { message: "Please solve ARC task 007bbfb7." }
    - say: "The solver reports: tiled."
  solver:
    - call: observer
      args: { message: "What patterns do you notice?" }
    - say: "tiled"
  observer:
    - say: "The grid is tiled by itself."
  prober:
    - say: "I looked at the grid first."
    - calls:
        - { call: min_obs, args: { message: "m" } }
        - { call: verb_obs, args: { message: "v" } }
        - { call: no_obs, args: { message: "n" } }
    - say: "probed"
  min_obs:
    - say: "min"
  verb_obs:
    - say: "verb"
  no_obs:
    - say: "none"
  ping:
    - call: pong
      args: { message: "ping" }
    - say: "ping done"
  pong:
    - call: ping
      args: { message: "pong" }
    - say: "pong done"
  memo:
    - call: keeper
      args: { message: "Remember 42." }
    - call: keeper
      args: { message: "Which number?", thread: reuse }
    - say: "memo done"
  keeper:
    - say: "Remembered."
    - say: "42"
  batcher:
    - calls:
        - { call: vault, args: { message: "Remember 7." } }
        - { call: vault, args: { message: "Which number?", thread: reuse } }
    - say: "batcher done"
  vault:
    - { say: "Remembered.", delay_ms: 300 }
    - say: "7"
  twin:
    - say: "Noted: the secret is 7."
    - call: copy
      args: { message: "What was the secret?", thread: clone }
    - say: "twin done"
  copy:
    - say: "unused"
    - say: "The secret was 7."
  boss:
    - calls:
        - { call: broken, args: { message: "fail" } }
        - { call: sleepy, args: { message: "slow" } }
    - say: "boss carries on"
  broken:
    - { fail: 401, message: "broken on purpose" }
    - say: "never"

  sleepy:
    - { say: "too late", delay_ms: 5000 }
`,
  'delegation',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('delegation', {
    agents,
    script,
    modelLogFile: modelLog,
  });
});

after(async () => {
  await harness?.close();
});

function requestsOf(rootThreadId: string, agentName: string): ModelLogEntry[] {
  return harness
    .modelRequests()
    .filter((r) => r.headers['x-baton-root-thread'] === rootThreadId && r.agent === agentName);
}

/** The last user message the agent's first request carried: the delegated message. */
function delegatedMessage(rootThreadId: string, agentName: string): string {
  const messages = requestsOf(rootThreadId, agentName)[0]?.messages ?? [];
  return messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
}

function toolResult(rootThreadId: string, agentName: string, requestIndex: number, name: string): string | undefined {
  const request = requestsOf(rootThreadId, agentName)[requestIndex];
  const calls = request?.messages.flatMap((m) => (m.tool_calls ?? []) as { id: string; function: { name: string } }[]);
  // The latest call of that name (an agent may be called more than once in a conversation).
  const call = calls?.filter((c) => c.function.name === name).at(-1);
  return request?.messages.find((m) => m.role === 'tool' && m.tool_call_id === call?.id)?.content ?? undefined;
}

test('delegation: three levels, each delegated agent told who called it, why and through which chain', async () => {
  const root = uniqueThreadId('arc');
  const thread = await harness.client.startThread({ agent: 'coordinator', threadId: root });
  const result = await thread.send('Solve ARC task 007bbfb7');

  assert.equal(result.reply, 'The solver reports: tiled.');
  assert.equal(
    delegatedMessage(root, 'solver'),
    [
      '---',
      '[Delegation Context]',
      'Called by: coordinator',
      'coordinator is: "Orchestrates ARC solving by delegating to specialists."',
      'Delegation chain: human → coordinator → you (solver)',
      'Task context: Solve ARC task 007bbfb7',
      '---',
      '',
      'Please solve ARC task 007bbfb7.',
    ].join('\n'),
  );
  assert.equal(
    delegatedMessage(root, 'observer'),
    [
      '---',
      '[Delegation Context]',
      'Called by: solver',
      'solver is: "Solves ARC-AGI puzzles by finding transformation rules."',
      'Delegation chain: human → coordinator → solver → you (observer)',
      'Task context: Solve ARC task 007bbfb7',
      '---',
      '',
      'What patterns do you notice?',
    ].join('\n'),
  );
  assert.equal(delegatedMessage(root, 'coordinator'), 'Solve ARC task 007bbfb7', 'a human message gets no preamble');
  assert.equal(toolResult(root, 'solver', 1, 'observer'), 'The grid is tiled by itself.');
  assert.equal(toolResult(root, 'coordinator', 1, 'solver'), 'tiled');
  const rootTranscript = await listMessages(harness.pool, root);
  assert.equal(rootTranscript[0]?.content, 'Solve ARC task 007bbfb7', 'the stored human text is not changed');

  // Derived workflow ids with every Baton search attribute.
  const observer = await harness.client.temporal.workflow.getHandle(`baton/${root}/observer-1`).describe();
  assert.equal(observer.typedSearchAttributes.get(BatonSearchAttributes.rootThreadId), root);
  assert.equal(observer.typedSearchAttributes.get(BatonSearchAttributes.threadId), `${root}/observer-1`);
  assert.equal(observer.typedSearchAttributes.get(BatonSearchAttributes.parentThreadId), `${root}/solver-1`);
  assert.equal(observer.typedSearchAttributes.get(BatonSearchAttributes.agent), 'observer');

  // The tree, with statuses and token totals.
  const tree = await thread.tree();
  assert.equal(tree.agent, 'coordinator');
  assert.equal(tree.status, 'completed');
  const solver = tree.children[0];
  assert.deepEqual([solver?.agent, solver?.caller, solver?.status], ['solver', 'coordinator', 'completed']);
  const observerNode = solver?.children[0];
  assert.deepEqual(
    [observerNode?.agent, observerNode?.caller, observerNode?.status],
    ['observer', 'solver', 'completed'],
  );
  assert.deepEqual([tree.modelCalls, solver?.modelCalls, observerNode?.modelCalls], [2, 2, 1]);
  assert.ok((observerNode?.totalTokens ?? 0) > 0);
  await thread.end();
});

test('delegation: detail levels minimal, verbose and false, delegated concurrently', async () => {
  const root = uniqueThreadId('prober');
  const thread = await harness.client.startThread({ agent: 'prober', threadId: root });
  await thread.send('First look.');
  const result = await thread.send('Now probe all three.');
  assert.equal(result.reply, 'probed');

  assert.equal(
    delegatedMessage(root, 'min_obs'),
    '---\n[Delegation Context]\nCalled by: prober\nDelegation chain: human → prober → you (min_obs)\n---\n\nm',
  );
  assert.equal(
    delegatedMessage(root, 'verb_obs'),
    [
      '---',
      '[Delegation Context]',
      'Called by: prober',
      'prober is: "Probes detail levels."',
      'Delegation chain: human → prober → you (verb_obs)',
      'Task context: Now probe all three.',
      'prober last said: I looked at the grid first.',
      '---',
      '',
      'v',
    ].join('\n'),
  );
  assert.equal(delegatedMessage(root, 'no_obs'), 'n');
  const results = ['min_obs', 'verb_obs', 'no_obs'].map((name) => toolResult(root, 'prober', 2, name));
  assert.deepEqual(results, ['min', 'verb', 'none']);
  // All three ran while the prober waited: their turns overlapped.
  const children = await Promise.all(
    ['min_obs', 'verb_obs', 'no_obs'].map((name) =>
      harness.client.temporal.workflow.getHandle(`baton/${root}/${name}-1`).describe(),
    ),
  );
  const latestStart = Math.max(...children.map((c) => c.startTime.getTime()));
  const earliestClose = Math.min(...children.map((c) => c.closeTime?.getTime() ?? Infinity));
  assert.ok(latestStart <= earliestClose, 'every child started before any finished');
  await thread.end();
});

test('delegation: the task context is truncated with an ellipsis past the configured length', async () => {
  const root = uniqueThreadId('trunc');
  const thread = await harness.client.startThread({
    agent: 'coordinator',
    threadId: root,
    limits: { taskContextLimit: 20 },
  });
  await thread.send('Solve ARC task 007bbfb7 and explain every step in detail');
  assert.match(delegatedMessage(root, 'solver'), /\nTask context: Solve ARC task 007b…\n/);
  await thread.end();
});

test('delegation: depth beyond the limit is refused as a tool error, and the caller goes on', async () => {
  const root = uniqueThreadId('deep');
  const thread = await harness.client.startThread({ agent: 'coordinator', threadId: root, limits: { maxDepth: 1 } });
  const result = await thread.send('Solve ARC task 007bbfb7');

  // What the guard did, not the scripted reply: the refusal the solver received, no observer thread or request.
  assert.equal(result.status, 'completed');
  assert.equal(
    toolResult(root, 'solver', 1, 'observer'),
    "Error: delegating to 'observer' would exceed the maximum delegation depth of 1 (chain: human → coordinator → solver). Answer with what you have.",
  );
  assert.equal(requestsOf(root, 'observer').length, 0, 'the observer never ran');
  const tree = await thread.tree();
  assert.deepEqual(
    tree.children.map((child) => [child.agent, child.children.map((grandchild) => grandchild.agent)]),
    [['solver', []]],
    'no thread was opened for the refused delegation',
  );
  await thread.end();
});

test('delegation: a cycle beyond the repeat limit is refused as a tool error', async () => {
  const root = uniqueThreadId('cycle');
  const thread = await harness.client.startThread({ agent: 'ping', threadId: root, limits: { maxRepeats: 1 } });
  const result = await thread.send('Start the cycle.');

  // What the guard did, not the scripted reply: the refusal pong received, and no second ping in the tree.
  assert.equal(result.status, 'completed');
  const tree = await thread.tree();
  assert.deepEqual(
    tree.children.map((child) => [child.agent, child.children.map((grandchild) => grandchild.agent)]),
    [['pong', []]],
  );
  assert.equal(requestsOf(root, 'ping').length, 2, 'ping ran only as the root (its call and its final answer)');
  assert.equal(
    toolResult(root, 'pong', 1, 'ping'),
    "Error: delegating to 'ping' would put it in the delegation chain 2 times (chain: human → ping → pong), more than the limit of 1: this looks like a cycle. Answer with what you have.",
  );
  await thread.end();
});

test("delegation: thread 'reuse' continues the callee's conversation, so it remembers", async () => {
  const root = uniqueThreadId('memo');
  const thread = await harness.client.startThread({ agent: 'memo', threadId: root });
  await thread.send('Go.');

  const keeper = requestsOf(root, 'keeper');
  assert.equal(keeper.length, 2);
  assert.deepEqual(
    keeper[1]?.messages.map((m) => m.role),
    ['system', 'user', 'assistant', 'user'],
  );
  assert.match(keeper[1]?.messages[1]?.content ?? '', /Remember 42\.$/);
  assert.equal(keeper[1]?.messages[2]?.content, 'Remembered.');
  assert.equal(keeper[0]?.thread, keeper[1]?.thread, 'one thread for both calls');
  assert.equal(toolResult(root, 'memo', 2, 'keeper'), '42');
  // Two delegation workflows, one thread.
  const tree = await thread.tree();
  assert.equal(tree.children.length, 1);
  await thread.end();
});

test("delegation: a 'reuse' call in the same reply waits for the earlier call and continues its thread", async () => {
  const root = uniqueThreadId('batcher');
  const thread = await harness.client.startThread({ agent: 'batcher', threadId: root });
  await thread.send('Go.');

  const vault = requestsOf(root, 'vault');
  assert.equal(vault.length, 2);
  assert.equal(vault[0]?.thread, vault[1]?.thread, 'one thread, never two turns in it at once');
  assert.deepEqual(
    vault[1]?.messages.map((m) => m.role),
    ['system', 'user', 'assistant', 'user'],
  );
  const results = requestsOf(root, 'batcher')[1]
    ?.messages.filter((m) => m.role === 'tool')
    .map((m) => m.content);
  assert.deepEqual(results?.sort(), ['7', 'Remembered.']);
  await thread.end();
});

test("delegation: thread 'clone' seeds the callee with a copy of the caller's transcript", async () => {
  const root = uniqueThreadId('twin');
  const thread = await harness.client.startThread({ agent: 'twin', threadId: root });
  await thread.send('The secret is 7.');
  const result = await thread.send('Ask your copy.');
  assert.equal(result.reply, 'twin done');

  const [request] = requestsOf(root, 'copy');
  assert.deepEqual(
    request?.messages.slice(1, 4).map((m) => [m.role, m.content]),
    [
      ['user', 'The secret is 7.'],
      ['assistant', 'Noted: the secret is 7.'],
      ['user', 'Ask your copy.'],
    ],
  );
  assert.match(request?.messages[4]?.content ?? '', /\n\nWhat was the secret\?$/);
  assert.equal(toolResult(root, 'twin', 2, 'copy'), 'The secret was 7.');
  const rootRows = await listMessages(harness.pool, root);
  assert.equal(rootRows.length, 6, "the caller's own transcript is unchanged by the copy");
  await thread.end();
});

test('delegation: a failing and a timed-out child fail only their own tool calls', async () => {
  const root = uniqueThreadId('boss');
  const thread = await harness.client.startThread({ agent: 'boss', threadId: root });
  const result = await thread.send('Delegate.');

  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'boss carries on');
  assert.match(
    toolResult(root, 'boss', 1, 'broken') ?? '',
    /^Error: broken failed: model endpoint answered 401 \(provider 'default', model 'baton-scripted'\): .*broken on purpose/,
  );
  assert.equal(
    toolResult(root, 'boss', 1, 'sleepy'),
    'Error: sleepy failed: it did not finish within 1 seconds and was stopped',
  );
  const tree = await thread.tree();
  const statuses = Object.fromEntries(tree.children.map((child) => [child.agent, [child.status, child.lastError]]));
  assert.equal(statuses.broken?.[0], 'failed');
  assert.deepEqual(statuses.sleepy, ['failed', 'it did not finish within 1 seconds and was stopped']);
  assert.equal(tree.status, 'completed');
  await thread.end();
});
