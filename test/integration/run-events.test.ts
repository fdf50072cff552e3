/**
 * The run feed (`thread.events`, migration 014) on the real dev server and Postgres: a turn with a tool, a delegation
 * and a fork arrives in order, each event once with its feed number, and matches what is stored; a reader that
 * leaves mid-turn and comes back with `since` (or whose connection Postgres drops) gets exactly the rest; streamed
 * deltas add up to the stored reply; a worker that does not stream produces the same stored events; approvals,
 * questions, waits, env writes and refused writes have their events. (A worker SIGKILLed mid-stream:
 * test/chaos/worker-kill.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RunDeltaEvent, RunEvent, StoredRunEvent, ThreadEvents, ThreadHandle } from '../../client';
import type { SendMessageResult } from '../../common/types';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { runEventsChannel } from '../../common/run-events';
import { lastRunFeedSeq, readRunFeed, recordModelCallStarted, recordModelCallWaiting } from '../../db/run-events';
import { listMessages, type TranscriptMessage } from '../../db/transcripts';
import { validateScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { settle, waitFor } from '../chaos/waiting';

const agents: AgentRegistry = new Map(
  (
    [
      ['lead', 'capabilities: [helper, fork_join]'],
      ['helper', ''],
      ['pauser', ''],
      ['dropper', ''],
      ['streamer', ''],
      ['gatekeeper', 'approval: [think]'],
      ['deadline_lead', 'capabilities: [fork_join, laggard, late_writer]'],
      ['laggard', ''],
      ['late_writer', 'capabilities: [gated_store]'],
      ['teller', ''],
    ] as const
  ).map(([name, extra]) => [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name}.\n${extra}\n---\nWork.\n`, `${name}.md`),
  ]),
);

/** Replies with characters of 1 to 4 UTF-8 bytes, and a surrogate pair the scripted model may cut between chunks. */
const STREAMED_TEXT = 'Ünïcødé words — 漢字 and emoji 🎉🚀 streamed slowly, word by word.';
/**
 * Tool call arguments far above one notification's 7000 bytes, sent in one burst of 16-character pieces: a batch
 * that must be split (splitDelta) and still add up.
 */
const LONG_THOUGHT = Array.from({ length: 400 }, (_, i) => `step ${i}: ünïcødé 漢字 🎉;`).join(' ');

const script = validateScript(
  {
    agents: {
      lead: [
        { call: 'think', args: { thought: 'First a tool.' } },
        { call: 'helper', args: { message: 'Help me.' } },
        { call: 'fork_join', args: { tasks: [{ agent: 'helper', message: 'Task one.' }] } },
        { say: 'All done, streamed word by word.', chunk_delay_ms: 20 },
      ],
      helper: [
        { say: 'Helped.', chunk_delay_ms: 5 },
        { say: 'Task done.', chunk_delay_ms: 5 },
      ],
      // Held twice, so "mid-turn" is a state the test decides: once to leave, once to come back.
      pauser: [
        { call: 'think', args: { thought: 'Before the pause.' } },
        { call: 'think', args: { thought: 'Held once.' }, hold: 'resume-first' },
        { say: 'Resumed and done, word by word.', hold: 'resume-second', chunk_delay_ms: 5 },
      ],
      dropper: [
        { call: 'think', args: { thought: 'Before the drop.' } },
        { call: 'think', args: { thought: 'After the drop.' }, hold: 'drop-gate' },
        { say: 'Still here after the drop.' },
      ],
      streamer: [
        {
          calls: [
            { call: 'think', args: { thought: LONG_THOUGHT } },
            { call: 'list_env_data', args: {} },
          ],
        },
        { say: STREAMED_TEXT, chunk_delay_ms: 10 },
      ],
      gatekeeper: [
        { call: 'think', args: { thought: 'May I?' } },
        { call: 'ask_human', args: { question: 'Which colour?' } },
        { call: 'wait', args: { seconds: 1, reason: 'let the paint dry' } },
        { call: 'store_env_data', args: { key: 'colour', short_description: 'The colour.', value: 'blue' } },
        { say: 'Approved, answered, waited and stored.' },
      ],
      deadline_lead: [
        {
          call: 'fork_join',
          args: {
            store: 'shared',
            deadline_seconds: 2,
            tasks: [
              { agent: 'laggard', message: 'Slow.' },
              { agent: 'late_writer', message: 'Store it late.' },
            ],
          },
        },
        { say: 'The fork ran out of time.' },
      ],
      // Held past the fork's deadline: its turn ends with the model call open.
      laggard: [{ say: 'Too late, word by word.', hold: 'late-reply', chunk_delay_ms: 5 }],
      late_writer: [{ call: 'gated_store', args: { key: 'late/key' } }, { say: 'Never said.' }],
      // Two turns (one per callback test) of a tool and a streamed reply: every kind of event a plain turn has.
      teller: [
        { call: 'think', args: { thought: 'What to tell.' } },
        { say: 'Told, word by word.', chunk_delay_ms: 2 },
        { call: 'think', args: { thought: 'What to tell again.' } },
        { say: 'Told again, word by word.', chunk_delay_ms: 2 },
      ],
    },
  },
  'run-events',
);

