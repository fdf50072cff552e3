/**
 * Watchers (issue 26): an agent that wakes when the shared env data of a root changes, in a thread of its own per
 * wake-up, told what changed; debounced, queued behind its running turn, never woken by its own writes, stopped by the
 * depth limit of a chain of watchers, paused by its rate limit, ended by its removal. Real Temporal, real Postgres, the
 * scripted model over HTTP.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { sweepWatchSignals } from '../../activities/watchers';
import { wakeupThreadId, watcherWorkflowId } from '../../common/watchers';
import { setWorldVariablesText } from '../../db/worlds';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { waitFor } from '../chaos/waiting';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import type { ThreadHandle } from '../../client';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'watchers-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, extra = ''): [string, ReturnType<typeof parseAgentFile>] {
  const text = `---\nname: ${name}\ndescription: Test agent ${name}.\n${extra}---\nYou are ${name}.\n`;
  return [name, parseAgentFile(text, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  agent('lead', 'capabilities: [reviewer, finder]\n'),
  agent('reviewer', 'watches:\n  - keys: ["findings/*"]\n    debounce_s: 0\n    message: "Review the new findings."\n'),
  agent('finder'),
  agent('batcher'),
  agent('coalescer'),
  agent('writer2'),
  agent('slowrev'),
  agent('sstarter'),
  agent('selfwriter'),
  agent('pstarter'),
  agent('ping'),
  agent('pong'),
  agent('rwriter'),
  agent('rlimited'),
  agent('mwriter'),
  agent('mremoved'),
  agent('setter', 'capabilities: [watch_env_data, helperw]\n'),
  agent('helperw'),
  agent('outsider'),
  agent('ender'),
  agent('endwatch'),
  agent('dstarter'),
  agent('delegwatch', 'capabilities: [subwriter]\n'),
  agent('subwriter'),
  agent('forkwriter', 'capabilities: [fork_join, ftask]\n'),
  agent('ftask'),
  agent('mergewatch'),
  agent('proposer', 'capabilities: [fork_join, ptask]\n'),
  agent('ptask'),
  agent('propwatch'),
]);

const store = (key: string) =>
  `{ call: store_env_data, args: { key: "${key}", short_description: "Test data.", value: 1 } }`;

const script = parseScript(
  `
agents:
  lead:
    - { call: reviewer, args: { message: "Get ready to review." } }
    - { call: finder, args: { message: "Find things." } }
    - say: "Done."
  reviewer:
    - say: "Noted."
  finder:
    - ${store('findings/a')}
    - say: "Stored."
  batcher:
    - ${store('k/1')}
    - ${store('k/2')}
    - ${store('k/3')}
    - say: "Three."
  coalescer:
    - say: "Seen."
  writer2:
    - ${store('j/1')}
    - say: "One."
    - ${store('j/2')}
    - say: "Two."
  slowrev:
    - { say: "Checked.", hold: slow }
  sstarter:
    - ${store('s/go')}
    - say: "Go."
  selfwriter:
    - ${store('s/mine')}
    - say: "Wrote mine."
  pstarter:
    - ${store('pong/start')}
    - say: "Started."
  ping:
    - ${store('ping/x')}
    - say: "Ping."
  pong:
    - ${store('pong/x')}
    - say: "Pong."
  rwriter:
    - ${store('r/1')}
    - say: "One."
    - ${store('r/2')}
    - say: "Two."
  rlimited:
    - say: "Ok."
  mwriter:
    - ${store('m/1')}
    - say: "Stored."
  mremoved:
    - say: "Should not run."
  setter:
    - { call: watch_env_data, args: { agent: outsider, keys: ["t/*"] } }
    - { call: watch_env_data, args: { agent: helperw, keys: ["t/*"], debounce_s: 0, message: "Check t." } }
    - ${store('t/1')}
    - say: "Set."
  helperw:
    - say: "Helped."
  ender:
    - say: "Bye."
  endwatch:
    - say: "Should not run."
  dstarter:
    - ${store('d/go')}
    - say: "Go."
  delegwatch:
    - { call: subwriter, args: { message: "Write d/sub." } }
    - say: "Delegated."
  subwriter:
    - ${store('d/sub')}
    - say: "Wrote."
  forkwriter:
    - { call: fork_join, args: { tasks: [{ agent: ftask, message: "Find." }], prefix: found } }
    - say: "Forked."
  ftask:
    - ${store('x')}
    - say: "Found."
  mergewatch:
    - say: "Saw the merge."
  proposer:
    - ${store('p/base')}
    - { call: fork_join, args: { tasks: [{ agent: ptask, message: "Propose." }] } }
    - say: "Proposed."
  ptask:
    - { call: update_env_data, args: { key: p/base, value: 2 } }
    - say: "Staged."
  propwatch:
    - say: "Saw the accepted proposal."
`,
  'watchers',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('watchers', { agents, script, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

/** Waits for the watcher's wake-ups to number `count`, all finished; returns them oldest first. */
async function finishedWakeups(thread: ThreadHandle, watcher: string, count: number) {
  return waitFor(`${count} finished wake-up(s) of ${watcher}`, 60_000, async () => {
    const wakeups = await thread.wakeups({ watcher });
    return wakeups.length === count && wakeups.every((wakeup) => wakeup.status !== 'running')
      ? wakeups.reverse()
      : undefined;
  });
}

