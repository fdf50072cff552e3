/**
 * Guards the suite did not test before (issue 13): the Update validators (an empty or NUL-holding message, an ended
 * thread, an empty, oversized or unexpected answer), idempotency and fencing of question and delegation writes, and
 * the typed failures `Thread.NotFound` and `Model.InvalidReply`. Each asserts what the guard did, not a scripted reply.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { ErrorType } from '../../common/errors';
import type { ThreadScope } from '../../common/types';
import { openDelegation } from '../../db/delegations';
import { StaleEpochError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { openQuestion } from '../../db/questions';
import { ensureThread } from '../../db/threads';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { createModelClient } from '../../worker/model-client';
import { MAX_ANSWER_BYTES } from '../../workflows/agent-turn';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl });
const asker = parseAgentFile('---\nname: asker\ndescription: Asks.\n---\nAsk.\n', 'asker.md');
let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('guards', {
    agents: new Map([['asker', asker]]),
    script: parseScript(
      'agents:\n  asker:\n    - call: ask_human\n      args: { question: "Which colour?" }\n    - say: "Thanks."\n',
      'guards',
    ),
  });
});

after(async () => {
  await harness?.close();
  await pool.end();
});

/** The failure an Update validator or activity raised, wherever the client wrapped it. */
function failureOf(error: unknown): ApplicationFailure {
  for (let current: unknown = error; current instanceof Error; current = current.cause) {
    if (current instanceof ApplicationFailure) return current;
  }
  assert.fail(`no ApplicationFailure in ${String(error)}`);
}

async function rejectsWith(promise: Promise<unknown>, type: string, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    const failure = failureOf(error);
    assert.equal(failure.type, type);
    assert.match(failure.message, message);
    return true;
  });
}

test('answer: a question stored before its turn waits for it is retried, then refused clearly; nothing closes', async () => {
  const thread = await harness.client.startThread({ agent: 'asker', threadId: uniqueThreadId('early-answer') });
  const reply = thread.send('Pick a colour.');
  let asked: { questionId: string; workflowId: string; threadId: string } | undefined;
  for (const deadline = Date.now() + 60_000; !asked; await new Promise((resolve) => setTimeout(resolve, 100))) {
    asked = (await thread.questions())[0];
    assert.ok(Date.now() < deadline, 'the question was never asked');
  }
  // A second question stored for the same turn, which the turn never asked: as a question looks between its row
  // being stored and its turn starting to wait for it (a worker that died in between stretches that moment).
  const { rows } = await pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [
    asked.threadId,
  ]);
  const early = await openQuestion(
    pool,
    { rootThreadId: thread.threadId, threadId: asked.threadId, agent: 'asker', epoch: rows[0]?.epoch ?? 0 },
    `${uniqueThreadId('op')}:question`,
    { workflowId: asked.workflowId, toolCallId: 'call-early', question: 'Not asked yet?' },
  );
  const started = Date.now();
  await assert.rejects(
    thread.answer(early.questionId, 'green', { waitMs: 1_500 }),
    new RegExp(`question '${early.questionId}' is open but its turn has not started waiting for it after 1.5 s`),
  );
  assert.ok(Date.now() - started >= 1_500, 'the client tried again before giving up');
  const stored = await thread.questions({ all: true });
  assert.deepEqual(
    stored.map((q) => [q.questionId, q.status]),
    [
      [asked.questionId, 'open'],
      [early.questionId, 'open'],
    ],
    'nothing was closed by the refused answer',
  );
  await thread.answer(asked.questionId, 'blue');
  assert.equal((await reply).reply, 'Thanks.');
  await thread.end();
});

test('update validators: bad messages and answers are refused before they reach the turn', async () => {
  const thread = await harness.client.startThread({ agent: 'asker', threadId: uniqueThreadId('guards') });
  await rejectsWith(thread.send(''), ErrorType.InvalidInput, /message must be a non-empty string/);
  await rejectsWith(thread.send('   '), ErrorType.InvalidInput, /message must be a non-empty string/);
  await rejectsWith(thread.send('a\u0000b'), ErrorType.InvalidInput, /NUL character/);
  assert.deepEqual(await thread.transcript(), [], 'nothing refused was stored');

  const reply = thread.send('Pick a colour.');
  let question: { questionId: string; workflowId: string } | undefined;
  for (const deadline = Date.now() + 60_000; !question; await new Promise((resolve) => setTimeout(resolve, 100))) {
    question = (await thread.questions())[0];
    assert.ok(Date.now() < deadline, 'the question was never asked');
  }
  const turn = harness.client.temporal.workflow.getHandle(question.workflowId);
  const answer = (questionId: string, text: string) =>
    turn.executeUpdate('answerQuestion', { args: [{ questionId, answer: text }] });
  await rejectsWith(answer(question.questionId, ''), ErrorType.InvalidInput, /the answer must not be empty/);
  await rejectsWith(
    answer(question.questionId, 'x'.repeat(MAX_ANSWER_BYTES + 1)),
    ErrorType.InvalidInput,
    /the answer is too long/,
  );
  await rejectsWith(answer('q999', 'blue'), ErrorType.InvalidInput, /question 'q999' is not waiting/);
  assert.equal((await thread.questions())[0]?.status, 'open', 'the refused answers closed nothing');

  // An answer holding a NUL is cleaned on its way into Postgres instead of failing the waiting turn.
  await thread.answer(question.questionId, 'bl\u0000ue');
  assert.equal((await reply).reply, 'Thanks.');
  // The turn that asked has ended: a second answer has nowhere to go.
  await assert.rejects(answer(question.questionId, 'red'), /already completed|is not waiting/);
  assert.equal((await thread.questions({ all: true }))[0]?.answer, 'bl\uFFFDue');

  await thread.end();
  await thread.result();
  await assert.rejects(thread.send('Still there?'), /has ended|does not exist|thread has ended/);
});

