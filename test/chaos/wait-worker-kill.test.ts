/**
 * A `wait` survives its worker: the worker process is SIGKILLed while the turn waits on its timer, a new worker takes
 * over, and the turn resumes when the timer fires, with one tool result saying it waited as planned.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { settle, waitFor } from './waiting';
import { useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-wait-'));

/** Long enough that the kill certainly lands inside the wait; the timer fires whether or not a worker is up. */
const WAIT_SECONDS = 10;
const REPLY = 'Still here after the wait.';
const script = parseScript(
  `
agents:
  patient:
    - call: wait
      args: { seconds: ${WAIT_SECONDS}, reason: "outlive the worker" }
    - say: "${REPLY}"
`,
  'wait-worker-kill',
);

/** Two worker start-ups (bundling) and the wait: a backstop against a hang, generous for a loaded machine. */
const TEST_TIMEOUT_MS = 300_000;

const workers = useKillableWorkers({
  name: 'chaos-wait',
  dir: workDir,
  agents: {
    'patient.md': '---\nname: patient\ndescription: Waits, so its worker can be killed meanwhile.\n---\nYou wait.\n',
  },
  script,
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);

test(
  'chaos: a worker SIGKILLed while a turn waits is replaced and the wait ends on its timer',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const { client, pool } = workers();
    const workerA = await startWorker('worker A');
    const threadId = uniqueThreadId('wait-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'patient', threadId });
      const sending = settle(thread.send('Wait a little.'));
      const started = thread;
      const waiting = await waitFor('the wait to start', 60_000, async () => (await started.status()).waits?.[0]);
      assert.equal(waiting.reason, 'outlive the worker');

      const exit = await workerA.kill();
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });
      assert.deepEqual(
        (await listMessages(pool, threadId)).map((m) => m.role),
        ['user', 'assistant'],
        'the wait had not ended when the worker died',
      );

      await startWorker('worker B');
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, REPLY);

      const transcript = await listMessages(pool, threadId);
      assert.deepEqual(
        transcript.map((m) => m.role),
        ['user', 'assistant', 'tool', 'assistant'],
      );
      const result = transcript[2]?.content ?? '';
      const match = new RegExp(
        `^Waited (\\d+) seconds, until ${waiting.until.replace(/[.]/g, '\\.')}, as planned \\(outlive the worker\\)\\.$`,
      ).exec(result);
      assert.ok(match, result);
      assert.ok(Number(match[1]) >= WAIT_SECONDS, result);
      // One timer, fired once: the new worker picked the turn up from its history instead of starting it over.
      const events = (await client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory()).events ?? [];
      assert.equal(events.filter((e) => e.timerStartedEventAttributes).length, 1);
      assert.equal(events.filter((e) => e.timerFiredEventAttributes).length, 1);
      assert.equal(
        events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel').length,
        2,
      );
      assert.deepEqual((await thread.status()).waits, []);
    } finally {
      await thread?.end();
    }
  },
);