/** The sequence number of the event that stored `key` last in the root. */
async function seqOfWrite(rootThreadId: string, key: string): Promise<number> {
  const { rows } = await harness.pool.query<{ seq: string }>(
    "SELECT max(seq) AS seq FROM env_events WHERE root_thread_id = $1 AND key = $2 AND action <> 'rejected'",
    [rootThreadId, key],
  );
  return Number(rows[0]?.seq ?? 0);
}

/** What the watcher's row says: its status, its cursor, and how many signals writers and sweeps claimed for it. */
async function watcherRow(
  rootThreadId: string,
  name: string,
): Promise<{ status: string; cursor: number; claims: number }> {
  const { rows } = await harness.pool.query<{ status: string; cursor: string; claims: string }>(
    `SELECT status, cursor_seq AS cursor, signal_claims AS claims FROM env_watchers
      WHERE root_thread_id = $1 AND name = $2`,
    [rootThreadId, name],
  );
  const row = rows[0];
  assert.ok(row, `watcher ${name} has a row`);
  return { status: row.status, cursor: Number(row.cursor), claims: Number(row.claims) };
}

/** The number of the root's last env event (0 when it has none). */
async function lastEnvEvent(rootThreadId: string): Promise<number> {
  const { rows } = await harness.pool.query<{ seq: string | null }>(
    'SELECT max(seq) AS seq FROM env_events WHERE root_thread_id = $1',
    [rootThreadId],
  );
  return Number(rows[0]?.seq ?? 0);
}

/** Waits until the watcher has looked at the log past event `seq` (its cursor moved there). */
async function lookedPast(thread: ThreadHandle, watcher: string, seq: number): Promise<void> {
  await waitFor(`${watcher} to look past event ${seq}`, 60_000, async () => {
    const found = (await thread.watchers()).find((candidate) => candidate.name === watcher);
    return found !== undefined && found.cursor >= seq ? true : undefined;
  });
}

async function feedKinds(thread: ThreadHandle, kind: string) {
  const { rows } = await harness.pool.query<{ data: Record<string, unknown> }>(
    'SELECT data FROM run_events WHERE root_thread_id = $1 AND kind = $2 ORDER BY seq',
    [thread.threadId, kind],
  );
  return rows.map((row) => row.data);
}

