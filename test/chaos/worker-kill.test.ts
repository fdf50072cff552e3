import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { decodeTimeoutType } from '@temporalio/common';
import type { ThreadHandle } from '../../client';
import type { SendMessageResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { readModelLog, type ModelLogEntry } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { settle, waitFor } from './waiting';
import { useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-worker-kill-'));
const modelLog = path.join(workDir, 'model.jsonl');

/**
 * Far longer than the few milliseconds between the request reaching the model and the SIGKILL, so the first call
 * is certainly cut off; and far shorter than the 20 s heartbeat timeout, so the retried call (which, seeing the
 * same transcript, gets the same step and the same delay) is not timed out itself.
 */
const MODEL_DELAY_MS = 8_000;
const REPLY = 'Survived the crash.';
const script = parseScript(
  `
agents:
  survivor:
    - say: "${REPLY}"
      delay_ms: ${MODEL_DELAY_MS}
`,
  'worker-kill',
);

/**
 * Two worker start-ups (webpack bundling, a few seconds each; worker B's overlaps the wait below), the 20 s
 * heartbeat timeout that notices the dead worker, the 1 s retry interval and two model delays: about 35 s on an idle
 * machine. Every step waits on an event (a request logged, a process exited, a reply), so the budget is only a
 * backstop against a hang: generous, so that a loaded machine (CI, several suites at once) does not fail it.
 */
const TEST_TIMEOUT_MS = 300_000;

const workers = useKillableWorkers({
  name: 'chaos-worker-kill',
  dir: workDir,
  agents: {
    'survivor.md':
      '---\nname: survivor\ndescription: Answers slowly, so its worker can be killed mid-call.\n---\nYou survive.\n',
  },
  script,
  modelLog,
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);

function requestsFor(threadId: string): ModelLogEntry[] {
  return readModelLog(modelLog).filter((request) => request.thread === threadId);
}

test(
  'chaos: a worker SIGKILLed during a model call is replaced and the turn completes with one stored reply',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const workerA = await startWorker('worker A');
    t.diagnostic(`worker A polling after ${elapsed()}`);
    const threadId = uniqueThreadId('worker-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'survivor', threadId });
      const sending = settle(thread.send('Keep going'));

      await waitFor('the model request of the first attempt', 30_000, () =>
        requestsFor(threadId).length > 0 ? true : undefined,
      );
      const exit = await workerA.kill();
      t.diagnostic(`worker A killed mid-call after ${elapsed()}`);
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' }, 'worker A died by the signal, not on its own');
      assert.deepEqual(
        (await listMessages(pool, threadId)).map((m) => m.role),
        ['user'],
        'no reply was stored before the kill',
      );

      await startWorker('worker B');
      t.diagnostic(`worker B polling after ${elapsed()}`);
      const outcome = await sending;
      t.diagnostic(`reply after ${elapsed()}`);
      if (!outcome.ok) throw outcome.error;
      const result: SendMessageResult = outcome.value;
      assert.equal(result.status, 'completed');
      assert.equal(result.reply, REPLY);
      assert.equal(result.turn, 1);

      const transcript = await listMessages(pool, threadId);
      assert.deepEqual(
        transcript.map((m) => [m.seq, m.role, m.content]),
        [
          [1, 'user', 'Keep going'],
          [2, 'assistant', REPLY],
        ],
      );

      // The first request was cut off by the kill (its connection dropped, so the model never answered it);
      // the retry on worker B saw the same transcript and was answered.
      const requests = requestsFor(threadId);
      assert.equal(requests.length, 2, 'one request per attempt');
      const [first, second] = requests;
      assert.deepEqual(second?.messages, first?.messages, 'the retried call saw the same transcript');
      assert.deepEqual(
        first?.messages.map((m) => m.role),
        ['system', 'user'],
      );
      assert.ok(first?.messages[0]?.content?.startsWith('You survive.\n\n## System Context'));
      assert.equal(first?.messages[1]?.content, 'Keep going');

      // Temporal retried the same activity (attempt 2) because worker A stopped heartbeating, rather than the
      // workflow scheduling a second model call.
      const history = await client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
      const events = history.events ?? [];
      const modelCalls = events.filter(
        (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel',
      );
      assert.equal(modelCalls.length, 1, 'the workflow scheduled one model call');
      const started = events.find(
        (event) =>
          event.activityTaskStartedEventAttributes &&
          Number(event.activityTaskStartedEventAttributes.scheduledEventId) === Number(modelCalls[0]?.eventId),
      )?.activityTaskStartedEventAttributes;
      assert.equal(started?.attempt, 2);
      assert.equal(decodeTimeoutType(started?.lastFailure?.timeoutFailureInfo?.timeoutType), 'HEARTBEAT');
    } finally {
      await thread?.end();
    }
  },
);
