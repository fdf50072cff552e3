/**
 * The `wait` tool (issue 16, durable timers for agents) on the real dev server: a short wait resumes on its timer; a
 * human message or a wake ends a long one early; the thread's status and the Web UI's current details say what it
 * waits for; a delegated agent's wait is woken through the root thread; waits beyond the world's limit and bad
 * arguments get clear errors and wait not at all. (A worker killed mid-wait: test/chaos/worker-kill.test.ts.)
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { WorkflowUpdateStage } from '@temporalio/client';
import type { SendMessageInput, SendMessageResult, ThreadStatus, WaitInfo } from '../../common/types';
import { listMessages, type TranscriptMessage } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'wait-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, capabilities: string[] = []): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\ncapabilities: [${capabilities.join(', ')}]\n---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('napper'),
  agent('sleeper'),
  agent('queued'),
  agent('dozer'),
  agent('boss', ['deputy']),
  agent('deputy'),
  agent('overlong'),
  agent('capped'),
  agent('clumsy_waiter'),
]);

// A time an hour after this file loads: `until` in a static script.
const IN_AN_HOUR = new Date(Date.now() + 3600_000).toISOString();

const script = parseScript(
  `
agents:
  napper:
    - call: wait
      args: { seconds: 2, reason: "let the build finish" }
    - say: "Done waiting."
  sleeper:
    - call: wait
      args: { seconds: 3600, reason: "check the deploy in an hour" }
    - say: "Stopped waiting for you."
    - say: "Handled your message."
  queued:
    # Held until the test has queued a second message, so the first turn plans its wait only then.
    - call: wait
      args: { seconds: 3600, reason: "check the deploy in an hour" }
      hold: queued-wait
    - say: "Stopped waiting for you."
    - say: "Handled your message."
  dozer:
    - say: "Hello."
    - call: wait
      args: { until: "${IN_AN_HOUR}", reason: "the nightly report" }
    - say: "Awake."
  boss:
    - call: deputy
      args: { message: "Wait for the report." }
    - say: "The deputy is done."
  deputy:
    - call: wait
      args: { seconds: 3600, reason: "the report of the deputy" }
    - say: "Woken up."
  overlong:
    - call: wait
      args: { seconds: ${8 * 24 * 3600}, reason: "next week" }
    - say: "I will not wait that long."
  capped:
    - call: wait
      args: { seconds: 120, reason: "two minutes" }
    - say: "Capped."
  clumsy_waiter:
    - calls:
        - { call: wait, args: { reason: "neither" } }
        - { call: wait, args: { seconds: 5, until: "${IN_AN_HOUR}", reason: "both" } }
        - { call: wait, args: { seconds: -5, reason: "negative" } }
        - { call: wait, args: { until: "2001-01-01T00:00:00Z", reason: "the past" } }
        - { call: wait, args: { seconds: 5 } }
        - { call: wait, args: { until: "tomorrow morning", reason: "vague" } }
        - { call: wait, args: { seconds: 5, reason: "   " } }
    - say: "I will read the manual."
`,
  'wait',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('wait', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

/** The thread's status once it lists a wait in progress. */
function waitingStatus(thread: ThreadHandle): Promise<ThreadStatus & { waits: WaitInfo[] }> {
  return waitFor(`a wait in ${thread.threadId}`, 30_000, async () => {
    const status = await thread.status();
    return status.waits && status.waits.length > 0 ? { ...status, waits: status.waits } : undefined;
  });
}

async function currentDetails(workflowId: string): Promise<string> {
  const metadata = await harness.client.temporal.workflow
    .getHandle(workflowId)
    .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  return metadata.currentDetails ?? '';
}

function toolResults(messages: readonly TranscriptMessage[]): string[] {
  return messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
}

test('wait: a short wait resumes on its timer with a result saying how long it waited', async () => {
  const threadId = uniqueThreadId('napper');
  const thread = await harness.client.startThread({ agent: 'napper', threadId });
  const result = await thread.send('Wait for the build.');

  assert.equal(result.reply, 'Done waiting.');
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((m) => m.role),
    ['user', 'assistant', 'tool', 'assistant'],
  );
  const [content] = toolResults(transcript);
  const match = /^Waited (\d+) seconds, until (\S+Z), as planned \(let the build finish\)\.$/.exec(content ?? '');
  assert.ok(match, content);
  assert.ok(Number(match[1]) >= 2, `waited at least the 2 seconds asked for: ${content}`);
  // The turn slept on a timer, not in an activity: its history holds one timer, started and fired.
  const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  const events = history.events ?? [];
  assert.equal(events.filter((e) => e.timerStartedEventAttributes).length, 1);
  assert.equal(events.filter((e) => e.timerFiredEventAttributes).length, 1);
  assert.equal(
    Number(events.find((e) => e.timerStartedEventAttributes)?.timerStartedEventAttributes?.startToFireTimeout?.seconds),
    2,
  );
  assert.deepEqual((await thread.status()).waits, [], 'the wait is over');
  await thread.end();
});