/** Opened by the refused-write test once the fork is over: `gated_store` writes only then. */
const lateStore = (() => {
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open: () => open() };
})();

/**
 * A tool that ignores its signal and writes env data once `lateStore` opens, as a task's call may still be running
 * when its task is given up on: the write it makes after the reclaim must be refused.
 */
const gatedStore = defineTool({
  name: 'gated_store',
  description: 'Stores a value in the shared data, when let.',
  parameters: z.object({ key: z.string() }),
  timeout_s: 120,
  retries: 0,
  run: async ({ key }, context) => {
    await lateStore.opened;
    await context.env.store({ key, shortDescription: 'Stored late.', value: 'late' });
    return 'stored';
  },
});

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('run-events', { agents, script, modelStream: true, tools: [gatedStore] });
});

after(async () => {
  await harness?.close();
});

const isStored = (event: RunEvent): event is StoredRunEvent => 'seq' in event;

/** Every stored event of a root's feed from the start, read by a fresh `thread.events()` that is then ended. */
async function wholeFeed(thread: ThreadHandle): Promise<StoredRunEvent[]> {
  const events = thread.events({ deltas: false });
  await events.catchUp();
  await events.finish();
  const out: RunEvent[] = [];
  for await (const event of events) out.push(event);
  assert.ok(out.every(isStored), 'deltas: false delivers stored events only');
  return out;
}

/** Events taken from an iterator in the background until `stop()`, which ends it after what has committed. */
function collect(events: ThreadEvents): { seen: RunEvent[]; stop(): Promise<RunEvent[]> } {
  const seen: RunEvent[] = [];
  const loop = (async () => {
    for await (const event of events) seen.push(event);
  })();
  return {
    seen,
    async stop() {
      await events.catchUp();
      await events.finish();
      await loop;
      return seen;
    },
  };
}

/** `thread` for the root and `~suffix` for a thread under it, so expectations do not name random ids. */
function short(root: string, threadId: string): string {
  return threadId === root ? 'root' : threadId.startsWith(`${root}/`) ? threadId.slice(root.length + 1) : threadId;
}

/** An event as a line: its thread, its type, and for tool events the tool. */
function line(root: string, event: StoredRunEvent): string {
  const tool = event.type === 'tool_call' || event.type === 'tool_result' ? `:${event.name}` : '';
  return `${short(root, event.threadId)} ${event.type}${tool}`;
}

/**
 * What every reading of the feed must be: numbers that only grow, every event of one number together and numbered
 * `seq`, `seq.1`, … in order, each id once.
 */
function assertNumbering(events: readonly StoredRunEvent[], what: string): void {
  const ids = events.map((event) => event.id);
  assert.equal(new Set(ids).size, ids.length, `${what}: each event once`);
  let previous = 0;
  let index = 0;
  for (const event of events) {
    if (event.seq !== previous) {
      assert.ok(event.seq > previous, `${what}: seq ${event.seq} after ${previous} (the numbers only grow)`);
      previous = event.seq;
      index = 0;
    } else {
      index++;
    }
    assert.equal(
      event.id,
      index === 0 ? String(event.seq) : `${event.seq}.${index}`,
      `${what}: the id of ${event.type}`,
    );
  }
}

/** Workflow run ids, which name operations (`<run id>:model:<step>`): new in every run. */
const RUN_ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * A run's events or result without what differs between two runs of one script: feed numbers, times, the root's
 * thread id, and run ids (numbered in order of appearance, so the same run id is the same name in both).
 */
function normalised(root: string, value: unknown): unknown {
  const runIds = new Map<string, string>();
  const text = JSON.stringify(value, (key, field: unknown) => (['seq', 'id', 'at'].includes(key) ? undefined : field))
    .replaceAll(root, '<root>')
    .replace(RUN_ID, (runId) => {
      if (!runIds.has(runId)) runIds.set(runId, `<run ${runIds.size}>`);
      return runIds.get(runId) ?? runId;
    });
  return JSON.parse(text) as unknown;
}

/** The rows of a tree's transcript, oldest first per thread. */
async function treeTranscript(root: string): Promise<TranscriptMessage[]> {
  const { rows } = await harness.pool.query<{ thread_id: string }>(
    'SELECT DISTINCT thread_id FROM transcript_messages WHERE root_thread_id = $1',
    [root],
  );
  const threads = await Promise.all(rows.map((row) => listMessages(harness.pool, row.thread_id)));
  return threads.flat();
}

