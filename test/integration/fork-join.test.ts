import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { ErrorType } from '../../common/errors';
import type { AgentTurnInput } from '../../common/types';
import { openDelegation, type DelegationReads } from '../../db/delegations';
import { openFork } from '../../db/forks';
import { appendMessage, listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { eventSummary } from '../../testing/turn-dispatches';
import { openRootThread } from '../../testing/thread-fixtures';
import { waitFor } from '../chaos/waiting';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'fork-join-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, capabilities: string[] = [], extra = '') {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('iso_lead', ['fork_join', 'scout_a', 'scout_b', 'scout_c']),
    agent('partial_lead', ['fork_join', 'scout_ok', 'broken']),
    agent('ff_lead', ['fork_join', 'broken', 'sleeper']),
    agent('deadline_lead', ['fork_join', 'scout_ok', 'laggard']),
    agent('window_lead', ['fork_join', 'pacer']),
    agent('limit_lead', ['fork_join', 'scout_ok']),
    agent('guard_lead', ['fork_join', 'scout_ok']),
    agent('shared_lead', ['fork_join', 'sharer_a', 'sharer_b']),
    agent('late_shared_lead', ['fork_join', 'late_sharer']),
    agent('late_ff_lead', ['fork_join', 'late_writer', 'broken']),
    agent('late_sharer', ['slow_store']),
    agent('late_writer', ['slow_store']),
    agent('scout_a'),
    agent('scout_b'),
    agent('scout_c'),
    agent('scout_ok'),
    agent('broken'),
    agent('sleeper'),
    agent('laggard'),
    agent('pacer'),
    agent('sharer_a'),
    agent('sharer_b'),
    agent('secret'),
    agent('here_lead', ['fork_join', 'here_batched', 'here_local']),
    agent('here_batched', [], 'steps: batched\n'),
    agent('here_local', [], 'steps: local\n'),
    agent('here_deadline_lead', ['fork_join', 'here_batched', 'here_laggard']),
    agent('here_laggard', [], 'steps: batched\n'),
    agent('here_retry_lead', ['fork_join', 'here_flaky']),
    agent('here_flaky', [], 'steps: batched\n'),
    agent('act_lead', ['fork_join', 'act_store', 'act_deep']),
    agent('act_store'),
    agent('act_deep', ['scout_ok']),
    agent('here_ff_lead', ['fork_join', 'here_sleeper', 'here_broken']),
    agent('here_sleeper', [], 'steps: local\n'),
    agent('here_broken', [], 'steps: batched\n'),
  ].map((a) => [a.name, a]),
);

const scoutACommit = JSON.stringify({
  commit_id: 'scout-a',
  creates: [{ id: 'e1', description: 'Evidence: the output is 9x9.', content: { size: 9 } }],
  links: [{ type: 'supports', src: 'e1', dst: 'hypothesis' }],
  proposes_updates: [{ target_id: 'arc/plan', patch: { count: 5 } }],
});

