/**
 * `BatonClient.run`: a root thread started with its first message in one call to Temporal (Update-with-Start). The
 * thread's first workflow task takes the message, so the turn begins without waiting for a second task; nothing is
 * started for a message the thread would refuse, and a taken thread id gets no message. A server that refuses
 * Update-with-Start gets the thread's start and its message in two calls.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WithStartWorkflowOperation, WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import { threadWorkflowId } from '../../common/ids';
import type { BegunTurn } from '../../common/types';
import { findThread } from '../../db/threads';
import { listMessages } from '../../db/transcripts';
import { localActivityResults } from '../../testing/turn-dispatches';
import { rejectsWith } from './failures';
import { parseScript } from '../../scripted-model';
import { startOwnTemporal } from '../../testing/test-stack';
import { skipUnlessCi } from '../../testing/ci';
import { startAgentHarness, startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const MODES = [
  { agent: 'greeter', steps: 'activity' },
  { agent: 'greeter-local', steps: 'local' },
] as const;

const agents: AgentRegistry = new Map(
  MODES.map(({ agent, steps }): [string, ReturnType<typeof parseAgentFile>] => [
    agent,
    parseAgentFile(`---\nname: ${agent}\ndescription: Greets.\nsteps: ${steps}\n---\nYou greet.\n`, `${agent}.md`),
  ]),
);

const script = parseScript(
  `
agents:
  greeter:
    - say: "hello"
    - say: "hello again"
  greeter-local:
    - say: "hello"
    - say: "hello again"
`,
  'client-run',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('client-run', { agents, script });
});

after(async () => {
  await harness?.close();
});

for (const { agent, steps } of MODES) {
  test(`run starts a thread whose first workflow task takes the message, and the thread goes on (steps: ${steps})`, async () => {
    const threadId = uniqueThreadId('run');
    const { thread, result } = await harness.client.run({ agent, threadId, message: 'Hi.' });
    assert.equal(thread.threadId, threadId);
    assert.deepEqual([result.status, result.reply, result.turn, result.threadId], ['completed', 'hello', 1, threadId]);

    // The message was accepted in the thread's first workflow task: no task ran before it without it.
    const events = (await thread.workflow.fetchHistory()).events ?? [];
    const accepted = events.findIndex((event) => event.workflowExecutionUpdateAcceptedEventAttributes);
    assert.ok(accepted > 0, "the message's Update is in the history");
    assert.equal(events.slice(0, accepted).filter((event) => event.workflowTaskStartedEventAttributes).length, 1);
    // The turn's beginning opened the thread's record (no local activity of the thread's own before it) and handed
    // the thread its epoch, which the record holds.
    assert.deepEqual(localActivityResults(events, 'ensureThread'), []);
    const [begun] = localActivityResults(events, 'beginTurn') as BegunTurn[];
    assert.equal(begun?.epoch, (await findThread(harness.pool, threadId))?.epoch);

    // A thread like any other: its next message is its second turn.
    const second = await thread.send('Again.');
    assert.deepEqual([second.turn, second.reply], [2, 'hello again']);
    assert.deepEqual(
      (await listMessages(harness.pool, threadId)).map((message) => [message.role, message.content]),
      [
        ['user', 'Hi.'],
        ['assistant', 'hello'],
        ['user', 'Again.'],
        ['assistant', 'hello again'],
      ],
    );
    await thread.end();
  });
}

test('run naming an agent no worker knows: the turn fails before the record is open, so the thread opens it itself and takes its next message', async () => {
  const threadId = uniqueThreadId('run-unknown');
  await rejectsWith(harness.client.run({ agent: 'nobody', threadId, message: 'Hi.' }), 'Agent.NotFound', /nobody/);
  const thread = harness.client.thread(threadId);
  // Its next message does not wait for ever for a record: it fails the same way, and the thread runs on.
  await rejectsWith(thread.send('Again.'), 'Agent.NotFound', /nobody/);
  const events = (await thread.workflow.fetchHistory()).events ?? [];
  assert.equal(localActivityResults(events, 'ensureThread').length, 1, 'the thread opened its record itself');
  assert.equal((await findThread(harness.pool, threadId))?.threadId, threadId);
  assert.equal((await thread.status()).turns, 2);
  await thread.end();
});

test('run under a thread id already taken fails with a clear error, and the running thread gets no message', async () => {
  const threadId = uniqueThreadId('run-taken');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  await assert.rejects(harness.client.run({ agent: 'greeter', threadId, message: 'Hi.' }), {
    name: 'BatonClientError',
    message: `thread '${threadId}' already exists; send it a message to continue it`,
  });
  assert.equal((await thread.status()).turns, 0);
  assert.deepEqual(await listMessages(harness.pool, threadId), []);
  await thread.end();
});

test('run refuses a message the thread would refuse before it starts anything, and a bad message id', async () => {
  for (const [message, problem] of [
    ['   ', 'message must be a non-empty string'],
    ['a\u0000b', 'message must not hold a NUL character (U+0000) or a lone UTF-16 surrogate'],
  ] as const) {
    const threadId = uniqueThreadId('run-refused');
    await assert.rejects(harness.client.run({ agent: 'greeter', threadId, message }), {
      name: 'BatonClientError',
      message: problem,
    });
    await assert.rejects(
      harness.client.temporal.workflow.getHandle(threadWorkflowId(threadId)).describe(),
      WorkflowNotFoundError,
      'no thread was started',
    );
  }
  await assert.rejects(
    harness.client.run({ agent: 'greeter', threadId: 'not a thread id!', message: 'Hi.' }),
    /BatonClientError|thread id/,
  );
  const threadId = uniqueThreadId('run-bad-id');
  await assert.rejects(harness.client.run({ agent: 'greeter', threadId, message: 'Hi.', messageId: '' }), {
    name: 'BatonClientError',
    message: 'messageId must be 1 to 200 characters (got 0)',
  });
  await assert.rejects(
    harness.client.temporal.workflow.getHandle(threadWorkflowId(threadId)).describe(),
    WorkflowNotFoundError,
  );
});

test("run under a message id is safe to repeat: the same call again, or the message sent again, gets the first turn's result", async () => {
  const threadId = uniqueThreadId('run-message-id');
  const call = { agent: 'greeter-local', threadId, message: 'Hi.', messageId: 'first-hello' };
  const { thread, result } = await harness.client.run(call);
  // A program that lost the reply calls again: the thread it started takes the message once.
  assert.deepEqual((await harness.client.run(call)).result, result);
  assert.deepEqual(await thread.send('Hi.', { messageId: 'first-hello' }), result);
  assert.equal((await thread.status()).turns, 1);
  assert.equal((await listMessages(harness.pool, threadId)).length, 2);
  // A new message id on the running thread is its next message.
  const next = await harness.client.run({ ...call, messageId: 'second-hello' });
  assert.deepEqual([next.result.turn, next.result.reply], [2, 'hello again']);
  await thread.end();
});

test('run on a server that refuses Update-with-Start starts the thread and sends its message in two calls', async (t) => {
  const env = readTestEnv();
  if (env.temporalCli === undefined) {
    skipUnlessCi(t, 'no local Temporal CLI to start a second server with');
    return;
  }
  const server = await startOwnTemporal(env.temporalCli, ['frontend.enableExecuteMultiOperation=false']);
  let older: AgentHarness | undefined;
  try {
    older = await startAgentHarness({
      temporalAddress: server.address,
      databaseUrl: env.databaseUrl,
      taskQueue: uniqueTaskQueue('client-run-refused'),
      workflowBundle: { codePath: env.workflowBundlePath },
      agents,
      script,
    });
    // The server does refuse it, so what follows goes the two-call way.
    const probe = new WithStartWorkflowOperation('threadWorkflow', {
      workflowId: uniqueThreadId('probe'),
      taskQueue: older.taskQueue,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
    });
    await assert.rejects(
      older.client.temporal.workflow.executeUpdateWithStart('sendMessage', {
        args: [{ message: 'Hi.' }],
        startWorkflowOperation: probe,
      }),
      (error: unknown) => error instanceof Error && /ExecuteMultiOperation API is disabled/.test(String(error.cause)),
    );

    const threadId = uniqueThreadId('run-two-calls');
    const { thread, result } = await older.client.run({ agent: 'greeter-local', threadId, message: 'Hi.' });
    assert.deepEqual([result.status, result.reply, result.turn], ['completed', 'hello', 1]);
    assert.deepEqual((await thread.status()).turns, 1);
    await assert.rejects(older.client.run({ agent: 'greeter', threadId, message: 'Again.' }), {
      name: 'BatonClientError',
      message: `thread '${threadId}' already exists; send it a message to continue it`,
    });
    assert.equal((await thread.status()).turns, 1, 'the taken thread got no message');
    await thread.end();

    // Under a message id the two calls are safe to repeat too.
    const retried = { agent: 'greeter', threadId: uniqueThreadId('run-two-calls-id'), message: 'Hi.', messageId: 'm1' };
    const first = await older.client.run(retried);
    assert.deepEqual((await older.client.run(retried)).result, first.result);
    assert.equal((await first.thread.status()).turns, 1);
    await first.thread.end();
  } finally {
    await older?.close();
    await server.stop();
  }
});
