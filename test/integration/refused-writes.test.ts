/**
 * Every write a reclaimed turn attempts leaves a trace (issue 13, defect 6): stale transcript, question, delegation
 * and env writes are refused and each is recorded in `refused_writes` with its thread, operation id and both epochs,
 * which `thread.refusedWrites()` and `baton events` read.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { connect } from '../../client';
import { openDelegation } from '../../db/delegations';
import { EnvStore } from '../../db/env-data';
import { StaleEpochError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { openQuestion } from '../../db/questions';
import { appendMessage } from '../../db/transcripts';
import { openRootThread } from '../../testing/thread-fixtures';
import { readTestEnv } from '../../testing/test-env';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl });

after(async () => {
  await pool.end();
});

test('refused writes: stale transcript, question, delegation and env writes are each refused and recorded once', async () => {
  const scope = await openRootThread(pool, 'zombie');
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [scope.threadId]);
  const stale = (error: unknown) => error instanceof StaleEpochError && error.currentEpoch === scope.epoch + 1;

  await assert.rejects(appendMessage(pool, scope, 'op-message', { role: 'user', content: 'late' }), stale);
  await assert.rejects(
    openQuestion(pool, scope, 'op-question', { workflowId: 'w', toolCallId: 'c', question: 'Still there?' }),
    stale,
  );
  await assert.rejects(
    openDelegation(pool, scope, 'op-delegation', {
      callee: 'helper',
      mode: 'new',
      chain: ['zombie', 'helper'],
      callerMessageSeq: 1,
      buildMessage: () => 'do it',
    }),
    stale,
  );
  await assert.rejects(
    new EnvStore(pool).store(scope, 'op-env', { key: 'late', shortDescription: 'Late.', value: 1 }),
    stale,
  );

  // Nothing was written…
  const { rows: written } = await pool.query(
    `SELECT (SELECT COUNT(*) FROM transcript_messages WHERE thread_id = $1)::int AS messages,
            (SELECT COUNT(*) FROM questions WHERE thread_id = $1)::int AS questions,
            (SELECT COUNT(*) FROM delegations WHERE parent_thread_id = $1)::int AS delegations,
            (SELECT COUNT(*) FROM env_data WHERE root_thread_id = $1)::int AS entries`,
    [scope.threadId],
  );
  assert.deepEqual(written[0], { messages: 0, questions: 0, delegations: 0, entries: 0 });

  // …and every refusal is in one place, with its thread, operation id and both epochs.
  const client = await connect({ address: env.temporalAddress, databaseUrl: env.databaseUrl });
  try {
    const refused = await client.thread(scope.rootThreadId).refusedWrites();
    assert.deepEqual(
      refused.map((row) => [row.kind, row.operationId, row.threadId, row.agent, row.writeEpoch, row.currentEpoch]),
      [
        ['transcript', 'op-message', scope.threadId, 'zombie', scope.epoch, scope.epoch + 1],
        ['question', 'op-question', scope.threadId, 'zombie', scope.epoch, scope.epoch + 1],
        ['delegation', 'op-delegation', scope.threadId, 'zombie', scope.epoch, scope.epoch + 1],
        ['env', 'op-env', scope.threadId, 'zombie', scope.epoch, scope.epoch + 1],
      ],
    );
  } finally {
    await client.close();
  }
});
