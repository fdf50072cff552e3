/**
 * `thread.events()` over a watch that the test drives (`ThreadEvents` takes any `RunWatchStarter`): the order in
 * which a stored row and a streamed delta reach the iterator is chosen here, so an interleaving that a loaded machine
 * produces only now and then is checked every run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BatonClient } from '../../client';
import { ThreadHandle } from '../../client';
import type { FeedWatch } from '../../client/feed-watch';
import { ThreadEvents, type RunWatchStarter } from '../../client/thread-events';
import type { DeltaAnnouncement, RunEvent, RunFeedRow } from '../../common/run-events';
import type { SendMessageResult } from '../../common/types';

const AT = new Date('2030-01-31T09:00:00.000Z');

/** A watch whose rows the test hands out; `catchUp` delivers what the test queued for it. */
function drivenWatch() {
  let onRow: ((row: RunFeedRow) => void | Promise<void>) | undefined;
  let onDelta: ((delta: DeltaAnnouncement) => void) | undefined;
  let stopped!: () => void;
  const done = new Promise<void>((resolve) => (stopped = resolve));
  /** Rows that have committed and that the next catch-up reads. */
  const committed: RunFeedRow[] = [];
  const watch: FeedWatch = {
    done,
    stop: () => Promise.resolve(stopped()),
    catchUp: async () => {
      for (const row of committed.splice(0)) await onRow?.(row);
    },
  };
  const starter: RunWatchStarter = {
    startRunWatch: (_root, rowListener, _since, deltaListener) => {
      onRow = rowListener;
      onDelta = deltaListener;
      return Promise.resolve(watch);
    },
  };
  return {
    starter,
    commit: (row: RunFeedRow) => committed.push(row),
    delta: (delta: DeltaAnnouncement) => onDelta?.(delta),
  };
}

const delta = (part: number, text: string): DeltaAnnouncement => ({
  rootThreadId: 'root',
  threadId: 'root',
  agent: 'lead',
  stream: 'run:model:0#1',
  step: 0,
  attempt: 1,
  part,
  text,
});

test('thread.events(): a delta held for a catch-up that reads its call’s reply is dropped, never given after the reply', async () => {
  const driven = drivenWatch();
  // The reader starts after the call's start (since 5): its deltas are held until a catch-up says whether it comes.
  const events = new ThreadEvents(driven.starter, 'root', { since: 5 });
  await events.catchUp();
  // The model's last batch is published, then its reply commits before the catch-up the delta asked for reads.
  driven.commit({
    seq: 6,
    threadId: 'root',
    agent: 'lead',
    kind: 'assistant_message',
    data: { operationId: 'run:model:0', content: 'Done.', toolCalls: [] },
    createdAt: AT,
  });
  driven.delta(delta(0, 'Done.'));
  await events.catchUp();
  await events.finish();
  const seen: RunEvent[] = [];
  for await (const event of events) seen.push(event);
  assert.deepEqual(
    seen.map((event) => event.type),
    ['model_call_ended', 'assistant_message'],
    'the stored reply alone: a streamed piece after it would be drawn as a stream that never ends',
  );
});

test('thread.events(): a delta held until its call’s start is read follows that start', async () => {
  const driven = drivenWatch();
  const events = new ThreadEvents(driven.starter, 'root', { since: 5 });
  await events.catchUp();
  driven.commit({
    seq: 6,
    threadId: 'root',
    agent: 'lead',
    kind: 'model_call_started',
    data: { operationId: 'run:model:0', step: 0, attempt: 1, stream: 'run:model:0#1', streaming: true },
    createdAt: AT,
  });
  driven.delta(delta(0, 'Do'));
  await events.catchUp();
  driven.delta(delta(1, 'ne.'));
  await events.finish();
  const seen: RunEvent[] = [];
  for await (const event of events) seen.push(event);
  assert.deepEqual(
    seen.map((event) => (event.type === 'delta' ? `delta ${event.text}` : event.type)),
    ['model_call_started', 'delta Do', 'delta ne.'],
  );
});

/**
 * A thread whose message's Update commits `rows` before it returns and whose feed is `driven`: what a callback gets
 * is decided by the order chosen here, not by how fast Postgres announces. The client is the part of `BatonClient`
 * that `send` uses: its feed, its last feed number and the Update.
 */
function drivenThread(driven: ReturnType<typeof drivenWatch>, rows: RunFeedRow[]): ThreadHandle {
  const usage = { promptTokens: 1, completionTokens: 1, totalTokens: 2 };
  const result: SendMessageResult = { threadId: 'root', turn: 1, status: 'completed', reply: 'Done.', steps: 1, usage };
  const client = {
    ...driven.starter,
    database: () => ({ query: () => Promise.resolve({ rows: [{ seq: '0' }] }) }),
    temporal: {
      workflow: {
        getHandle: (workflowId: string) => ({
          workflowId,
          executeUpdate: () => {
            // The turn's rows committed while the Update ran; none was announced before its reply came back.
            for (const row of rows) driven.commit(row);
            return Promise.resolve(result);
          },
        }),
      },
    },
  };
  return new ThreadHandle(client as unknown as BatonClient, 'root');
}

const TURN_ROWS: RunFeedRow[] = (
  [
    ['turn_started', {}],
    ['message', { role: 'user', content: 'Go.' }],
    ['model_call_started', { operationId: 'run:model:0', step: 0, attempt: 1, stream: 'run:model:0#1' }],
    ['assistant_message', { operationId: 'run:model:0', content: 'Done.', toolCalls: [] }],
    ['turn_ended', { status: 'completed' }],
  ] as const
).map(([kind, data], i) => ({ seq: i + 1, threadId: 'root', agent: 'lead', kind, data, createdAt: AT }));

for (const kind of ['a synchronous', 'an asynchronous'] as const) {
  test(`send({ onEvent }): ${kind} callback gets every event the last catch-up reads, the turn's end last, before send resolves`, async () => {
    const driven = drivenWatch();
    const thread = drivenThread(driven, TURN_ROWS);
    const seen: string[] = [];
    const result = await thread.send('Go.', {
      onEvent:
        kind === 'a synchronous'
          ? (event) => void seen.push(event.type)
          : async (event) => {
              await new Promise((resolve) => setImmediate(resolve));
              seen.push(event.type);
            },
    });
    assert.equal(result.reply, 'Done.');
    assert.deepEqual(seen, [
      'turn_started',
      'message',
      'model_call_started',
      'model_call_ended',
      'assistant_message',
      'turn_ended',
    ]);
  });
}
