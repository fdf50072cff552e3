import type { Pool } from 'pg';
import type { ThreadScope } from '../common/types';
import { BatonDbError } from './errors';
import { lockThreadAtEpoch, type Queryable } from './threads';
import { inTransaction } from './transaction';

/** What a claim found: a fresh run the caller may start, or the outcome of an earlier attempt. */
export type ToolRunClaim =
  | { status: 'claimed' }
  | { status: 'done'; content: string; ok: boolean }
  /** An earlier attempt started the tool and never recorded how it ended (its worker died, say). */
  | { status: 'interrupted'; startedAt: Date };

/**
 * Claims the run of a tool with side effects for an operation, only while the thread is at `scope.epoch`: the fence
 * is checked before anything runs, and a run is started at most once per operation id. A retried activity gets the
 * earlier attempt's outcome instead of a new claim.
 * @throws StaleEpochError, ThreadNotFoundError; BatonDbError when the operation id already ran another thread's tool
 */
export async function claimToolRun(
  pool: Pool,
  scope: ThreadScope,
  operationId: string,
  tool: string,
): Promise<ToolRunClaim> {
  return inTransaction(pool, async (client) => {
    await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
    const { rows } = await client.query<{
      threadId: string;
      status: 'running' | 'done';
      content: string | null;
      ok: boolean | null;
      startedAt: Date;
    }>(
      `SELECT thread_id AS "threadId", status, content, ok, started_at AS "startedAt" FROM tool_runs
        WHERE root_thread_id = $1 AND operation_id = $2`,
      [scope.rootThreadId, operationId],
    );
    const run = rows[0];
    if (run && run.threadId !== scope.threadId) {
      throw new BatonDbError(`operation '${operationId}' already ran a tool in thread '${run.threadId}'`);
    }
    if (run?.status === 'done') return { status: 'done', content: run.content ?? '', ok: run.ok ?? false };
    if (run) return { status: 'interrupted', startedAt: run.startedAt };
    await client.query(
      `INSERT INTO tool_runs (root_thread_id, operation_id, thread_id, tool, epoch) VALUES ($1, $2, $3, $4, $5)`,
      [scope.rootThreadId, operationId, scope.threadId, tool, scope.epoch],
    );
    return { status: 'claimed' };
  });
}

/** Records how a claimed run ended, so a retry of its activity can store the result without running it again. */
export async function finishToolRun(
  db: Queryable,
  rootThreadId: string,
  operationId: string,
  outcome: { content: string; ok: boolean },
): Promise<void> {
  await db.query(
    `UPDATE tool_runs SET status = 'done', content = $3, ok = $4, finished_at = now()
      WHERE root_thread_id = $1 AND operation_id = $2`,
    [rootThreadId, operationId, outcome.content, outcome.ok],
  );
}

/**
 * Counts a start of a tool call with retry rules (a tool without side effects that may run again after a throw or a
 * lost worker) and returns which start this is, from 1: the call's own attempt, whichever activity runs it (its own,
 * the next model call's, a batch of steps retried for another step's sake) and on whichever worker. One statement.
 * @throws BatonDbError when the operation id already ran a tool in another thread
 */
export async function startToolAttempt(
  db: Queryable,
  scope: Pick<ThreadScope, 'rootThreadId' | 'threadId'>,
  operationId: string,
  tool: string,
): Promise<number> {
  const { rows } = await db.query<{ attempts: number }>({
    name: 'baton-tool-attempt',
    text: `INSERT INTO tool_attempts AS a (root_thread_id, operation_id, thread_id, tool) VALUES ($1, $2, $3, $4)
           ON CONFLICT (root_thread_id, operation_id) DO UPDATE
             SET attempts = a.attempts + 1, last_started_at = now()
             WHERE a.thread_id = EXCLUDED.thread_id
           RETURNING attempts`,
    values: [scope.rootThreadId, operationId, scope.threadId, tool],
  });
  const row = rows[0];
  if (!row) throw new BatonDbError(`operation '${operationId}' already ran a tool in another thread`);
  return row.attempts;
}
