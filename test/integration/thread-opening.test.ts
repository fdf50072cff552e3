/**
 * A thread's record opened and marked running in one call (`openThreadRunning`, migration 028), as the turn that
 * opens its thread does: against the test stack's Postgres, it leaves what `ensureThread` then `markThread(…,
 * 'running')` leave (the record as given, running, its start in the run feed once), on a new record and on one that
 * already exists (a retried attempt, a record a turn had finished), and hands back the record's epoch.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { markThread } from '../../db/delegations';
import { ThreadNotFoundError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { ensureThread, findThread, openThreadRunning } from '../../db/threads';
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

test('a new record: opened as given, marked running, its turn in the feed once however often the call is repeated', async () => {
  const root = uniqueThreadId('open-new');
  const input = { threadId: root, rootThreadId: root, agent: 'lead', world: 'w-open' };
  assert.equal(await openThreadRunning(pool, input), 0, 'a new record starts at epoch 0');
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
  assert.deepEqual(await feedKinds(root, root), ['turn_started']);
  // A retried attempt of the turn's beginning: the same record, still one start in the feed.
  assert.equal(await openThreadRunning(pool, input), 0);
  assert.deepEqual(await feedKinds(root, root), ['turn_started']);
});

test('an existing record: left as it was but marked running again, under the epoch it has', async () => {
  const root = uniqueThreadId('open-old');
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
  await markThread(pool, root, 'running');
  await markThread(pool, root, 'failed', 'the model refused');
  await pool.query('UPDATE threads SET epoch = 3 WHERE thread_id = $1', [root]);
  // Another agent and world given: an existing record keeps its own.
  assert.equal(await openThreadRunning(pool, { threadId: root, rootThreadId: root, agent: 'other', world: 'x' }), 3);
  const { rows } = await pool.query<{ agent: string; world: string; status: string; last_error: string | null }>(
    'SELECT agent, world, status, last_error FROM threads WHERE thread_id = $1',
    [root],
  );
  assert.deepEqual(rows[0], { agent: 'lead', world: 'default', status: 'running', last_error: null });
  assert.deepEqual(await feedKinds(root, root), ['turn_started', 'turn_ended', 'turn_started']);
});

test('an insert Postgres refuses fails the call and stores nothing', async () => {
  const root = uniqueThreadId('open-orphan');
  // A child record whose parent does not exist: the insert fails on the parent's foreign key.
  await assert.rejects(
    openThreadRunning(pool, {
      threadId: `${root}/child-1`,
      rootThreadId: root,
      parentThreadId: `${root}/missing`,
      agent: 'helper',
    }),
    (error: unknown) => !(error instanceof ThreadNotFoundError) && error instanceof Error,
  );
  assert.equal(await findThread(pool, `${root}/child-1`), undefined, 'nothing stored');
});
