/**
 * Regression tests for the reclaim gaps of issue 22 (section 2, defects 1, 2, 7 and 8): a child opened by a task at
 * the moment it is reclaimed, a `reuse` delegation landing in a fork task's or a stopped thread, a delegated turn or
 * fork task stopped by its own `timeout_s` left unfenced, and questions of reclaimed or failed turns left open. Stores
 * run against the test stack's Postgres; turns run on the real Temporal server with the scripted model.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { PoolClient } from 'pg';
import { BatonClientError } from '../../client';
import { formatQuestions } from '../../client/format';
import type { ThreadScope } from '../../common/types';
import { insertDelegation, lockDelegationNumbers, markThread, openDelegation } from '../../db/delegations';
import { StaleEpochError } from '../../db/errors';
import { fenceFailedThread } from '../../db/fences';
import { openFork, reclaimForkTasks } from '../../db/forks';
import { findQuestion, openQuestion } from '../../db/questions';
import { lockThreadAtEpoch } from '../../db/threads';
import { listMessages } from '../../db/transcripts';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { openRootThread } from '../../testing/thread-fixtures';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';
import { explorerHttp } from './explorer-http';

function agent(name: string, capabilities: string[] = [], extra = '') {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('lead', ['fork_join', 'worker']),
    agent('worker', ['helper']),
    agent('helper'),
    agent('boss', ['dawdler']),
    agent('dawdler', [], 'timeout_s: 2\n'),
    agent('ff_boss', ['fork_join', 'asker', 'stall']),
    agent('asker'),
    agent('stall', [], 'timeout_s: 3\n'),
  ].map((a) => [a.name, a]),
);

const script = parseScript(
  `
agents:
  boss:
    - call: dawdler
      args: { message: "Ask, then work." }
    - call: dawdler
      args: { message: "Try again.", thread: reuse }
    - say: "boss done"
  dawdler:
    - call: ask_human
      args: { question: "Shall I go on?" }
    - say: "I went on."
  ff_boss:
    - call: fork_join
      args: { fail_fast: true, tasks: [ { agent: asker, message: "Ask." }, { agent: stall, message: "Stall." } ] }
    - say: "ff done"
  asker:
    - call: ask_human
      args: { question: "Which way?" }
    - say: "never"
  stall:
    - { say: "too late", delay_ms: 20000 }
`,
  'reclaim',
);

let harness: AgentHarness;
let explorer: ExplorerServer;
const { request, page } = explorerHttp(() => explorer);

before(async () => {
  harness = await startTestHarness('reclaim', { agents, script });
  explorer = await startExplorer({ client: harness.client, port: 0 });
});

after(async () => {
  await explorer?.close();
  await harness?.close();
});

async function threadRow(threadId: string) {
  const { rows } = await harness.pool.query<{ epoch: number; status: string; lastError: string | null }>(
    'SELECT epoch, status, last_error AS "lastError" FROM threads WHERE thread_id = $1',
    [threadId],
  );
  return rows[0];
}

/** A fork of one `worker` task opened by `root`, as `fork_join` opens it. */
async function forkOneWorker(root: ThreadScope) {
  return openFork(harness.pool, root, `${root.threadId}:fork`, {
    store: 'isolated',
    failFast: false,
    deadlineSeconds: 60,
    maxParallel: 1,
    tasks: [
      {
        delegation: { callee: 'worker', mode: 'new', chain: ['lead', 'worker'], callerMessageSeq: 0 },
        buildMessage: () => 'Work.',
      },
    ],
  });
}

/** Resolves once another session waits for a lock `holder` holds; fails after 5 s. */
async function waitUntilBlocking(holder: PoolClient): Promise<void> {
  const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]?.pid;
  await waitFor('a session waiting for the holder', 5000, async () => {
    const { rows: blocked } = await harness.pool.query<{ waiting: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))) AS waiting',
      [pid],
    );
    return blocked[0]?.waiting ? true : undefined;
  });
}

test('reclaim: a child a task opens at the moment it is reclaimed is fenced with it (defect 1)', async () => {
  const root = await openRootThread(harness.pool, 'lead');
  const fork = await forkOneWorker(root);
  const [task] = fork.tasks;
  assert.ok(task);
  const taskScope: ThreadScope = { ...root, threadId: task.threadId, agent: 'worker', epoch: task.epoch };
  const opener = await harness.pool.connect();
  let childId = '';
  try {
    // The task's delegation, held open before its commit: what `openDelegation` does in its transaction.
    await opener.query('BEGIN');
    await lockThreadAtEpoch(opener, task.threadId, task.epoch);
    await lockDelegationNumbers(opener, root.rootThreadId);
    const child = await insertDelegation(
      opener,
      taskScope,
      `${task.threadId}:delegate`,
      {
        callee: 'helper',
        mode: 'new',
        chain: ['lead', 'worker', 'helper'],
        callerMessageSeq: 0,
        buildMessage: () => 'Help.',
      },
      { rootMessage: '', callerLatest: undefined },
    );
    childId = child.threadId;
    assert.equal(child.epoch, 0);
    const reclaiming = reclaimForkTasks(harness.pool, root.rootThreadId, fork.number, [
      { taskIndex: 1, status: 'timeout', error: 'past the deadline' },
    ]);
    await waitUntilBlocking(opener);
    await opener.query('COMMIT');
    assert.equal(await reclaiming, 2, "the task's thread and the child it opened");
  } finally {
    await opener.query('ROLLBACK').catch(() => undefined);
    opener.release();
  }
  assert.deepEqual(await threadRow(childId), {
    epoch: 1,
    status: 'reclaimed',
    lastError: 'reclaimed: past the deadline',
  });
  // The child's turn, started at the epoch its delegation handed out, can write nothing.
  await assert.rejects(
    openQuestion(harness.pool, { ...root, threadId: childId, agent: 'helper', epoch: 0 }, `${childId}:q`, {
      workflowId: 'w',
      toolCallId: 'c',
      question: 'Still there?',
    }),
    StaleEpochError,
  );
});

