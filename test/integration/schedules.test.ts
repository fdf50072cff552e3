/**
 * Schedules through the client SDK on the real dev server: the runs a Temporal Schedule takes, what overlap `skip`
 * does while a run still works, a standing thread across runs, and run thread ids derived from the scheduled time.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import type { ScheduleDetails } from '../../client';
import { runThreadId } from '../../common/schedules';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';

const agents = new Map(
  [
    '---\nname: reporter\ndescription: Reports on a schedule.\n---\nYou report.\n',
    // Busy until a human answers: a run is still working, for as long as the test likes, when the next is due.
    '---\nname: waiter\ndescription: Waits for a human.\n---\nYou wait.\n',
    '---\nname: standing\ndescription: Keeps one conversation.\n---\nYou stand.\n',
  ].map((text) => {
    const agent = parseAgentFile(text, 'schedules.test.ts');
    return [agent.name, agent];
  }),
);
const script = parseScript(
  `
agents:
  reporter:
    - say: "Nothing new."
  waiter:
    - call: ask_human
      args: { question: "Go on?" }
    - say: "Went on."
  standing:
    - say: "Hello, human."
    - say: "First scheduled answer."
    - say: "Second scheduled answer."
`,
  'schedules.test.ts',
);

let harness: AgentHarness;
const created: string[] = [];
/** Run-wide unique names: the Temporal server outlives this file. */
const uniqueName = (name: string) => `${name}-${randomBytes(3).toString('hex')}`;

before(async () => {
  harness = await startTestHarness('schedules', { agents, script });
});

after(async () => {
  for (const name of created) await harness.client.schedules.get(name).delete();
  await harness.close();
});

async function create(options: Parameters<AgentHarness['client']['schedules']['create']>[0]) {
  const handle = await harness.client.schedules.create(options);
  created.push(options.name);
  return handle;
}

/** Polls the schedule until `condition` holds (bounded, so a schedule that never gets there fails the test). */
async function waitFor(name: string, what: string, condition: (details: ScheduleDetails) => boolean) {
  const deadline = Date.now() + 120_000;
  let last: ScheduleDetails | undefined;
  while (Date.now() < deadline) {
    last = await harness.client.schedules.get(name).describe();
    if (condition(last)) return last;
    await sleep(250);
  }
  assert.fail(`waiting for ${what}:\n${JSON.stringify(last, null, 2)}`);
}

const userMessages = async (threadId: string) =>
  (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'user').map((m) => m.content ?? '');

test('schedules: with overlap skip, a run due while the previous one still works is skipped', async () => {
  const name = uniqueName('busy');
  const handle = await create({
    name,
    agent: 'waiter',
    message: 'Check in.',
    every: '1h',
    newThread: true,
    overlap: 'skip',
  });
  await handle.trigger();
  const busy = await waitFor(name, 'the first run to start its thread', (d) => d.recentRuns[0]?.threadId !== undefined);
  const threadId = busy.recentRuns[0]?.threadId ?? '';
  const thread = harness.client.thread(threadId);
  for (let i = 0; (await thread.questions()).length === 0; i++) {
    assert.ok(i < 600, 'the run asks its question');
    await sleep(200);
  }

  await handle.trigger();
  const skipped = await waitFor(name, 'the second trigger to be skipped', (d) => d.skippedOverlap >= 1);
  assert.equal(skipped.recentRuns.length, 1, 'no second run started');
  assert.equal(skipped.recentRuns[0]?.status, 'running');

  await thread.answer('q1', 'yes');
  const done = await waitFor(name, 'the run to complete', (d) => d.recentRuns[0]?.status === 'completed');
  assert.equal(done.recentRuns.length, 1);
  assert.equal(done.recentRuns[0]?.result?.reply, 'Went on.');
  assert.equal((await userMessages(threadId)).length, 1);
});

test('schedules: a --thread schedule appends every run to one standing conversation', async () => {
  const threadId = uniqueThreadId('standing');
  const thread = await harness.client.startThread({ agent: 'standing', threadId });
  await thread.send('Hello');
  const name = uniqueName('standup');
  // The agent comes from the thread.
  const handle = await create({ name, thread: threadId, message: 'Time for the stand-up.', every: '1h' });
  assert.equal((await handle.describe()).agent, 'standing');

  await handle.trigger();
  const once = await waitFor(name, 'the first run', (d) => d.recentRuns[0]?.status === 'completed');
  // Trigger times are kept to the second: the next trigger must fall in a later one to be a different run.
  const firstAt = Date.parse(once.recentRuns[0]?.scheduledAt ?? '');
  while (Math.floor(Date.now() / 1000) <= Math.floor(firstAt / 1000)) await sleep(100);
  await handle.trigger();
  const twice = await waitFor(
    name,
    'the second run',
    (d) => d.recentRuns.length === 2 && d.recentRuns.every((run) => run.status === 'completed'),
  );
  assert.deepEqual(
    twice.recentRuns.map((run) => [run.threadId, run.result?.turn, run.result?.reply]),
    [
      [threadId, 2, 'First scheduled answer.'],
      [threadId, 3, 'Second scheduled answer.'],
    ],
  );
  const messages = await userMessages(threadId);
  assert.equal(messages.length, 3);
  assert.equal(messages[0], 'Hello');
  for (const message of messages.slice(1)) {
    assert.match(message, new RegExp(`\\[Schedule Context\\]\\nSent by schedule: ${name}\\n`));
    assert.match(message, /Time for the stand-up\.$/);
  }
  assert.deepEqual(
    (await thread.tree()).children.map((child) => child.threadId),
    [],
    'no other thread',
  );
});