test('a frontmatter watcher wakes once for a change to its keys, told the key, its versions and its writer', async () => {
  const threadId = uniqueThreadId('review');
  const thread = await harness.client.startThread({ agent: 'lead', threadId });
  const result = await thread.send('Go.');
  assert.equal(result.status, 'completed');

  const [wakeup] = await finishedWakeups(thread, 'reviewer', 1);
  assert.ok(wakeup);
  assert.equal(wakeup.status, 'completed');
  assert.equal(wakeup.threadId, wakeupThreadId(threadId, 'reviewer', 1));
  assert.equal(wakeup.depth, 1);
  assert.equal(wakeup.changes.length, 1);
  const [change] = wakeup.changes;
  assert.equal(change?.key, 'findings/a');
  assert.equal(change?.action, 'stored');
  assert.equal(change?.oldVersion, null);
  assert.equal(change?.newVersion, 1);
  assert.deepEqual(change?.writer, { agent: 'finder', thread: `${threadId}/finder-1` });

  // What the reviewer's model was told in its wake-up turn.
  const request = harness
    .modelRequests()
    .find((entry) => entry.agent === 'reviewer' && entry.thread === wakeup.threadId);
  assert.ok(request, 'the wake-up turn called the model');
  const told = request.messages.find((message) => message.role === 'user')?.content ?? '';
  assert.match(told, /\[Watch Context\]/);
  assert.match(told, /findings\/a: stored as version 1 by finder \(thread [^)]+\/finder-1\)/);
  assert.match(told, /Review the new findings\./);

  // The watcher is registered from the frontmatter, and the feed shows the wake-up and its end.
  const [watcher] = await thread.watchers();
  assert.equal(watcher?.name, 'reviewer');
  assert.equal(watcher?.origin, 'frontmatter');
  assert.equal(watcher?.wakeups, 1);
  const woke = await feedKinds(thread, 'watch_woke');
  assert.equal(woke.length, 1);
  assert.equal((woke[0]?.changes as { key: string }[])[0]?.key, 'findings/a');
  assert.equal((await feedKinds(thread, 'watch_finished'))[0]?.status, 'completed');
  // Its thread sits under the root, marked with the watcher.
  const { rows } = await harness.pool.query<{ parent: string; watcher: string }>(
    'SELECT parent_thread_id AS parent, watcher FROM threads WHERE thread_id = $1',
    [wakeup.threadId],
  );
  assert.deepEqual(rows[0], { parent: threadId, watcher: 'reviewer' });
});

test('changes within the debounce window wake the watcher once, with every change', async () => {
  const thread = await harness.client.startThread({ agent: 'batcher', threadId: uniqueThreadId('batch') });
  await thread.addWatcher({ agent: 'coalescer', keys: ['k/*'], debounceS: 4 });
  assert.equal((await thread.send('Store three.')).status, 'completed');
  const [wakeup] = await finishedWakeups(thread, 'coalescer', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => change.key),
    ['k/1', 'k/2', 'k/3'],
  );
  // Nothing is left for a second wake-up: the cursor is past the last write.
  await lookedPast(thread, 'coalescer', await seqOfWrite(thread.threadId, 'k/3'));
  assert.equal((await thread.wakeups({ watcher: 'coalescer' })).length, 1);
});

test('a change during a running wake-up wakes the watcher again once that turn ends, never two at once', async () => {
  const thread = await harness.client.startThread({ agent: 'writer2', threadId: uniqueThreadId('during') });
  await thread.addWatcher({ agent: 'slowrev', keys: ['j/*'], debounceS: 0 });
  const watcher = harness.client.temporal.workflow.getHandle(watcherWorkflowId(thread.threadId, 'slowrev'));
  await thread.send('First.');
  await waitFor('the first wake-up to run', 60_000, async () =>
    (await thread.wakeups({ watcher: 'slowrev' })).length === 1 ? true : undefined,
  );
  // j/2 commits while wake-up 1 is held in its model call. Its write signalled the watcher before the turn that made
  // it ended (Temporal accepted the signal), so once the watcher completed a workflow task after its last signal, it
  // has decided what to do about j/2: a watcher that ran two wake-ups at once would have started the second then.
  await thread.send('Second.');
  const j2 = await seqOfWrite(thread.threadId, 'j/2');
  assert.ok(j2 > 0);
  const events = await waitFor('the watcher to take the signal of j/2', 60_000, async () => {
    const history = (await watcher.fetchHistory()).events ?? [];
    const lastSignal = history.findLastIndex((event) => event.workflowExecutionSignaledEventAttributes);
    const lastTask = history.findLastIndex((event) => event.workflowTaskCompletedEventAttributes);
    const firstChild = history.findIndex((event) => event.startChildWorkflowExecutionInitiatedEventAttributes);
    return firstChild >= 0 && lastSignal > firstChild && lastTask > lastSignal ? history : undefined;
  });
  const children = events.filter((event) => event.startChildWorkflowExecutionInitiatedEventAttributes);
  assert.equal(children.length, 1, 'the watcher started no second wake-up while the first runs');
  const during = await thread.wakeups({ watcher: 'slowrev' });
  assert.deepEqual(
    during.map((wakeup) => wakeup.status),
    ['running'],
  );
  harness.model.release('slow');
  const wakeups = await finishedWakeups(thread, 'slowrev', 2);
  assert.deepEqual(
    wakeups.map((wakeup) => wakeup.changes.map((change) => change.key)),
    [['j/1'], ['j/2']],
  );
  // As recorded: the second began after the first ended, and the watcher's cursor moved past j/2's write.
  const [first, second] = wakeups;
  assert.ok(first?.finishedAt !== undefined && second !== undefined);
  assert.ok(
    Date.parse(second.startedAt) >= Date.parse(first.finishedAt),
    `wake-up 2 started at ${second.startedAt}, after wake-up 1 finished at ${first.finishedAt}`,
  );
  await lookedPast(thread, 'slowrev', j2);
});