/** The tree turn of `lead`: a tool, a delegation, a fork of one task. Everything in it happens one after another. */
const TREE_TURN = [
  'root turn_started',
  'root message',
  'root model_call_started',
  'root model_call_ended',
  'root tool_call:think',
  'root tool_result:think',
  'root model_call_started',
  'root model_call_ended',
  'root tool_call:helper',
  'root delegation_started',
  'helper-1 turn_started',
  'helper-1 message',
  'helper-1 model_call_started',
  'helper-1 model_call_ended',
  'helper-1 assistant_message',
  'helper-1 turn_ended',
  'root delegation_ended',
  'root tool_result:helper',
  'root model_call_started',
  'root model_call_ended',
  'root tool_call:fork_join',
  'root fork_started',
  'helper-2 fork_task_started',
  'helper-2 turn_started',
  'helper-2 message',
  'helper-2 model_call_started',
  'helper-2 model_call_ended',
  'helper-2 assistant_message',
  'helper-2 turn_ended',
  'helper-2 fork_task_ended',
  'root fork_ended',
  'root tool_result:fork_join',
  'root model_call_started',
  'root model_call_ended',
  'root assistant_message',
  'root turn_ended',
];

const MODEL_CALLS = TREE_TURN.filter((entry) => entry.endsWith(' model_call_started')).length;

/**
 * Runs the tree turn on `on`, started with its message in one call, with its events delivered to `run({ onEvent })`
 * (`send({ onEvent })` is the deltas test's).
 */
async function runTree(on: AgentHarness): Promise<{ root: string; result: SendMessageResult; seen: RunEvent[] }> {
  const root = uniqueThreadId('feed');
  const seen: RunEvent[] = [];
  const { result } = await on.client.run({
    agent: 'lead',
    threadId: root,
    message: 'Go.',
    onEvent: (event) => void seen.push(event),
  });
  assert.equal(result.reply, 'All done, streamed word by word.');
  return { root, result, seen };
}

test('run feed: a turn with a tool, a delegation and a fork arrives in order, once, numbered, as stored', async () => {
  const { root, seen } = await runTree(harness);
  const stored = seen.filter(isStored);
  assert.deepEqual(
    stored.map((event) => line(root, event)),
    TREE_TURN,
  );
  assertNumbering(stored, 'run({ onEvent })');
  const thread = harness.client.thread(root);
  const whole = await wholeFeed(thread);
  assert.deepEqual(whole, stored, 'a reading from 0 after the turn is what onEvent got while it ran');
  // The rows themselves: one per number, each number read once.
  const rows = await readRunFeed(harness.pool, root);
  assert.deepEqual(
    [...new Set(stored.map((event) => event.seq))],
    rows.map((row) => row.seq),
  );

  // Events on a thread carry that thread's agent, whichever row they come from.
  const agentOf = new Map([
    ['root', 'lead'],
    ['helper-1', 'helper'],
    ['helper-2', 'helper'],
  ]);
  for (const event of stored) {
    assert.equal(event.agent, agentOf.get(short(root, event.threadId)), `the agent of ${line(root, event)}`);
  }

  // Every stored message of the tree has its event, with the same text.
  const transcript = await treeTranscript(root);
  // The lead's message, three calls with their results and its reply; a message and a reply in each helper thread.
  assert.equal(transcript.length, 12);
  for (const message of transcript) {
    const on = stored.filter((event) => event.threadId === message.threadId);
    if (message.role === 'user') {
      assert.ok(
        on.some((event) => event.type === 'message' && event.content === message.content),
        `the message ${message.threadId}#${message.seq}`,
      );
    } else if (message.role === 'assistant') {
      assert.equal(
        on.filter((event) => event.type === 'model_call_ended' && event.operationId === message.operationId).length,
        1,
        `the reply ${message.threadId}#${message.seq} ends its model call once`,
      );
      assert.equal(
        on.filter((event) => event.type === 'model_call_started' && event.operationId === message.operationId).length,
        1,
        `the reply ${message.threadId}#${message.seq} started once`,
      );
      if (message.content) {
        assert.ok(
          on.some(
            (event) =>
              event.type === 'assistant_message' &&
              event.operationId === message.operationId &&
              event.content === message.content,
          ),
          `the text of ${message.threadId}#${message.seq}`,
        );
      }
      for (const call of message.toolCalls ?? []) {
        assert.equal(
          on.filter(
            (event) =>
              event.type === 'tool_call' &&
              event.toolCallId === call.id &&
              event.name === call.name &&
              event.arguments === call.arguments,
          ).length,
          1,
          `the call ${call.id} of ${message.threadId}#${message.seq}`,
        );
      }
    } else {
      assert.equal(
        on.filter(
          (event) =>
            event.type === 'tool_result' &&
            event.toolCallId === message.toolCallId &&
            event.content === message.content,
        ).length,
        1,
        `the result ${message.toolCallId} of ${message.threadId}`,
      );
    }
  }
  // And no event of these kinds that nothing stored: user, assistant and tool messages, counted.
  const count = (role: string) => transcript.filter((message) => message.role === role).length;
  assert.equal(stored.filter((event) => event.type === 'message').length, count('user'));
  assert.equal(stored.filter((event) => event.type === 'model_call_ended').length, count('assistant'));
  assert.equal(stored.filter((event) => event.type === 'tool_result').length, count('tool'));
  // Each tool call has its one result, after it, on its thread.
  const calls = stored.filter((event) => event.type === 'tool_call');
  assert.equal(calls.length, 3);
  for (const call of calls) {
    const results = stored.filter((event) => event.type === 'tool_result' && event.toolCallId === call.toolCallId);
    assert.equal(results.length, 1, `one result for ${call.toolCallId}`);
    assert.ok(results[0] && results[0].seq > call.seq && results[0].threadId === call.threadId);
  }
  const { rows: delegations } = await harness.pool.query('SELECT 1 FROM delegations WHERE root_thread_id = $1', [root]);
  // A fork task is a delegation row too; its own events say it (fork_task_started), not delegation_started.
  assert.equal(delegations.length, 2);
  assert.equal(stored.filter((event) => event.type === 'delegation_started').length, 1);

  // Streamed text comes inside its model call: after it started, before its reply was stored.
  const deltas = seen.filter((event): event is RunDeltaEvent => event.type === 'delta');
  const streams = new Set(deltas.map((delta) => delta.stream));
  assert.equal(streams.size, MODEL_CALLS, 'every model call streamed (tool calls too)');
  for (const stream of streams) {
    const startedAt = seen.findIndex((event) => event.type === 'model_call_started' && event.stream === stream);
    const started = seen[startedAt];
    assert.ok(started?.type === 'model_call_started' && started.streaming && started.attempt === 1, stream);
    const endedAt = seen.findIndex(
      (event) => event.type === 'model_call_ended' && event.operationId === started.operationId,
    );
    for (const [at, event] of seen.entries()) {
      if (event.type === 'delta' && event.stream === stream) {
        assert.ok(at > startedAt, `a delta of ${stream} after its call started`);
        assert.ok(at < endedAt, `a delta of ${stream} before its reply`);
        assert.equal(event.threadId, started.threadId);
        assert.equal(event.step, started.step);
      }
    }
  }
  assert.equal(
    seen.filter((event) => event.type === 'stream_abandoned').length,
    0,
    'nothing was abandoned in a turn without failures',
  );
});

