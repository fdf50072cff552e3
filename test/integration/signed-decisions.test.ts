/**
 * Signed decisions, on the real stack: anyone who reaches the Temporal frontend can send a waiting turn's
 * `decideApproval` Update (a model's shell command with egress into the deployment's network, a compromised MCP
 * server, another tenant of the namespace), so a worker with a decision key writes a decision only when it carries a
 * proof made with that key. Sent straight to the turn with the Temporal client, without a proof or with a wrong one,
 * the Update is refused, the approval stays pending, the call does not run and the turn goes on waiting; the same
 * decision through a client connected with the key runs the call.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { z } from 'zod';
import { connect, BatonClientError, type ThreadHandle } from '../../client';
import { createApprovalActivities } from '../../activities/approvals';
import { decisionProof } from '../../activities/decision-proofs';
import { defineTool } from '../../activities/tools/types';
import { threadWorkflowId } from '../../common/ids';
import { closeApproval as closeApprovalRow, findApproval, type ApprovalRow } from '../../db/approvals';
import { listMessages } from '../../db/transcripts';
import type { DecideApprovalInput } from '../../common/types';
import { parseScript } from '../../scripted-model';
import { generateAccessToken } from '../../stack/access-token';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { settle, waitFor } from '../chaos/waiting';

const env = readTestEnv();

/** Every payment `pay` really made. */
const paid: number[] = [];
const pay = defineTool({
  name: 'pay',
  description: 'Pays an amount.',
  parameters: z.object({ amount: z.number() }),
  sideEffects: true,
  needsApproval: true,
  run: ({ amount }) => {
    paid.push(amount);
    return `paid ${amount}`;
  },
});

const agents: AgentRegistry = new Map([
  ['payer', parseAgentFile('---\nname: payer\ndescription: Pays.\ncapabilities: [pay]\n---\nPay.\n', 'payer')],
]);

const script = parseScript(
  `
agents:
  payer:
    - { call: pay, args: { amount: 1000 } }
    - say: "Done."
`,
  'signed-decisions',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('signed-decisions', { agents, script, tools: [pay] });
});

after(async () => {
  await harness?.close();
});

/** Starts a payment and waits until it waits for its approval. */
async function paymentWaiting(name: string) {
  const threadId = uniqueThreadId(name);
  const thread = await harness.client.startThread({ agent: 'payer', threadId });
  const sending = settle(thread.send('Pay the invoice.'));
  const pending = await waitFor('the approval', 60_000, async () => (await thread.approvals())[0]);
  assert.equal(pending.approvalId, 'a1');
  return { thread, sending, pending };
}

/** The failure's chain, outermost first, as `type: message` where a failure has a type. */
function failureChain(error: unknown): string[] {
  const chain: string[] = [];
  for (let current = error; current instanceof Error && chain.length < 10; current = current.cause) {
    const type = (current as { type?: unknown }).type;
    chain.push(typeof type === 'string' ? `${type}: ${current.message}` : current.message);
  }
  return chain;
}

async function stillPending(thread: ThreadHandle): Promise<ApprovalRow> {
  const row = await findApproval(harness.pool, thread.threadId, 'a1');
  assert.ok(row);
  assert.deepEqual([row.status, row.decidedBy, row.reason], ['pending', null, null], 'nothing was written');
  return row;
}

