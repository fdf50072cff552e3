import type { Pool } from 'pg';
import type { ThreadScope, TokenUsage, ToolCallRequest } from '../common/types';
import type { Queryable } from './threads';
import { BatonDbError } from './errors';
import { lockThreadAtEpoch } from './threads';
import { logStaleRefusal } from './refusals';
import { inTransaction } from './transaction';

export type TranscriptRole = 'user' | 'assistant' | 'tool';

/** One stored transcript message, in OpenAI chat shape. */
export interface TranscriptMessage {
  threadId: string;
  seq: number;
  role: TranscriptRole;
  agent: string;
  content: string | null;
  toolCalls: ToolCallRequest[] | null;
  toolCallId: string | null;
  usage: TokenUsage | null;
  operationId: string;
  createdAt: Date;
}

export interface NewTranscriptMessage {
  role: TranscriptRole;
  content: string | null;
  toolCalls?: ToolCallRequest[];
  toolCallId?: string;
  usage?: TokenUsage | null;
}

const MESSAGE_COLUMNS = `thread_id AS "threadId", seq, role, agent, content, tool_calls AS "toolCalls",
  tool_call_id AS "toolCallId", usage, operation_id AS "operationId", created_at AS "createdAt"`;

/**
 * The message a write with `operationId` stored in the scope's root, if it already ran. Operation ids are unique
 * per root (never global: another root's message is never found), and one belongs to one thread.
 * `scope` is optional only for callers not yet scoped; without it the lookup is by operation id alone.
 * @throws BatonDbError when the operation id already wrote to another thread of the root
 */
export async function findMessageByOperation(
  db: Queryable,
  operationId: string,
  scope?: Pick<ThreadScope, 'rootThreadId' | 'threadId'>,
): Promise<TranscriptMessage | undefined> {
  if (!scope) {
    const { rows } = await db.query<TranscriptMessage>(
      `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE operation_id = $1`,
      [operationId],
    );
    return rows[0];
  }
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE root_thread_id = $1 AND operation_id = $2`,
    [scope.rootThreadId, operationId],
  );
  const found = rows[0];
  if (found && found.threadId !== scope.threadId) {
    throw new BatonDbError(`operation '${operationId}' already wrote to thread '${found.threadId}'`);
  }
  return found;
}

/**
 * Appends a message to a thread's transcript, exactly once per `operationId` and only while the thread is still
 * at `scope.epoch`. A retried write returns the message the first attempt stored.
 * @throws StaleEpochError when the thread's epoch has moved on; ThreadNotFoundError
 */
export async function appendMessage(
  pool: Pool,
  scope: ThreadScope,
  operationId: string,
  message: NewTranscriptMessage,
): Promise<{ message: TranscriptMessage; reused: boolean }> {
  return logStaleRefusal(pool, scope, 'transcript', operationId, () =>
    inTransaction(pool, async (client) => {
      // The epoch check comes first: a reclaimed turn is refused even for an operation it had already written.
      await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
      const existing = await findMessageByOperation(client, operationId, scope);
      if (existing) return { message: existing, reused: true };
      const { rows } = await client.query<TranscriptMessage>(
        `INSERT INTO transcript_messages
         (root_thread_id, thread_id, seq, role, agent, content, tool_calls, tool_call_id, usage, operation_id)
       SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $8, $9
         FROM transcript_messages WHERE thread_id = $2
       RETURNING ${MESSAGE_COLUMNS}`,
        [
          scope.rootThreadId,
          scope.threadId,
          message.role,
          scope.agent,
          message.content,
          message.toolCalls ? JSON.stringify(message.toolCalls) : null,
          message.toolCallId ?? null,
          message.usage ? JSON.stringify(message.usage) : null,
          operationId,
        ],
      );
      const inserted = rows[0];
      if (!inserted) throw new Error(`append to thread '${scope.threadId}' returned no row`);
      return { message: inserted, reused: false };
    }),
  );
}

/** A thread's transcript in order. */
export async function listMessages(db: Queryable, threadId: string): Promise<TranscriptMessage[]> {
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE thread_id = $1 ORDER BY seq`,
    [threadId],
  );
  return rows;
}

/** One message of a thread by its sequence number. */
export async function findMessageBySeq(
  db: Queryable,
  threadId: string,
  seq: number,
): Promise<TranscriptMessage | undefined> {
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE thread_id = $1 AND seq = $2`,
    [threadId, seq],
  );
  return rows[0];
}

/** Token usage summed over every model call in a delegation tree. */
export async function sumUsage(
  db: Queryable,
  rootThreadId: string,
): Promise<{ promptTokens: number; completionTokens: number; totalTokens: number; modelCalls: number }> {
  const { rows } = await db.query<{ prompt: string; completion: string; total: string; calls: string }>(
    `SELECT COALESCE(SUM((usage->>'promptTokens')::bigint), 0) AS prompt,
            COALESCE(SUM((usage->>'completionTokens')::bigint), 0) AS completion,
            COALESCE(SUM((usage->>'totalTokens')::bigint), 0) AS total,
            COUNT(*) FILTER (WHERE role = 'assistant') AS calls
       FROM transcript_messages WHERE root_thread_id = $1`,
    [rootThreadId],
  );
  const row = rows[0];
  return {
    promptTokens: Number(row?.prompt ?? 0),
    completionTokens: Number(row?.completion ?? 0),
    totalTokens: Number(row?.total ?? 0),
    modelCalls: Number(row?.calls ?? 0),
  };
}
