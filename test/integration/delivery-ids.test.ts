/**
 * A message sent again under the same id after its thread continued as new (issue 22, defect 6). Temporal
 * deduplicates Update ids within one run only; a client that lost the result of `send --message-id` (or a scheduled
 * run's retried delivery) and sends again once the thread has continued as new must get the first turn's outcome, not
 * a second turn. The thread carries the ids it handled (the most recent ones) into its next run.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { ThreadHandle } from '../../client';
import { MAX_MESSAGE_ID_CHARS } from '../../common/deliveries';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';

/** Each agent twice: its turns as turn workflows, and (`-local`) begun and answered in the thread's own workflow. */
const MODES = [
  { suffix: '', steps: 'activity' },
  { suffix: '-local', steps: 'local' },
] as const;

const agents: AgentRegistry = new Map(
  ['counter', 'breaker'].flatMap((base) =>
    MODES.map(({ suffix, steps }): [string, ReturnType<typeof parseAgentFile>] => {
      const name = `${base}${suffix}`;
      const text = `---\nname: ${name}\ndescription: The ${base}.\nsteps: ${steps}\n---\nYou are ${base}.\n`;
      return [name, parseAgentFile(text, `${name}.md`)];
    }),
  ),
);

const script = parseScript(
  `
agents:
  counter:
    - say: "first"
    - say: "second"
    - say: "third"
  breaker:
    - { fail: 401, message: "refused on purpose" }
    - say: "never"
  counter-local:
    - say: "first"
    - say: "second"
    - say: "third"
  breaker-local:
    - { fail: 401, message: "refused on purpose" }
    - say: "never"
`,
  'delivery-ids',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('delivery-ids', { agents, script });
});

after(async () => {
  await harness?.close();
});

/** Waits until the thread's workflow has continued as new into run `runs`. */
async function continuedAsNew(thread: ThreadHandle, runs: number): Promise<void> {
  await waitFor(`${thread.threadId} to reach run ${runs}`, 30_000, async () =>
    (await thread.status()).runs >= runs ? true : undefined,
  );
}

for (const { suffix, steps } of MODES) {
  test(`a message sent again with the same id after continue-as-new gets its first turn, and runs no second one (steps: ${steps})`, async () => {
    const threadId = uniqueThreadId('delivered-once');
    const thread = await harness.client.startThread({
      agent: `counter${suffix}`,
      threadId,
      continueAsNewAfterTurns: 1,
    });
    const first = await thread.send('Count.', { messageId: 'count-1' });
    assert.deepEqual([first.turn, first.reply], [1, 'first']);
    await continuedAsNew(thread, 2);

    // The retry of a delivery whose result was lost: the new run knows the id, and answers with turn 1's result.
    const again = await thread.send('Count.', { messageId: 'count-1' });
    assert.deepEqual(again, first);
    const transcript = await listMessages(harness.pool, threadId);
    assert.deepEqual(
      transcript.map((m) => [m.role, m.content]),
      [
        ['user', 'Count.'],
        ['assistant', 'first'],
      ],
    );
    assert.equal((await thread.status()).turns, 1);

    // A new id is a new message, and the ids carry on over the next continue-as-new too.
    const second = await thread.send('Count again.', { messageId: 'count-2' });
    assert.deepEqual([second.turn, second.reply], [2, 'second']);
    await continuedAsNew(thread, 3);
    assert.deepEqual(await thread.send('Count.', { messageId: 'count-1' }), first);
    assert.deepEqual(await thread.send('Count again.', { messageId: 'count-2' }), second);
    assert.equal((await listMessages(harness.pool, threadId)).length, 4);
    await thread.end();
  });

  test(`a message whose turn failed, sent again after continue-as-new, fails the same way without running again (steps: ${steps})`, async () => {
    const threadId = uniqueThreadId('failed-once');
    const thread = await harness.client.startThread({
      agent: `breaker${suffix}`,
      threadId,
      continueAsNewAfterTurns: 1,
    });
    await assert.rejects(thread.send('Break.', { messageId: 'break-1' }), WorkflowUpdateFailedError);
    await continuedAsNew(thread, 2);
    await assert.rejects(thread.send('Break.', { messageId: 'break-1' }), (error: unknown) => {
      assert.ok(error instanceof WorkflowUpdateFailedError);
      assert.match(
        error.cause?.message ?? '',
        /^message 'break-1' was delivered before, as turn 1, which failed: .*refused on purpose/,
      );
      return true;
    });
    assert.equal((await thread.status()).turns, 1, 'no second turn ran');
    await thread.end();
  });
}

test('a message id longer than the thread carries is refused by the client, naming the limit', async () => {
  const thread = harness.client.thread(uniqueThreadId('long-id'));
  for (const messageId of ['x'.repeat(MAX_MESSAGE_ID_CHARS + 1), '']) {
    await assert.rejects(thread.send('Hi.', { messageId }), {
      name: 'BatonClientError',
      message: `messageId must be 1 to ${MAX_MESSAGE_ID_CHARS} characters (got ${messageId.length})`,
    });
  }
});
