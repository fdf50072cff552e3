/**
 * Durable approvals: a tool call that needs a person's approval waits for it in its turn workflow (no activity
 * running), is listed at the root of its tree, runs once approved, and is told why when rejected, timed out or
 * cancelled; at any depth (delegated and forked agents) and for Baton's own tools through an agent's `approval`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import type { ThreadHandle } from '../../client';
import { defineTool } from '../../activities/tools/types';
import { approvalOperationId } from '../../common/ids';
import { listMessages, type TranscriptMessage } from '../../db/transcripts';
import { closeApproval, type ApprovalRow } from '../../db/approvals';
import { closeQuestion } from '../../db/questions';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { directActivities } from './direct-activities';
import { settle, waitFor, type Settled } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'approvals-'));

/** Every run of `deploy`, with its arguments. */
const deployments: unknown[] = [];
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service to an environment.',
  parameters: z.object({ service: z.string(), env: z.enum(['staging', 'production']) }),
  sideEffects: true,
  // Staging goes ahead; production waits for a person.
  needsApproval: (args) => args.env === 'production',
  run: (args) => {
    deployments.push(args);
    return `deployed ${args.service} to ${args.env}`;
  },
});

/** Every run of `purge`, and every time its `needsApproval` threw. */
const purges: unknown[] = [];
const approvalChecks = { thrown: 0 };
const purge = defineTool({
  name: 'purge',
  description: 'Purges a cache.',
  parameters: z.object({ target: z.string() }),
  sideEffects: true,
  // A check that cannot decide (its policy service is down): README says a throw counts as needing approval.
  needsApproval: () => {
    approvalChecks.thrown += 1;
    throw new Error('the policy service is down');
  },
  run: (args) => {
    purges.push(args);
    return `purged ${args.target}`;
  },
});

/** How often `deploy` ran for production, in any test. */
const productionDeploys = () => deployments.filter((d) => (d as { env: string }).env === 'production').length;