test('run feed: a reader that leaves mid-turn and resumes with since gets exactly the rest', async () => {
  const root = uniqueThreadId('resume');
  const thread = await harness.client.startThread({ agent: 'pauser', threadId: root });
  const sending = settle(thread.send('Pause twice.'));

  // The first reading leaves once the turn waits on its held second step: its model call has started.
  const first: RunEvent[] = [];
  for await (const event of thread.events()) {
    first.push(event);
    // Steps count from 0: step 1 is the held second call.
    if (event.type === 'model_call_started' && event.step === 1) break;
  }
  const since = first.filter(isStored).at(-1)?.seq ?? 0;
  assert.ok(since > 0);

  // Meanwhile the turn goes on while nobody reads: the second step's reply is stored and the third step starts
  // (and waits on its own hold).
  harness.model.release('resume-first');
  await waitFor('the third model call to start', 30_000, async () =>
    (await readRunFeed(harness.pool, root, { since })).some(
      (row) => row.kind === 'model_call_started' && row.data.step === 2,
    )
      ? true
      : undefined,
  );

  // The second reading starts after the last event the first one took, and stays to the end of the turn.
  const second = collect(thread.events({ since }));
  await waitFor('the second reading to catch up', 30_000, () =>
    second.seen.some((event) => event.type === 'model_call_started' && event.step === 2) ? true : undefined,
  );
  harness.model.release('resume-second');
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Resumed and done, word by word.');
  const rest = (await second.stop()).filter(isStored);
  assert.ok(rest.every((event) => event.seq > since));

  const whole = await wholeFeed(thread);
  const union = [...first.filter(isStored), ...rest];
  assertNumbering(union, 'the two readings');
  assert.deepEqual(union, whole, 'the two readings together are one uninterrupted reading');
  assert.deepEqual(
    whole.map((event) => line(root, event)),
    [
      'root turn_started',
      'root message',
      'root model_call_started',
      'root model_call_ended',
      'root tool_call:think',
      'root tool_result:think',
      'root model_call_started',
      'root model_call_ended',
      'root tool_call:think',
      'root tool_result:think',
      'root model_call_started',
      'root model_call_ended',
      'root assistant_message',
      'root turn_ended',
    ],
  );
  // The cut was mid-turn: the second reading begins with what committed while nobody read (the held call's reply
  // and its tool's result), before the call it waited on started.
  assert.deepEqual(
    rest.slice(0, 4).map((event) => line(root, event)),
    ['root model_call_ended', 'root tool_call:think', 'root tool_result:think', 'root model_call_started'],
  );
});

