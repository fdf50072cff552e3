/**
 * How env writes wake watchers: a signal per watcher claimed in Postgres and sent best effort after the commit, so
 * writes while a watcher has not looked yet send no more; a write whose signal Temporal refuses still succeeds (a tool
 * with side effects answers with its result), and the workers' sweep wakes the watcher from the change in Postgres;
 * a run of the watcher's workflow continues as new after a bounded number of signals, also during a wake-up's turn,
 * which it leaves running and waits for in its next run; a look that finds only changes past the depth limit and more
 * events after them reads on. Real Temporal, real Postgres, the scripted model over HTTP.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import type { ThreadHandle } from '../../client';
import { ENV_CHANGED_SIGNAL, wakeupThreadId, watcherWorkflowId } from '../../common/watchers';
import { setWorldVariablesText } from '../../db/worlds';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { SIGNALS_PER_RUN } from '../../workflows/watcher';
import { waitFor } from '../chaos/waiting';
import { watcherRuns, watcherSignals } from './watcher-runs';

/** The key whose watchers' signals the worker's fault refuses, as Temporal refuses a signal past a run's limit. */
const REFUSED_KEY = 'f/refused';
/** Over-depth changes written in one go: one look's page (1,000 events) and one more. */
const BULK_WRITES = 1001;

function agent(name: string, extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const tools = [
  defineTool({
    name: 'record_refused',
    description: 'Records a finding once (side effects).',
    parameters: z.object({}),
    sideEffects: true,
    run: async (_args, context) => {
      await context.env.store({ key: REFUSED_KEY, shortDescription: 'A finding.', value: 1 });
      return `recorded ${REFUSED_KEY}`;
    },
  }),
  defineTool({
    name: 'write_many',
    description: 'Stores `count` keys under `prefix/`, one write each.',
    parameters: z.object({ prefix: z.string(), count: z.int().min(1).max(5000) }),
    timeout_s: 600,
    run: async ({ prefix, count }, context) => {
      for (let index = 0; index < count; index += 1) {
        await context.env.store({ key: `${prefix}/${index}`, shortDescription: 'One of many.', value: index });
      }
      return `${count} written`;
    },
  }),
];

const agents: AgentRegistry = new Map([
  agent('frecorder', 'capabilities: [record_refused]\n'),
  agent('frwatch'),
  agent('cwriter', 'capabilities: [write_many]\n'),
  agent('coalesced'),
  agent('floodwriter'),
  agent('floodwatch'),
  agent('odlead'),
  agent('bulker', 'capabilities: [write_many]\n'),
  agent('xwatch'),
]);

const store = (key: string) =>
  `{ call: store_env_data, args: { key: "${key}", short_description: "Test data.", value: 1 } }`;

const script = parseScript(
  `
agents:
  frecorder:
    - { call: record_refused, args: {} }
    - say: "Recorded."
  frwatch:
    - say: "Seen."
  cwriter:
    - { call: write_many, args: { prefix: c, count: 40 } }
    - say: "Forty."
  coalesced:
    - say: "Seen them."
  floodwriter:
    - ${store('fl/1')}
    - say: "One."
    - ${store('fl/2')}
    - say: "Two."
  floodwatch:
    - { say: "Seen.", hold: flood }
  odlead:
    - ${store('x/first')}
    - say: "First."
    - ${store('go')}
    - say: "Go."
    - ${store('x/last')}
    - say: "Last."
  bulker:
    - { call: write_many, args: { prefix: x, count: ${BULK_WRITES} } }
    - say: "Bulk written."
  xwatch:
    - { say: "Seen x.", hold: xhold }
`,
  'watcher-signals',
);

/** Sweeps every second and refuses the signals of writes of `REFUSED_KEY`. */
let harness: AgentHarness;
/** Sweeps only once an hour: what it shows is the watcher's own doing. */
let unswept: AgentHarness;

before(async () => {
  harness = await startTestHarness('watcher-signals', {
    agents,
    script,
    tools,
    watchSweepSeconds: 1,
    watchFaults: { failSignalForKey: REFUSED_KEY },
  });
  unswept = await startTestHarness('watcher-unswept', { agents, script, tools, watchSweepSeconds: 3600 });
});

after(async () => {
  await harness?.close();
  await unswept?.close();
});

/** Waits for the watcher's wake-ups to number `count`, all finished; returns them oldest first. */
async function finishedWakeups(thread: ThreadHandle, watcher: string, count: number) {
  return waitFor(`${count} finished wake-up(s) of ${watcher}`, 120_000, async () => {
    const wakeups = await thread.wakeups({ watcher });
    return wakeups.length === count && wakeups.every((wakeup) => wakeup.status !== 'running')
      ? wakeups.reverse()
      : undefined;
  });
}

/** The env events a root logged for keys under `prefix/` that changed them. */
async function changesUnder(pool: AgentHarness['pool'], rootThreadId: string, prefix: string): Promise<number> {
  const { rows } = await pool.query<{ count: string }>(
    `SELECT count(*) AS count FROM env_events
      WHERE root_thread_id = $1 AND key LIKE $2 AND action IN ('stored', 'updated', 'deleted')`,
    [rootThreadId, `${prefix}/%`],
  );
  return Number(rows[0]?.count);
}

test('a side-effect tool whose write cannot signal answers with its result, and the sweep wakes the watcher once', async () => {
  const thread = await harness.client.startThread({ agent: 'frecorder', threadId: uniqueThreadId('refused') });
  await thread.addWatcher({ agent: 'frwatch', keys: ['f/*'], debounceS: 0 });
  assert.equal((await thread.send('Record it.')).status, 'completed');
  // The write committed and its signal was refused: the tool's result is its own, not an error (it runs once).
  const results = (await thread.transcript()).filter((message) => message.role === 'tool');
  assert.deepEqual(
    results.map((message) => message.content),
    [`recorded ${REFUSED_KEY}`],
  );

  const [wakeup] = await finishedWakeups(thread, 'frwatch', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => [change.key, change.writer.agent]),
    [[REFUSED_KEY, 'frecorder']],
  );
  // Its signals: the one that started it, and the sweep's; the write sent none.
  assert.equal(await watcherSignals(harness.client, thread.threadId, 'frwatch'), 2);
  // Sweeps after the wake-up find nothing more to tell it.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.equal((await thread.wakeups({ watcher: 'frwatch' })).length, 1);
  assert.equal(await watcherSignals(harness.client, thread.threadId, 'frwatch'), 2);
});

