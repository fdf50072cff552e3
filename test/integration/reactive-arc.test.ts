/**
 * The reactive ARC team (examples/arc-team/agents/arc_verified_lead.md and verifier.md) with the shipped model script, on the real
 * task 007bbfb7: the lead sets the verifier to watch `arc/candidates/*` and stores two candidate rules in one reply;
 * one debounced wake-up of the verifier checks both with check_arc_candidate and stores what the tool returned under
 * `arc/verdicts/<name>`: the fractal rule holds, the scaling rule fails. Real Temporal, real Postgres, the scripted
 * model over HTTP.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { wakeupThreadId } from '../../common/watchers';
import { EnvStore } from '../../db/env-data';
import { findDemoProblems, formatDemoProblem } from '../../dev/demo-check';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { waitFor } from '../chaos/waiting';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';

const env = readTestEnv();
const ROOT = path.resolve(__dirname, '..', '..');
const modelLog = path.join(fs.mkdtempSync(path.join(env.stateDir, 'reactive-arc-')), 'model.jsonl');
const task = JSON.parse(fs.readFileSync(path.join(DEFAULT_ARC_DATA_DIR, '007bbfb7.json'), 'utf8')) as {
  train: { input: number[][]; output: number[][] }[];
};
const CANDIDATES = ['arc/candidates/fractal', 'arc/candidates/scaling'];

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('reactive-arc', {
    agents: path.join(ROOT, 'examples', 'arc-team', 'agents'),
    script: path.join(ROOT, 'examples', 'arc-team', 'agents', 'model-script.yaml'),
    modelLogFile: modelLog,
  });
});

after(async () => {
  await harness?.close();
});

/** The results of the agent's calls to `tool` in `thread`, in call order, parsed as JSON. */
function toolResults(thread: string, agent: string, tool: string): unknown[] {
  const requests: ModelLogEntry[] = harness.modelRequests().filter((r) => r.thread === thread && r.agent === agent);
  const last = requests.at(-1);
  if (last === undefined) return [];
  const calls = last.messages.flatMap((m) => (m.tool_calls ?? []) as { id: string; function: { name: string } }[]);
  return calls
    .filter((call) => call.function.name === tool)
    .map((call) => last.messages.find((m) => m.role === 'tool' && m.tool_call_id === call.id)?.content ?? 'none')
    .map((content) => JSON.parse(content) as unknown);
}

async function watcherCursor(thread: ThreadHandle): Promise<number | undefined> {
  return (await thread.watchers()).find((watcher) => watcher.name === 'verifier')?.cursor;
}