const script = parseScript(
  `
agents:
  iso_lead:
    - call: store_env_data
      args: { key: arc/plan, short_description: "The plan.", value: { step: 1, count: 0 } }
    - call: fork_join
      args:
        tasks:
          - { agent: scout_a, message: "Try tiling." }
          - { agent: scout_b, message: "Try colours." }
          - { agent: scout_c, message: "Try symmetry." }
    - call: update_env_data
      args: { key: arc/plan, proposal: p1 }
    - say: "joined"
  scout_a:
    - call: store_env_data
      args: { key: hypothesis, short_description: "Tiling hypothesis.", value: { rule: tile } }
    - call: list_env_data
      args: {}
    - say: |
        Tiling it is.
        \`\`\`json
        ${scoutACommit}
        \`\`\`
  scout_b:
    - call: update_env_data
      args: { key: arc/plan, value: { step: 2, count: 1 } }
    - say: "Proposed a new plan."
  scout_c:
    - say: |
        \`\`\`json
        { "creates": [ { "id": "x"
        \`\`\`
  partial_lead:
    - call: fork_join
      args: { tasks: [ { agent: scout_ok, message: "Go." }, { agent: broken, message: "Go too." } ] }
    - say: "partial done"
  scout_ok:
    - call: store_env_data
      args: { key: note, short_description: "A note.", value: ok }
    - say: "ok"
  broken:
    - call: store_env_data
      args: { key: half, short_description: "Half-done work.", value: 1 }
    - { fail: 401, message: "broken on purpose" }
    - say: "never"
  ff_lead:
    - call: fork_join
      args: { fail_fast: true, tasks: [ { agent: sleeper, message: "Sleep." }, { agent: broken, message: "Fail." } ] }
    - say: "ff done"
  sleeper:
    - { say: "woke up", delay_ms: 20000 }
  deadline_lead:
    - call: fork_join
      args: { deadline_seconds: 4, tasks: [ { agent: scout_ok, message: "Quick." }, { agent: laggard, message: "Slow." } ] }
    - say: "deadline done"
  laggard:
    - call: think
      args: { thought: "starting" }
    - { say: "too late", delay_ms: 9000 }
  window_lead:
    - call: fork_join
      args:
        max_parallel: 2
        tasks:
          - { agent: pacer, message: "1" }
          - { agent: pacer, message: "2" }
          - { agent: pacer, message: "3" }
          - { agent: pacer, message: "4" }
          - { agent: pacer, message: "5" }
    - say: "window done"
  pacer:
    - { say: "paced", delay_ms: 700 }
  limit_lead:
    - call: fork_join
      args: { tasks: [ { agent: scout_ok, message: "1" }, { agent: scout_ok, message: "2" }, { agent: scout_ok, message: "3" } ] }
    - say: "limit done"
  guard_lead:
    - call: fork_join
      args: { tasks: [ { agent: scout_ok, message: "1" }, { agent: secret, message: "2" } ] }
    - say: "guard done"
  shared_lead:
    - call: fork_join
      args: { store: shared, tasks: [ { agent: sharer_a, message: "A." }, { agent: sharer_b, message: "B." } ] }
    - say: "shared done"
  sharer_a:
    - call: store_env_data
      args: { key: finding/a, short_description: "What A found.", value: a }
    - say: "a done"
  sharer_b:
    - call: store_env_data
      args: { key: finding/b, short_description: "What B found.", value: b }
    - call: list_env_data
      args: { exclude_self: true }
      delay_ms: 1500
    - say: "b done"
  late_shared_lead:
    - call: fork_join
      args: { store: shared, deadline_seconds: 3, tasks: [ { agent: late_sharer, message: "Store it, slowly." } ] }
    - say: "late shared done"
  late_sharer:
    - { call: slow_store, args: { key: late/shared } }
    - say: "never"
  late_ff_lead:
    - call: fork_join
      args:
        store: shared
        fail_fast: true
        tasks: [ { agent: late_writer, message: "Store it, slowly." }, { agent: broken, message: "Fail." } ]
    - say: "late ff done"
  late_writer:
    - { call: slow_store, args: { key: late/ff } }
    - say: "never"
  here_lead:
    - call: fork_join
      args: { tasks: [ { agent: here_batched, message: "Batch it." }, { agent: here_local, message: "Step it." } ] }
    - say: "here done"
  here_batched:
    - call: store_env_data
      args: { key: batched/note, short_description: "A note from a batch.", value: { ok: true } }
    - say: "batched here"
  here_local:
    - call: think
      args: { thought: "a local step" }
    - say: "stepped here"
  here_deadline_lead:
    - call: fork_join
      args: { deadline_seconds: 3, tasks: [ { agent: here_batched, message: "Quick." }, { agent: here_laggard, message: "Slow." } ] }
    - say: "here deadline done"
  here_laggard:
    - call: think
      args: { thought: "starting" }
    - { say: "too late", delay_ms: 20000 }
  here_retry_lead:
    - call: fork_join
      args: { deadline_seconds: 2, tasks: [ { agent: here_flaky, message: "Retry." } ] }
    - say: "here retry done"
  here_flaky:
    - { fail: 429, times: 2, retry_after_s: 5 }
    - { say: "too late", delay_ms: 20000 }
  act_lead:
    - call: fork_join
      args: { tasks: [ { agent: act_store, message: "Store it." }, { agent: act_deep, message: "Ask on." } ] }
    - say: "act done"
  act_store:
    - call: store_env_data
      args: { key: act/note, short_description: "A note from an activity step.", value: { ok: true } }
    - say: "stored with activities"
  act_deep:
    - call: think
      args: { thought: "an activity step in the fork" }
    - call: scout_ok
      args: { message: "Look." }
    - say: "asked on"
  here_ff_lead:
    - call: fork_join
      args: { fail_fast: true, tasks: [ { agent: here_sleeper, message: "Sleep." }, { agent: here_broken, message: "Fail." } ] }
    - say: "here ff done"
  here_sleeper:
    - { say: "woke up", delay_ms: 20000 }
  here_broken:
    - { fail: 401, times: 5, message: "broken on purpose" }
    - say: "never"
`,
  'fork-join',
);

/** How long `slow_store` takes before it writes: well past the forks' deadline, and past a fail_fast cut. */
const SLOW_STORE_DELAY_MS = 6_000;

/**
 * A tool that ignores its signal and writes env data late, as a task's call may still be running when its task is
 * given up on: the write it makes after the reclaim must be refused.
 */
const slowStore = defineTool({
  name: 'slow_store',
  description: 'Stores a value in the shared data, slowly.',
  parameters: z.object({ key: z.string() }),
  timeout_s: 60,
  retries: 0,
  run: async ({ key }, context) => {
    await new Promise((resolve) => setTimeout(resolve, SLOW_STORE_DELAY_MS));
    await context.env.store({ key, shortDescription: 'Stored late.', value: 'late' });
    return 'stored';
  },
});

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('fork-join', { agents, script, modelLogFile: modelLog, tools: [slowStore] });
});

after(async () => {
  await harness?.close();
});

interface ForkResult {
  fork: number;
  status: string;
  store: string;
  prefix?: string;
  stopped_by?: string;
  tasks: {
    task_index: number;
    agent: string;
    thread_id: string;
    status: string;
    reply?: string;
    error?: string;
    merge?: { commit_id: string; created: string[]; links: number; proposals: string[]; errors: string[] };
  }[];
}

/** The tool result of the root agent's `fork_join` call, as stored in its transcript. */
async function forkResult(root: string): Promise<string> {
  const messages = await listMessages(harness.pool, root);
  const call = messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.name === 'fork_join');
  const result = messages.find((m) => m.role === 'tool' && m.toolCallId === call?.id);
  assert.ok(result?.content, `no fork_join result in ${root}`);
  return result.content;
}

