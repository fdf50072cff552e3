import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { readModelLog } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { settle, waitFor } from './waiting';
import { useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-fork-kill-'));
const modelLog = path.join(workDir, 'model.jsonl');
const TASKS = 3;

/** Long enough that every task's first model call is in flight when the worker dies. */
const MODEL_DELAY_MS = 4_000;
const script = parseScript(
  `
agents:
  fanner:
    - call: fork_join
      args:
        deadline_seconds: 300
        tasks:
${Array.from({ length: TASKS }, (_, i) => `          - { agent: prober, message: "Probe ${i + 1}." }`).join('\n')}
    - say: "fanned"
  prober:
    - call: store_env_data
      args: { key: probe, short_description: "What the probe found.", value: { ok: true } }
      delay_ms: ${MODEL_DELAY_MS}
    - say: "probed"
`,
  'fork-worker-kill',
);

/**
 * Two worker start-ups, the 20 s heartbeat timeout that notices the dead worker's model calls, retries and the
 * fork's own steps: about 45 s, with room for a slow machine.
 */
const TEST_TIMEOUT_MS = 150_000;

const workers = useKillableWorkers({
  name: 'chaos-fork-kill',
  dir: workDir,
  agents: {
    'fanner.md':
      '---\nname: fanner\ndescription: Fans probes out.\ncapabilities: [fork_join, prober]\n---\nYou fan out.\n',
    'prober.md': '---\nname: prober\ndescription: Probes.\n---\nYou probe.\n',
  },
  script,
  modelLog,
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);

test(
  'chaos: a worker SIGKILLed mid-fork is replaced; the fork completes and every write is stored once',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const db = pool;
    const workerA = await startWorker('worker A');
    const root = uniqueThreadId('fork-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'fanner', threadId: root });
      const sending = settle(thread.send('Probe everything.'));
      await waitFor('every task model call in flight', 60_000, () =>
        readModelLog(modelLog).filter((r) => r.headers['x-baton-root-thread'] === root && r.agent === 'prober')
          .length >= TASKS
          ? true
          : undefined,
      );
      const exit = await workerA.kill();
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });
      t.diagnostic('worker A killed while every task waited for the model');
      await startWorker('worker B');

      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, 'fanned');

      const [fork] = await thread.forks();
      assert.equal(fork?.status, 'success');
      assert.deepEqual(
        fork?.tasks.map((task) => task.status),
        Array.from({ length: TASKS }, () => 'success'),
      );
      // Every task's finding merged once under its prefix; no operation wrote twice.
      assert.deepEqual(
        (await thread.envData()).map((entry) => [entry.key, entry.version]),
        Array.from({ length: TASKS }, (_, i) => [`fork/1/${i + 1}/probe`, 1]),
      );
      const { rows: stored } = await db.query<{ key: string; scope: string; n: number }>(
        `SELECT key, scope, COUNT(*)::int AS n FROM env_events WHERE root_thread_id = $1 AND action = 'stored'
          GROUP BY key, scope ORDER BY scope, key`,
        [root],
      );
      assert.equal(stored.length, TASKS * 2, 'each probe stored once in its own store and merged once');
      assert.ok(stored.every((row) => row.n === 1));
      // Each task's transcript holds one reply per step, although its first model call ran twice.
      for (const task of fork?.tasks ?? []) {
        const roles = (await listMessages(db, task.threadId)).map((m) => m.role);
        assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant'], task.threadId);
      }
      const { rows: refused } = await db.query('SELECT 1 FROM refused_writes WHERE root_thread_id = $1', [root]);
      assert.equal(refused.length, 0, 'no task was reclaimed: the deadline was never reached');
    } finally {
      await thread?.end();
    }
  },
);
