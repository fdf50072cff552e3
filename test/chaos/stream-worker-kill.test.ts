/**
 * A worker SIGKILLed while a model reply streams: the readers of the run feed are told the first stream is abandoned
 * when the retried attempt starts a new one (also a reader that joined after the first attempt started, which knows
 * that stream only from its deltas), the new stream adds up to the reply, and the stored reply is the whole scripted
 * text, stored once. `baton worker` runs as a real process with `BATON_MODEL_STREAM=on`; the scripted model holds the
 * reply's start and end, so "mid-stream" is a state the test sets, not a moment it hopes for.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { RunDeltaEvent, RunEvent, ThreadEvents, ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { readModelLog } from '../../testing/harness';
import { validateScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { useKillableWorkers } from '../../testing/worker-process';
import { settle, waitFor } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-stream-worker-kill-'));
const modelLog = path.join(workDir, 'model.jsonl');

/** Forty words, a chunk each: the text goes out (`hold` released), then the reply's end waits (`hold_end`). */
const REPLY = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

const script = validateScript(
  { agents: { streamer: [{ say: REPLY, chunk_delay_ms: 5, hold: 'text', hold_end: 'end' }] } },
  'stream-worker-kill',
);

/**
 * Two worker start-ups and the 20 s heartbeat timeout that notices the dead worker: under a minute on an idle
 * machine. Every step waits on an event, so this is only a backstop against a hang.
 */
const TEST_TIMEOUT_MS = 300_000;

const workers = useKillableWorkers({
  name: 'chaos-stream-kill',
  dir: workDir,
  agents: {
    'streamer.md':
      '---\nname: streamer\ndescription: Streams slowly, so its worker can be killed mid-stream.\n---\nStream.\n',
  },
  script,
  modelLog,
  workerEnv: { BATON_MODEL_STREAM: 'on' },
});

/** A reader of the feed taking events in the background until `stop()`, which ends it after what has committed. */
function follow(events: ThreadEvents): { events: ThreadEvents; seen: RunEvent[]; stop(): Promise<RunEvent[]> } {
  const seen: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of events) seen.push(event);
  })();
  return {
    events,
    seen,
    async stop() {
      await events.catchUp();
      await events.finish();
      await reading;
      return seen;
    },
  };
}

const deltasOf = (seen: readonly RunEvent[], stream: string): RunDeltaEvent[] =>
  seen.filter((event): event is RunDeltaEvent => event.type === 'delta' && event.stream === stream);
const joined = (seen: readonly RunEvent[], stream: string): string =>
  deltasOf(seen, stream)
    .map((delta) => delta.text ?? '')
    .join('');

test(
  'chaos: a worker SIGKILLed mid-stream leaves an abandoned stream, a new one, and one complete stored reply',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const workerA = await workers().start('worker A');
    const threadId = uniqueThreadId('stream-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'streamer', threadId });
      const early = follow(thread.events());
      const sending = settle(thread.send('Stream slowly.'));

      // The first attempt has started (its request waits at the model). A second reader joins after that start.
      const first = await waitFor('the first attempt to start', 60_000, () =>
        early.seen.find((event) => event.type === 'model_call_started'),
      );
      assert.ok(first.type === 'model_call_started');
      const late = follow(thread.events({ since: first.seq }));
      await late.events.catchUp();

      // The text streams to both; the reply's end is held, so the kill lands mid-stream.
      workers().model.release('text');
      await waitFor('the text of the first attempt to reach both readers', 60_000, () =>
        [early, late].every((reader) => joined(reader.seen, first.stream) === REPLY) ? true : undefined,
      );
      const exit = await workerA.kill();
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });
      t.diagnostic(`worker A killed mid-stream after ${elapsed()}`);
      assert.deepEqual(
        (await listMessages(pool, threadId)).map((message) => message.role),
        ['user'],
        'no reply was stored before the kill',
      );

      // The retried attempt streams its text again and is let finish.
      workers().model.release('end');
      await workers().start('worker B');
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, REPLY);
      t.diagnostic(`reply after ${elapsed()}`);

      for (const [name, reader] of [
        ['the reader from the start', early],
        ['the reader that joined after the first start', late],
      ] as const) {
        const seen = await reader.stop();
        // Two attempts of one model call, each with a stream of its own.
        const starts = seen.filter((event) => event.type === 'model_call_started');
        const second = starts.at(-1);
        assert.ok(second?.type === 'model_call_started', name);
        assert.equal(second.attempt, 2, name);
        assert.equal(second.operationId, first.operationId, `${name}: the same call, retried`);
        assert.notEqual(second.stream, first.stream, name);
        assert.ok(second.streaming, name);

        // The reader is told to drop the first stream, just before the second starts, and sees nothing of it after.
        const abandoned = seen.filter((event) => event.type === 'stream_abandoned');
        assert.deepEqual(
          abandoned,
          [{ type: 'stream_abandoned', threadId, stream: first.stream, reason: 'retried' }],
          name,
        );
        const abandonedAt = seen.indexOf(abandoned[0] as RunEvent);
        assert.equal(seen[abandonedAt + 1], second, `${name}: told when the retried attempt starts`);
        assert.deepEqual(deltasOf(seen.slice(abandonedAt), first.stream), [], `${name}: nothing of it after`);

        // Each stream was shown whole, numbered from 0 with no gap; the second one before the stored reply.
        for (const stream of [first.stream, second.stream]) {
          const parts = deltasOf(seen, stream).map((delta) => delta.part);
          assert.deepEqual(
            parts,
            parts.map((_, i) => i),
            `${name}: the parts of ${stream}`,
          );
          assert.equal(joined(seen, stream), REPLY, `${name}: the text of ${stream}`);
        }
        assert.ok(deltasOf(seen, second.stream).every((delta) => delta.attempt === 2));
        const endedAt = seen.findIndex((event) => event.type === 'model_call_ended');
        assert.ok(seen.lastIndexOf(deltasOf(seen, second.stream).at(-1) as RunEvent) < endedAt, name);

        // The stored reply is told once, whole.
        assert.deepEqual(
          seen.flatMap((event) => (event.type === 'assistant_message' ? [event.content] : [])),
          [REPLY],
          name,
        );
        assert.equal(seen.filter((event) => event.type === 'model_call_ended').length, 1, name);
      }

      // Stored once, whole.
      const transcript = await listMessages(pool, threadId);
      assert.deepEqual(
        transcript.map((message) => [message.role, message.content]),
        [
          ['user', 'Stream slowly.'],
          ['assistant', REPLY],
        ],
      );
      assert.equal(readModelLog(modelLog).filter((request) => request.thread === threadId).length, 2);
    } finally {
      await thread?.end();
    }
  },
);