function requestsOf(root: string, agentName: string): ModelLogEntry[] {
  return harness.modelRequests().filter((r) => r.headers['x-baton-root-thread'] === root && r.agent === agentName);
}

/** The result of the latest call of tool `name` the agent's n-th request carried. */
function toolResult(root: string, agentName: string, requestIndex: number, name: string): string | undefined {
  const request = requestsOf(root, agentName)[requestIndex];
  const calls = request?.messages.flatMap((m) => (m.tool_calls ?? []) as { id: string; function: { name: string } }[]);
  const call = calls?.filter((c) => c.function.name === name).at(-1);
  return request?.messages.find((m) => m.role === 'tool' && m.tool_call_id === call?.id)?.content ?? undefined;
}

async function rows<T extends Record<string, unknown>>(sql: string, params: unknown[]): Promise<T[]> {
  return (await harness.pool.query<T>(sql, params)).rows;
}

test('fork/join: isolated stores merge under the prefix in input order, with links, proposals and an invalid commit', async () => {
  const root = uniqueThreadId('iso');
  const thread = await harness.client.startThread({ agent: 'iso_lead', threadId: root });
  const turn = await thread.send('Solve ARC task 007bbfb7 three ways.');
  assert.equal(turn.reply, 'joined');

  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'success');
  assert.equal(result.store, 'isolated');
  assert.equal(result.prefix, 'fork/1');
  assert.deepEqual(
    result.tasks.map((t) => [t.task_index, t.agent, t.status]),
    [
      [1, 'scout_a', 'success'],
      [2, 'scout_b', 'success'],
      [3, 'scout_c', 'success'],
    ],
  );
  const [a, b, c] = result.tasks;
  assert.deepEqual(a?.merge?.created.sort(), ['fork/1/1/e1', 'fork/1/1/hypothesis']);
  assert.equal(a?.merge?.commit_id, 'scout-a');
  assert.equal(a?.merge?.links, 1);
  assert.deepEqual(a?.merge?.proposals, ['p2']);
  assert.deepEqual(a?.merge?.errors, []);
  assert.deepEqual(b?.merge, { commit_id: 'fork-1-task-2', created: [], links: 0, proposals: ['p1'], errors: [] });
  assert.match(c?.merge?.errors[0] ?? '', /^the commit is not valid JSON/);
  assert.deepEqual(c?.merge?.created, []);
  assert.match(a?.reply ?? '', /^Tiling it is\./);

  // Each worker was told which task of how many it is, and who runs beside it.
  const scoutB =
    requestsOf(root, 'scout_b')[0]
      ?.messages.filter((m) => m.role === 'user')
      .at(-1)?.content ?? '';
  assert.match(
    scoutB,
    /Fork: you are task 2 of 3 of fork 1, running in parallel with scout_a \(task 1\), scout_c \(task 3\)\./,
  );
  assert.match(scoutB, /merged under fork\/1\/2\//);
  // Inside its isolated store, scout_a saw its own entry marked as such, and the shared data beside it.
  const listed = JSON.parse(toolResult(root, 'scout_a', 2, 'list_env_data') ?? '[]') as Record<string, unknown>[];
  assert.deepEqual(
    listed.map((e) => [e.key, e.in !== undefined]),
    [
      ['arc/plan', false],
      ['hypothesis', true],
    ],
  );
  // scout_b's update of a shared entry changed nothing while it ran: it was recorded as a proposal.
  assert.match(toolResult(root, 'scout_b', 1, 'update_env_data') ?? '', /recorded as proposal p1/);

  // The shared data holds the merged findings under the prefix, attributed to their task; nothing unprefixed.
  const manifest = await thread.envData();
  assert.deepEqual(
    manifest.map((e) => e.key),
    ['arc/plan', 'fork/1/1/e1', 'fork/1/1/hypothesis'],
  );
  const hypothesis = await thread.envGet('fork/1/1/hypothesis');
  assert.deepEqual(hypothesis?.value, { rule: 'tile' });
  assert.equal(hypothesis?.storedBy.agent, 'scout_a');
  assert.equal(hypothesis?.storedByTask, 'fork 1 task 1');
  const links = await rows<{ src_key: string; dst_key: string; type: string }>(
    'SELECT src_key, dst_key, type FROM env_links WHERE root_thread_id = $1',
    [root],
  );
  assert.deepEqual(links, [{ src_key: 'fork/1/1/e1', dst_key: 'fork/1/1/hypothesis', type: 'supports' }]);

  // The lead accepted p1 (scout_b's plan); p2 (scout_a's patch) waits for someone to accept it.
  assert.match(toolResult(root, 'iso_lead', 3, 'update_env_data') ?? '', /^Applied proposal p1 to 'arc\/plan'/);
  assert.deepEqual((await thread.envGet('arc/plan'))?.value, { step: 2, count: 1 });
  const pending = await thread.envProposals();
  assert.deepEqual(
    pending.map((p) => [p.proposalId, p.key, p.patch, p.forkTask]),
    [['p2', 'arc/plan', { count: 5 }, 'fork 1 task 1']],
  );

  // A human accepts p2 through the client: applied as a patch, and the log says who accepted what.
  const accepted = await thread.envAccept('p2');
  assert.equal(accepted.version, 3);
  assert.deepEqual((await thread.envGet('arc/plan'))?.value, { step: 2, count: 5 });
  await assert.rejects(thread.envAccept('p1'), /proposal 'p1' is accepted; only pending ones can be accepted/);
  const acceptances = (await thread.envEvents()).filter((e) => e.reason?.startsWith('accepted proposal'));
  assert.deepEqual(
    acceptances.map((e) => [e.key, e.actor.agent, e.reason]),
    [
      ['arc/plan', 'iso_lead', 'accepted proposal p1 (proposed by scout_b, fork 1 task 2)'],
      ['arc/plan', 'human', 'accepted proposal p2 (proposed by scout_a, fork 1 task 1)'],
    ],
  );
  const [fork] = await thread.forks();
  assert.equal(fork?.status, 'success');
  assert.deepEqual(
    fork?.tasks.map((t) => t.status),
    ['success', 'success', 'success'],
  );
});