test('run feed: a reader that leaves mid-write resumes from position and gets that write whole, nothing lost', async () => {
  const root = uniqueThreadId('position');
  const thread = await harness.client.startThread({ agent: 'helper', threadId: root });
  const outcome = await thread.send('Reply.');
  assert.equal(outcome.reply, 'Helped.');
  // The stored reply is one write with two events (its model call's end and its text): leave between them, with the
  // turn's end still queued behind.
  const first = thread.events({ deltas: false });
  const taken: StoredRunEvent[] = [];
  for await (const event of first) {
    taken.push(event as StoredRunEvent);
    if (event.type === 'model_call_ended') break;
  }
  const cut = taken.at(-1)?.seq ?? 0;
  // Numbers come from one sequence for every root, so the write before the cut need not be `cut - 1`: other threads
  // (and other test files) draw numbers in between.
  const before = taken.filter((event) => event.seq < cut).at(-1)?.seq;
  assert.ok(before !== undefined && before > 0, 'events were taken before the cut write');
  assert.equal(first.position, before, 'position stops before the write not taken whole');
  const rest = (await collect(thread.events({ since: first.position, deltas: false })).stop()).filter(isStored);
  assert.deepEqual(
    rest.filter((event) => event.seq === cut).map((event) => event.type),
    ['model_call_ended', 'assistant_message'],
    'the unfinished write comes again, whole',
  );
  const union = [...taken.filter((event) => event.seq <= first.position), ...rest];
  assert.deepEqual(union, await wholeFeed(thread), 'and with what was taken before it, the whole feed');
});

test('run feed: an iterator whose connection Postgres ends goes on, nothing lost or repeated', async () => {
  const root = uniqueThreadId('dropped');
  const thread = await harness.client.startThread({ agent: 'dropper', threadId: root });
  const events = thread.events();
  const reading = collect(events);
  const sending = settle(thread.send('Survive a drop.'));
  await waitFor('the held model call to start', 30_000, () =>
    reading.seen.some((event) => event.type === 'model_call_started' && event.step === 1) ? true : undefined,
  );
  // The watch's own connection, named by the client (`baton-client-watch`); other test files watch too, so only
  // this iterator's backend is ended. Reaching into the iterator is the one way to know which backend is its own.
  const listenerPid = () =>
    (events as unknown as { watch?: { listener: { processID?: number | null } } }).watch?.listener.processID;
  const killed = listenerPid();
  assert.ok(typeof killed === 'number');
  const { rows } = await harness.pool.query<{ ended: boolean }>(
    `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
      WHERE application_name = 'baton-client-watch' AND pid = $1`,
    [killed],
  );
  assert.deepEqual(rows, [{ ended: true }]);
  // The rest of the turn commits while the iterator reconnects (or after): either way it must all arrive.
  harness.model.release('drop-gate');
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Still here after the drop.');
  await waitFor('the iterator to reach the end of the turn', 30_000, () =>
    reading.seen.some((event) => event.type === 'turn_ended') ? true : undefined,
  );
  const reconnected = listenerPid();
  assert.ok(typeof reconnected === 'number' && reconnected !== killed, 'a new connection');
  const stored = (await reading.stop()).filter(isStored);
  assertNumbering(stored, 'the reconnected iterator');
  assert.deepEqual(stored, await wholeFeed(thread), 'one iterator across the drop reads what a fresh one does');
});