test("a watcher's own writes do not wake it", async () => {
  const thread = await harness.client.startThread({ agent: 'sstarter', threadId: uniqueThreadId('self') });
  await thread.addWatcher({ agent: 'selfwriter', keys: ['s/*'], debounceS: 0 });
  await thread.send('Go.');
  const [wakeup] = await finishedWakeups(thread, 'selfwriter', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => change.key),
    ['s/go'],
  );
  // Its turn stored s/mine (a key it watches); it looked at that write and did not wake for it.
  const mine = await seqOfWrite(thread.threadId, 's/mine');
  assert.ok(mine > 0, 'the wake-up turn stored s/mine');
  await lookedPast(thread, 'selfwriter', mine);
  assert.equal((await thread.wakeups({ watcher: 'selfwriter' })).length, 1);
});

test('two watchers writing each other’s keys stop at the depth limit, and the feed says so', async () => {
  const thread = await harness.client.startThread({ agent: 'pstarter', threadId: uniqueThreadId('pingpong') });
  await thread.addWatcher({ agent: 'ping', keys: ['pong/*'], debounceS: 0 });
  await thread.addWatcher({ agent: 'pong', keys: ['ping/*'], debounceS: 0 });
  await thread.send('Start.');
  // pong/start (a human's turn) → ping at depth 1 → pong at depth 2 → ping at depth 3 → pong would be 4 > 3.
  const skipped = await waitFor('the chain to stop', 60_000, async () => {
    const events = await feedKinds(thread, 'watch_skipped');
    return events.length > 0 ? events : undefined;
  });
  assert.deepEqual(skipped[0], { watcher: 'pong', keys: ['ping/x'], depth: 4, maxDepth: 3, reason: 'depth_limit' });
  const ping = await finishedWakeups(thread, 'ping', 2);
  const pong = await finishedWakeups(thread, 'pong', 1);
  assert.deepEqual(
    ping.map((wakeup) => wakeup.depth),
    [1, 3],
  );
  assert.deepEqual(
    pong.map((wakeup) => wakeup.depth),
    [2],
  );
  await lookedPast(thread, 'pong', await seqOfWrite(thread.threadId, 'ping/x'));
  assert.equal((await thread.wakeups({ watcher: 'pong' })).length, 1);
});

