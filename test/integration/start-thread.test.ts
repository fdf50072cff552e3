/**
 * `BatonClient.startThread`: a client with Baton's database opens the thread's record itself once the workflow has
 * started, so the record is there when the call returns, the thread's first workflow task runs nothing, and the first
 * message's turn takes the record's epoch (as a thread started with its message by `run` does). A client without the
 * database leaves the opening to the thread's first task, as before; a thread ended before any message, and one whose
 * first turn fails before it could open anything, still have their record and go on.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import type { BegunTurn, ThreadWorkflowInput } from '../../common/types';
import { findThread } from '../../db/threads';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { localActivityResults } from '../../testing/turn-dispatches';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { rejectsWith } from './failures';

const agents: AgentRegistry = new Map([
  ['greeter', parseAgentFile('---\nname: greeter\ndescription: Greets.\nsteps: batched\n---\nYou greet.\n', 'g.md')],
]);
const script = parseScript('agents:\n  greeter:\n    - say: "hello"\n    - say: "hello again"\n', 'start-thread');

let harness: AgentHarness;
/** A client of the same deployment connected without Baton's database. */
let temporalOnly: BatonClient;

before(async () => {
  harness = await startTestHarness('start-thread', { agents, script });
  temporalOnly = await connect({ address: readTestEnv().temporalAddress, taskQueue: harness.taskQueue });
});

after(async () => {
  await temporalOnly?.close();
  await harness?.close();
});

/** The thread's workflow input as its history recorded it. */
function startInput(events: { workflowExecutionStartedEventAttributes?: unknown }[]): ThreadWorkflowInput {
  const started = events[0]?.workflowExecutionStartedEventAttributes as
    { input?: { payloads?: { data?: Uint8Array | null }[] | null } | null } | undefined;
  return JSON.parse(Buffer.from(started?.input?.payloads?.[0]?.data ?? []).toString('utf8')) as ThreadWorkflowInput;
}

test("startThread with the database: the record is there as it returns, the thread's first task runs nothing, the first turn takes its epoch", async () => {
  const threadId = uniqueThreadId('start-opened');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  const record = await findThread(harness.pool, threadId);
  assert.deepEqual([record?.threadId, record?.agent, record?.status], [threadId, 'greeter', 'active']);

  const first = await thread.send('Hi.');
  assert.deepEqual([first.turn, first.reply], [1, 'hello']);
  const second = await thread.send('Again.');
  assert.deepEqual([second.turn, second.reply], [2, 'hello again']);
  const events = (await thread.workflow.fetchHistory()).events ?? [];
  assert.equal(startInput(events).recordOpenedByStarter, true);
  // The first workflow task completed with no command: no local activity opened the record.
  const firstCompleted = events.findIndex((event) => event.workflowTaskCompletedEventAttributes);
  assert.ok(firstCompleted > 0);
  assert.ok(
    events[firstCompleted + 1]?.workflowTaskScheduledEventAttributes !== undefined ||
      events[firstCompleted + 1]?.workflowExecutionUpdateAcceptedEventAttributes !== undefined,
    'nothing recorded by the first task',
  );
  assert.deepEqual(localActivityResults(events, 'ensureThread'), [], 'the thread opened nothing itself');
  const begun = localActivityResults(events, 'beginTurn') as BegunTurn[];
  assert.equal(begun[0]?.epoch, (await findThread(harness.pool, threadId))?.epoch, 'the first turn took the epoch');
  assert.equal(begun[1]?.epoch, undefined, 'the second opened nothing');
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
  await thread.workflow.result();
});

test('startThread without the database: the thread opens its record in its first task', async () => {
  const threadId = uniqueThreadId('start-unopened');
  const thread = await temporalOnly.startThread({ agent: 'greeter', threadId });
  // No message yet (one sent at once may reach that first task, whose turn then opens the record instead).
  const deadline = Date.now() + 20_000;
  let events = (await thread.workflow.fetchHistory()).events ?? [];
  while (localActivityResults(events, 'ensureThread').length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    events = (await thread.workflow.fetchHistory()).events ?? [];
  }
  assert.equal(startInput(events).recordOpenedByStarter, undefined);
  assert.equal(localActivityResults(events, 'ensureThread').length, 1, 'the thread opened its record itself');
  assert.equal((await findThread(harness.pool, threadId))?.threadId, threadId);
  assert.equal((await thread.send('Hi.')).reply, 'hello');
  await thread.end();
  await thread.workflow.result();
});

test('a thread its starter opened, ended before any message: it ends, its record kept', async () => {
  const threadId = uniqueThreadId('start-ended');
  const thread = await harness.client.startThread({ agent: 'greeter', threadId });
  await thread.end();
  const status = await thread.workflow.result();
  assert.equal(status.turns, 0);
  assert.equal((await findThread(harness.pool, threadId))?.threadId, threadId);
});

test('a thread its starter opened whose first turn fails before opening (no such agent): it opens the record itself and takes its next message', async () => {
  const threadId = uniqueThreadId('start-unknown');
  const thread = await harness.client.startThread({ agent: 'nobody', threadId });
  await rejectsWith(thread.send('Hi.'), 'Agent.NotFound', /nobody/);
  // Its next message does not wait for ever for an epoch: it fails the same way, and the thread runs on.
  await rejectsWith(thread.send('Again.'), 'Agent.NotFound', /nobody/);
  const events = (await thread.workflow.fetchHistory()).events ?? [];
  assert.equal(localActivityResults(events, 'ensureThread').length, 1, 'the thread opened its record itself');
  assert.equal((await thread.status()).turns, 2);
  await thread.end();
  await thread.workflow.result();
});
