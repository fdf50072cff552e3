/**
 * Fencing a turn that will not finish its own work: a fork task given up on (reclaimed), or a delegated turn or fork
 * task that failed or was stopped by its own `timeout_s`. Its activities, and those of every turn below it, may still
 * be running; bumping their threads' epochs makes whatever they still write refused and logged (invariant 3).
 */
import type { Pool, PoolClient } from 'pg';
import type { Queryable } from './threads';
import { inTransaction } from './transaction';

/** How a fenced thread's turn ended: given up on (`reclaimed`), or failed or stopped from outside (`failed`). */
export interface FencedEnd {
  status: 'reclaimed' | 'failed';
  /** Why, in a few words: recorded on the threads, and given as the reason of what it cancels. */
  error: string;
  /** Fence only a thread still at this epoch: a retry, or a thread fenced already, then changes nothing. */
  epoch?: number;
}

/**
 * Locks a thread and every thread below it, top down and one level at a time, and returns their ids (the thread
 * first). Opening a delegation or a fork holds the caller's row lock while it inserts the child's row, so a level read
 * after the level above it is locked sees every child committed before, and no child can be added once its parent is
 * locked (the opening would find the parent's epoch moved on). One statement reading the whole tree from its snapshot
 * would miss a child whose opening commits while the statement waits for its parent's lock.
 *
 * `FOR NO KEY UPDATE` is what the epoch bump takes anyway: it blocks every write fenced by its thread's row (`FOR
 * UPDATE` or `FOR SHARE`; the common env write waits for the bump through migration 009's trigger instead) and leaves
 * foreign-key checks of inserts elsewhere alone. Every fence locks top down, so two fences of nested trees never wait
 * for each other in a circle.
 */
export async function lockSubtree(client: PoolClient, rootThreadId: string, threadId: string): Promise<string[]> {
  const locked: string[] = [];
  let { rows } = await client.query<{ threadId: string }>(
    `SELECT thread_id AS "threadId" FROM threads WHERE root_thread_id = $1 AND thread_id = $2 FOR NO KEY UPDATE`,
    [rootThreadId, threadId],
  );
  while (rows.length > 0) {
    const level = rows.map((row) => row.threadId);
    locked.push(...level);
    ({ rows } = await client.query<{ threadId: string }>(
      `SELECT thread_id AS "threadId" FROM threads
        WHERE root_thread_id = $1 AND parent_thread_id = ANY ($2::text[])
        ORDER BY thread_id FOR NO KEY UPDATE`,
      [rootThreadId, level],
    ));
  }
  return locked;
}

/**
 * Fences a thread and every thread below it in the caller's transaction: locks them ({@link lockSubtree}), bumps their
 * epochs, records the thread's end (below it, turns still running are `reclaimed`; finished ones keep their status),
 * and cancels their pending approvals and open questions, which nobody could decide or answer any more.
 * @returns the ids of the threads whose epoch moved (none when `end.epoch` is given and the thread has moved on)
 */
export async function fenceThread(
  client: PoolClient,
  rootThreadId: string,
  threadId: string,
  end: FencedEnd,
): Promise<string[]> {
  if (end.epoch !== undefined) {
    // The thread's lock first (the subtree's locking takes it again), so its epoch cannot move before the bump.
    const { rows } = await client.query<{ epoch: number }>(
      'SELECT epoch FROM threads WHERE root_thread_id = $1 AND thread_id = $2 FOR NO KEY UPDATE',
      [rootThreadId, threadId],
    );
    if (rows[0]?.epoch !== end.epoch) return [];
  }
  const threadIds = await lockSubtree(client, rootThreadId, threadId);
  if (threadIds.length === 0) return [];
  const reclaimed = { lastError: `reclaimed: ${end.error}`, reason: `its turn was reclaimed: ${end.error}` };
  const own =
    end.status === 'reclaimed' ? reclaimed : { lastError: end.error, reason: `its turn failed: ${end.error}` };
  await client.query(
    `UPDATE threads
        SET epoch = epoch + 1, updated_at = now(), finished_at = COALESCE(finished_at, now()),
            status = CASE WHEN thread_id = $2 THEN $3 WHEN status IN ('active', 'running') THEN 'reclaimed' ELSE status END,
            last_error = CASE WHEN thread_id = $2 THEN $4 WHEN status IN ('active', 'running') THEN $5 ELSE last_error END
      WHERE thread_id = ANY ($1::text[])`,
    [threadIds, threadId, end.status, own.lastError, reclaimed.lastError],
  );
  const [, ...below] = threadIds;
  await cancelWaitingRequests(client, rootThreadId, [threadId], own.reason);
  if (below.length > 0) await cancelWaitingRequests(client, rootThreadId, below, reclaimed.reason);
  return threadIds;
}

/**
 * Cancels what the given threads' turns wait for a person to do, in the caller's transaction: their pending approvals
 * and open questions. Their turns are over, so no decision or answer could reach them.
 */
export async function cancelWaitingRequests(
  client: Queryable,
  rootThreadId: string,
  threadIds: readonly string[],
  reason: string,
): Promise<void> {
  await client.query(
    `WITH approvals AS (
       UPDATE approvals SET status = 'cancelled', reason = $3, decided_at = now()
        WHERE root_thread_id = $1 AND thread_id = ANY ($2::text[]) AND status = 'pending')
     UPDATE questions SET status = 'cancelled', reason = $3, closed_at = now()
      WHERE root_thread_id = $1 AND thread_id = ANY ($2::text[]) AND status = 'open'`,
    [rootThreadId, threadIds, reason],
  );
}

/**
 * Fences a delegated turn or fork task that failed or was stopped by its own timeout (its caller saw it fail), once:
 * only while its thread is still at the epoch the turn ran at.
 * @returns the number of threads whose epoch moved
 */
export async function fenceFailedThread(
  pool: Pool,
  rootThreadId: string,
  threadId: string,
  epoch: number,
  error: string,
): Promise<number> {
  return inTransaction(
    pool,
    async (client) => (await fenceThread(client, rootThreadId, threadId, { status: 'failed', error, epoch })).length,
  );
}
