import type { Pool, PoolClient } from 'pg';
import type { EnsureThreadInput } from '../common/types';
import { StaleEpochError, ThreadNotFoundError } from './errors';

export type Queryable = Pick<Pool, 'query'> | PoolClient;

export interface ThreadRow {
  threadId: string;
  rootThreadId: string;
  parentThreadId: string | null;
  agent: string;
  caller: string | null;
  epoch: number;
  status: string;
  createdAt: Date;
  updatedAt: Date;
}

const THREAD_COLUMNS = `thread_id AS "threadId", root_thread_id AS "rootThreadId", parent_thread_id AS "parentThreadId",
  agent, caller, epoch, status, created_at AS "createdAt", updated_at AS "updatedAt"`;

/** Creates the thread record if it does not exist yet (idempotent) and returns it. */
export async function ensureThread(db: Queryable, input: EnsureThreadInput): Promise<ThreadRow> {
  // A new record comes back from its insert, in one round trip (a new thread's opening waits for it); one that
  // existed is read.
  const { rows } = await db.query<ThreadRow>(
    `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, world)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (thread_id) DO NOTHING RETURNING ${THREAD_COLUMNS}`,
    threadRecordValues(input),
  );
  const thread = rows[0] ?? (await findThread(db, input.threadId));
  if (!thread) throw new ThreadNotFoundError(input.threadId);
  return thread;
}

/**
 * A new record's columns, in the order the insert of `ensureThread`, `open_thread_running` and
 * `open_thread_with_message` take them.
 */
export function threadRecordValues(input: EnsureThreadInput): (string | null)[] {
  return [
    input.threadId,
    input.rootThreadId,
    input.parentThreadId ?? null,
    input.agent,
    input.caller ?? null,
    input.world ?? 'default',
  ];
}

export async function findThread(db: Queryable, threadId: string): Promise<ThreadRow | undefined> {
  const { rows } = await db.query<ThreadRow>(`SELECT ${THREAD_COLUMNS} FROM threads WHERE thread_id = $1`, [threadId]);
  return rows[0];
}

/**
 * Locks the thread row for the rest of the transaction and checks the write's epoch against it. Every fenced
 * write calls this first, so concurrent writes to one thread serialise and a reclaimed turn cannot slip through.
 * @throws ThreadNotFoundError, StaleEpochError
 */
export async function lockThreadAtEpoch(client: PoolClient, threadId: string, epoch: number): Promise<void> {
  const { rows } = await client.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1 FOR UPDATE', [
    threadId,
  ]);
  checkEpoch(threadId, epoch, rows[0]?.epoch);
}

/**
 * The fence: a write issued under `epoch` goes ahead only while the thread is still at it (`current`, absent when
 * the thread does not exist).
 * @throws ThreadNotFoundError, StaleEpochError
 */
export function checkEpoch(threadId: string, epoch: number, current: number | null | undefined): void {
  if (current === null || current === undefined) throw new ThreadNotFoundError(threadId);
  if (current !== epoch) throw new StaleEpochError(threadId, epoch, current);
}

/**
 * The UPDATE that records how a thread's latest turn is going (`markThread`), over three SQL expressions: the thread's
 * id, the status and the error. A reclaimed thread keeps saying so unless a new turn in it (`running`) moves it on.
 */
export function markThreadStatement(thread: string, status: string, error: string): string {
  return `UPDATE threads SET status = ${status}, last_error = ${error}, updated_at = now(),
              started_at = CASE WHEN ${status} = 'running' THEN now() ELSE started_at END,
              finished_at = CASE WHEN ${status} = 'running' THEN NULL ELSE now() END
        WHERE thread_id = ${thread} AND (status <> 'reclaimed' OR ${status} = 'running')`;
}
