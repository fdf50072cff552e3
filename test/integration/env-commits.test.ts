/**
 * Merging an isolated fork task's store into its caller's (`mergeTaskCommit`, and a join's tasks in one transaction
 * with `mergeTaskCommits`) and accepting what it proposed, against the real Postgres: a retried merge applies once, a
 * stale caller is refused, and a proposal based on an older version is accepted only when it cannot undo what changed
 * since.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { ThreadScope } from '../../common/types';
import { mergeTaskCommit, mergeTaskCommits, type TaskCommit } from '../../db/env-commits';
import { EnvDataError, EnvDataErrorType, EnvStore } from '../../db/env-data';
import { StaleEpochError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { readTestEnv } from '../../testing/test-env';
import { openChildThread, openRootThread } from '../../testing/thread-fixtures';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, applicationName: 'baton-env-commits-test' });
const store = new EnvStore(pool);

after(async () => {
  await pool.end();
});

/** Isolated task `taskIndex` of fork 1 below `caller`: it reads and writes its own scope first. */
async function isolatedTask(
  caller: ThreadScope,
  taskIndex: number,
): Promise<{ task: ThreadScope; commit: TaskCommit }> {
  const task = await openChildThread(pool, caller, 'scout');
  const label = `fork 1 task ${taskIndex}`;
  await pool.query(`UPDATE threads SET env_scopes = ARRAY[thread_id, ''], fork_task = $2 WHERE thread_id = $1`, [
    task.threadId,
    label,
  ]);
  return {
    task,
    commit: {
      forkNumber: 1,
      taskIndex,
      prefix: 'fork/1',
      threadId: task.threadId,
      agent: task.agent,
      forkTask: label,
      explicit: { kind: 'none' },
    },
  };
}

/** A caller and one isolated fork task below it. */
async function forkTask(): Promise<{ caller: ThreadScope; task: ThreadScope; commit: TaskCommit }> {
  const caller = await openRootThread(pool, 'lead');
  return { caller, ...(await isolatedTask(caller, 1)) };
}

const merge = (caller: ThreadScope, operationId: string, commit: TaskCommit) =>
  mergeTaskCommit(pool, caller, operationId, commit, (value) => store.serialize(value));

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(sql, params);
  return rows[0]?.n ?? 0;
}

test('commit merge: a retried merge with the same operation id leaves one commit and logs nothing twice', async () => {
  const { caller, task, commit } = await forkTask();
  await store.store(task, `${task.threadId}:s1`, { key: 'finding', shortDescription: 'What it found.', value: 1 });
  const first = await merge(caller, `${caller.threadId}:merge:1`, commit);
  const again = await merge(caller, `${caller.threadId}:merge:1`, commit);
  assert.deepEqual(again, first, 'the retry answers with the first outcome');
  assert.deepEqual(first.created, ['fork/1/1/finding']);
  assert.equal(
    await count('SELECT COUNT(*)::int AS n FROM env_commits WHERE root_thread_id = $1', [caller.rootThreadId]),
    1,
  );
  assert.equal(
    await count(`SELECT COUNT(*)::int AS n FROM env_events WHERE root_thread_id = $1 AND key = 'fork/1/1/finding'`, [
      caller.rootThreadId,
    ]),
    1,
    'the merged entry was logged once',
  );
  assert.equal((await store.get(caller.rootThreadId, 'fork/1/1/finding'))?.version, 1);
});

test('commit merge: a caller whose epoch moved on is refused, logged, and merges nothing', async () => {
  const { caller, task, commit } = await forkTask();
  await store.store(task, `${task.threadId}:s1`, { key: 'finding', shortDescription: 'What it found.', value: 1 });
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [caller.threadId]);
  await assert.rejects(merge(caller, `${caller.threadId}:merge:1`, commit), (error: unknown) => {
    assert.ok(error instanceof StaleEpochError, String(error));
    assert.deepEqual([error.writeEpoch, error.currentEpoch], [caller.epoch, caller.epoch + 1]);
    return true;
  });
  assert.equal(await store.get(caller.rootThreadId, 'fork/1/1/finding'), undefined, 'nothing merged');
  assert.equal(
    await count('SELECT COUNT(*)::int AS n FROM env_commits WHERE root_thread_id = $1', [caller.rootThreadId]),
    0,
  );
  assert.equal(
    await count(`SELECT COUNT(*)::int AS n FROM refused_writes WHERE thread_id = $1 AND kind = 'env'`, [
      caller.threadId,
    ]),
    1,
    'the refusal is logged',
  );
});

test("commit merges of one join: each task's commit, in order, in one call; a retry applies nothing twice", async () => {
  const { caller, task, commit } = await forkTask();
  const second = await isolatedTask(caller, 2);
  await store.store(task, `${task.threadId}:s1`, { key: 'finding', shortDescription: 'What it found.', value: 1 });
  await store.store(second.task, `${second.task.threadId}:s1`, {
    key: 'finding',
    shortDescription: 'What the second found.',
    value: 2,
  });
  const merges = [
    { operationId: `${caller.threadId}:merge:1`, task: commit },
    { operationId: `${caller.threadId}:merge:2`, task: second.commit },
  ];
  const serialize = (value: unknown) => store.serialize(value);
  const first = await mergeTaskCommits(pool, caller, merges, serialize);
  assert.deepEqual(
    first.map((result) => [result.commitId, result.created]),
    [
      ['fork-1-task-1', ['fork/1/1/finding']],
      ['fork-1-task-2', ['fork/1/2/finding']],
    ],
  );
  assert.deepEqual(
    [
      (await store.get(caller.rootThreadId, 'fork/1/1/finding'))?.value,
      (await store.get(caller.rootThreadId, 'fork/1/2/finding'))?.value,
    ],
    [1, 2],
  );
  // A retry of the whole join, and of one of its merges alone: nothing applies twice.
  assert.deepEqual(await mergeTaskCommits(pool, caller, merges, serialize), first);
  assert.deepEqual(await merge(caller, `${caller.threadId}:merge:2`, second.commit), first[1]);
  assert.equal(
    await count('SELECT COUNT(*)::int AS n FROM env_commits WHERE root_thread_id = $1', [caller.rootThreadId]),
    2,
  );
  assert.equal(
    await count(`SELECT COUNT(*)::int AS n FROM env_events WHERE root_thread_id = $1 AND key LIKE 'fork/1/%'`, [
      caller.rootThreadId,
    ]),
    2,
    'each merged entry was logged once',
  );
});