test('run feed: the deltas of each stream, in part order with no gap, add up to the stored reply', async () => {
  const root = uniqueThreadId('deltas');
  const thread = await harness.client.startThread({ agent: 'streamer', threadId: root });
  const seen: RunEvent[] = [];
  const result = await thread.send('Stream.', { onEvent: (event) => void seen.push(event) });
  assert.equal(result.reply, STREAMED_TEXT);
  const replies = (await listMessages(harness.pool, root)).filter((message) => message.role === 'assistant');
  assert.equal(replies.length, 2);
  for (const reply of replies) {
    const stream = `${reply.operationId}#1`;
    const deltas = seen.filter((event): event is RunDeltaEvent => event.type === 'delta' && event.stream === stream);
    assert.deepEqual(
      deltas.map((delta) => delta.part),
      deltas.map((_, i) => i),
      `the parts of ${stream}: from 0, in order, no gap`,
    );
    assert.equal(deltas.map((delta) => delta.text ?? '').join(''), reply.content ?? '', 'the text adds up');
    const pieces = deltas.flatMap((delta) => delta.toolCalls ?? []);
    const calls = (reply.toolCalls ?? []).map((call, index) => {
      const own = pieces.filter((piece) => piece.index === index);
      return {
        id: own.find((piece) => piece.id !== undefined)?.id,
        name: own.find((piece) => piece.name !== undefined)?.name,
        arguments: own.map((piece) => piece.arguments ?? '').join(''),
      };
    });
    // Compared by length first: a long difference printed whole says nothing.
    const shape = (list: { id?: string; name?: string; arguments: string }[]) =>
      list.map((call) => ({ id: call.id, name: call.name, length: call.arguments.length }));
    assert.deepEqual(
      shape(calls),
      shape(reply.toolCalls ?? []),
      'each tool call adds up: id and name, then its arguments',
    );
    assert.ok(
      calls.every((call, index) => call.arguments === reply.toolCalls?.[index]?.arguments),
      'the arguments add up',
    );
    assert.deepEqual(
      [...new Set(pieces.map((piece) => piece.index))],
      (reply.toolCalls ?? []).map((_, index) => index),
      'no piece of a call the reply does not have',
    );
  }
  // The long arguments could not go in one notification: they were split, so this checked the joins.
  const first = replies[0];
  const firstDeltas = seen.filter((event) => event.type === 'delta' && event.stream === `${first?.operationId}#1`);
  assert.ok(firstDeltas.length > 2, `${firstDeltas.length} batches for ${LONG_THOUGHT.length} characters`);
});

test('run feed: a worker that does not stream has the same stored events and result, without deltas', async () => {
  const whole = await startTestHarness('run-events-whole', { agents, script, modelStream: false, tools: [gatedStore] });
  try {
    const off = await runTree(whole);
    const on = await runTree(harness);
    assert.equal(
      off.seen.filter((event) => !isStored(event)).length,
      0,
      'no delta and no abandoned stream without streaming',
    );
    const storedOff = off.seen.filter(isStored);
    const storedOn = on.seen.filter(isStored);
    const starts = (events: StoredRunEvent[]) =>
      events.flatMap((event) => (event.type === 'model_call_started' ? [event.streaming] : []));
    assert.deepEqual(starts(storedOff), Array(MODEL_CALLS).fill(false), 'each model call says it did not stream');
    assert.deepEqual(starts(storedOn), Array(MODEL_CALLS).fill(true));
    const withoutStreaming = (root: string, events: StoredRunEvent[]) =>
      normalised(
        root,
        events.map((event) => (event.type === 'model_call_started' ? { ...event, streaming: false } : event)),
      );
    assert.deepEqual(withoutStreaming(off.root, storedOff), withoutStreaming(on.root, storedOn));
    assert.deepEqual(normalised(off.root, off.result), normalised(on.root, on.result), 'the same result');
  } finally {
    await whole.close();
  }
});

/**
 * What a callback must have seen when `send` or `run` resolved: every event the feed holds for the turn, stored ones as
 * a reading from `since` returns them, the turn's end last.
 */
async function assertSawTheTurn(thread: ThreadHandle, since: number, atReply: RunEvent[], what: string): Promise<void> {
  const rest = thread.events({ since, deltas: false });
  await rest.catchUp();
  await rest.finish();
  const stored: RunEvent[] = [];
  for await (const event of rest) stored.push(event);
  assert.equal(stored.at(-1)?.type, 'turn_ended', 'the feed holds the whole turn');
  assert.deepEqual(atReply.filter(isStored), stored, `${what}: every stored event of the turn, in order, each once`);
  assert.equal(atReply.filter(isStored).length, stored.length);
  const last = atReply.at(-1);
  assert.ok(last?.type === 'turn_ended' && last.threadId === thread.threadId, `${what}: the turn's end comes last`);
}

test('run feed: an async onEvent that takes its time gets every event of the turn, its end last, before run resolves', async () => {
  const root = uniqueThreadId('slow-callback');
  const seen: RunEvent[] = [];
  const { thread, result } = await harness.client.run({
    agent: 'teller',
    threadId: root,
    message: 'Tell me.',
    onEvent: async (event) => {
      // Slower than the turn (a dozen events): its events queue up behind the callback.
      await new Promise((resolve) => setTimeout(resolve, 250));
      seen.push(event);
    },
  });
  const atReply = [...seen];
  assert.equal(result.reply, 'Told, word by word.');
  await assertSawTheTurn(thread, 0, atReply, 'run({ onEvent }) with an async callback');
  assert.ok(
    atReply.some((event) => event.type === 'delta'),
    'deltas were given too',
  );

  // The next message's turn, from where the first ended, to a callback that does its work synchronously.
  const since = await thread.lastEventSeq();
  const syncSeen: RunEvent[] = [];
  const second = await thread.send('Tell me again.', { onEvent: (event) => void syncSeen.push(event) });
  const syncAtReply = [...syncSeen];
  assert.equal(second.reply, 'Told again, word by word.');
  await assertSawTheTurn(thread, since, syncAtReply, 'send({ onEvent }) with a sync callback');
});

