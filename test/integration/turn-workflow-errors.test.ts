/**
 * Errors inside a turn's workflow code (issue 22, defect 5). A `wait` of 9,000,000,000,000 seconds used to pass
 * validation and then throw a RangeError in the workflow (the deadline is no date), a workflow-task failure Temporal
 * retries forever, leaving the thread's queue stuck. Now the argument is bounded, and any error the turn's workflow
 * code throws fails the turn once, with a reason saying so, instead of failing its workflow task again and again.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { ErrorType } from '../../common/errors';
import type { AgentTurnInput } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';

function agent(name: string, capabilities: string[] = []) {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [agent('eternal_waiter'), agent('relay', ['helper']), agent('helper')].map((a) => [a.name, a]),
);

const script = parseScript(
  `
agents:
  eternal_waiter:
    - call: wait
      args: { seconds: 9000000000000, reason: "the heat death of the universe" }
    - say: "I will not wait that long."
    - say: "Still here."
  relay:
    - call: helper
      args: { message: "Help." }
    - say: "never"
  helper:
    - say: "helped"
`,
  'turn-workflow-errors',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('turn-workflow-errors', { agents, script });
});

after(async () => {
  await harness?.close();
});

/**
 * The workflow's history once it closed, or once a workflow task failed (which, for an error in workflow code, is
 * retried without end): whichever comes first.
 */
async function settledHistory(workflowId: string): Promise<temporal.api.history.v1.IHistoryEvent[]> {
  return waitFor(`${workflowId} to close or fail a workflow task`, 60_000, async () => {
    const handle = harness.client.temporal.workflow.getHandle(workflowId);
    try {
      await handle.describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return undefined; // not started yet
      throw error;
    }
    const events = (await handle.fetchHistory()).events ?? [];
    const settled = events.some(
      (e) =>
        e.workflowTaskFailedEventAttributes ||
        e.workflowExecutionCompletedEventAttributes ||
        e.workflowExecutionFailedEventAttributes,
    );
    return settled ? events : undefined;
  });
}

test('wait: 9,000,000,000,000 seconds is refused as an argument, and the turn and its thread go on', async () => {
  const threadId = uniqueThreadId('eternal');
  const thread = await harness.client.startThread({ agent: 'eternal_waiter', threadId });
  const reply = thread.send('Wait for ever.');
  const events = await settledHistory(`baton/${threadId}/turn-1`);
  assert.equal(events.filter((e) => e.workflowTaskFailedEventAttributes).length, 0, 'no workflow task failed');
  assert.equal((await reply).reply, 'I will not wait that long.');
  const [refusal] = (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'tool');
  assert.equal(
    refusal?.content,
    "Error: Invalid arguments for 'wait': 'seconds' must be at most 999999999 (about 31 years; the world's " +
      'BATON_MAX_WAIT_SECONDS sets the real limit).',
  );
  assert.equal(events.filter((e) => e.timerStartedEventAttributes).length, 0, 'no timer was started');
  assert.equal((await thread.send('Are you there?')).reply, 'Still here.');
  await thread.end();
});

test('a turn whose workflow code throws fails once with a reason saying so, and never retries its workflow task', async () => {
  const threadId = uniqueThreadId('throwing-turn');
  const thread = await harness.client.startThread({ agent: 'relay', threadId });
  const { epoch } = await waitFor('the thread row', 30_000, async () => {
    const { rows } = await harness.pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [
      threadId,
    ]);
    return rows[0];
  });
  // A turn started by hand, as a parent would, with a chain its code cannot read: the delegation check throws a
  // TypeError inside the turn's workflow code (`chain.filter is not a function`).
  const input = {
    rootThreadId: threadId,
    threadId,
    agent: 'relay',
    message: 'Ask your helper.',
    sender: 'human',
    epoch,
    chain: 42,
  } as unknown as AgentTurnInput;
  const workflowId = `baton/${threadId}/turn-by-hand`;
  const handle = await harness.client.temporal.workflow.start('agentTurnWorkflow', {
    workflowId,
    taskQueue: harness.taskQueue,
    args: [input],
  });
  const events = await settledHistory(workflowId);
  assert.equal(events.filter((e) => e.workflowTaskFailedEventAttributes).length, 0, 'no workflow task failed');
  const expected = /^the turn's workflow code failed \(TypeError: chain\.filter is not a function\)/;
  await assert.rejects(handle.result(), (error: unknown) => {
    assert.ok(error instanceof WorkflowFailedError, String(error));
    assert.ok(error.cause instanceof ApplicationFailure, String(error.cause));
    assert.equal(error.cause.type, ErrorType.TurnCodeFailed);
    assert.equal(error.cause.nonRetryable, true);
    assert.match(error.cause.message, expected);
    return true;
  });
  // The thread's row says why its turn stopped, as for any failed turn.
  const { rows } = await harness.pool.query<{ status: string; lastError: string }>(
    'SELECT status, last_error AS "lastError" FROM threads WHERE thread_id = $1',
    [threadId],
  );
  assert.equal(rows[0]?.status, 'failed');
  assert.match(rows[0]?.lastError ?? '', expected);
  await thread.end();
});

test('a rootTurnWorkflow started without what its thread began is refused as invalid input, and begins nothing', async () => {
  const threadId = uniqueThreadId('unbegun-turn');
  const input: AgentTurnInput = {
    rootThreadId: threadId,
    threadId,
    agent: 'relay',
    message: 'Hello.',
    sender: 'human',
    epoch: 0,
  };
  const handle = await harness.client.temporal.workflow.start('rootTurnWorkflow', {
    workflowId: `baton/${threadId}/unbegun`,
    taskQueue: harness.taskQueue,
    args: [input],
  });
  await assert.rejects(handle.result(), (error: unknown) => {
    assert.ok(error instanceof WorkflowFailedError, String(error));
    assert.ok(error.cause instanceof ApplicationFailure, String(error.cause));
    assert.equal(error.cause.type, ErrorType.InvalidInput);
    assert.match(error.cause.message, /needs `begun`/);
    return true;
  });
  const { rows } = await harness.pool.query('SELECT 1 FROM transcript_messages WHERE thread_id = $1', [threadId]);
  assert.equal(rows.length, 0, 'no message was recorded');
});