async function rootScope(name: string): Promise<ThreadScope> {
  const threadId = uniqueThreadId(name);
  const thread = await ensureThread(pool, { threadId, rootThreadId: threadId, agent: 'asker' });
  return { rootThreadId: threadId, threadId, agent: 'asker', epoch: thread.epoch };
}

test('question writes: a retried write stores one question; a stale one stores none', async () => {
  const scope = await rootScope('question');
  const question = { workflowId: 'wf', toolCallId: 'call-1', question: 'Which?' };
  const [first, again] = await Promise.all([
    openQuestion(pool, scope, `${scope.threadId}:q`, question),
    openQuestion(pool, scope, `${scope.threadId}:q`, question),
  ]);
  assert.equal(first.questionId, again.questionId);
  const count = async () =>
    Number(
      (
        await pool.query<{ n: string }>('SELECT count(*) AS n FROM questions WHERE root_thread_id = $1', [
          scope.rootThreadId,
        ])
      ).rows[0]?.n,
    );
  assert.equal(await count(), 1);
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [scope.threadId]);
  await assert.rejects(openQuestion(pool, scope, `${scope.threadId}:q2`, question), StaleEpochError);
  await assert.rejects(openQuestion(pool, scope, `${scope.threadId}:q`, question), StaleEpochError);
  assert.equal(await count(), 1);
});

test('delegation writes: a retried write opens one delegation and one callee thread; a stale one opens none', async () => {
  const scope = await rootScope('delegation');
  const delegation = {
    callee: 'asker',
    mode: 'new' as const,
    chain: ['asker', 'asker'],
    callerMessageSeq: 1,
    buildMessage: () => 'Do it.',
  };
  const first = await openDelegation(pool, scope, `${scope.threadId}:d`, delegation);
  const again = await openDelegation(pool, scope, `${scope.threadId}:d`, delegation);
  assert.deepEqual(again, first);
  const counts = async () => {
    const { rows } = await pool.query<{ delegations: string; threads: string }>(
      `SELECT (SELECT count(*) FROM delegations WHERE root_thread_id = $1) AS delegations,
              (SELECT count(*) FROM threads WHERE root_thread_id = $1) AS threads`,
      [scope.rootThreadId],
    );
    return rows[0];
  };
  assert.deepEqual(await counts(), { delegations: '1', threads: '2' });
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [scope.threadId]);
  await assert.rejects(openDelegation(pool, scope, `${scope.threadId}:d2`, delegation), StaleEpochError);
  assert.deepEqual(await counts(), { delegations: '1', threads: '2' });
});

test('typed failures: Thread.NotFound for a missing thread, Model.InvalidReply for a reply without choices', async () => {
  const empty = http.createServer((_request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [] }));
  });
  await new Promise<void>((resolve) => empty.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = empty.address() as AddressInfo;
    const agents = new Map([['asker', asker]]);
    const activities = createActivities({
      pool,
      openai: createModelClient({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', model: 'm' }),
      model: 'm',
      agents: () => agents,
      tools: createAgentCatalog({ agents, filesRoot: env.stateDir, arcDataDir: DEFAULT_ARC_DATA_DIR }).tools,
    });
    const run = <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> =>
      new MockActivityEnvironment().run(fn, ...args);

    const missing: ThreadScope = { rootThreadId: 'no-such-root', threadId: 'no-such-thread', agent: 'asker', epoch: 0 };
    await assert.rejects(
      run(activities.recordMessage, { scope: missing, operationId: 'op', message: { role: 'user', content: 'hi' } }),
      (error: unknown) => {
        const failure = failureOf(error);
        assert.equal(failure.type, ErrorType.ThreadNotFound);
        assert.equal(failure.nonRetryable, true);
        return true;
      },
    );

    const scope = await rootScope('invalid-reply');
    await run(activities.recordMessage, {
      scope,
      operationId: `${scope.threadId}:in`,
      message: { role: 'user', content: 'hi' },
    });
    const { version } = await run(activities.resolveAgent, { name: 'asker' });
    await rejectsWith(
      run(activities.callModel, {
        scope,
        world: 'default',
        agentVersion: version,
        operationId: `${scope.threadId}:m`,
        step: 0,
      }),
      ErrorType.ModelInvalidReply,
      /no choices/,
    );
  } finally {
    await new Promise((resolve) => empty.close(resolve));
  }
});