test('signed decisions: a decideApproval Update straight to the turn without a valid proof is refused; the approval waits', async () => {
  const { thread, sending, pending } = await paymentWaiting('unsigned-update');
  const root = thread.threadId;
  const key = harness.decisionKey ?? '';
  assert.ok(key.length >= 32, 'the harness signs with a key of its own');
  const turn = harness.client.temporal.workflow.getHandle(pending.workflowId);
  const attempts: [string, DecideApprovalInput][] = [
    ['no proof', { approvalId: 'a1', approve: true, decidedBy: 'the model' }],
    ['no proof, a rejection', { approvalId: 'a1', approve: false, decidedBy: 'the model', reason: 'spite' }],
    ['a made-up proof', { approvalId: 'a1', approve: true, proof: `v1.${'A'.repeat(43)}` }],
    ['not a proof at all', { approvalId: 'a1', approve: true, proof: 'approved, honestly' }],
    [
      'a proof under another key',
      {
        approvalId: 'a1',
        approve: true,
        proof: decisionProof(generateAccessToken(), { rootThreadId: root, approvalId: 'a1', approve: true }),
      },
    ],
    [
      'a proof for another approval',
      {
        approvalId: 'a1',
        approve: true,
        proof: decisionProof(key, { rootThreadId: root, approvalId: 'a2', approve: true }),
      },
    ],
    [
      'a proof for another root',
      {
        approvalId: 'a1',
        approve: true,
        proof: decisionProof(key, { rootThreadId: `${root}-other`, approvalId: 'a1', approve: true }),
      },
    ],
    [
      "a rejection's proof on an approval",
      {
        approvalId: 'a1',
        approve: true,
        proof: decisionProof(key, { rootThreadId: root, approvalId: 'a1', approve: false }),
      },
    ],
  ];
  for (const [what, input] of attempts) {
    const failure = await turn.executeUpdate('decideApproval', { args: [input] }).then(
      () => assert.fail(`${what}: the Update was accepted`),
      (error: unknown) => error,
    );
    assert.ok(failure instanceof WorkflowUpdateFailedError, `${what}: ${String(failure)}`);
    const refusal = failureChain(failure).find((line) => line.startsWith('Approval.Unauthorized: '));
    assert.match(
      refusal ?? failureChain(failure).join(' <- '),
      new RegExp(
        `^Approval\\.Unauthorized: approval 'a1' of thread '${root}' was not (approved|rejected): the decision carries ` +
          `no (valid )?proof, and only a client holding this deployment's decision key \\(BATON_DECISION_KEY\\) can ` +
          'decide approvals$',
      ),
      what,
    );
    await stillPending(thread);
  }
  assert.deepEqual(paid, [], 'nothing was paid');
  // A refused decision failed its Update alone: the turn goes on waiting for a real one.
  assert.equal((await turn.describe()).status.name, 'RUNNING');
  assert.equal((await thread.approvals())[0]?.status, 'pending');

  // The same decision through a client holding the key runs the call.
  assert.deepEqual(await harness.client.thread(root).approve('a1', { by: 'alice' }), {
    approvalId: 'a1',
    status: 'approved',
  });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Done.');
  assert.deepEqual(paid, [1000], 'paid once, once approved');
  const [decided] = await thread.approvals({ all: true });
  assert.deepEqual([decided?.status, decided?.decidedBy], ['approved', 'alice']);
  const results = (await listMessages(harness.pool, root)).filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, ['paid 1000']);
});

