import type { Pool } from 'pg';
import type { ThreadScope } from '../common/types';
import { BatonDbError } from './errors';
import { logStaleRefusal } from './refusals';
import { lockThreadAtEpoch, type Queryable } from './threads';
import { inTransaction } from './transaction';

/**
 * `pending` until someone decides; `expired` when its timeout passed first; `cancelled` when its turn was reclaimed
 * or stopped before anyone decided.
 */
export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';

/** A tool call waiting for, or given, a person's approval. */
export interface ApprovalRow {
  rootThreadId: string;
  approvalId: string;
  threadId: string;
  agent: string;
  workflowId: string;
  /** The stored reply holding the call (its `seq` in the thread's transcript), and the call's id in it. */
  messageSeq: number;
  toolCallId: string;
  tool: string;
  /** The call's arguments as the model sent them (JSON text): exactly what runs when it is approved. */
  arguments: string;
  status: ApprovalStatus;
  /** Why it was rejected, expired or cancelled (a rejection's reason is optional). */
  reason: string | null;
  decidedBy: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  decidedAt: Date | null;
}

const APPROVAL_COLUMNS = `root_thread_id AS "rootThreadId", approval_id AS "approvalId", thread_id AS "threadId", agent,
  workflow_id AS "workflowId", message_seq AS "messageSeq", tool_call_id AS "toolCallId", tool, arguments, status, reason,
  decided_by AS "decidedBy", created_at AS "createdAt", expires_at AS "expiresAt", decided_at AS "decidedAt"`;

export interface NewApproval {
  workflowId: string;
  /** The stored reply holding the call, and the call's id in it. */
  messageSeq: number;
  toolCallId: string;
  timeoutSeconds?: number;
  /**
   * What is asked for, when it is not a tool call of the reply (a turn asking for more budget): its name and JSON
   * arguments, stored as given; `toolCallId` then names the request, and `messageSeq` is where the thread stood.
   */
  request?: { name: string; arguments: string };
}

/**
 * Stores a pending approval of a tool call, numbered `a<n>` within its root thread, once per operation id and only
 * while the calling thread is at `scope.epoch`. The tool's name and arguments are copied from the stored reply.
 * @throws StaleEpochError, ThreadNotFoundError; BatonDbError when the reply holds no such call, or holds its id twice
 */
export async function openApproval(
  pool: Pool,
  scope: ThreadScope,
  operationId: string,
  approval: NewApproval,
): Promise<ApprovalRow> {
  return logStaleRefusal(pool, scope, 'approval', operationId, () =>
    inTransaction(pool, async (client) => {
      await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
      const existing = await client.query<ApprovalRow>(
        `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE root_thread_id = $1 AND operation_id = $2`,
        [scope.rootThreadId, operationId],
      );
      const found = existing.rows[0];
      if (found && found.threadId !== scope.threadId) {
        throw new BatonDbError(`operation '${operationId}' already opened an approval in thread '${found.threadId}'`);
      }
      if (found) return found;
      // Numbers are per root thread; the advisory lock serialises numbering across the threads of one tree.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`approvals:${scope.rootThreadId}`]);
      const { rows } = await client.query<ApprovalRow>(
        `INSERT INTO approvals (root_thread_id, approval_id, number, thread_id, agent, workflow_id, operation_id,
                                message_seq, tool_call_id, tool, arguments, expires_at)
         SELECT $1, 'a' || n, n, $2, $3, $4, $5, $6, $7, call->>'name', call->>'arguments',
                CASE WHEN $8::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $8::integer) END
           FROM (SELECT COALESCE(MAX(number), 0) + 1 AS n FROM approvals WHERE root_thread_id = $1) next,
                (SELECT $9::jsonb AS call WHERE $9::jsonb IS NOT NULL
                 UNION ALL
                 SELECT (array_agg(call))[1] AS call FROM transcript_messages m, jsonb_array_elements(m.tool_calls) call
                  WHERE $9::jsonb IS NULL AND m.thread_id = $2 AND m.seq = $6 AND call->>'id' = $7
                 HAVING COUNT(*) = 1) reply
         RETURNING ${APPROVAL_COLUMNS}`,
        [
          scope.rootThreadId,
          scope.threadId,
          scope.agent,
          approval.workflowId,
          operationId,
          approval.messageSeq,
          approval.toolCallId,
          approval.timeoutSeconds ?? null,
          approval.request === undefined ? null : JSON.stringify(approval.request),
        ],
      );
      const row = rows[0];
      if (!row) {
        // A reply stored before its ids were made distinct may hold the id twice: which call it is cannot be told.
        throw new BatonDbError(
          `tool call '${approval.toolCallId}' is not in message ${approval.messageSeq} of thread '${scope.threadId}' ` +
            'exactly once',
        );
      }
      return row;
    }),
  );
}

/** How an approval is closed: a person's decision, or the turn's own timeout or end. */
export type ApprovalOutcome =
  | { status: 'approved'; decidedBy: string }
  | { status: 'rejected'; decidedBy: string; reason?: string }
  | { status: 'expired' }
  | { status: 'cancelled'; reason: string };

/**
 * Closes a pending approval. The first outcome to reach Postgres wins (a decision racing the timeout): a row closed
 * already is returned unchanged, so the caller compares its status. Idempotent.
 */
export async function closeApproval(
  db: Queryable,
  rootThreadId: string,
  approvalId: string,
  outcome: ApprovalOutcome,
): Promise<ApprovalRow | undefined> {
  const { rows } = await db.query<ApprovalRow>(
    `UPDATE approvals SET status = $3, decided_by = $4, reason = $5, decided_at = now()
      WHERE root_thread_id = $1 AND approval_id = $2 AND status = 'pending'
      RETURNING ${APPROVAL_COLUMNS}`,
    [
      rootThreadId,
      approvalId,
      outcome.status,
      'decidedBy' in outcome ? outcome.decidedBy : null,
      'reason' in outcome ? (outcome.reason ?? null) : null,
    ],
  );
  return rows[0] ?? findApproval(db, rootThreadId, approvalId);
}

export async function findApproval(
  db: Queryable,
  rootThreadId: string,
  approvalId: string,
): Promise<ApprovalRow | undefined> {
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE root_thread_id = $1 AND approval_id = $2`,
    [rootThreadId, approvalId],
  );
  return rows[0];
}

/** The approval opened under `operationId` (see `approvalOperationId`), if any. */
export async function findApprovalByOperation(
  db: Queryable,
  rootThreadId: string,
  operationId: string,
): Promise<ApprovalRow | undefined> {
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE root_thread_id = $1 AND operation_id = $2`,
    [rootThreadId, operationId],
  );
  return rows[0];
}

/** The approvals of a whole delegation tree, oldest first; pending ones only unless `all`. */
export async function listApprovals(db: Queryable, rootThreadId: string, all = false): Promise<ApprovalRow[]> {
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE root_thread_id = $1 ${all ? '' : "AND status = 'pending'"}
      ORDER BY number`,
    [rootThreadId],
  );
  return rows;
}