test('fork/join: a failing task gives a partial result and merges nothing', async () => {
  const root = uniqueThreadId('partial');
  const thread = await harness.client.startThread({ agent: 'partial_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'partial');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [
      ['scout_ok', 'success'],
      ['broken', 'failed'],
    ],
  );
  assert.match(result.tasks[1]?.error ?? '', /broken on purpose/);
  assert.equal(result.tasks[1]?.merge, undefined);
  assert.deepEqual(
    (await thread.envData()).map((e) => e.key),
    ['fork/1/1/note'],
    "the failed task's half-done entry stays in its own store",
  );
});

test('fork/join: fail_fast cancels the other tasks as soon as one fails, and reclaims them', async () => {
  const root = uniqueThreadId('ff');
  const thread = await harness.client.startThread({ agent: 'ff_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'failed');
  assert.equal(result.stopped_by, 'fail_fast');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [
      ['sleeper', 'cancelled'],
      ['broken', 'failed'],
    ],
  );
  const [fork] = await thread.forks();
  // The sleeper's model answers after 20 s; the fork was over long before.
  assert.ok(fork?.finishedAt && fork.finishedAt.getTime() - fork.createdAt.getTime() < 15_000);
  const [sleeper] = await rows<{ epoch: number; status: string }>(
    'SELECT epoch, status FROM threads WHERE thread_id = $1',
    [result.tasks[0]?.thread_id],
  );
  assert.deepEqual(sleeper, { epoch: 1, status: 'reclaimed' });
  // The sleeper stepped in the lead's turn (its steps are activities there): the fork cancelled its model call.
  assert.equal(await workflowExists(`baton/${root}/sleeper-1`), false, 'no workflow of its own for the sleeper');
  const events = (await leadHistory(root)).events ?? [];
  const step = events.find((event) => activitySummary(event) === 'model: sleeper (fork 1 task 1) step 1');
  assert.ok(step, "the sleeper's model call was an activity of the lead's turn");
  assert.ok(
    events.some(
      (event) => Number(event.activityTaskCancelRequestedEventAttributes?.scheduledEventId) === Number(step.eventId),
    ),
    "the fork cancelled the sleeper's model call",
  );
});

test('fork/join: at the deadline an unfinished task is reclaimed, and its late write is refused and logged', async () => {
  const root = uniqueThreadId('deadline');
  const thread = await harness.client.startThread({ agent: 'deadline_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'partial');
  assert.equal(result.stopped_by, 'deadline');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [
      ['scout_ok', 'success'],
      ['laggard', 'timeout'],
    ],
  );
  const laggard = result.tasks[1]?.thread_id ?? '';
  const [fenced] = await rows<{ epoch: number; status: string }>(
    'SELECT epoch, status FROM threads WHERE thread_id = $1',
    [laggard],
  );
  assert.deepEqual(fenced, { epoch: 1, status: 'reclaimed' });

  // The laggard's model call was already running; its reply comes after the reclaim, and storing it is refused.
  let refused: { kind: string; write_epoch: number; current_epoch: number }[] = [];
  for (let attempt = 0; attempt < 60 && refused.length === 0; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    refused = await rows('SELECT kind, write_epoch, current_epoch FROM refused_writes WHERE thread_id = $1', [laggard]);
  }
  assert.deepEqual(refused, [{ kind: 'transcript', write_epoch: 0, current_epoch: 1 }]);
  const transcript = await listMessages(harness.pool, laggard);
  assert.equal(
    transcript.some((m) => m.content === 'too late'),
    false,
    'the late reply was not stored',
  );
  const [task] = await rows<{ reclaimed_at: Date | null }>(
    'SELECT reclaimed_at FROM fork_tasks WHERE root_thread_id = $1 AND task_index = 2',
    [root],
  );
  assert.ok(task?.reclaimed_at instanceof Date);
});

test('fork/join: max_parallel is never exceeded, and every task still runs', async () => {
  const root = uniqueThreadId('window');
  const thread = await harness.client.startThread({ agent: 'window_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'success');
  assert.equal(result.tasks.length, 5);
  const spans = await rows<{ started_at: Date; finished_at: Date }>(
    `SELECT t.started_at, t.finished_at FROM fork_tasks f JOIN threads t ON t.thread_id = f.thread_id
      WHERE f.root_thread_id = $1`,
    [root],
  );
  const edges = spans
    .flatMap((s) => [
      { at: s.started_at.getTime(), delta: 1 },
      { at: s.finished_at.getTime(), delta: -1 },
    ])
    .sort((x, y) => x.at - y.at || x.delta - y.delta);
  let inFlight = 0;
  let most = 0;
  for (const edge of edges) most = Math.max(most, (inFlight += edge.delta));
  assert.equal(most, 2, `at most 2 tasks ran at once (measured ${most})`);
});

test('fork/join: more tasks than the limit is refused and nothing starts', async () => {
  const root = uniqueThreadId('limit');
  const thread = await harness.client.startThread({ agent: 'limit_lead', threadId: root, limits: { maxForkTasks: 2 } });
  await thread.send('Go.');
  assert.match(
    await forkResult(root),
    /^Error: fork_join got 3 tasks; at most 2 may run in one fork .*Nothing was started/,
  );
  assert.deepEqual(await rows('SELECT number FROM forks WHERE root_thread_id = $1', [root]), []);
  assert.deepEqual(
    (await rows<{ thread_id: string }>('SELECT thread_id FROM threads WHERE root_thread_id = $1', [root])).map(
      (r) => r.thread_id,
    ),
    [root],
  );
});

test('fork/join: every task must be an agent the caller may call; otherwise nothing starts', async () => {
  const root = uniqueThreadId('guard');
  const thread = await harness.client.startThread({ agent: 'guard_lead', threadId: root });
  await thread.send('Go.');
  assert.equal(
    await forkResult(root),
    "Error: Invalid call of 'fork_join': task 2 (agent 'secret'): 'secret' is not one of your capabilities, so you cannot give it a task. Nothing was started.",
  );
  assert.deepEqual(await rows('SELECT number FROM forks WHERE root_thread_id = $1', [root]), []);
  assert.equal(requestsOf(root, 'scout_ok').length, 0);
});

test('fork/join: shared-store workers write straight into the shared data, attributed, and exclude_self shows the others', async () => {
  const root = uniqueThreadId('shared');
  const thread = await harness.client.startThread({ agent: 'shared_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'success');
  assert.equal(result.prefix, undefined);
  assert.equal(result.tasks[0]?.merge, undefined, 'shared writes need no merge');
  const manifest = await thread.envData();
  assert.deepEqual(
    manifest.map((e) => [e.key, e.storedBy.agent, e.storedByTask, e.scope]),
    [
      ['finding/a', 'sharer_a', 'fork 1 task 1', ''],
      ['finding/b', 'sharer_b', 'fork 1 task 2', ''],
    ],
  );
  const others = JSON.parse(toolResult(root, 'sharer_b', 2, 'list_env_data') ?? '[]') as { key: string }[];
  assert.deepEqual(
    others.map((e) => e.key),
    ['finding/a'],
  );
});

/** Waits until the late `slow_store` of `thread` was refused, and checks it left the shared data as it was. */
async function lateEnvWriteRefused(root: string, thread: string, key: string): Promise<void> {
  const refused = await waitFor(`the late env write of ${thread}`, SLOW_STORE_DELAY_MS + 20_000, async () => {
    const found = await rows<{ kind: string; write_epoch: number; current_epoch: number }>(
      `SELECT kind, write_epoch, current_epoch FROM refused_writes WHERE thread_id = $1 AND kind = 'env'`,
      [thread],
    );
    return found.length > 0 ? found : undefined;
  });
  assert.deepEqual(refused, [{ kind: 'env', write_epoch: 0, current_epoch: 1 }]);
  const stored = await rows('SELECT key FROM env_data WHERE root_thread_id = $1 AND key = $2', [root, key]);
  assert.deepEqual(stored, [], 'the shared data did not change');
}

test("fork/join: a shared fork's task reclaimed at the deadline has its late env write refused, the data unchanged", async () => {
  const root = uniqueThreadId('late-shared');
  const thread = await harness.client.startThread({ agent: 'late_shared_lead', threadId: root });
  assert.equal((await thread.send('Go.')).reply, 'late shared done');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.store, 'shared');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [['late_sharer', 'timeout']],
  );
  await lateEnvWriteRefused(root, result.tasks[0]?.thread_id ?? '', 'late/shared');
});

test('fork/join: a task cut by fail_fast has its late env write refused too', async () => {
  const root = uniqueThreadId('late-ff');
  const thread = await harness.client.startThread({ agent: 'late_ff_lead', threadId: root });
  assert.equal((await thread.send('Go.')).reply, 'late ff done');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.stopped_by, 'fail_fast');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [
      ['late_writer', 'cancelled'],
      ['broken', 'failed'],
    ],
  );
  await lateEnvWriteRefused(root, result.tasks[0]?.thread_id ?? '', 'late/ff');
});

test('fork/join: tasks open together, numbered per agent after earlier delegations, with a reused and a cloned thread', async () => {
  // Straight against Postgres, as the `openFork` activity calls it: every task of the fork is opened in one set of
  // statements, and each must come out as it would alone (its number, thread, store, epoch and message).
  const root = await openRootThread(harness.pool, 'iso_lead');
  const chain = (callee: string) => ['iso_lead', callee];
  await appendMessage(harness.pool, root, `${root.threadId}:m1`, { role: 'user', content: 'Survey the field.' });
  const reply = await appendMessage(harness.pool, root, `${root.threadId}:m2`, {
    role: 'assistant',
    content: 'I will ask the scouts.',
  });
  const earlier = await openDelegation(harness.pool, root, `${root.threadId}:d1`, {
    callee: 'scout_a',
    mode: 'new',
    chain: chain('scout_a'),
    callerMessageSeq: reply.message.seq,
    buildMessage: () => 'Look first.',
  });
  assert.equal(earlier.threadId, `${root.threadId}/scout_a-1`);

  const task = (callee: string, mode: 'new' | 'reuse' | 'clone', text: string) => ({
    delegation: { callee, mode, chain: chain(callee), callerMessageSeq: reply.message.seq + 1 },
    buildMessage: (reads: DelegationReads, fork: { forkNumber: number; prefix: string }) =>
      `${text} (${reads.rootMessage} / ${reads.callerLatest ?? '-'}; fork ${fork.forkNumber} ${fork.prefix})`,
  });
  const open = () =>
    openFork(harness.pool, root, `${root.threadId}:fork`, {
      store: 'isolated',
      failFast: false,
      deadlineSeconds: 60,
      maxParallel: 4,
      tasks: [
        task('scout_a', 'new', 'One.'),
        task('scout_a', 'reuse', 'Two.'),
        task('scout_b', 'clone', 'Three.'),
        task('scout_a', 'new', 'Four.'),
      ],
    });
  const fork = await open();
  const base = root.threadId;
  assert.deepEqual(
    fork.tasks.map((t) => [t.taskIndex, t.agent, t.threadId, t.workflowId, t.epoch, t.status]),
    [
      [1, 'scout_a', `${base}/scout_a-2`, `baton/${base}/scout_a-2`, 0, 'pending'],
      // `reuse` continues the caller's plain delegation thread to the agent, under the delegation's own number.
      [2, 'scout_a', `${base}/scout_a-1`, `baton/${base}/scout_a-3`, 0, 'pending'],
      [3, 'scout_b', `${base}/scout_b-1`, `baton/${base}/scout_b-1`, 0, 'pending'],
      [4, 'scout_a', `${base}/scout_a-4`, `baton/${base}/scout_a-4`, 0, 'pending'],
    ],
  );
  const delegations = await rows<{ number: number; threadId: string; message: string; mode: string }>(
    `SELECT number, thread_id AS "threadId", message, mode FROM delegations
      WHERE root_thread_id = $1 AND operation_id LIKE $2 ORDER BY operation_id`,
    [base, `${base}:fork:task:%`],
  );
  assert.deepEqual(
    delegations.map((d) => [d.number, d.threadId, d.mode, d.message]),
    [
      [2, `${base}/scout_a-2`, 'new', 'One. (Survey the field. / I will ask the scouts.; fork 1 fork/1)'],
      [3, `${base}/scout_a-1`, 'reuse', 'Two. (Survey the field. / I will ask the scouts.; fork 1 fork/1)'],
      [1, `${base}/scout_b-1`, 'clone', 'Three. (Survey the field. / I will ask the scouts.; fork 1 fork/1)'],
      [4, `${base}/scout_a-4`, 'new', 'Four. (Survey the field. / I will ask the scouts.; fork 1 fork/1)'],
    ],
  );
  const threads = await rows<{ threadId: string; scopes: string[]; forkTask: string | null; chain: string[] }>(
    `SELECT thread_id AS "threadId", env_scopes AS scopes, fork_task AS "forkTask", chain FROM threads
      WHERE root_thread_id = $1 AND thread_id <> $1 ORDER BY thread_id`,
    [base],
  );
  assert.deepEqual(
    threads.map((t) => [t.threadId, t.scopes, t.forkTask, t.chain]),
    [
      // The reused thread keeps what it was: a plain delegation thread on the shared store.
      [`${base}/scout_a-1`, [''], null, ['iso_lead', 'scout_a']],
      [`${base}/scout_a-2`, [`${base}/scout_a-2`, ''], 'fork 1 task 1', ['iso_lead', 'scout_a']],
      [`${base}/scout_a-4`, [`${base}/scout_a-4`, ''], 'fork 1 task 4', ['iso_lead', 'scout_a']],
      [`${base}/scout_b-1`, [`${base}/scout_b-1`, ''], 'fork 1 task 3', ['iso_lead', 'scout_b']],
    ],
  );
  // The clone starts from the caller's messages before the call.
  assert.deepEqual(
    (await listMessages(harness.pool, `${base}/scout_b-1`)).map((m) => [m.role, m.content]),
    [
      ['user', 'Survey the field.'],
      ['assistant', 'I will ask the scouts.'],
    ],
  );
  // Opened once per operation id: asked again, the same fork comes back and nothing more is numbered.
  assert.deepEqual((await open()).tasks, fork.tasks);
  const [counted] = await rows<{ n: number }>('SELECT count(*)::int AS n FROM delegations WHERE root_thread_id = $1', [
    base,
  ]);
  assert.equal(counted?.n, 5);
});

/** The lead's turn workflow of `root`'s first turn and its local activities' summaries, in order. */
async function leadTurnMarkers(root: string): Promise<{ workflowId: string; summaries: string[] }> {
  const workflowId = `baton/${root}/turn-1`;
  const history = await leadHistory(root);
  const summaries = (history.events ?? []).flatMap((event) => {
    const summary = markerSummary(event);
    return summary === undefined ? [] : [summary];
  });
  return { workflowId, summaries };
}

/** A local activity marker's summary, as the Web UI shows it; `undefined` for any other event. */
function markerSummary(event: temporal.api.history.v1.IHistoryEvent): string | undefined {
  return event.markerRecordedEventAttributes ? eventSummary(event) : undefined;
}

/** An activity's summary where it was scheduled, as the Web UI shows it; `undefined` for any other event. */
function activitySummary(event: temporal.api.history.v1.IHistoryEvent): string | undefined {
  return event.activityTaskScheduledEventAttributes ? eventSummary(event) : undefined;
}

/** The history of a root's first turn, the one that ran the fork. */
async function leadHistory(root: string): Promise<temporal.api.history.v1.IHistory> {
  return harness.client.temporal.workflow.getHandle(`baton/${root}/turn-1`).fetchHistory();
}

/** The failure of the local activity whose summary holds `summary` (the first such), as its marker recorded it. */
function markerFailure(history: temporal.api.history.v1.IHistory, summary: string) {
  const marker = (history.events ?? []).find((event) => markerSummary(event)?.includes(summary));
  return marker?.markerRecordedEventAttributes?.failure ?? undefined;
}

/** Whether a workflow with this id was ever started. */
async function workflowExists(workflowId: string): Promise<boolean> {
  try {
    await harness.client.temporal.workflow.getHandle(workflowId).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

test("fork/join: batched and local tasks answer in the fork's workflow, with no workflow of their own", async () => {
  const root = uniqueThreadId('here');
  const thread = await harness.client.startThread({ agent: 'here_lead', threadId: root });
  const reply = await thread.send('Go.');
  assert.equal(reply.reply, 'here done');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'success');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status, t.reply]),
    [
      ['here_batched', 'success', 'batched here'],
      ['here_local', 'success', 'stepped here'],
    ],
  );
  // The batched task's isolated store merged as a child's would.
  assert.deepEqual(result.tasks[0]?.merge?.created, ['fork/1/1/batched/note']);
  const { workflowId, summaries } = await leadTurnMarkers(root);
  // Each task's steps are local activities of the lead's turn: the batched one's whole turn in its beginning, the
  // local one's beginning, then its model step, each with its own summary.
  for (const expected of [
    'fork 1 task 1/2: here_batched starts',
    'fork 1 task 2/2: here_local starts',
    'model: here_local (fork 1 task 2) step 1',
    'step: here_local (fork 1 task 2) runs think, then model step 2',
  ]) {
    assert.ok(summaries.includes(expected), `the lead's history shows "${expected}" (it has ${summaries.join(' | ')})`);
  }
  const tasks = await rows<{ taskIndex: number; workflowId: string; status: string; threadStatus: string }>(
    `SELECT ft.task_index AS "taskIndex", ft.workflow_id AS "workflowId", ft.status, t.status AS "threadStatus"
       FROM fork_tasks ft JOIN threads t ON t.thread_id = ft.thread_id
      WHERE ft.root_thread_id = $1 ORDER BY ft.task_index`,
    [root],
  );
  // The join records where each task ran: the lead's workflow, as the explorer links it.
  assert.deepEqual(
    tasks.map((t) => [t.taskIndex, t.workflowId, t.status, t.threadStatus]),
    [
      [1, workflowId, 'success', 'completed'],
      [2, workflowId, 'success', 'completed'],
    ],
  );
  for (const task of result.tasks) {
    const name = `${task.thread_id.slice(root.length + 1)}`;
    assert.equal(await workflowExists(`baton/${root}/${name}`), false, `no workflow of its own for ${name}`);
    const transcript = await listMessages(harness.pool, task.thread_id);
    assert.equal(transcript[0]?.role, 'user', 'the task message comes first');
    assert.equal(transcript.at(-1)?.content, task.reply);
    assert.equal(transcript.filter((m) => m.role === 'user').length, 1, 'the message was recorded once');
  }
});