test('writes while a watcher waits out its debounce window send far fewer signals than writes', async () => {
  const thread = await harness.client.startThread({ agent: 'cwriter', threadId: uniqueThreadId('coalesce') });
  await thread.addWatcher({ agent: 'coalesced', keys: ['c/*'], debounceS: 5 });
  assert.equal((await thread.send('Write forty.')).status, 'completed');
  assert.equal(await changesUnder(harness.pool, thread.threadId, 'c'), 40);
  const [wakeup] = await finishedWakeups(thread, 'coalesced', 1);
  assert.equal(wakeup?.changes.length, 40, 'one wake-up for all forty writes');
  // The start's signal, the first write's, and at most a few more: a write that finds a signal claimed since the
  // watcher's last look sends none (it was one signal per write).
  const signals = await watcherSignals(harness.client, thread.threadId, 'coalesced');
  assert.ok(signals <= 5, `${signals} signals for 40 writes`);
});

test("a watcher's run continues as new at its bound of signals during a wake-up's turn, which runs on", async () => {
  const thread = await harness.client.startThread({ agent: 'floodwriter', threadId: uniqueThreadId('flood') });
  await thread.addWatcher({ agent: 'floodwatch', keys: ['fl/*'], debounceS: 0 });
  await thread.send('One.');
  // Wake-up 1's turn is held in its model call.
  await waitFor('the wake-up turn to call the model', 60_000, () =>
    harness.model.requestCount('floodwatch') >= 1 ? true : undefined,
  );
  const handle = harness.client.temporal.workflow.getHandle(watcherWorkflowId(thread.threadId, 'floodwatch'));
  const firstRun = (await handle.describe()).runId;
  // A flood of signals, as workers of an older version or anything outside Baton could send.
  const FLOOD = SIGNALS_PER_RUN * 2 + SIGNALS_PER_RUN / 2;
  for (let index = 0; index < FLOOD; index += 1) await handle.signal(ENV_CHANGED_SIGNAL);
  const runs = await waitFor('the flood to be spread over runs', 60_000, async () => {
    const found = await watcherRuns(harness.client, thread.threadId, 'floodwatch');
    const total = found.reduce((sum, run) => sum + run.signals, 0);
    return total >= FLOOD + 2 && found.length >= 2 ? found : undefined;
  });
  assert.equal(runs[0]?.runId, firstRun);
  for (const run of runs.slice(0, -1)) {
    assert.ok(run.continued, `run ${run.runId} continued as new`);
    // The bound, plus what arrived while the run's last task was being answered.
    assert.ok(run.signals < SIGNALS_PER_RUN * 1.5, `run ${run.runId} received ${run.signals} signals`);
    assert.ok(run.events.length < 1500, `run ${run.runId} has ${run.events.length} events`);
  }
  // The wake-up's turn was left running, not stopped; it is still wake-up 1's.
  const wakeupTurn = harness.client.temporal.workflow.getHandle(
    `baton/${wakeupThreadId(thread.threadId, 'floodwatch', 1)}`,
  );
  assert.equal((await wakeupTurn.describe()).status.name, 'RUNNING');
  const during = await thread.wakeups({ watcher: 'floodwatch' });
  assert.deepEqual(
    during.map((wakeup) => [wakeup.wakeup, wakeup.status]),
    [[1, 'running']],
  );

  // Released, the turn ends; the run that carries the wake-up records how, and the watcher wakes for the next change.
  harness.model.release('flood');
  const [first] = await finishedWakeups(thread, 'floodwatch', 1);
  assert.equal(first?.status, 'completed');
  assert.equal((await wakeupTurn.describe()).status.name, 'COMPLETED');
  await thread.send('Two.');
  const wakeups = await finishedWakeups(thread, 'floodwatch', 2);
  assert.deepEqual(
    wakeups.map((wakeup) => [wakeup.status, wakeup.changes.map((change) => change.key)]),
    [
      ['completed', ['fl/1']],
      ['completed', ['fl/2']],
    ],
  );
});