test("reclaim: a 'reuse' delegation never continues a fork task's thread (defect 2)", async () => {
  const root = await openRootThread(harness.pool, 'lead');
  const fork = await forkOneWorker(root);
  const taskThread = fork.tasks[0]?.threadId;
  const delegation = (operationId: string) =>
    openDelegation(harness.pool, root, operationId, {
      callee: 'worker',
      mode: 'reuse',
      chain: ['lead', 'worker'],
      callerMessageSeq: 0,
      buildMessage: () => 'Go on.',
    });
  const first = await delegation(`${root.threadId}:reuse-1`);
  assert.notEqual(first.threadId, taskThread, "the fork task's thread is not a delegation to continue");
  const { rows } = await harness.pool.query<{ forkTask: string | null; scopes: string[] }>(
    'SELECT fork_task AS "forkTask", env_scopes AS scopes FROM threads WHERE thread_id = $1',
    [first.threadId],
  );
  assert.deepEqual(
    rows[0],
    { forkTask: null, scopes: [''] },
    "a plain delegation thread, writing to the caller's data",
  );
  // A plain delegation thread is continued as before.
  assert.equal((await delegation(`${root.threadId}:reuse-2`)).threadId, first.threadId);
});

test('reclaim: a delegated turn stopped by its timeout_s is fenced, its question cancelled, and reuse starts afresh (defects 7, 8, 2)', async () => {
  const root = uniqueThreadId('boss');
  const thread = await harness.client.startThread({ agent: 'boss', threadId: root });
  const result = await thread.send('Delegate.');
  assert.equal(result.reply, 'boss done');
  const stopped = 'it did not finish within 2 seconds and was stopped';
  const results = (await listMessages(harness.pool, root)).filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, [`Error: dawdler failed: ${stopped}`, `Error: dawdler failed: ${stopped}`]);

  const first = `${root}/dawdler-1`;
  assert.deepEqual(await threadRow(first), { epoch: 1, status: 'failed', lastError: stopped });
  // Whatever the stopped turn's activities still try is refused.
  await assert.rejects(
    openQuestion(harness.pool, { rootThreadId: root, threadId: first, agent: 'dawdler', epoch: 0 }, `${first}:late`, {
      workflowId: 'w',
      toolCallId: 'c',
      question: 'Late?',
    }),
    StaleEpochError,
  );
  // The second call asked to continue the dawdler's thread; the stopped one is not continued.
  const { rows: delegations } = await harness.pool.query<{ thread_id: string; mode: string }>(
    'SELECT thread_id, mode FROM delegations WHERE root_thread_id = $1 ORDER BY number',
    [root],
  );
  assert.deepEqual(delegations, [
    { thread_id: first, mode: 'new' },
    { thread_id: `${root}/dawdler-2`, mode: 'reuse' },
  ]);

  // Both questions were closed with the reason; none is offered, and an answer gets that reason back.
  assert.deepEqual(await thread.questions(), []);
  const all = await thread.questions({ all: true });
  assert.deepEqual(
    all.map((q) => [q.questionId, q.threadId, q.status, q.reason]),
    [
      ['q1', first, 'cancelled', `its turn failed: ${stopped}`],
      ['q2', `${root}/dawdler-2`, 'cancelled', `its turn failed: ${stopped}`],
    ],
  );
  await assert.rejects(
    thread.answer('q1', 'Yes.'),
    (error: unknown) =>
      error instanceof BatonClientError &&
      error.message === `question 'q1' is already cancelled: its turn failed: ${stopped}`,
  );
  assert.match(formatQuestions(all, true), /^q1 +dawdler +\S+ +cancelled \(its turn failed: it did not finish/m);
  await thread.end();
});