test('past its wake-ups per hour a watcher pauses and says until when; the change waits', async () => {
  const world = `watchrate${process.pid}`;
  await setWorldVariablesText(harness.pool, world, 'BATON_WATCH_MAX_WAKEUPS_PER_HOUR=1\n');
  const thread = await harness.client.startThread({ agent: 'rwriter', world, threadId: uniqueThreadId('rate') });
  await thread.addWatcher({ agent: 'rlimited', keys: ['r/*'], debounceS: 0 });
  await thread.send('One.');
  await finishedWakeups(thread, 'rlimited', 1);
  await thread.send('Two.');
  const paused = await waitFor('the watcher to pause', 60_000, async () => {
    const found = (await thread.watchers()).find((watcher) => watcher.name === 'rlimited');
    return found?.status === 'paused' ? found : undefined;
  });
  assert.match(paused.reason ?? '', /1 wake-ups in the last hour/);
  const until_ = Date.parse(paused.pausedUntil ?? '');
  assert.ok(until_ - Date.now() > 50 * 60_000, `paused for most of an hour (until ${paused.pausedUntil})`);
  const [event] = await feedKinds(thread, 'watch_paused');
  assert.equal(event?.watcher, 'rlimited');
  assert.equal((await thread.wakeups({ watcher: 'rlimited' })).length, 1);
});

test('a removed watcher ends its workflow and wakes no more', async () => {
  const thread = await harness.client.startThread({ agent: 'mwriter', threadId: uniqueThreadId('removed') });
  await thread.addWatcher({ agent: 'mremoved', keys: ['m/*'], debounceS: 0 });
  const handle = harness.client.temporal.workflow.getHandle(watcherWorkflowId(thread.threadId, 'mremoved'));
  assert.equal((await handle.describe()).status.name, 'RUNNING');
  const removed = await thread.removeWatcher('mremoved', { by: 'the test' });
  assert.equal(removed.status, 'removed');
  assert.equal(removed.reason, 'removed by the test');
  await handle.result();
  const { runId } = await handle.describe();
  const atRemoval = await watcherRow(thread.threadId, 'mremoved');
  const logAtRemoval = await lastEnvEvent(thread.threadId);

  await thread.send('Store.');
  const write = await seqOfWrite(thread.threadId, 'm/1');
  assert.ok(write > logAtRemoval, `the write (event ${write}) came after the removal (log at ${logAtRemoval})`);
  // The write's activity told the watchers of m/* before the turn ended: it claimed no signal for the removed one.
  // The sweep (run here, not waited for) finds nothing for it either.
  await sweepWatchSignals({
    pool: harness.pool,
    temporal: harness.client.temporal,
    taskQueue: harness.taskQueue,
    graceSeconds: 0,
    warn: () => undefined,
  });
  const afterWrite = await watcherRow(thread.threadId, 'mremoved');
  assert.equal(afterWrite.status, 'removed');
  assert.equal(afterWrite.claims, atRemoval.claims, 'no signal was claimed for the removed watcher');
  assert.ok(afterWrite.cursor < write, 'its cursor never moved past the write');
  const described = await handle.describe();
  assert.deepEqual([described.runId, described.status.name], [runId, 'COMPLETED'], 'its workflow never ran again');
  assert.deepEqual(await thread.wakeups({ watcher: 'mremoved' }), [], 'no wake-up has the write');
  assert.deepEqual(
    (await feedKinds(thread, 'watch_removed')).map((event) => event.watcher),
    ['mremoved'],
  );
  await assert.rejects(thread.removeWatcher('nobody'), /no watcher named 'nobody'/);
  await assert.rejects(thread.addWatcher({ agent: 'mremoved', keys: ['bad//key'] }), /key pattern 'bad\/\/key'/);
});

test('an agent sets a watcher with watch_env_data, for an agent it may call and no other', async () => {
  const thread = await harness.client.startThread({ agent: 'setter', threadId: uniqueThreadId('tool') });
  assert.equal((await thread.send('Set a watcher.')).status, 'completed');
  const results = (await thread.transcript()).filter((message) => message.role === 'tool').map((m) => m.content);
  assert.match(results[0] ?? '', /only for yourself or an agent you may call, and 'outsider'/);
  assert.match(results[1] ?? '', /Watcher 'helperw' set: helperw wakes when t\/\* change/);
  const [watcher] = await thread.watchers();
  assert.equal(watcher?.origin, 'run_time');
  assert.equal(watcher?.createdBy, 'setter');
  assert.equal(watcher?.message, 'Check t.');
  const [wakeup] = await finishedWakeups(thread, 'helperw', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => change.key),
    ['t/1'],
  );
});

