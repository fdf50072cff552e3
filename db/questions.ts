import type { Pool } from 'pg';
import type { Queryable } from './threads';
import { BatonDbError } from './errors';
import { lockThreadAtEpoch } from './threads';
import { logStaleRefusal } from './refusals';
import { inTransaction } from './transaction';
import type { ThreadScope } from '../common/types';

/** `cancelled`: its turn was reclaimed, timed out or failed before anyone answered (`reason` says which). */
export type QuestionStatus = 'open' | 'answered' | 'expired' | 'cancelled';

/** A question an agent asked a human. */
export interface QuestionRow {
  rootThreadId: string;
  questionId: string;
  threadId: string;
  agent: string;
  workflowId: string;
  toolCallId: string;
  question: string;
  status: QuestionStatus;
  answer: string | null;
  /** Why it was cancelled; `null` otherwise. */
  reason: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  closedAt: Date | null;
}

const QUESTION_COLUMNS = `root_thread_id AS "rootThreadId", question_id AS "questionId", thread_id AS "threadId", agent,
  workflow_id AS "workflowId", tool_call_id AS "toolCallId", question, status, answer, reason, created_at AS "createdAt",
  expires_at AS "expiresAt", closed_at AS "closedAt"`;

export interface NewQuestion {
  workflowId: string;
  toolCallId: string;
  question: string;
  timeoutSeconds?: number;
}

/**
 * Stores an open question, numbered `q<n>` within its root thread, once per operation id and only while the
 * asking thread is at `scope.epoch`.
 * @throws StaleEpochError, ThreadNotFoundError
 */
export async function openQuestion(
  pool: Pool,
  scope: ThreadScope,
  operationId: string,
  question: NewQuestion,
): Promise<QuestionRow> {
  return logStaleRefusal(pool, scope, 'question', operationId, () =>
    inTransaction(pool, async (client) => {
      await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
      // Operation ids are unique per root, and one belongs to one thread.
      const existing = await client.query<QuestionRow>(
        `SELECT ${QUESTION_COLUMNS} FROM questions WHERE root_thread_id = $1 AND operation_id = $2`,
        [scope.rootThreadId, operationId],
      );
      const found = existing.rows[0];
      if (found && found.threadId !== scope.threadId) {
        throw new BatonDbError(`operation '${operationId}' already asked a question in thread '${found.threadId}'`);
      }
      if (found) return found;
      // Numbers are per root thread; the advisory lock serialises numbering across the threads of one tree.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`questions:${scope.rootThreadId}`]);
      const { rows } = await client.query<QuestionRow>(
        `INSERT INTO questions (root_thread_id, question_id, number, thread_id, agent, workflow_id, tool_call_id,
                              question, operation_id, expires_at)
       SELECT $1, 'q' || n, n, $2, $3, $4, $5, $6, $7,
              CASE WHEN $8::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $8::integer) END
         FROM (SELECT COALESCE(MAX(number), 0) + 1 AS n FROM questions WHERE root_thread_id = $1) next
       RETURNING ${QUESTION_COLUMNS}`,
        [
          scope.rootThreadId,
          scope.threadId,
          scope.agent,
          question.workflowId,
          question.toolCallId,
          question.question,
          operationId,
          question.timeoutSeconds ?? null,
        ],
      );
      const row = rows[0];
      if (!row) throw new Error(`storing a question for thread '${scope.threadId}' returned no row`);
      return row;
    }),
  );
}

/**
 * Closes an open question as answered or expired. Idempotent: closing it again with the same outcome returns the
 * stored row; a question already closed otherwise is returned unchanged (the caller compares the status).
 */
export async function closeQuestion(
  db: Queryable,
  rootThreadId: string,
  questionId: string,
  outcome: { status: 'answered'; answer: string } | { status: 'expired' },
): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(
    `UPDATE questions SET status = $3, answer = $4, closed_at = now()
      WHERE root_thread_id = $1 AND question_id = $2 AND status = 'open'
      RETURNING ${QUESTION_COLUMNS}`,
    [rootThreadId, questionId, outcome.status, outcome.status === 'answered' ? outcome.answer : null],
  );
  return rows[0] ?? findQuestion(db, rootThreadId, questionId);
}

export async function findQuestion(
  db: Queryable,
  rootThreadId: string,
  questionId: string,
): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(
    `SELECT ${QUESTION_COLUMNS} FROM questions WHERE root_thread_id = $1 AND question_id = $2`,
    [rootThreadId, questionId],
  );
  return rows[0];
}

/** The questions of a whole delegation tree, oldest first; open ones only unless `all`. */
export async function listQuestions(db: Queryable, rootThreadId: string, all = false): Promise<QuestionRow[]> {
  const { rows } = await db.query<QuestionRow>(
    `SELECT ${QUESTION_COLUMNS} FROM questions WHERE root_thread_id = $1 ${all ? '' : "AND status = 'open'"}
      ORDER BY number`,
    [rootThreadId],
  );
  return rows;
}