test('signed decisions: a client without the key, or with another, is told so; the approval waits for one with it', async () => {
  const { thread, sending } = await paymentWaiting('client-keys');
  const paidBefore = paid.length;
  const connectWith = (decisionKey?: string) =>
    connect({
      address: env.temporalAddress,
      taskQueue: harness.taskQueue,
      databaseUrl: env.databaseUrl,
      ...(decisionKey === undefined ? {} : { decisionKey }),
    });
  const unsigned = await connectWith();
  const wrong = await connectWith(generateAccessToken());
  try {
    await assert.rejects(unsigned.thread(thread.threadId).approve('a1', { by: 'mallory' }), (error: unknown) => {
      assert.ok(error instanceof BatonClientError, String(error));
      assert.match(error.message, /^approval 'a1' of thread '\S+' was not approved: the decision carries no proof, /);
      assert.match(
        error.message,
        /; this client has no decision key: connect with `decisionKey` \(the CLI reads BATON_DECISION_KEY/,
      );
      return true;
    });
    await assert.rejects(wrong.thread(thread.threadId).reject('a1', { by: 'mallory' }), (error: unknown) => {
      assert.ok(error instanceof BatonClientError, String(error));
      assert.match(error.message, /was not rejected: the decision carries no valid proof, /);
      assert.match(
        error.message,
        /; this client's decision key is not the workers': give both the same BATON_DECISION_KEY$/,
      );
      return true;
    });
    await stillPending(thread);

    // A decision stored that its turn never heard is finished by deciding again: signed too, so a client without the
    // key cannot hand it over either, and is told why rather than that it is already decided.
    await closeApprovalRow(harness.pool, thread.threadId, 'a1', { status: 'rejected', decidedBy: 'bob', reason: 'no' });
    await assert.rejects(
      unsigned.thread(thread.threadId).reject('a1'),
      (error: unknown) =>
        error instanceof BatonClientError && /carries no proof.*this client has no decision key/.test(error.message),
    );
    assert.deepEqual(await harness.client.thread(thread.threadId).reject('a1', { by: 'bob' }), {
      approvalId: 'a1',
      status: 'rejected',
    });
    const outcome = await sending;
    if (!outcome.ok) throw outcome.error;
    assert.equal(paid.length, paidBefore, 'the rejected payment was not made');
  } finally {
    await unsigned.close();
    await wrong.close();
  }
});

test('signed decisions: closeApproval with a key writes only a proven decision; expiries and cancellations need none', async () => {
  const key = generateAccessToken();
  const keyed = createApprovalActivities({ pool: harness.pool, decisionKey: key });
  const open = createApprovalActivities({ pool: harness.pool });
  const run = <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> =>
    new MockActivityEnvironment().run(fn, ...args);
  const opened: { threadId: string; sending: Promise<unknown> }[] = [];
  /** A pending approval of a thread of its own (a stored reply with one call). */
  const approvalOf = async (name: string) => {
    const { thread, sending } = await paymentWaiting(name);
    opened.push({ threadId: thread.threadId, sending });
    return thread.threadId;
  };
  try {
    const root = await approvalOf('activity-keyed');
    const decided = { status: 'approved', decidedBy: 'alice' } as const;
    await assert.rejects(
      run(keyed.closeApproval, { rootThreadId: root, approvalId: 'a1', outcome: decided }),
      (error: unknown) => {
        assert.match(String((error as Error).message), /carries no proof/);
        assert.equal((error as { type?: string }).type, 'Approval.Unauthorized');
        assert.equal((error as { nonRetryable?: boolean }).nonRetryable, true);
        return true;
      },
    );
    assert.equal((await findApproval(harness.pool, root, 'a1'))?.status, 'pending');
    const proof = decisionProof(key, { rootThreadId: root, approvalId: 'a1', approve: true });
    assert.deepEqual(
      await run(keyed.closeApproval, { rootThreadId: root, approvalId: 'a1', outcome: decided, proof }),
      decided,
    );

    // The turn's own ends of a wait carry no proof and need none.
    const expiring = await approvalOf('activity-expired');
    assert.deepEqual(
      await run(keyed.closeApproval, { rootThreadId: expiring, approvalId: 'a1', outcome: { status: 'expired' } }),
      { status: 'expired' },
    );
    const cancelled = await approvalOf('activity-cancelled');
    const cancel = { status: 'cancelled', reason: 'its turn was reclaimed' } as const;
    assert.deepEqual(
      await run(keyed.closeApproval, { rootThreadId: cancelled, approvalId: 'a1', outcome: cancel }),
      cancel,
    );

    // A worker without a key checks nothing, as before signed decisions.
    const unchecked = await approvalOf('activity-unkeyed');
    assert.deepEqual(
      await run(open.closeApproval, { rootThreadId: unchecked, approvalId: 'a1', outcome: decided }),
      decided,
    );
  } finally {
    // These turns wait for decisions their workflows never hear: terminate them, and let each `send` settle before the
    // harness closes its client, so no Update poll is left running on a closed connection.
    for (const { threadId, sending } of opened) {
      await harness.client.temporal.workflow.getHandle(threadWorkflowId(threadId)).terminate('the test is over');
      await sending;
    }
  }
});