test('schedules: backfilling the same time twice makes one thread with one message', async () => {
  const name = uniqueName('hourly');
  const handle = await create({
    name,
    agent: 'reporter',
    message: 'Hourly report.',
    cron: '0 * * * *',
    newThread: true,
  });
  // A one-hour window in the past holds exactly one full hour.
  const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
  const from = new Date(hour - 2 * 3_600_000 + 30 * 60_000);
  const to = new Date(hour - 3_600_000 + 30 * 60_000);
  const expectedThread = runThreadId(name, new Date(hour - 3_600_000).toISOString());

  await handle.backfill(from, to);
  const once = await waitFor(name, 'the backfilled run', (d) => d.recentRuns[0]?.status === 'completed');
  assert.equal(once.recentRuns[0]?.threadId, expectedThread);
  assert.equal(once.recentRuns[0]?.result?.createdThread, true);

  await handle.backfill(from, to);
  const twice = await waitFor(
    name,
    'the second backfill to be taken',
    (d) => d.recentRuns.length === 2 && d.recentRuns.every((run) => run.status === 'completed'),
  );
  assert.deepEqual(
    twice.recentRuns.map((run) => [run.threadId, run.result?.turn, run.result?.createdThread]),
    [
      [expectedThread, 1, true],
      [expectedThread, 1, false],
    ],
  );
  const { rows } = await harness.pool.query<{ thread_id: string }>(
    `SELECT thread_id FROM threads WHERE thread_id LIKE $1`,
    [`sched-${name}-%`],
  );
  assert.deepEqual(
    rows.map((row) => row.thread_id),
    [expectedThread],
  );
  assert.equal((await userMessages(expectedThread)).length, 1, 'one message, one turn');
});

test('schedules: update changes the message and timing; the agent and target stay', async () => {
  const name = uniqueName('changing');
  const handle = await create({ name, agent: 'reporter', message: 'Old.', every: '1h', newThread: true });
  await handle.update({ message: 'New.', cron: '30 6 * * *', timezone: 'Europe/Paris', overlap: 'allow-all' });
  const details = await handle.describe();
  assert.deepEqual(
    [details.message, details.timing, details.overlap, details.agent, details.target],
    ['New.', { cron: '30 6 * * *', timezone: 'Europe/Paris' }, 'allow-all', 'reporter', { kind: 'new-thread' }],
  );
  // 06:30 in Paris is 04:30 or 05:30 UTC.
  assert.match(details.nextRuns[0] ?? '', /T0[45]:30:00\.000Z$/);
  await assert.rejects(handle.update({ every: '5s' }), /below the minimum interval of 1m/);
  assert.equal((await handle.describe()).timing.cron, '30 6 * * *', 'a refused update changes nothing');
});

test('schedules: bad options get a clear error and create nothing', async () => {
  const threadId = uniqueThreadId('nosuch');
  const name = uniqueName('bad');
  const base = { name, agent: 'reporter', message: 'm', newThread: true };
  const cases: [Parameters<AgentHarness['client']['schedules']['create']>[0], RegExp][] = [
    [{ ...base, cron: 'every day' }, /invalid cron 'every day': expected 5 fields/],
    [{ ...base, cron: '@every 10s' }, /use --every for intervals/],
    [{ ...base, cron: '@daily', every: '1h' }, /give exactly one of --cron/],
    [{ ...base, every: 'soon' }, /--every 'soon' is not a duration/],
    [{ ...base, agent: 'nosuchagent', every: '1h' }, /unknown agent 'nosuchagent'.*known: .*reporter/],
    [{ ...base, every: '1h', timezone: 'Mars/Olympus' }, /--timezone 'Mars\/Olympus' is not an IANA time zone/],
    [{ ...base, every: '1h', until: '2001-01-01T00:00:00Z' }, /--until 2001-01-01T00:00:00.000Z is in the past/],
    [{ ...base, every: '1h', thread: threadId }, /give exactly one of --thread/],
    [{ ...base, every: '1h', overlap: 'sometimes' as 'skip' }, /--overlap must be one of skip, buffer-one, allow-all/],
    [{ ...base, every: '1h', message: ' ' }, /--message must not be empty/],
    [{ ...base, every: '1h', world: 'No World' }, /world name 'No World'/],
    [{ ...base, every: '1h', name: 'Bad Name' }, /schedule name 'Bad Name' must be/],
    [{ name, thread: threadId, message: 'm', every: '1h' }, new RegExp(`thread '${threadId}' does not exist`)],
    [{ name, newThread: true, message: 'm', every: '1h' }, /--new-thread needs --agent/],
  ];
  for (const [options, error] of cases) await assert.rejects(harness.client.schedules.create(options), error);
  const names = (await harness.client.schedules.list()).map((row) => row.name);
  assert.ok(!names.includes(name), 'nothing was created');
  await assert.rejects(harness.client.schedules.get(name).describe(), new RegExp(`there is no schedule '${name}'`));
});