function agent(name: string, fields: string): [string, ReturnType<typeof parseAgentFile>] {
  return [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name} agent.\n${fields}\n---\nYou act.\n`, name),
  ];
}

const agents: AgentRegistry = new Map([
  agent('releaser', 'capabilities: [deploy]'),
  agent('archivist', 'capabilities: [load_arc_task]\napproval: [{ tool: load_arc_task, timeout_s: 2 }]'),
  agent('manager', 'capabilities: [releaser]'),
  agent('fanout', 'capabilities: [fork_join, releaser]'),
  agent('hasty', 'capabilities: [fork_join, releaser]'),
  agent('asker', 'capabilities: []'),
  agent('purger', 'capabilities: [purge]'),
]);

const script = parseScript(
  `
agents:
  releaser:
    - calls:
        - { call: deploy, args: { service: "api", env: "staging" } }
        - { call: deploy, args: { service: "api", env: "production" } }
    - say: "Released."
  archivist:
    - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - say: "Nobody let me read it."
  manager:
    - { call: releaser, args: { message: "Release the api." } }
    - say: "The releaser is done."
  fanout:
    - call: fork_join
      args: { tasks: [ { agent: releaser, message: "Release one." }, { agent: releaser, message: "Release two." } ] }
    - say: "Both released."
  hasty:
    - call: fork_join
      args: { deadline_seconds: 3, tasks: [ { agent: releaser, message: "Release, if someone approves in time." } ] }
    - say: "The fork ran out of time."
  asker:
    - call: ask_human
      args: { question: "Which day?" }
    - say: "Asked."
  purger:
    - { call: purge, args: { target: "cache" } }
    - say: "Purged."
`,
  'approvals',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('approvals', {
    agents,
    script,
    tools: [deploy, purge],
    modelLogFile: path.join(workDir, 'model.jsonl'),
  });
});

after(async () => {
  await harness?.close();
});

/** Waits until the tree of `thread` has `count` pending approvals, and returns them. */
function pendingApprovals(thread: ThreadHandle, count: number): Promise<ApprovalRow[]> {
  return waitFor(`${count} pending approval(s) in ${thread.threadId}`, 60_000, async () => {
    const rows = await thread.approvals();
    return rows.length >= count ? rows : undefined;
  });
}

/** The result recorded for each call of a thread, in the order of the calls. */
function callResults(transcript: readonly TranscriptMessage[]): { name: string; args: string; result: string }[] {
  const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
  return transcript.flatMap((message) =>
    (message.toolCalls ?? []).map((call) => ({
      name: call.name,
      args: call.arguments,
      result: resultOf.get(call.id) ?? '(no result)',
    })),
  );
}

test('approvals: a call that needs approval waits, is listed, and runs once approved; the other call did not wait', async () => {
  const threadId = uniqueThreadId('approve');
  const thread = await harness.client.startThread({ agent: 'releaser', threadId });
  const sending = settle(thread.send('Release the api.'));
  const [pending] = await pendingApprovals(thread, 1);
  assert.equal(pending?.approvalId, 'a1');
  assert.equal(pending?.tool, 'deploy');
  assert.deepEqual(JSON.parse(pending?.arguments ?? '{}'), { service: 'api', env: 'production' });
  assert.equal(pending?.agent, 'releaser');
  assert.equal(pending?.threadId, threadId);
  assert.equal(pending?.status, 'pending');

  // While it waits, the production deploy has not run, and once the staging deploy beside it is done, the turn
  // waits with no activity running.
  const turn = harness.client.temporal.workflow.getHandle(pending?.workflowId ?? '');
  await waitFor('the staging deploy to finish', 30_000, async () =>
    ((await turn.describe()).raw.pendingActivities?.length ?? 0) === 0 ? true : undefined,
  );
  assert.equal(productionDeploys(), 0);
  assert.equal((await thread.approvals())[0]?.status, 'pending', 'still waiting, with nothing running');

  assert.deepEqual(await thread.approve('a1', { by: 'alice' }), { approvalId: 'a1', status: 'approved' });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Released.');
  assert.deepEqual(
    callResults(await listMessages(harness.pool, threadId)).map((call) => call.result),
    ['deployed api to staging', 'deployed api to production'],
  );
  const [decided] = await thread.approvals({ all: true });
  assert.equal(decided?.status, 'approved');
  assert.equal(decided?.decidedBy, 'alice');
  assert.deepEqual(await thread.approvals(), [], 'nothing is pending any more');
  await assert.rejects(thread.approve('a1'), /approval 'a1' is already approved/);
  await assert.rejects(thread.approve('a9'), new RegExp(`thread '${threadId}' has no approval 'a9'`));
});

test('approvals: a needsApproval function that throws counts as needing approval: the call waits, then runs once approved', async () => {
  const threadId = uniqueThreadId('thrown');
  const thread = await harness.client.startThread({ agent: 'purger', threadId });
  const sending = settle(thread.send('Purge the cache.'));
  const [pending] = await pendingApprovals(thread, 1);
  assert.equal(pending?.tool, 'purge');
  assert.deepEqual(JSON.parse(pending?.arguments ?? '{}'), { target: 'cache' });
  assert.ok(approvalChecks.thrown > 0, 'the check was asked, and threw');
  assert.deepEqual(purges, [], 'the call did not run while it waited');
  await thread.approve(pending?.approvalId ?? '', { by: 'alice' });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Purged.');
  assert.deepEqual(purges, [{ target: 'cache' }], 'it ran once, after the approval');
  assert.deepEqual(
    callResults(await listMessages(harness.pool, threadId)).map((call) => call.result),
    ['purged cache'],
  );
  await thread.end();
});

test('approvals: a rejection becomes the tool result with its reason, and the call does not run', async () => {
  const threadId = uniqueThreadId('reject');
  const thread = await harness.client.startThread({ agent: 'releaser', threadId });
  const sending = settle(thread.send('Release the api.'));
  await pendingApprovals(thread, 1);
  const ranBefore = productionDeploys();
  await thread.reject('a1', { by: 'bob', reason: 'no production deploys on a Friday' });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  const [, production] = callResults(await listMessages(harness.pool, threadId));
  assert.equal(
    production?.result,
    "Error: bob rejected this call of 'deploy', so it did not run. Reason: no production deploys on a Friday",
  );
  assert.equal(productionDeploys(), ranBefore, 'the rejected call never ran');
  const [row] = await thread.approvals({ all: true });
  assert.equal(row?.status, 'rejected');
  assert.equal(row?.reason, 'no production deploys on a Friday');
});

test("approvals: an agent's approval rule gates Baton's own tool, and its timeout rejects the call", async () => {
  const threadId = uniqueThreadId('expire');
  const thread = await harness.client.startThread({ agent: 'archivist', threadId });
  const result = await thread.send('Load the task.');
  assert.equal(result.reply, 'Nobody let me read it.');
  const [call] = callResults(await listMessages(harness.pool, threadId));
  assert.equal(
    call?.result,
    "Error: nobody approved this call of 'load_arc_task' within 2 seconds, so it did not run.",
  );
  const [row] = await thread.approvals({ all: true });
  assert.equal(row?.status, 'expired');
  assert.ok(row?.expiresAt instanceof Date);
  await assert.rejects(thread.approve('a1'), /approval 'a1' is already expired/);
});

test('approvals: a delegated agent waits at any depth, and the approval surfaces at the root', async () => {
  const threadId = uniqueThreadId('delegated');
  const thread = await harness.client.startThread({ agent: 'manager', threadId });
  const sending = settle(thread.send('Get the api released.'));
  const [pending] = await pendingApprovals(thread, 1);
  assert.equal(pending?.threadId, `${threadId}/releaser-1`, 'the call was made in the delegated thread');
  assert.equal(pending?.workflowId, `baton/${threadId}/releaser-1`);
  await thread.approve(pending?.approvalId ?? '');
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'The releaser is done.');
  const [, production] = callResults(await listMessages(harness.pool, `${threadId}/releaser-1`));
  assert.equal(production?.result, 'deployed api to production');
});

test('approvals: forked tasks each wait for their own approval, listed together at the root', async () => {
  const threadId = uniqueThreadId('forked');
  const thread = await harness.client.startThread({ agent: 'fanout', threadId });
  const sending = settle(thread.send('Release twice.'));
  const pending = await pendingApprovals(thread, 2);
  assert.deepEqual(pending.map((row) => row.approvalId).sort(), ['a1', 'a2']);
  assert.deepEqual(pending.map((row) => row.threadId).sort(), [`${threadId}/releaser-1`, `${threadId}/releaser-2`]);
  for (const row of pending) await thread.approve(row.approvalId);
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Both released.');
  for (const task of ['releaser-1', 'releaser-2']) {
    const [, production] = callResults(await listMessages(harness.pool, `${threadId}/${task}`));
    assert.equal(production?.result, 'deployed api to production');
  }
});

test("approvals: a reclaimed fork task's pending approval is closed, and can no longer be approved", async () => {
  const threadId = uniqueThreadId('reclaimed');
  const thread = await harness.client.startThread({ agent: 'hasty', threadId });
  const result = await thread.send('Release, quickly.');
  assert.equal(result.reply, 'The fork ran out of time.');
  const [row] = await thread.approvals({ all: true });
  assert.equal(row?.status, 'cancelled');
  assert.match(row?.reason ?? '', /^its turn was reclaimed: /);
  await assert.rejects(thread.approve(row?.approvalId ?? ''), /is already cancelled/);
});

test('approvals: the tool activity itself refuses a call that needs approval and has none approved', async () => {
  // What a worker whose workflow code predates approvals would do during a rolling deploy: run the call at once.
  const { activities, run, storeReply } = directActivities(harness, {
    agents,
    workDir,
    tools: [deploy, purge],
    source: 'approvals.test.ts',
  });
  const threadId = uniqueThreadId('unapproved');
  // The model's reply, stored as the model activity stores one.
  const { scope, version, seq } = await storeReply(threadId, 'releaser', [
    { id: 'call-1', name: 'deploy', arguments: '{"service":"api","env":"production"}' },
  ]);
  const call = (operationId: string) =>
    run(activities.executeToolCall, {
      scope,
      world: 'default',
      agentVersion: version,
      operationId,
      messageSeq: seq,
      toolCallId: 'call-1',
    });
  const ranBefore = productionDeploys();
  await call(`${threadId}:tool:0:0`);
  // An approval opened and rejected for another operation of the same call does not count either.
  const { approvalId } = await run(activities.openApproval, {
    scope,
    operationId: approvalOperationId(`${threadId}:tool:1:0`),
    workflowId: 'none',
    messageSeq: seq,
    toolCallId: 'call-1',
  });
  await run(activities.closeApproval, {
    rootThreadId: threadId,
    approvalId,
    outcome: { status: 'rejected', decidedBy: 'carol' },
  });
  await call(`${threadId}:tool:1:0`);
  const results = (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, [
    "Error: this call of 'deploy' needs a person's approval and none was asked for, so it did not run.",
    "Error: this call of 'deploy' needs a person's approval and its approval is rejected, so it did not run.",
  ]);
  assert.equal(productionDeploys(), ranBefore, 'the call never ran');
});

/**
 * What a decision's first half left when its Update was lost (the worker died in the task before the acceptance was
 * recorded, the server restarted, the client gave up): the row decided in Postgres, the turn never told. Turns from
 * before `baton-decisions-after-acceptance` wrote the row first; a handler's activity whose commit was not reported
 * leaves the same.
 */
async function releaseWithLostApproval(
  name: string,
): Promise<{ thread: ThreadHandle; sending: Promise<Settled<Awaited<ReturnType<ThreadHandle['send']>>>> }> {
  const threadId = uniqueThreadId(name);
  const thread = await harness.client.startThread({ agent: 'releaser', threadId });
  const sending = settle(thread.send('Release the api.'));
  const [pending] = await pendingApprovals(thread, 1);
  assert.equal(pending?.approvalId, 'a1');
  const written = await closeApproval(harness.pool, threadId, 'a1', { status: 'approved', decidedBy: 'alice' });
  assert.equal(written?.status, 'approved');
  return { thread, sending };
}

test('approvals: a decision stored whose Update was lost is finished by deciding it again, and the turn and the row agree', async () => {
  const before = productionDeploys();
  const { thread, sending } = await releaseWithLostApproval('lost-approve');
  try {
    assert.deepEqual(await thread.approve('a1', { by: 'alice' }), { approvalId: 'a1', status: 'approved' });
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    assert.equal(outcome.value.reply, 'Released.');
    assert.equal(productionDeploys(), before + 1, 'the approved call ran, once');
    const [row] = await thread.approvals({ all: true });
    assert.deepEqual([row?.status, row?.decidedBy], ['approved', 'alice']);
    // Now the turn has it: deciding again is refused as before.
    await assert.rejects(thread.approve('a1'), /approval 'a1' is already approved/);
  } finally {
    await thread.end();
  }
});

test('approvals: a rejection of a call whose approval was stored but never heard is refused, and the turn goes on as the row says', async () => {
  const before = productionDeploys();
  const { thread, sending } = await releaseWithLostApproval('lost-then-rejected');
  try {
    await assert.rejects(thread.reject('a1', { by: 'bob', reason: 'too late' }), /approval 'a1' is already approved/);
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    assert.equal(outcome.value.reply, 'Released.');
    assert.equal(productionDeploys(), before + 1, 'the call ran as approved');
    const results = callResults(await listMessages(harness.pool, thread.threadId));
    assert.equal(results[1]?.result, 'deployed api to production');
    const [row] = await thread.approvals({ all: true });
    assert.deepEqual([row?.status, row?.decidedBy, row?.reason], ['approved', 'alice', null]);
  } finally {
    await thread.end();
  }
});

test('approvals: an answer stored whose Update was lost is finished by answering it again', async () => {
  const threadId = uniqueThreadId('lost-answer');
  const thread = await harness.client.startThread({ agent: 'asker', threadId });
  try {
    const sending = settle(thread.send('Ask me.'));
    await waitFor('the question', 60_000, async () => ((await thread.questions()).length > 0 ? true : undefined));
    await closeQuestion(harness.pool, threadId, 'q1', { status: 'answered', answer: 'Tuesday' });
    assert.deepEqual(await thread.answer('q1', 'Tuesday'), { questionId: 'q1', status: 'answered' });
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    assert.equal(outcome.value.reply, 'Asked.');
    const tool = (await listMessages(harness.pool, threadId)).find((message) => message.role === 'tool');
    assert.equal(tool?.content, 'The human answered: Tuesday');
    await assert.rejects(thread.answer('q1', 'Tuesday'), /question 'q1' is already answered/);
  } finally {
    await thread.end();
  }
});

test('approvals: a decision is written to Postgres only after the turn accepted it, by an activity of its own', async () => {
  const threadId = uniqueThreadId('durable-decision');
  const thread = await harness.client.startThread({ agent: 'releaser', threadId });
  try {
    const sending = settle(thread.send('Release the api.'));
    const [pending] = await pendingApprovals(thread, 1);
    await thread.approve('a1', { by: 'alice' });
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    const history = await harness.client.temporal.workflow.getHandle(pending?.workflowId ?? '').fetchHistory();
    const events = history.events ?? [];
    const accepted = events.find((event) => event.workflowExecutionUpdateAcceptedEventAttributes);
    const scheduled = events.find(
      (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'closeApproval',
    );
    assert.ok(accepted && scheduled, 'the decision was recorded by an activity (not a local one inside the task)');
    const started = events.find(
      (event) =>
        event.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString(),
    );
    // The write runs in the activity, which starts only once the task that accepted the Update was recorded.
    assert.ok(Number(started?.eventId) > Number(accepted.eventId), 'the write started after the acceptance');
  } finally {
    await thread.end();
  }
});