test('commit merges of one join: a stale caller merges none of them, and the refusal is logged once', async () => {
  const { caller, task, commit } = await forkTask();
  const second = await isolatedTask(caller, 2);
  await store.store(task, `${task.threadId}:s1`, { key: 'finding', shortDescription: 'What it found.', value: 1 });
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [caller.threadId]);
  await assert.rejects(
    mergeTaskCommits(
      pool,
      caller,
      [
        { operationId: `${caller.threadId}:merge:1`, task: commit },
        { operationId: `${caller.threadId}:merge:2`, task: second.commit },
      ],
      (value) => store.serialize(value),
    ),
    StaleEpochError,
  );
  assert.equal(
    await count('SELECT COUNT(*)::int AS n FROM env_commits WHERE root_thread_id = $1', [caller.rootThreadId]),
    0,
  );
  assert.equal(
    await count(`SELECT COUNT(*)::int AS n FROM refused_writes WHERE thread_id = $1 AND kind = 'env'`, [
      caller.threadId,
    ]),
    1,
  );
});

test('proposals: a whole value based on an older version is refused and stays pending; a patch applies onto the current value', async () => {
  const { caller, task, commit } = await forkTask();
  await store.store(caller, `${caller.threadId}:plan`, {
    key: 'plan',
    shortDescription: 'The plan.',
    value: { step: 1, owner: 'lead' },
  });
  // The task, isolated, changes the shared entry twice: each becomes a proposal based on version 1.
  const whole = await store.update(task, `${task.threadId}:u1`, { key: 'plan', value: { step: 2 } });
  assert.equal(whole.action, 'proposed');
  await merge(caller, `${caller.threadId}:merge:1`, commit);
  const [wholeProposal] = await store.proposals(caller.rootThreadId);
  assert.deepEqual([wholeProposal?.baseVersion, wholeProposal?.status], [1, 'pending']);
  await pool.query(
    `INSERT INTO env_proposals (root_thread_id, proposal_id, number, scope, key, value, patch, short_description,
                                base_version, proposed_by_agent, proposed_by_thread, fork_task, operation_id)
     VALUES ($1, 'p2', 2, '', 'plan', NULL, '{"step": 3}', NULL, 1, 'scout', $2, 'fork 1 task 1', $1 || ':p2')`,
    [caller.rootThreadId, task.threadId],
  );

  // Meanwhile the lead changes the plan: version 2, a field the proposals never saw.
  await store.update(caller, `${caller.threadId}:owner`, { key: 'plan', value: { step: 1, owner: 'reviewer' } });

  await assert.rejects(
    store.acceptProposal(caller, `${caller.threadId}:accept-whole`, {
      key: 'plan',
      proposalId: wholeProposal?.proposalId ?? '',
    }),
    (error: unknown) => {
      assert.ok(error instanceof EnvDataError);
      assert.equal(error.type, EnvDataErrorType.VersionConflict);
      assert.equal(error.currentVersion, 2);
      assert.match(error.message, /as of version 1, but it is at version 2 now: accepting it would undo the changes/);
      return true;
    },
  );
  assert.deepEqual((await store.get(caller.rootThreadId, 'plan'))?.value, { step: 1, owner: 'reviewer' });
  assert.equal(
    (await store.proposals(caller.rootThreadId)).find((p) => p.proposalId === wholeProposal?.proposalId)?.status,
    'pending',
    'the refused proposal stays pending',
  );

  const patched = await store.acceptProposal(caller, `${caller.threadId}:accept-patch`, {
    key: 'plan',
    proposalId: 'p2',
  });
  assert.equal(patched.version, 3);
  assert.deepEqual(
    (await store.get(caller.rootThreadId, 'plan'))?.value,
    { step: 3, owner: 'reviewer' },
    'the patch kept the field changed after its base',
  );
});

test('an isolated task updating its caller’s entry at a stale version is refused with the entry as it is now', async () => {
  const { caller, task } = await forkTask();
  await store.store(caller, `${caller.threadId}:s1`, { key: 'plan', shortDescription: 'The plan.', value: 'v1' });
  await store.update(caller, `${caller.threadId}:u1`, { key: 'plan', value: 'v2' });

  await assert.rejects(
    store.update(task, `${task.threadId}:u1`, { key: 'plan', value: 'mine', expectedVersion: 1 }),
    (error: unknown) => {
      assert.ok(error instanceof EnvDataError);
      assert.equal(error.type, EnvDataErrorType.VersionConflict);
      assert.equal(error.currentVersion, 2);
      assert.deepEqual(error.conflict, { key: 'plan', expectedVersion: 1, current: { version: 2, value: 'v2' } });
      return true;
    },
  );
  // Nothing was staged for it: the caller has no proposal, and its entry is as it was.
  assert.deepEqual(await store.proposals(caller.rootThreadId), []);
  assert.equal((await store.get(caller.rootThreadId, 'plan'))?.value, 'v2');
});