test('wait: a human message ends the wait early, and is then handled as the next turn', async () => {
  const threadId = uniqueThreadId('sleeper');
  const thread = await harness.client.startThread({ agent: 'sleeper', threadId });
  const first = thread.send('Check the deploy later.');
  first.catch(() => undefined);

  const status = await waitingStatus(thread);
  assert.equal(status.busy, true);
  const [wait] = status.waits;
  assert.equal(status.waits.length, 1);
  assert.equal(wait?.agent, 'sleeper');
  assert.equal(wait?.threadId, threadId);
  assert.equal(wait?.workflowId, `baton/${threadId}/turn-1`);
  assert.equal(wait?.reason, 'check the deploy in an hour');
  assert.equal(Date.parse(wait?.until ?? '') - Date.parse(wait?.since ?? ''), 3600_000);
  // The Web UI's current details of the thread and of the waiting turn.
  assert.equal(
    await currentDetails(`baton/${threadId}`),
    `Running turn 1: sleeper is waiting until ${wait?.until}: check the deploy in an hour`,
  );
  assert.match(
    await currentDetails(`baton/${threadId}/turn-1`),
    new RegExp(
      `^sleeper is waiting until ${wait?.until}: check the deploy in an hour\nEnd it early with: baton wake ${threadId}`,
    ),
  );
  // While it waits, nothing runs: no activity is pending.
  const described = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).describe();
  assert.equal(described.raw.pendingActivities?.length ?? 0, 0);

  const second = await thread.send('Actually, one question first.');
  const result = await first;
  assert.equal(result.reply, 'Stopped waiting for you.');
  assert.deepEqual([second.turn, second.reply], [2, 'Handled your message.']);

  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((m) => [m.role, m.role === 'tool' ? 'result' : m.content]),
    [
      ['user', 'Check the deploy later.'],
      ['assistant', null],
      ['tool', 'result'],
      ['assistant', 'Stopped waiting for you.'],
      ['user', 'Actually, one question first.'],
      ['assistant', 'Handled your message.'],
    ],
  );
  assert.match(
    toolResults(transcript)[0] ?? '',
    new RegExp(
      `^The wait ended early, after \\d+ seconds? of the 1 hour planned \\(until ${wait?.until}\\): a new message ` +
        'from the human arrived in this conversation\\.',
    ),
  );
  assert.deepEqual((await thread.status()).waits, []);
  await thread.end();
});

test('wait: a wait that starts while a message is already queued behind its turn ends at once', async () => {
  const threadId = uniqueThreadId('queued');
  const thread = await harness.client.startThread({ agent: 'queued', threadId });
  // Both messages arrive before the first turn calls `wait`: the second is queued when the wait starts. The first is
  // accepted before the second is sent, so the two cannot race each other into the queue in the other order, and the
  // first turn's reply (its `wait` call) is held by the scripted model until the second is accepted too.
  const send = (message: string) =>
    thread.workflow.startUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', {
      args: [{ message }],
      waitForStage: WorkflowUpdateStage.ACCEPTED,
    });
  const firstUpdate = await send('Check the deploy later.');
  const secondUpdate = await send('And then this.');
  // Its model request may or may not have arrived yet: either way it is answered only from here on.
  harness.model.release('queued-wait');
  const [first, second] = await Promise.all([firstUpdate.result(), secondUpdate.result()]);
  assert.deepEqual([first.reply, second.reply], ['Stopped waiting for you.', 'Handled your message.']);
  const [result] = toolResults(await listMessages(harness.pool, threadId));
  assert.match(result ?? '', /^The wait ended early, .*: a new message from the human arrived/);
  // The thread accepted both messages before it heard of the wait: the wake answered the wait's report.
  const events = (await harness.client.temporal.workflow.getHandle(`baton/${threadId}`).fetchHistory()).events ?? [];
  const firstReport = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'waitChanged');
  const accepted = events.flatMap((e, index) => (e.workflowExecutionUpdateAcceptedEventAttributes ? [index] : []));
  assert.equal(accepted.length, 2);
  assert.ok(firstReport > Math.max(...accepted), 'both messages were queued when the wait started');
  await thread.end();
});

test('wait: wake ends a wait for a time (until), in a thread that has continued as new; a second wake finds nothing', async () => {
  const threadId = uniqueThreadId('dozer');
  const thread = await harness.client.startThread({ agent: 'dozer', threadId, continueAsNewAfterTurns: 1 });
  assert.equal((await thread.send('Hi.')).reply, 'Hello.');
  const reply = thread.send('Wait for the nightly report.');
  reply.catch(() => undefined);

  const status = await waitingStatus(thread);
  assert.deepEqual([status.runs, status.turns], [2, 2], 'the wait is in the run after continue-as-new');
  assert.equal(status.waits[0]?.until, IN_AN_HOUR);
  assert.equal(status.waits[0]?.reason, 'the nightly report');

  const woken = await thread.wake();
  assert.equal(woken.threadId, threadId);
  assert.deepEqual(
    woken.woken.map((w) => [w.agent, w.workflowId, w.until]),
    [['dozer', `baton/${threadId}/turn-2`, IN_AN_HOUR]],
  );
  const result = await reply;
  assert.equal(result.reply, 'Awake.');
  const results = toolResults(await listMessages(harness.pool, threadId));
  assert.match(
    results[0] ?? '',
    new RegExp(`^The wait ended early, after \\d+ seconds? of the .+ planned \\(until ${IN_AN_HOUR}\\): someone woke`),
  );
  assert.deepEqual((await thread.wake()).woken, [], 'nothing waits any more');
  await thread.end();
});

