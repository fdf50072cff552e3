/**
 * Crash exactness of watchers for a write no retry repeats: a user tool with side effects stores a key a watcher
 * watches, and its worker dies between the commit and the watcher's signal. The tool is never run again (the next
 * worker tells the model its outcome is unknown), so no retried writer signals; the next worker's watch sweep finds
 * the committed change no signal announced and wakes the watcher, once. `baton worker` runs as a real process, the tool
 * comes from a module loaded through `BATON_TOOLS`, and `BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL` makes worker 1 SIGKILL
 * itself right after the write commits.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { ENV_CHANGED_SIGNAL, wakeupThreadId, watcherWorkflowId } from '../../common/watchers';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { turnDispatches } from '../../testing/turn-dispatches';
import { startScriptedWorker, useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';
import { settle, waitFor } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-watcher-side-effects-'));
const toolsFile = path.join(workDir, 'tools.mjs');
const runsLog = path.join(workDir, 'runs.log');

const KEY = 'findings/b';
const TOOLS_MODULE = `
import fs from 'node:fs';
import { z } from 'zod';
export default [
  {
    name: 'record_finding',
    description: 'Records a finding (side effects: never run twice).',
    parameters: z.object({}),
    sideEffects: true,
    run: async (_args, ctx) => {
      fs.appendFileSync(${JSON.stringify(runsLog)}, ctx.operationId + '\\n');
      await ctx.env.store({ key: ${JSON.stringify(KEY)}, shortDescription: 'A finding.', value: 1 });
      return 'recorded';
    },
  },
];
`;

const script = parseScript(
  `
agents:
  recorder:
    - { call: record_finding, args: {} }
    - say: "Done."
  reviewer:
    - say: "Reviewed."
`,
  'watcher-side-effects-kill',
);

/** Two worker start-ups, the heartbeat timeout that notices the dead worker, the sweep, the wake-up: a backstop. */
const TEST_TIMEOUT_MS = 300_000;
const WAIT_MS = 120_000;

fs.writeFileSync(toolsFile, TOOLS_MODULE);
const workers = useKillableWorkers({
  name: 'chaos-watcher-side-effects',
  dir: workDir,
  agents: {
    'recorder.md':
      '---\nname: recorder\ndescription: Records a finding.\ncapabilities: [record_finding]\n---\nYou record.\n',
    'reviewer.md': '---\nname: reviewer\ndescription: Reviews findings when they change.\n---\nYou review.\n',
  },
  script,
  // Worker 2 sweeps every second, so the test need not wait out the default interval.
  workerEnv: { BATON_TOOLS: toolsFile, BATON_WATCH_SWEEP_SECONDS: '1' },
});

const faulty: WorkerProcess[] = [];
after(async () => {
  await Promise.all(faulty.map((worker) => worker.kill()));
});

test(
  'chaos: a side-effect tool whose worker dies between its write and the signal still wakes the watcher, once',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool, taskQueue, model } = workers();
    const worker1 = await startScriptedWorker('worker 1', {
      taskQueue,
      modelBaseUrl: model.baseURL,
      agentsDir: path.join(workDir, 'agents'),
      env: { BATON_TOOLS: toolsFile, BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL: KEY },
    });
    faulty.push(worker1);
    const threadId = uniqueThreadId('watch-side-effects');
    let thread: ThreadHandle | undefined;
    const watcherHistory = async () =>
      (await client.temporal.workflow.getHandle(watcherWorkflowId(threadId, 'reviewer')).fetchHistory()).events ?? [];
    const changeSignals = async () =>
      (await watcherHistory()).filter(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === ENV_CHANGED_SIGNAL,
      ).length;
    const stored = async () =>
      (
        await pool.query<{ seq: string }>(
          "SELECT seq FROM env_events WHERE root_thread_id = $1 AND key = $2 AND action = 'stored'",
          [threadId, KEY],
        )
      ).rows.map((row) => Number(row.seq));

    try {
      thread = await client.startThread({ agent: 'recorder', threadId });
      await thread.addWatcher({ agent: 'reviewer', keys: ['findings/*'], debounceS: 0 });
      await waitFor("the watcher's first look at the log", WAIT_MS, async () =>
        turnDispatches(await watcherHistory()).some((dispatch) => dispatch.startsWith('local:lookForWatchChanges'))
          ? true
          : undefined,
      );

      const sending = settle(thread.send('Record it.'));
      const died = await Promise.race([
        worker1.exited,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), WAIT_MS)),
      ]);
      assert.deepEqual(died, { code: null, signal: 'SIGKILL' }, `worker 1 died by SIGKILL:\n${worker1.output()}`);
      assert.match(worker1.output(), /fault injection: killing this worker/);
      // The write committed; nobody told the watcher.
      const committed = await stored();
      assert.equal(committed.length, 1, `${KEY} was stored once before the kill`);
      assert.equal(await changeSignals(), 1, "the watcher's only signal so far is the one that started it");

      await workers().start('worker 2');
      t.diagnostic('worker 2 polling');
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.status, 'completed');
      // The tool was not run again: the model was told its outcome is unknown.
      assert.equal(fs.readFileSync(runsLog, 'utf8').trim().split('\n').length, 1, 'record_finding ran once');
      const transcript = await listMessages(pool, threadId);
      assert.match(transcript.find((message) => message.role === 'tool')?.content ?? '', /ended without recording/);

      const wakeups = await waitFor('one finished wake-up of reviewer', WAIT_MS, async () => {
        const found = await thread?.wakeups({ watcher: 'reviewer' });
        return found !== undefined && found.length > 0 && found.every((wakeup) => wakeup.status !== 'running')
          ? found
          : undefined;
      });
      assert.equal(wakeups.length, 1);
      const [wakeup] = wakeups;
      assert.equal(wakeup?.status, 'completed');
      assert.equal(wakeup?.threadId, wakeupThreadId(threadId, 'reviewer', 1));
      assert.deepEqual(
        wakeup?.changes.map((change) => [change.key, change.seq, change.writer.agent]),
        [[KEY, committed[0], 'recorder']],
      );
      // Sweeps after it find nothing more: still one wake-up, and the sweep's was the one signal after the start.
      const seq = committed[0] ?? Number.POSITIVE_INFINITY;
      await waitFor(`the watcher's cursor past event ${seq}`, WAIT_MS, async () => {
        const found = (await thread?.watchers())?.find((candidate) => candidate.name === 'reviewer');
        return found !== undefined && found.cursor >= seq ? true : undefined;
      });
      await new Promise((resolve) => setTimeout(resolve, 3000));
      assert.equal((await thread.wakeups({ watcher: 'reviewer' })).length, 1, 'still exactly one wake-up');
      assert.equal(await changeSignals(), 2, 'the start signal and the sweep’s');
    } finally {
      await thread?.end();
    }
  },
);