test('run feed: approvals, questions, waits and env writes have their events', async () => {
  const root = uniqueThreadId('gated');
  const thread = await harness.client.startThread({ agent: 'gatekeeper', threadId: root });
  const sending = settle(thread.send('Go through the gates.'));
  const [approval] = await waitFor('the approval', 30_000, async () => {
    const rows = await thread.approvals();
    return rows.length > 0 ? rows : undefined;
  });
  assert.ok(approval);
  await thread.approve(approval.approvalId, { by: 'alice' });
  const [question] = await waitFor('the question', 30_000, async () => {
    const rows = await thread.questions();
    return rows.length > 0 ? rows : undefined;
  });
  assert.ok(question);
  await thread.answer(question.questionId, 'Blue.');
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Approved, answered, waited and stored.');

  const whole = await wholeFeed(thread);
  assertNumbering(whole, 'the gated turn');
  const steps = whole.filter((event) => !event.type.startsWith('model_call')).map((event) => line(root, event));
  assert.deepEqual(steps, [
    'root turn_started',
    'root message',
    'root tool_call:think',
    'root approval_requested',
    'root approval_decided',
    'root tool_result:think',
    'root tool_call:ask_human',
    'root question_asked',
    'root question_closed',
    'root tool_result:ask_human',
    'root tool_call:wait',
    'root wait_started',
    'root tool_result:wait',
    'root wait_ended',
    'root tool_call:store_env_data',
    'root env_written',
    'root tool_result:store_env_data',
    'root assistant_message',
    'root turn_ended',
  ]);
  const find = <T extends StoredRunEvent['type']>(type: T) =>
    whole.find((event): event is Extract<StoredRunEvent, { type: T }> => event.type === type);
  const thinkCall = whole.find((event) => event.type === 'tool_call' && event.name === 'think');
  assert.ok(thinkCall?.type === 'tool_call');
  assert.deepEqual(
    { ...find('approval_requested'), seq: 0, id: '', at: '' },
    {
      seq: 0,
      id: '',
      at: '',
      threadId: root,
      agent: 'gatekeeper',
      type: 'approval_requested',
      approvalId: approval.approvalId,
      tool: 'think',
      toolCallId: thinkCall.toolCallId,
      arguments: thinkCall.arguments,
      ...(approval.expiresAt ? { expiresAt: find('approval_requested')?.expiresAt } : {}),
    },
  );
  assert.equal(find('approval_decided')?.status, 'approved');
  assert.equal(find('approval_decided')?.decidedBy, 'alice');
  assert.equal(find('question_asked')?.question, 'Which colour?');
  assert.equal(find('question_asked')?.questionId, question.questionId);
  assert.equal(find('question_closed')?.status, 'answered');
  assert.equal(find('question_closed')?.answer, 'Blue.');
  const waitCall = whole.find((event) => event.type === 'tool_call' && event.name === 'wait');
  assert.ok(waitCall?.type === 'tool_call');
  assert.equal(find('wait_started')?.toolCallId, waitCall.toolCallId);
  assert.equal(find('wait_started')?.arguments, waitCall.arguments);
  assert.equal(find('wait_ended')?.toolCallId, waitCall.toolCallId);
  const env = find('env_written');
  assert.equal(env?.key, 'colour');
  assert.equal(env?.action, 'stored');
  assert.equal(env?.threadId, root);
});

