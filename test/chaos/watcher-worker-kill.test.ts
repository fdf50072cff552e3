/**
 * Crash exactness of watchers: a writer wakes a root's watchers after its env-data write commits (Signal-with-Start of
 * each matching watcher's workflow). When its worker dies between the commit and that signal, the activity is retried
 * on another worker, finds its write done (same operation id) and signals again: the watcher still wakes, and once.
 * `baton worker` runs as a real process; `BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL` makes worker 1 SIGKILL itself right
 * after the write of `findings/a` commits, so "between the commit and the wake-up" is a state the test sets, not a
 * moment it hopes for.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { ENV_CHANGED_SIGNAL, wakeupThreadId, watcherWorkflowId } from '../../common/watchers';
import { listMessages } from '../../db/transcripts';
import { readModelLog } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { turnDispatches } from '../../testing/turn-dispatches';
import { startScriptedWorker, useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';
import { settle, waitFor } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-watcher-kill-'));
const modelLog = path.join(workDir, 'model.jsonl');

const KEY = 'findings/a';
const REPLY = 'Stored.';
const REVIEW = 'Reviewed.';
const script = parseScript(
  `
agents:
  finder:
    - { call: store_env_data, args: { key: "${KEY}", short_description: "A finding.", value: 1 } }
    - say: "${REPLY}"
  reviewer:
    - say: "${REVIEW}"
`,
  'watcher-worker-kill',
);

/**
 * Two worker start-ups, the 30 s heartbeat timeout that notices the dead worker's tool step, the retry, and the
 * wake-up's turn: about a minute on an idle machine. Every step waits on a state, so the budget is only a backstop.
 */
const TEST_TIMEOUT_MS = 300_000;
/** The longest any one wait may take. */
const WAIT_MS = 120_000;

const workers = useKillableWorkers({
  name: 'chaos-watcher-kill',
  dir: workDir,
  agents: {
    'finder.md': '---\nname: finder\ndescription: Stores a finding in the shared env data.\n---\nYou find.\n',
    'reviewer.md': '---\nname: reviewer\ndescription: Reviews findings when they change.\n---\nYou review.\n',
  },
  script,
  modelLog,
  // Worker 2 sweeps only once an hour, so the wake-up below is the retried writer's doing, not the sweep's
  // (watcher-side-effects-kill.test.ts is the sweep's, for a write no retry repeats).
  workerEnv: { BATON_WATCH_SWEEP_SECONDS: '3600' },
});

/** Worker 1 carries the fault, so it is started here rather than by the fixture (whose workers share one env). */
const faulty: WorkerProcess[] = [];
after(async () => {
  await Promise.all(faulty.map((worker) => worker.kill()));
});

async function startFaultyWorker(name: string): Promise<WorkerProcess> {
  const { taskQueue, model } = workers();
  const worker = await startScriptedWorker(name, {
    taskQueue,
    modelBaseUrl: model.baseURL,
    // Where the fixture wrote the agents.
    agentsDir: path.join(workDir, 'agents'),
    env: { BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL: KEY },
  });
  faulty.push(worker);
  return worker;
}

