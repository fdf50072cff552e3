import type { Pool } from 'pg';
import type { ThreadScope } from '../common/types';
import { StaleEpochError } from './errors';
import type { Queryable } from './threads';

/** What a refused write tried to write. */
export type RefusedWriteKind = 'env' | 'transcript' | 'question' | 'delegation' | 'fork' | 'tool' | 'approval';

/** One write refused because its thread's epoch had moved on (its turn was reclaimed). */
export interface RefusedWrite {
  seq: number;
  rootThreadId: string;
  threadId: string;
  agent: string;
  kind: RefusedWriteKind;
  operationId: string;
  writeEpoch: number;
  currentEpoch: number;
  detail: string | null;
  createdAt: Date;
}

/**
 * Runs a fenced write and, when the fence refuses it, records the refusal (outside the rolled-back transaction) in
 * `refused_writes` before rethrowing, so every zombie write of a reclaimed turn leaves a trace, whatever it wrote.
 */
export async function logStaleRefusal<T>(
  pool: Pool,
  scope: ThreadScope,
  kind: RefusedWriteKind,
  operationId: string,
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof StaleEpochError) {
      await recordRefusedWrite(pool, scope, kind, operationId, error).catch(() => undefined);
    }
    throw error;
  }
}

export async function recordRefusedWrite(
  db: Queryable,
  scope: ThreadScope,
  kind: RefusedWriteKind,
  operationId: string,
  error: StaleEpochError,
): Promise<void> {
  await db.query(
    `INSERT INTO refused_writes (root_thread_id, thread_id, agent, kind, operation_id, write_epoch, current_epoch, detail)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      scope.rootThreadId,
      error.threadId,
      scope.agent,
      kind,
      operationId,
      error.writeEpoch,
      error.currentEpoch,
      error.message,
    ],
  );
}

/** The refused writes of a root's whole tree, oldest first. */
export async function listRefusedWrites(
  db: Queryable,
  rootThreadId: string,
  options: { since?: number; limit?: number } = {},
): Promise<RefusedWrite[]> {
  const { rows } = await db.query<RefusedWrite>(
    `SELECT seq::float8 AS seq, root_thread_id AS "rootThreadId", thread_id AS "threadId", agent, kind,
            operation_id AS "operationId", write_epoch AS "writeEpoch", current_epoch AS "currentEpoch", detail,
            created_at AS "createdAt"
       FROM refused_writes WHERE root_thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
    [rootThreadId, options.since ?? 0, options.limit ?? 1000],
  );
  return rows;
}