test("fork/join: tasks with activity steps step in the fork's workflow, and go on in one of their own to delegate", async () => {
  const root = uniqueThreadId('act');
  const thread = await harness.client.startThread({ agent: 'act_lead', threadId: root });
  const reply = await thread.send('Go.');
  assert.equal(reply.reply, 'act done');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.status, 'success');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status, t.reply]),
    [
      ['act_store', 'success', 'stored with activities'],
      ['act_deep', 'success', 'asked on'],
    ],
  );
  assert.deepEqual(result.tasks[0]?.merge?.created, ['fork/1/1/act/note']);
  // Each step is an activity of the lead's turn (dispatched, not a local activity marker), named after its task.
  const scheduled = ((await leadHistory(root)).events ?? []).flatMap((event) => activitySummary(event) ?? []);
  for (const expected of [
    'model: act_store (fork 1 task 1) step 1',
    'step: act_store (fork 1 task 1) runs store_env_data, then model step 2',
    'model: act_deep (fork 1 task 2) step 1',
    'step: act_deep (fork 1 task 2) runs think, then model step 2',
  ]) {
    assert.ok(
      scheduled.includes(expected),
      `the lead's turn scheduled "${expected}" (it has ${scheduled.join(' | ')})`,
    );
  }
  const { workflowId } = await leadTurnMarkers(root);
  const tasks = await rows<{ workflowId: string; threadStatus: string }>(
    `SELECT ft.workflow_id AS "workflowId", t.status AS "threadStatus"
       FROM fork_tasks ft JOIN threads t ON t.thread_id = ft.thread_id
      WHERE ft.root_thread_id = $1 ORDER BY ft.task_index`,
    [root],
  );
  // The first answered in the lead's workflow; the second went on in its own to delegate, from its second reply.
  const deepWorkflowId = `baton/${root}/act_deep-1`;
  assert.deepEqual(
    tasks.map((t) => [t.workflowId, t.threadStatus]),
    [
      [workflowId, 'completed'],
      [deepWorkflowId, 'completed'],
    ],
  );
  assert.equal(await workflowExists(`baton/${root}/act_store-1`), false, 'no workflow of its own for act_store');
  const deep = await harness.client.temporal.workflow.getHandle(deepWorkflowId).fetchHistory();
  const started = deep.events?.[0]?.workflowExecutionStartedEventAttributes;
  assert.equal(started?.workflowType?.name, 'forkTaskTurnWorkflow');
  const input = JSON.parse(Buffer.from(started?.input?.payloads?.[0]?.data ?? []).toString('utf8')) as AgentTurnInput;
  assert.equal(input.begun?.progress?.step, 1, 'it went on from the reply that delegated');
  // Every step's reply and tool result is in each task's transcript once, in order.
  for (const [task, expected] of [
    [result.tasks[0], ['user', 'assistant', 'tool', 'assistant']],
    [result.tasks[1], ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant']],
  ] as const) {
    const transcript = await listMessages(harness.pool, task?.thread_id ?? '');
    assert.deepEqual(
      transcript.map((m) => m.role),
      expected,
      `${task?.agent}'s transcript`,
    );
    assert.equal(transcript.at(-1)?.content, task?.reply);
  }
});