test('wait: a delegated agent’s wait shows in the root thread’s status and a wake of the root ends it', async () => {
  const threadId = uniqueThreadId('boss');
  const thread = await harness.client.startThread({ agent: 'boss', threadId });
  const reply = thread.send('Get the report.');
  reply.catch(() => undefined);

  const status = await waitingStatus(thread);
  const delegated = `${threadId}/deputy-1`;
  assert.deepEqual(
    status.waits.map((w) => [w.agent, w.threadId, w.workflowId, w.reason]),
    [['deputy', delegated, `baton/${delegated}`, 'the report of the deputy']],
  );
  assert.match(
    await currentDetails(`baton/${threadId}`),
    /^Running turn 1: deputy is waiting until \S+Z: the report of the deputy$/,
  );

  const woken = await thread.wake();
  assert.deepEqual(
    woken.woken.map((w) => w.threadId),
    [delegated],
  );
  assert.equal((await reply).reply, 'The deputy is done.');
  const [deputyResult] = toolResults(await listMessages(harness.pool, delegated));
  assert.match(deputyResult ?? '', /^The wait ended early, after \d+ seconds? of the 1 hour planned .*: someone woke/);
  const [bossResult] = toolResults(await listMessages(harness.pool, threadId));
  assert.equal(bossResult, 'Woken up.');
  await thread.end();
});

test('wait: a wait beyond the limit (7 days by default, or the world’s BATON_MAX_WAIT_SECONDS) is refused and waits not at all', async () => {
  const threadId = uniqueThreadId('overlong');
  const thread = await harness.client.startThread({ agent: 'overlong', threadId });
  assert.equal((await thread.send('See you next week.')).reply, 'I will not wait that long.');
  const [refusal] = toolResults(await listMessages(harness.pool, threadId));
  assert.match(
    refusal ?? '',
    /^Error: a wait of 8 days \(until \S+Z\) is longer than this world allows: at most 7 days \(604800 seconds, world variable BATON_MAX_WAIT_SECONDS\)\. Nothing was waited/,
  );
  const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  assert.equal(history.events?.filter((e) => e.timerStartedEventAttributes).length, 0, 'no timer was started');
  await thread.end();

  const world = `wait-capped-${threadId}`;
  await harness.client.world(world).set({ BATON_MAX_WAIT_SECONDS: '60' });
  const cappedId = uniqueThreadId('capped');
  const capped = await harness.client.startThread({ agent: 'capped', threadId: cappedId, world });
  assert.equal((await capped.send('Wait two minutes.')).reply, 'Capped.');
  assert.match(
    toolResults(await listMessages(harness.pool, cappedId))[0] ?? '',
    /^Error: a wait of 2 minutes \(until \S+Z\) is longer than this world allows: at most 60 seconds \(60 seconds, world variable BATON_MAX_WAIT_SECONDS\)\./,
  );
  await capped.end();
});

test('wait: bad arguments get clear errors and the turn goes on without waiting', async () => {
  const threadId = uniqueThreadId('clumsy-waiter');
  const thread = await harness.client.startThread({ agent: 'clumsy_waiter', threadId });
  assert.equal((await thread.send('Wait, badly.')).reply, 'I will read the manual.');
  const transcript = await listMessages(harness.pool, threadId);
  assert.deepEqual(
    transcript.map((m) => m.role),
    ['user', 'assistant', ...Array<string>(7).fill('tool'), 'assistant'],
  );
  const byCall = new Map(transcript.filter((m) => m.role === 'tool').map((m) => [m.toolCallId, m.content]));
  const result = (index: number) => byCall.get(`call_clumsy_waiter_1_${index}`);
  assert.equal(result(0), "Error: Invalid arguments for 'wait': give exactly one of 'seconds' and 'until'.");
  assert.equal(result(1), "Error: Invalid arguments for 'wait': give exactly one of 'seconds' and 'until'.");
  assert.equal(result(2), "Error: Invalid arguments for 'wait': 'seconds' must be at least 1.");
  assert.match(
    result(3) ?? '',
    /^Error: 'until' \(2001-01-01T00:00:00Z\) is not in the future: it is now \S+Z\. Nothing was waited/,
  );
  assert.equal(result(4), "Error: Invalid arguments for 'wait': 'reason' is required: say what you are waiting for.");
  assert.equal(
    result(5),
    "Error: Invalid arguments for 'wait': 'until' must be an ISO 8601 time with a time zone, e.g. 2030-01-31T09:00:00Z.",
  );
  assert.equal(
    result(6),
    "Error: Invalid arguments for 'wait': 'reason' must not be empty: say what you are waiting for.",
  );
  const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  assert.equal(history.events?.filter((e) => e.timerStartedEventAttributes).length, 0, 'no timer was started');
  await thread.end();
});