/** Bounds a promise: a worker that neither dies nor lives on fails the test instead of hanging it. */
async function within<T>(what: string, timeoutMs: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

test(
  'chaos: a worker SIGKILLed between the commit and the wake-up still wakes it exactly once',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const worker1 = await startFaultyWorker('worker 1');
    t.diagnostic(`worker 1 (killing itself before the watchers' signal of ${KEY}) polling after ${elapsed()}`);
    const threadId = uniqueThreadId('watch-kill');
    let thread: ThreadHandle | undefined;

    const envEvents = async () =>
      (
        await pool.query<{ seq: string; action: string }>(
          'SELECT seq, action FROM env_events WHERE root_thread_id = $1 AND key = $2 ORDER BY seq',
          [threadId, KEY],
        )
      ).rows.map((row) => ({ seq: Number(row.seq), action: row.action }));
    const wakeupCount = async () =>
      Number(
        (
          await pool.query<{ count: string }>(
            'SELECT count(*) AS count FROM env_watch_wakeups WHERE root_thread_id = $1',
            [threadId],
          )
        ).rows[0]?.count,
      );
    const watcherHistory = async () =>
      (await client.temporal.workflow.getHandle(watcherWorkflowId(threadId, 'reviewer')).fetchHistory()).events ?? [];
    const changeSignals = async () =>
      (await watcherHistory()).filter(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === ENV_CHANGED_SIGNAL,
      ).length;

    try {
      thread = await client.startThread({ agent: 'finder', threadId });
      const watcher = await within(
        'the watcher to be added',
        WAIT_MS,
        thread.addWatcher({ agent: 'reviewer', keys: ['findings/*'], debounceS: 0 }),
      );
      assert.equal(watcher.name, 'reviewer');
      // Its workflow (started with a signal) looks at the log once and finds nothing: from then on only a writer's
      // signal makes it look again, so a wake-up below can only come from the write's signal.
      await waitFor("the watcher's first look at the log", WAIT_MS, async () =>
        turnDispatches(await watcherHistory()).some((dispatch) => dispatch.startsWith('local:lookForWatchChanges'))
          ? true
          : undefined,
      );
      t.diagnostic(`watcher added and idle after ${elapsed()}`);

      const sending = settle(thread.send('Find something.'));
      const exit = await within('worker 1 to die of the fault', WAIT_MS, worker1.exited);
      t.diagnostic(`worker 1 exited after ${elapsed()}: ${JSON.stringify(exit)}`);
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' }, `worker 1 died by SIGKILL:\n${worker1.output()}`);
      assert.match(worker1.output(), /fault injection: killing this worker/, 'worker 1 killed itself at the fault');

      // Worker 1 died between the commit and the signal: the write is stored, the watcher was not told.
      const committed = await envEvents();
      assert.deepEqual(
        committed.map((event) => event.action),
        ['stored'],
        `the write of ${KEY} committed before the kill`,
      );
      assert.equal(await wakeupCount(), 0, 'no wake-up before the kill');
      assert.equal(await changeSignals(), 1, "the watcher's only signal so far is the one that started it");

      await workers().start('worker 2');
      t.diagnostic(`worker 2 polling after ${elapsed()}`);
      const outcome = await within('the turn to complete on worker 2', WAIT_MS, sending);
      t.diagnostic(`turn completed after ${elapsed()}`);
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.status, 'completed');
      assert.equal(outcome.value.reply, REPLY);

      // The tool step was retried on worker 2: it found its write done and answered as if it had made it.
      const transcript = await listMessages(pool, threadId);
      assert.deepEqual(
        transcript.map((message) => message.role),
        ['user', 'assistant', 'tool', 'assistant'],
      );
      assert.doesNotMatch(transcript[2]?.content ?? '', /^Error:/, 'the store succeeded');

      const wakeups = await waitFor('one finished wake-up of reviewer', WAIT_MS, async () => {
        const found = await thread?.wakeups({ watcher: 'reviewer' });
        return found !== undefined && found.length > 0 && found.every((wakeup) => wakeup.status !== 'running')
          ? found
          : undefined;
      });
      t.diagnostic(`wake-up finished after ${elapsed()}`);
      assert.equal(wakeups.length, 1, 'one wake-up');
      const [wakeup] = wakeups;
      assert.equal(wakeup?.status, 'completed');
      assert.equal(wakeup?.threadId, wakeupThreadId(threadId, 'reviewer', 1));
      assert.deepEqual(
        wakeup?.changes.map((change) => [change.key, change.action, change.oldVersion, change.newVersion]),
        [[KEY, 'stored', null, 1]],
      );
      assert.deepEqual(wakeup?.changes[0]?.writer, { agent: 'finder', thread: threadId });
      assert.equal(wakeup?.changes[0]?.seq, committed[0]?.seq, 'the wake-up is about the write worker 1 committed');

      // The wake-up's turn was told of the change and answered.
      const told = readModelLog(modelLog).filter(
        (request) => request.agent === 'reviewer' && request.thread === wakeup?.threadId,
      );
      assert.equal(told.length, 1, "one model request of the wake-up's turn");
      assert.match(
        told[0]?.messages.find((message) => message.role === 'user')?.content ?? '',
        /findings\/a: stored as version 1 by finder/,
      );
      const reviewed = await listMessages(pool, wakeup?.threadId ?? '');
      assert.equal(reviewed.at(-1)?.content, REVIEW);

      // Nothing is left to wake it again: its cursor is past the write, and still one wake-up, one write.
      const seq = committed[0]?.seq ?? Number.POSITIVE_INFINITY;
      await waitFor(`the watcher's cursor past event ${seq}`, WAIT_MS, async () => {
        const found = (await thread?.watchers())?.find((candidate) => candidate.name === 'reviewer');
        return found !== undefined && found.cursor >= seq ? true : undefined;
      });
      assert.equal((await thread.wakeups({ watcher: 'reviewer' })).length, 1, 'still exactly one wake-up');
      assert.equal(await wakeupCount(), 1);
      assert.deepEqual(await envEvents(), committed, `one stored event for ${KEY}: the retry wrote nothing again`);
      // The retried step's signal is the one that woke it: the killed attempt sent none.
      assert.equal(await changeSignals(), 2, 'the start signal and the retried writer signal');
    } finally {
      await thread?.end();
    }
  },
);