/**
 * Runs `lead`'s fork, which its deadline stops: its tasks end as `expected` says (agent and status, in order), and each
 * one given up on is reclaimed, its late reply ("too late") never stored. Returns the root thread's id.
 */
async function runForkToItsDeadline(lead: string, expected: [string, string][]): Promise<string> {
  const root = uniqueThreadId(lead.replaceAll('_', '-'));
  const thread = await harness.client.startThread({ agent: lead, threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.stopped_by, 'deadline');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    expected,
  );
  for (const task of result.tasks.filter((t) => t.status === 'timeout')) {
    const [fenced] = await rows<{ epoch: number; status: string }>(
      'SELECT epoch, status FROM threads WHERE thread_id = $1',
      [task.thread_id],
    );
    assert.deepEqual(fenced, { epoch: 1, status: 'reclaimed' }, `${task.agent} was reclaimed`);
    const transcript = await listMessages(harness.pool, task.thread_id);
    assert.equal(
      transcript.some((m) => m.content === 'too late'),
      false,
      `${task.agent}'s late reply was not stored`,
    );
  }
  return root;
}

test("fork/join: at the deadline a task stepping in the fork's workflow is reclaimed and its reply never stored", async () => {
  const root = await runForkToItsDeadline('here_deadline_lead', [
    ['here_batched', 'success'],
    ['here_laggard', 'timeout'],
  ]);
  // The laggard was given up by its own local activity at the deadline, not when the fork's timer was next seen (the
  // caller's workflow task, held open by the laggard, completes only when the SDK renews it, seconds later): by the
  // activity's schedule-to-close timeout, or, when the SDK retried it instead, by its retry refused.
  const failure = markerFailure(await leadHistory(root), 'here_laggard starts');
  assert.ok(
    failure?.timeoutFailureInfo?.timeoutType === temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE ||
      failure?.applicationFailureInfo?.type === ErrorType.ActivityPastDeadline,
    `the laggard's start failed at its deadline (it failed with ${JSON.stringify(failure)})`,
  );
});

