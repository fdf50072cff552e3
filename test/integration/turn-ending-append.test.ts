/**
 * The append of a turn's answer that also ends the turn (`appendMessage(…, { endsTurn: true })`), against the test
 * stack's Postgres: the thread is recorded completed in the statement that stores the answer, after it in the run feed,
 * once however often the call is repeated; a reply with tool calls ends nothing, and a refused append (a stale epoch)
 * leaves the thread as it was, its refusal recorded.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { markThread } from '../../db/delegations';
import { StaleEpochError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { ensureThread, findThread } from '../../db/threads';
import { appendMessage, listMessages } from '../../db/transcripts';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, max: 2 });

after(async () => {
  await pool.end();
});

/** The kinds of the run feed's events of one thread, in order. */
async function feedKinds(threadId: string): Promise<string[]> {
  const { rows } = await pool.query<{ kind: string }>(
    'SELECT kind FROM run_events WHERE root_thread_id = $1 AND thread_id = $1 ORDER BY seq',
    [threadId],
  );
  return rows.map((row) => row.kind);
}

/** A root thread running its turn, its message recorded: the scope its answer is appended under. */
async function runningTurn(name: string) {
  const threadId = uniqueThreadId(name);
  const thread = await ensureThread(pool, { threadId, rootThreadId: threadId, agent: 'lead' });
  await markThread(pool, threadId, 'running');
  const scope = { rootThreadId: threadId, threadId, agent: 'lead', epoch: thread.epoch };
  await appendMessage(pool, scope, `${threadId}:in`, { role: 'user', content: 'Check it.' });
  return scope;
}

const answer = { role: 'assistant' as const, content: 'Checked.', usage: null, provider: 'default', model: 'm' };

test('an answer that ends the turn: stored, then the thread completed, in that order, once however often', async () => {
  const scope = await runningTurn('ends');
  const first = await appendMessage(pool, scope, `${scope.threadId}:model:0`, answer, { endsTurn: true });
  assert.equal(first.reused, false);
  const thread = await findThread(pool, scope.threadId);
  assert.equal(thread?.status, 'completed');
  assert.deepEqual(await feedKinds(scope.threadId), ['turn_started', 'message', 'assistant_message', 'turn_ended']);

  const again = await appendMessage(pool, scope, `${scope.threadId}:model:0`, answer, { endsTurn: true });
  assert.equal(again.reused, true);
  assert.equal(again.message.seq, first.message.seq);
  assert.deepEqual(await feedKinds(scope.threadId), ['turn_started', 'message', 'assistant_message', 'turn_ended']);
  assert.equal((await listMessages(pool, scope.threadId)).length, 2);
});

test('a reply with tool calls ends nothing, even asked to; nor does one found stored with tool calls', async () => {
  const scope = await runningTurn('calls');
  const reply = { ...answer, content: null, toolCalls: [{ id: 'c1', name: 'think', arguments: '{}' }] };
  await appendMessage(pool, scope, `${scope.threadId}:model:0`, reply, { endsTurn: true });
  assert.equal((await findThread(pool, scope.threadId))?.status, 'running');
  // A retry whose model answered this time finds the reply with calls an earlier attempt stored: the turn goes on.
  const found = await appendMessage(pool, scope, `${scope.threadId}:model:0`, answer, { endsTurn: true });
  assert.equal(found.reused, true);
  assert.deepEqual(found.message.toolCalls, reply.toolCalls);
  assert.equal((await findThread(pool, scope.threadId))?.status, 'running');
  assert.deepEqual(await feedKinds(scope.threadId), ['turn_started', 'message', 'assistant_message']);
});

test('a refused append (a stale epoch) stores nothing but its refusal, and leaves the thread running', async () => {
  const scope = await runningTurn('stale');
  await assert.rejects(
    appendMessage(pool, { ...scope, epoch: scope.epoch + 1 }, `${scope.threadId}:model:0`, answer, { endsTurn: true }),
    StaleEpochError,
  );
  assert.equal((await findThread(pool, scope.threadId))?.status, 'running');
  assert.equal((await listMessages(pool, scope.threadId)).length, 1);
  assert.deepEqual(await feedKinds(scope.threadId), ['turn_started', 'message', 'write_refused']);
});