test('a look that finds only changes past the depth limit, with more after them, reads on to a change within it', async () => {
  const world = `watchdepth${process.pid}`;
  await setWorldVariablesText(unswept.pool, world, 'BATON_WATCH_MAX_DEPTH=1\n');
  const thread = await unswept.client.startThread({ agent: 'odlead', world, threadId: uniqueThreadId('overdepth') });
  await thread.addWatcher({ agent: 'xwatch', keys: ['x/**'], debounceS: 0 });
  await thread.addWatcher({ agent: 'bulker', keys: ['go'], debounceS: 0 });
  await thread.send('First.');
  await waitFor('wake-up 1 of xwatch to call the model', 60_000, () =>
    unswept.model.requestCount('xwatch') >= 1 ? true : undefined,
  );
  // While it is held: bulker, woken at depth 1, writes a page of x/ keys, each past the depth limit of 1 for xwatch;
  // then a person's turn writes x/last, within it.
  await thread.send('Go.');
  await finishedWakeups(thread, 'bulker', 1);
  assert.equal(await changesUnder(unswept.pool, thread.threadId, 'x'), BULK_WRITES + 1);
  await thread.send('Last.');
  unswept.model.release('xhold');
  // Its next look reads one page of changes past the limit (reported), and the next page holds x/last.
  const wakeups = await finishedWakeups(thread, 'xwatch', 2);
  assert.deepEqual(
    wakeups.map((wakeup) => wakeup.changes.map((change) => change.key)),
    [['x/first'], ['x/last']],
  );
  const { rows } = await unswept.pool.query<{ data: { watcher: string; depth: number; maxDepth: number } }>(
    "SELECT data FROM run_events WHERE root_thread_id = $1 AND kind = 'watch_skipped'",
    [thread.threadId],
  );
  assert.ok(rows.length >= 1, 'the changes past the limit were reported');
  assert.deepEqual(
    rows.map((row) => [row.data.watcher, row.data.depth, row.data.maxDepth]),
    rows.map(() => ['xwatch', 2, 1]),
  );
});
