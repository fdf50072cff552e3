/**
 * A thread's record opened, marked running and its turn's message recorded in one call (`openThreadWithMessage`,
 * migration 029), as the turn that opens its thread does: against the test stack's Postgres, it leaves what
 * `ensureThread`, `markThread(…, 'running')` and `appendMessage` leave one after the other (the record as given,
 * running, its start and then its message in the run feed once each; the message under the record's epoch), on a new
 * record and on one that already exists (a retried attempt, a record a turn had finished), and hands back the
 * record's epoch; asked for the turn's world, the same statement reads that world's variables.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { markThread } from '../../db/delegations';
import { BatonDbError, StaleEpochError, ThreadNotFoundError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { ensureThread, findThread } from '../../db/threads';
import { appendMessage, listMessages, openThreadWithMessage } from '../../db/transcripts';
import { setWorldVariablesText } from '../../db/worlds';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, max: 2 });

after(async () => {
  await pool.end();
});

/** The kinds of the run feed's events of one thread, in order. */
async function feedKinds(rootThreadId: string, threadId: string): Promise<string[]> {
  const { rows } = await pool.query<{ kind: string }>(
    'SELECT kind FROM run_events WHERE root_thread_id = $1 AND thread_id = $2 ORDER BY seq',
    [rootThreadId, threadId],
  );
  return rows.map((row) => row.kind);
}

/** A root's messages as role, content and operation id. */
async function messages(threadId: string): Promise<[string, string | null, string][]> {
  return (await listMessages(pool, threadId)).map((m) => [m.role, m.content, m.operationId]);
}

const hello = (agent: string) => ({ role: 'user' as const, agent, content: 'Hello.' });

test('a new record: opened as given, marked running, its message recorded, each once however often the call is repeated', async () => {
  const root = uniqueThreadId('open-new');
  const input = { threadId: root, rootThreadId: root, agent: 'lead', world: 'w-open' };
  const opened = await openThreadWithMessage(pool, input, `${root}:in`, hello('lead'));
  assert.equal(opened.epoch, 0, 'a new record starts at epoch 0');
  assert.equal(opened.reused, false);
  assert.deepEqual([opened.message.threadId, opened.message.content], [root, 'Hello.']);
  const thread = await findThread(pool, root);
  assert.ok(thread);
  assert.deepEqual(
    { root: thread.rootThreadId, parent: thread.parentThreadId, agent: thread.agent, caller: thread.caller },
    { root, parent: null, agent: 'lead', caller: null },
  );
  assert.equal(thread.status, 'running');
  const { rows } = await pool.query<{ world: string; started: boolean; finished: boolean }>(
    'SELECT world, started_at IS NOT NULL AS started, finished_at IS NOT NULL AS finished FROM threads WHERE thread_id = $1',
    [root],
  );
  assert.deepEqual(rows[0], { world: 'w-open', started: true, finished: false });
  assert.deepEqual(await feedKinds(root, root), ['turn_started', 'message'], 'the start, then the message');
  assert.deepEqual(await messages(root), [['user', 'Hello.', `${root}:in`]]);
  // A retried attempt of the turn's beginning: the same record and message, still one start and one message.
  const again = await openThreadWithMessage(pool, input, `${root}:in`, hello('lead'));
  assert.deepEqual([again.epoch, again.reused, again.message.seq], [0, true, opened.message.seq]);
  assert.deepEqual(await feedKinds(root, root), ['turn_started', 'message']);
  assert.deepEqual(await messages(root), [['user', 'Hello.', `${root}:in`]]);
});