test('run feed: a reclaimed fork task’s late write is a refused write; a task cut off mid-call abandons its stream', async () => {
  const root = uniqueThreadId('refused');
  const thread = await harness.client.startThread({ agent: 'deadline_lead', threadId: root });
  const reading = collect(thread.events());
  const result = await thread.send('Fork and wait.');
  assert.equal(result.reply, 'The fork ran out of time.');
  // Both tasks were reclaimed at the deadline; the writer's tool call is still running: let it write now.
  lateStore.open();
  await waitFor('the refused write', 30_000, () =>
    reading.seen.some((event) => event.type === 'write_refused') ? true : undefined,
  );
  const seen = await reading.stop();
  assertNumbering(seen.filter(isStored), 'the refused turn');
  const tasks = seen.filter((event) => event.type === 'fork_task_ended');
  assert.deepEqual(tasks.map((event) => event.type === 'fork_task_ended' && [event.agent, event.reclaimed]).sort(), [
    ['laggard', true],
    ['late_writer', true],
  ]);
  const writer = tasks.find((event) => event.agent === 'late_writer');
  const refused = seen.find((event) => event.type === 'write_refused');
  assert.ok(refused?.type === 'write_refused' && writer);
  assert.equal(refused.threadId, writer.threadId);
  assert.equal(refused.agent, 'late_writer');
  assert.deepEqual(
    { write: refused.write, writeEpoch: refused.writeEpoch, currentEpoch: refused.currentEpoch },
    { write: 'env', writeEpoch: 0, currentEpoch: 1 },
  );
  assert.ok(seen.indexOf(refused) > seen.indexOf(writer), 'told after the task ended: the write came too late');

  // The laggard's turn ended with its model call open: the reader is told its stream will not be completed, just
  // before the turn's end.
  const laggard = tasks.find((event) => event.agent === 'laggard');
  assert.ok(laggard);
  const started = seen.find((event) => event.type === 'model_call_started' && event.threadId === laggard.threadId);
  assert.ok(started?.type === 'model_call_started');
  const abandonedAt = seen.findIndex((event) => event.type === 'stream_abandoned' && event.stream === started.stream);
  assert.deepEqual(seen[abandonedAt], {
    type: 'stream_abandoned',
    threadId: laggard.threadId,
    stream: started.stream,
    reason: 'turn_ended',
  });
  const turnEndedAt = seen.findIndex((event) => event.type === 'turn_ended' && event.threadId === laggard.threadId);
  assert.equal(abandonedAt, turnEndedAt - 1, 'told just before the turn’s end');
  const turnEnded = seen[turnEndedAt];
  assert.ok(turnEnded?.type === 'turn_ended');
  assert.equal(turnEnded.status, 'reclaimed');
});

test('run feed: lastEventSeq waits for an event still being written with a lower number, so from it none is missed', async () => {
  // Two writers of one root: the first draws its number and has not committed, the second draws the next and commits.
  const root = uniqueThreadId('cursor');
  const writer = await harness.pool.connect();
  try {
    await writer.query('BEGIN');
    const { rows: pending } = await writer.query<{ seq: string }>(
      `SELECT run_event($1, $1, 'lead', 'message', '{"content":"slow"}') AS seq`,
      [root],
    );
    const { rows: committed } = await harness.pool.query<{ seq: string }>(
      `SELECT run_event($1, $1, 'lead', 'message', '{"content":"quick"}') AS seq`,
      [root],
    );
    assert.ok(Number(committed[0]?.seq) > Number(pending[0]?.seq));
    // "From now" may not be the quick one's number while the slow one, below it, can still commit: a reader from
    // there would never see it. The cursor must wait for the slow writer (the root's lock, as reads do).
    const cursor = settle(lastRunFeedSeq(harness.pool, root));
    let given = false;
    void cursor.then(() => (given = true));
    const waiting = await waitFor('the cursor to settle or wait for the root lock', 30_000, async () => {
      if (given) return 'given';
      // Someone waits for this root's lock (the key of migration 008, split in two by pg_locks).
      const { rows } = await harness.pool.query(
        `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
            AND ((classid::bigint << 32) | objid::bigint) = env_root_lock_key($1)`,
        [root],
      );
      return rows.length > 0 ? 'waiting' : undefined;
    });
    assert.equal(waiting, 'waiting', 'the cursor was given while an event below it was still being written');
    await writer.query('COMMIT');
    const outcome = await cursor;
    if (!outcome.ok) throw outcome.error;
    assert.equal(outcome.value, Number(committed[0]?.seq));
  } finally {
    await writer.query('ROLLBACK').catch(() => undefined);
    writer.release();
  }
});

test('run feed: a model call’s start mark tells the root’s listeners itself, once it can be read', async () => {
  const root = uniqueThreadId('mark-told');
  const listener = await harness.pool.connect();
  try {
    const told: string[] = [];
    listener.on('notification', (message) => told.push(`${message.channel} ${message.payload ?? ''}`));
    await listener.query(`LISTEN ${runEventsChannel(root)}`);
    const call = {
      rootThreadId: root,
      threadId: root,
      agent: 'lead',
      operationId: `${root}:model:0`,
      step: 0,
      attempt: 1,
      stream: `${root}:model:0#1`,
      streaming: false,
      provider: 'default',
      model: 'scripted',
    };
    await recordModelCallStarted(harness.pool, call);
    await recordModelCallWaiting(harness.pool, { ...call, scope: 'model default/scripted', reason: 'at its limit' });
    // Nothing else announces this root: each notification is the mark's own.
    await waitFor('both marks to be told', 30_000, () => (told.length >= 2 ? true : undefined));
    const payload = JSON.stringify({ rootThreadId: root });
    assert.deepEqual(told, [`${runEventsChannel(root)} ${payload}`, `${runEventsChannel(root)} ${payload}`]);
    const feed = await readRunFeed(harness.pool, root);
    assert.deepEqual(
      feed.map((row) => row.kind),
      ['model_call_started', 'model_call_waiting'],
    );
  } finally {
    await listener.query('UNLISTEN *').catch(() => undefined);
    listener.release();
  }
});