test('a root thread that ends stops its watchers, and their workflows end', async () => {
  const thread = await harness.client.startThread({ agent: 'ender', threadId: uniqueThreadId('ended') });
  await thread.addWatcher({ agent: 'endwatch', keys: ['e/*'] });
  const handle = harness.client.temporal.workflow.getHandle(watcherWorkflowId(thread.threadId, 'endwatch'));
  await thread.send('Hello.');
  await thread.end();
  await thread.result();
  await handle.result();
  const [watcher] = await thread.watchers();
  assert.equal(watcher?.status, 'stopped');
  assert.equal(watcher?.reason, `its root thread '${thread.threadId}' has ended`);
  assert.deepEqual(
    (await feedKinds(thread, 'watch_stopped')).map((event) => event.watcher),
    ['endwatch'],
  );
});

test('writes of the turns a wake-up started (its delegations) do not wake the watcher either', async () => {
  const thread = await harness.client.startThread({ agent: 'dstarter', threadId: uniqueThreadId('deleg') });
  await thread.addWatcher({ agent: 'delegwatch', keys: ['d/*'], debounceS: 0 });
  await thread.send('Go.');
  const [wakeup] = await finishedWakeups(thread, 'delegwatch', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => change.key),
    ['d/go'],
  );
  // d/sub was stored by subwriter, in a thread its wake-up delegated to (which carries the watcher's name).
  const sub = await seqOfWrite(thread.threadId, 'd/sub');
  assert.ok(sub > 0, 'the delegated turn stored d/sub');
  const { rows } = await harness.pool.query<{ watcher: string; depth: number }>(
    'SELECT watcher, watch_depth AS depth FROM threads WHERE thread_id = $1',
    [`${thread.threadId}/subwriter-1`],
  );
  assert.deepEqual(rows[0], { watcher: 'delegwatch', depth: 1 });
  await lookedPast(thread, 'delegwatch', sub);
  assert.equal((await thread.wakeups({ watcher: 'delegwatch' })).length, 1);
});

test("a fork's merge into the shared data wakes the watchers of the merged keys, and the Web UI lists the watcher", async () => {
  const thread = await harness.client.startThread({ agent: 'forkwriter', threadId: uniqueThreadId('merge') });
  await thread.addWatcher({ agent: 'mergewatch', keys: ['found/**'], debounceS: 0 });
  assert.equal((await thread.send('Fork.')).status, 'completed');
  const [wakeup] = await finishedWakeups(thread, 'mergewatch', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => [change.key, change.action]),
    [['found/1/x', 'stored']],
  );
  // The watcher's workflow is found as every workflow of the conversation is: by BatonRootThreadId.
  const listed = await waitFor('the watcher in visibility', 60_000, async () => {
    const ids: string[] = [];
    for await (const execution of harness.client.temporal.workflow.list({
      query: `BatonRootThreadId="${thread.threadId}" AND WorkflowType="envWatcherWorkflow"`,
    })) {
      ids.push(execution.workflowId);
    }
    return ids.length > 0 ? ids : undefined;
  });
  assert.deepEqual(listed, [watcherWorkflowId(thread.threadId, 'mergewatch')]);
});

test("a person accepting a fork worker's proposal wakes the watchers of its key", async () => {
  const thread = await harness.client.startThread({ agent: 'proposer', threadId: uniqueThreadId('accept') });
  assert.equal((await thread.send('Propose.')).status, 'completed');
  const [proposal] = await thread.envProposals();
  assert.ok(proposal, 'the fork worker staged a proposal');
  await thread.addWatcher({ agent: 'propwatch', keys: ['p/*'], debounceS: 0 });
  await thread.envAccept(proposal.proposalId);
  const [wakeup] = await finishedWakeups(thread, 'propwatch', 1);
  assert.deepEqual(
    wakeup?.changes.map((change) => [
      change.key,
      change.action,
      change.oldVersion,
      change.newVersion,
      change.writer.agent,
    ]),
    [['p/base', 'updated', 1, 2, 'human']],
  );
});