test('an existing record: left as it was but marked running again, the message under the epoch it has', async () => {
  const root = uniqueThreadId('open-old');
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
  await markThread(pool, root, 'running');
  await markThread(pool, root, 'failed', 'the model refused');
  await pool.query('UPDATE threads SET epoch = 3 WHERE thread_id = $1', [root]);
  // Another agent and world given: an existing record keeps its own.
  const opened = await openThreadWithMessage(
    pool,
    { threadId: root, rootThreadId: root, agent: 'other', world: 'x' },
    `${root}:in`,
    hello('lead'),
  );
  assert.equal(opened.epoch, 3);
  const { rows } = await pool.query<{ agent: string; world: string; status: string; last_error: string | null }>(
    'SELECT agent, world, status, last_error FROM threads WHERE thread_id = $1',
    [root],
  );
  assert.deepEqual(rows[0], { agent: 'lead', world: 'default', status: 'running', last_error: null });
  assert.deepEqual(await feedKinds(root, root), ['turn_started', 'turn_ended', 'turn_started', 'message']);
  // The message went under that epoch, and the turn goes on under it: its next write is taken, an older one refused.
  await assert.rejects(
    appendMessage(pool, { rootThreadId: root, threadId: root, agent: 'lead', epoch: 0 }, `${root}:old`, {
      role: 'assistant',
      content: 'Stale.',
    }),
    StaleEpochError,
  );
  await appendMessage(pool, { rootThreadId: root, threadId: root, agent: 'lead', epoch: 3 }, `${root}:out`, {
    role: 'assistant',
    content: 'Hi.',
  });
  assert.equal((await messages(root)).length, 2);
});

test('an insert Postgres refuses fails the call and stores nothing', async () => {
  const root = uniqueThreadId('open-orphan');
  // A child record whose parent does not exist: the insert fails on the parent's foreign key.
  await assert.rejects(
    openThreadWithMessage(
      pool,
      { threadId: `${root}/child-1`, rootThreadId: root, parentThreadId: `${root}/missing`, agent: 'helper' },
      `${root}:in`,
      hello('helper'),
    ),
    (error: unknown) => !(error instanceof ThreadNotFoundError) && error instanceof Error,
  );
  assert.equal(await findThread(pool, `${root}/child-1`), undefined, 'no record');
  assert.deepEqual(await messages(`${root}/child-1`), [], 'no message');
});

test('an operation id that wrote to another thread of the root is refused: nothing recorded in this thread', async () => {
  const root = uniqueThreadId('open-taken');
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
  await appendMessage(pool, { rootThreadId: root, threadId: root, agent: 'lead', epoch: 0 }, `${root}:taken`, {
    role: 'user',
    content: 'First.',
  });
  const child = `${root}/child-1`;
  await assert.rejects(
    openThreadWithMessage(
      pool,
      { threadId: child, rootThreadId: root, parentThreadId: root, agent: 'helper' },
      `${root}:taken`,
      hello('helper'),
    ),
    (error: unknown) => error instanceof BatonDbError && /already wrote to thread/.test(error.message),
  );
  assert.deepEqual(await messages(child), [], 'no message of the child');
});

test("asked for its world, the call reads the world's variables in the same statement; a world never set has none", async () => {
  const root = uniqueThreadId('open-world');
  const world = `w-${root}`;
  await setWorldVariablesText(pool, world, 'BATON_STEPS=local\nBATON_MAX_DELEGATION_DEPTH=3\n');
  const input = { threadId: root, rootThreadId: root, agent: 'lead', world };
  const opened = await openThreadWithMessage(pool, input, `${root}:in`, hello('lead'), { world });
  assert.equal(opened.worldVariables, 'BATON_STEPS=local\nBATON_MAX_DELEGATION_DEPTH=3\n');
  assert.equal(opened.epoch, 0);
  assert.deepEqual(await messages(root), [['user', 'Hello.', `${root}:in`]], 'and opened the thread with its message');
  const unset = await openThreadWithMessage(pool, input, `${root}:in`, hello('lead'), { world: `${world}-never` });
  assert.equal(unset.worldVariables, undefined);
  const unasked = await openThreadWithMessage(pool, input, `${root}:in`, hello('lead'));
  assert.equal(unasked.worldVariables, undefined, 'not asked, not read');
});