test('reactive ARC: one wake-up of the verifier checks both candidates for real and stores their verdicts', async () => {
  const root = uniqueThreadId('reactive-arc');
  const thread = await harness.client.startThread({ agent: 'arc_verified_lead', threadId: root });
  const result = await thread.send('Solve ARC task 007bbfb7 and have every candidate rule verified.');
  assert.equal(result.status, 'completed');
  const store = new EnvStore(harness.pool);

  // The lead stored the task and, after setting the watcher, both candidates in one reply.
  assert.deepEqual(((await store.get(root, 'arc_task'))?.value as typeof task).train, task.train);
  const fractal = await store.get(root, 'arc/candidates/fractal');
  const scaling = await store.get(root, 'arc/candidates/scaling');
  const outputs = (value: unknown) => (value as { train_outputs: number[][][] }).train_outputs;
  assert.deepEqual(
    outputs(fractal?.value),
    task.train.map((pair) => pair.output),
    'the correct candidate predicts the real outputs',
  );
  assert.notDeepEqual(outputs(scaling?.value), outputs(fractal?.value));
  assert.deepEqual(fractal?.storedBy, { agent: 'arc_verified_lead', thread: root });

  const [watcher] = await thread.watchers();
  assert.equal(watcher?.name, 'verifier');
  assert.equal(watcher?.agent, 'verifier');
  assert.equal(watcher?.origin, 'run_time');
  assert.equal(watcher?.createdBy, 'arc_verified_lead');
  assert.deepEqual(watcher?.keys, ['arc/candidates/*']);
  assert.equal(watcher?.debounceS, 1);

  // One wake-up, in <root>/watch.verifier.1, for both candidates.
  const [wakeup] = await waitFor('the verifier to finish its wake-up', 60_000, async () => {
    const wakeups = await thread.wakeups({ watcher: 'verifier' });
    return wakeups.length > 0 && wakeups.every((w) => w.status !== 'running') ? wakeups : undefined;
  });
  assert.ok(wakeup);
  assert.equal(wakeup.threadId, `${root}/watch.verifier.1`);
  assert.equal(wakeup.threadId, wakeupThreadId(root, 'verifier', 1));
  assert.equal(wakeup.status, 'completed');
  assert.equal(wakeup.depth, 1);
  assert.deepEqual(wakeup.changes.map((change) => change.key).sort(), CANDIDATES);
  for (const change of wakeup.changes) {
    assert.equal(change.action, 'stored');
    assert.deepEqual(change.writer, { agent: 'arc_verified_lead', thread: root });
  }
  // Nothing is left for a second wake-up: the cursor is past both writes, and the verdicts (not watched) woke none.
  const { rows } = await harness.pool.query<{ seq: string }>(
    "SELECT max(seq) AS seq FROM env_events WHERE root_thread_id = $1 AND key LIKE 'arc/%' AND action <> 'rejected'",
    [root],
  );
  const lastSeq = Number(rows[0]?.seq ?? 0);
  await waitFor('the verifier to look past the verdicts', 60_000, async () =>
    ((await watcherCursor(thread)) ?? 0) >= lastSeq ? true : undefined,
  );
  assert.equal((await thread.wakeups({ watcher: 'verifier' })).length, 1);

  // What the verifier was told: the [Watch Context] with both keys, then the lead's instruction.
  const told =
    harness
      .modelRequests()
      .find((r) => r.agent === 'verifier' && r.thread === wakeup.threadId)
      ?.messages.find((m) => m.role === 'user')?.content ?? '';
  assert.match(told, /^\[Watch Context\]/);
  assert.match(told, /arc\/candidates\/fractal: stored as version 1 by arc_verified_lead/);
  assert.match(told, /arc\/candidates\/scaling: stored as version 1 by arc_verified_lead/);
  assert.match(told, /Check each candidate rule that changed with check_arc_candidate/);

  // The verdicts, read from env data: the correct candidate holds, the wrong one fails, on every training pair.
  const verdict = async (name: string) => {
    const entry = await store.get(root, `arc/verdicts/${name}`);
    assert.ok(entry, `a verdict for ${name} is stored`);
    assert.deepEqual(entry.storedBy, { agent: 'verifier', thread: wakeup.threadId });
    assert.equal(entry.type, 'verdict');
    return entry.value as { key: string; verdict: string; matched: number[]; mismatched: { index: number }[] };
  };
  const holds = await verdict('fractal');
  const fails = await verdict('scaling');
  assert.equal(holds.verdict, 'holds');
  assert.deepEqual(holds.matched, [0, 1, 2, 3, 4]);
  assert.equal(fails.verdict, 'fails');
  assert.deepEqual(
    fails.mismatched.map((pair) => pair.index),
    [0, 1, 2, 3, 4],
  );

  // The check is real: what check_arc_candidate returned in the wake-up is what was stored, candidate by candidate.
  const checked = toolResults(wakeup.threadId, 'verifier', 'check_arc_candidate');
  assert.deepEqual(checked, [holds, fails]);
  assert.deepEqual(
    checked.map((check) => (check as { key: string }).key),
    CANDIDATES,
  );

  // No turn of the tree (the wake-up's included) failed and no tool call returned an error.
  const tree = await thread.tree();
  assert.ok(tree.children.some((child) => child.threadId === wakeup.threadId));
  assert.deepEqual((await findDemoProblems(harness.pool, tree)).map(formatDemoProblem), []);
  await thread.end();
});