test("fork/join: a task's retry that would begin past the deadline is refused, not run without one", async () => {
  const root = await runForkToItsDeadline('here_retry_lead', [['here_flaky', 'timeout']]);
  // The task's first batch (in its beginning) met the rate limit, and so did the batch after it, to be retried 5 s
  // later; the deadline (2 s, time enough for both under load) fell in that wait, when the SDK has no attempt to time
  // out and drops the timeout. The retry, past the deadline, was refused at once, not run for the model's 20 s until
  // the fork's timer was seen.
  const failure = markerFailure(await leadHistory(root), 'here_flaky (fork 1 task 1)');
  assert.equal(
    failure?.applicationFailureInfo?.type,
    ErrorType.ActivityPastDeadline,
    `the batch's retry was refused (it failed with ${JSON.stringify(failure)})`,
  );
  assert.match(failure?.message ?? '', /runSteps attempt 2 would begin \d+ ms past its schedule-to-close deadline/);
});

test("fork/join: under fail_fast a task failing in the fork's workflow stops its sibling stepping there", async () => {
  const root = uniqueThreadId('here-ff');
  const thread = await harness.client.startThread({ agent: 'here_ff_lead', threadId: root });
  await thread.send('Go.');
  const result = JSON.parse(await forkResult(root)) as ForkResult;
  assert.equal(result.stopped_by, 'fail_fast');
  assert.deepEqual(
    result.tasks.map((t) => [t.agent, t.status]),
    [
      ['here_sleeper', 'cancelled'],
      ['here_broken', 'failed'],
    ],
  );
  assert.match(result.tasks[1]?.error ?? '', /broken on purpose/);
  const statuses = await rows<{ threadId: string; status: string; epoch: number }>(
    `SELECT thread_id AS "threadId", status, epoch FROM threads WHERE root_thread_id = $1 AND thread_id <> $1
      ORDER BY thread_id`,
    [root],
  );
  assert.deepEqual(
    statuses.map((t) => [t.threadId.slice(root.length + 1), t.status, t.epoch]),
    [
      ['here_broken-1', 'failed', 1],
      ['here_sleeper-1', 'reclaimed', 1],
    ],
  );
});