test('reclaim: under fail_fast, a task stopped by its timeout_s is fenced and the reclaimed asker cannot be answered (defects 7, 8)', async () => {
  const root = uniqueThreadId('ff');
  const thread = await harness.client.startThread({ agent: 'ff_boss', threadId: root });
  const result = await thread.send('Go.');
  assert.equal(result.reply, 'ff done');
  const messages = await listMessages(harness.pool, root);
  const fork = JSON.parse(messages.find((m) => m.role === 'tool')?.content ?? '{}') as {
    tasks: { agent: string; status: string; thread_id: string; error?: string }[];
  };
  assert.deepEqual(
    fork.tasks.map((t) => [t.agent, t.status, t.error]),
    [
      ['asker', 'cancelled', 'stopped because another task failed (fail_fast); reclaimed'],
      ['stall', 'failed', 'it did not finish within its own timeout_s of 3 seconds'],
    ],
  );
  const [asker, stall] = fork.tasks.map((t) => t.thread_id);
  assert.deepEqual(await threadRow(stall ?? ''), {
    epoch: 1,
    status: 'failed',
    lastError: 'it did not finish within its own timeout_s of 3 seconds',
  });
  assert.equal((await threadRow(asker ?? ''))?.status, 'reclaimed');

  const question = await findQuestion(harness.pool, root, 'q1');
  assert.equal(question?.threadId, asker);
  assert.equal(question?.status, 'cancelled');
  assert.equal(question?.reason, 'its turn was reclaimed: stopped because another task failed (fail_fast); reclaimed');
  await assert.rejects(thread.answer('q1', 'Left.'), BatonClientError);
  // The explorer offers no answer box for it, and an answer posted anyway gets the reason, not a server error.
  const overview = await page(`/threads/${encodeURIComponent(root)}`);
  assert.doesNotMatch(overview, /<form\s[^>]*data-question="q1"/, 'no answer form for the cancelled question');
  assert.match(
    overview,
    /<tr data-question="q1">.*?class="status status-cancelled">cancelled<\/span><\/td><td>its turn was reclaimed: stopped because another task failed/,
    'it is listed closed, with the reason',
  );
  const posted = await request(`/api/threads/${encodeURIComponent(root)}/questions/q1/answer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"answer":"Left."}',
  });
  assert.equal(posted.status, 409, posted.body);
  assert.match(posted.body, /question 'q1' is already cancelled: its turn was reclaimed/);
  await thread.end();
});

test('reclaim: a turn that fails closes its open questions as cancelled, with the reason (defect 8)', async () => {
  const root = await openRootThread(harness.pool, 'asker');
  const { questionId } = await openQuestion(harness.pool, root, `${root.threadId}:q`, {
    workflowId: `baton/${root.threadId}/turn-1`,
    toolCallId: 'call-1',
    question: 'Which way?',
  });
  await markThread(harness.pool, root.threadId, 'failed', 'the model refused');
  const question = await findQuestion(harness.pool, root.rootThreadId, questionId);
  assert.deepEqual([question?.status, question?.reason], ['cancelled', 'its turn failed: the model refused']);
  assert.ok(question?.closedAt instanceof Date);
});

test('reclaim: a failed turn is fenced once, with the whole tree below it, finished threads keeping their status', async () => {
  const root = await openRootThread(harness.pool, 'boss');
  const open = (caller: ThreadScope, callee: string) =>
    openDelegation(harness.pool, caller, `${caller.threadId}:${callee}`, {
      callee,
      mode: 'new',
      chain: [caller.agent, callee],
      callerMessageSeq: 0,
      buildMessage: () => 'Go.',
    });
  const dawdler = await open(root, 'dawdler');
  const dawdlerScope = { ...root, threadId: dawdler.threadId, agent: 'dawdler', epoch: dawdler.epoch };
  const [running, done] = [await open(dawdlerScope, 'helper'), await open(dawdlerScope, 'asker')];
  await markThread(harness.pool, running.threadId, 'running');
  await markThread(harness.pool, done.threadId, 'completed');
  const below = { ...root, threadId: running.threadId, agent: 'helper', epoch: running.epoch };
  const asked = await openQuestion(harness.pool, below, `${running.threadId}:q`, {
    workflowId: 'w',
    toolCallId: 'c',
    question: 'Which one?',
  });
  const fence = () => fenceFailedThread(harness.pool, root.rootThreadId, dawdler.threadId, dawdler.epoch, 'stopped');
  assert.equal(await fence(), 3);
  assert.equal(await fence(), 0, 'a retry bumps nothing twice');
  assert.deepEqual(await threadRow(dawdler.threadId), { epoch: 1, status: 'failed', lastError: 'stopped' });
  assert.deepEqual(await threadRow(running.threadId), {
    epoch: 1,
    status: 'reclaimed',
    lastError: 'reclaimed: stopped',
  });
  assert.deepEqual(await threadRow(done.threadId), { epoch: 1, status: 'completed', lastError: null });
  assert.deepEqual(
    await threadRow(root.threadId),
    { epoch: 0, status: 'active', lastError: null },
    'the caller is not',
  );
  const question = await findQuestion(harness.pool, root.rootThreadId, asked.questionId);
  assert.deepEqual([question?.status, question?.reason], ['cancelled', 'its turn was reclaimed: stopped']);
});
