/**
 * A model reply may give two tool calls one id (an endpoint numbering calls from 0 in every reply, a confused or a
 * hostile model). Each call is handled as itself: it runs with its own arguments, its approval shows and runs its own
 * arguments, and its result answers it alone, because the reply is stored with the repeated id made distinct. A
 * reply stored with a repeated id (by a worker from before) runs none of the calls sharing it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import type { ThreadHandle } from '../../client';
import { defineTool } from '../../activities/tools/types';
import { approvalOperationId } from '../../common/ids';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { directActivities } from './direct-activities';
import { settle, waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'tool-call-ids-'));

/** Every run of `pay`, by thread: the cents it paid. */
const payments = new Map<string, number[]>();
const pay = defineTool({
  name: 'pay',
  description: 'Pays an amount.',
  parameters: z.object({ cents: z.int().min(1) }),
  sideEffects: true,
  // Small amounts go ahead; more than a euro waits for a person.
  needsApproval: (args) => args.cents > 100,
  run: ({ cents }, ctx) => {
    payments.set(ctx.threadId, [...(payments.get(ctx.threadId) ?? []), cents]);
    return `paid ${cents}`;
  },
});

const agents: AgentRegistry = new Map(
  ['twin', 'gated'].map((name) => [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: Pays.\ncapabilities: [pay]\n---\nYou pay.\n`, `${name}.md`),
  ]),
);

const script = parseScript(
  `
agents:
  twin:
    - calls:
        - { call: pay, args: { cents: 5 }, id: same }
        - { call: pay, args: { cents: 7 }, id: same }
    - say: "Paid both."
  gated:
    - calls:
        - { call: pay, args: { cents: 5 }, id: same }
        - { call: pay, args: { cents: 500 }, id: same }
    - say: "Paid what was approved."
`,
  'tool-call-ids',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('tool-call-ids', {
    agents,
    script,
    tools: [pay],
    modelLogFile: path.join(workDir, 'model.jsonl'),
  });
});

after(async () => {
  await harness?.close();
});

/** Each call of the thread's replies with its arguments and the result that answers it. */
async function calls(threadId: string): Promise<{ id: string; args: string; result: string[] }[]> {
  const transcript = await listMessages(harness.pool, threadId);
  return transcript.flatMap((message) =>
    (message.toolCalls ?? []).map((call) => ({
      id: call.id,
      args: call.arguments,
      result: transcript.filter((m) => m.toolCallId === call.id).map((m) => m.content ?? ''),
    })),
  );
}

test('tool call ids: two calls with one id in a reply each run with their own arguments, once', async () => {
  const threadId = uniqueThreadId('twin');
  const thread = await harness.client.startThread({ agent: 'twin', threadId });
  try {
    assert.equal((await thread.send('Pay both.')).reply, 'Paid both.');
    assert.deepEqual(
      (payments.get(threadId) ?? []).sort((a, b) => a - b),
      [5, 7],
      'each call paid its own amount, once',
    );
    assert.deepEqual(await calls(threadId), [
      { id: 'same', args: '{"cents":5}', result: ['paid 5'] },
      { id: 'same#2', args: '{"cents":7}', result: ['paid 7'] },
    ]);
  } finally {
    await thread.end();
  }
});

test('tool call ids: a repeated id needing approval is approved and run with its own arguments, and the other call is not confused with it', async () => {
  const threadId = uniqueThreadId('gated');
  const thread: ThreadHandle = await harness.client.startThread({ agent: 'gated', threadId });
  try {
    const sending = settle(thread.send('Pay both.'));
    const [approval] = await waitFor('the approval of the second call', 60_000, async () => {
      const rows = await thread.approvals();
      return rows.length > 0 ? rows : undefined;
    });
    // What the person is asked to approve is the second call, with its own arguments, under its own id.
    assert.equal(approval?.approvalId, 'a1');
    assert.equal(approval?.arguments, '{"cents":500}');
    assert.equal(approval?.toolCallId, 'same#2');
    await waitFor('the first call to run', 60_000, () =>
      (payments.get(threadId) ?? []).length > 0 ? true : undefined,
    );
    assert.deepEqual(payments.get(threadId), [5], 'nothing that needs approval ran before it');

    await thread.approve('a1', { by: 'alice' });
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    assert.equal(outcome.value.reply, 'Paid what was approved.');
    assert.deepEqual(payments.get(threadId), [5, 500], 'the approved call ran its own arguments, once');
    assert.deepEqual(await calls(threadId), [
      { id: 'same', args: '{"cents":5}', result: ['paid 5'] },
      { id: 'same#2', args: '{"cents":500}', result: ['paid 500'] },
    ]);
    const all = await thread.approvals({ all: true });
    assert.deepEqual(
      all.map((row) => [row.approvalId, row.toolCallId, row.status, row.decidedBy]),
      [['a1', 'same#2', 'approved', 'alice']],
      'one approval, of the call that needed it',
    );
  } finally {
    await thread.end();
  }
});

test('tool call ids: a stored reply that repeats an id runs none of the calls sharing it, and opens no approval for them', async () => {
  const { activities, run, storeReply } = directActivities(harness, {
    agents,
    workDir,
    tools: [pay],
    source: 'tool-call-ids.test.ts',
  });
  const threadId = uniqueThreadId('stored-twin');
  // A reply as a worker from before distinct ids stored it.
  const { scope, version, seq } = await storeReply(threadId, 'gated', [
    { id: 'same', name: 'pay', arguments: '{"cents":5}' },
    { id: 'same', name: 'pay', arguments: '{"cents":7}' },
  ]);
  for (const index of [0, 1]) {
    await run(activities.executeToolCall, {
      scope,
      world: 'default',
      agentVersion: version,
      operationId: `${threadId}:tool:0:${index}`,
      messageSeq: seq,
      toolCallId: 'same',
    });
  }
  const results = (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, [
    "Error: this reply has more than one tool call with the id 'same', so none of them ran.",
    "Error: this reply has more than one tool call with the id 'same', so none of them ran.",
  ]);
  assert.equal(payments.get(threadId), undefined, 'pay never ran');
  await assert.rejects(
    run(activities.openApproval, {
      scope,
      operationId: approvalOperationId(`${threadId}:tool:0:1`),
      workflowId: 'none',
      messageSeq: seq,
      toolCallId: 'same',
    }),
    /tool call 'same' is not in message \d+ of thread '.+' exactly once/,
  );
  assert.deepEqual(await harness.client.thread(threadId).approvals({ all: true }), [], 'no approval was opened');
});
