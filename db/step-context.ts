/**
 * What a step reads before it acts, in one round trip each: a model call its thread's epoch, the reply an earlier
 * attempt stored under its operation id, the transcript, the world's variables, whether the root has env data and the
 * thread's token budget; a
 * tool call its thread's epoch, the result an earlier attempt stored, the reply holding the call and the world's
 * variables. Each used to be a statement of its own, one after another, on every step.
 */
import type { UnreadMessages } from '../common/context-policy';
import type { ThreadScope, ToolCallRequest } from '../common/types';
import { budgetFrom, type Budget } from './budgets';
import { ThreadNotFoundError } from './errors';
import { checkEpoch, type Queryable } from './threads';
import { checkOperationThread, MESSAGE_COLUMNS, type TranscriptMessage } from './transcripts';

export interface ModelCallContext {
  /** The reply an earlier attempt of this call stored, if one did. */
  stored: TranscriptMessage | undefined;
  /**
   * The thread's transcript, oldest first; read with a window and `unread` set, its first human message and its
   * newest messages only.
   */
  transcript: TranscriptMessage[];
  /** Read with a window: the messages between the first human message and the newest ones that were not read. */
  unread: UnreadMessages | undefined;
  /** The world's raw variables text, or `undefined` when it has none. */
  worldVariables: string | undefined;
  /** Whether the root thread has any env data. */
  hasEnvData: boolean;
  /** The thread's token budget, when its tree has one. */
  budget: Budget | undefined;
}

interface ContextRow extends Partial<TranscriptMessage> {
  currentEpoch: number | null;
  unreadCount?: number;
  unreadAssistants?: number;
  worldVariables: string | null;
  hasEnvData: boolean;
  storedThreadId: string | null;
  budget: Parameters<typeof budgetFrom>[0];
}

/** The scalars of a model call's context, over $1 thread, $2 root, $3 world, $4 operation id. */
const MODEL_CALL_SCALARS = `(SELECT epoch FROM threads WHERE thread_id = $1) AS "currentEpoch",
  (SELECT variables FROM worlds WHERE name = $3) AS "worldVariables",
  EXISTS (SELECT 1 FROM env_data WHERE root_thread_id = $2) AS "hasEnvData",
  (SELECT thread_id FROM transcript_messages WHERE root_thread_id = $2 AND operation_id = $4) AS "storedThreadId",
  budget_of($2, $1) AS "budget"`;

/** The whole transcript: one row of the scalars joined to each message (null message columns when there is none). */
const MODEL_CALL_CONTEXT = {
  name: 'baton-model-call-context',
  text: `SELECT c.*, m.*
           FROM (SELECT ${MODEL_CALL_SCALARS}) c
           LEFT JOIN LATERAL (SELECT ${MESSAGE_COLUMNS} FROM transcript_messages
                               WHERE thread_id = $1 ORDER BY seq) m ON true`,
};

/**
 * The transcript's first human message and its newest $5 messages (and the stored reply, wherever it is), with the
 * count of those between that were not read: one pass over their rows in Postgres, none of them sent back.
 */
const MODEL_CALL_CONTEXT_WINDOW = {
  name: 'baton-model-call-context-window',
  text: `WITH bounds AS (
           SELECT (SELECT seq FROM transcript_messages WHERE thread_id = $1
                    ORDER BY seq DESC OFFSET $5 - 1 LIMIT 1) AS newest_from,
                  (SELECT seq FROM transcript_messages WHERE thread_id = $1 AND role = 'user'
                    ORDER BY seq LIMIT 1) AS first_human)
         SELECT c.*, m.*
           FROM (SELECT ${MODEL_CALL_SCALARS},
                        u.count::int AS "unreadCount", u.assistants::int AS "unreadAssistants"
                   FROM bounds b,
                        LATERAL (SELECT count(*) AS count, count(*) FILTER (WHERE role = 'assistant') AS assistants
                                   FROM transcript_messages
                                  WHERE thread_id = $1 AND seq < b.newest_from AND seq <> b.first_human) u) c
           LEFT JOIN LATERAL (SELECT ${MESSAGE_COLUMNS} FROM transcript_messages, bounds b
                               WHERE thread_id = $1
                                 AND (b.newest_from IS NULL OR seq >= b.newest_from OR seq = b.first_human
                                      OR operation_id = $4)
                               ORDER BY seq) m ON true`,
};

/**
 * Reads a model call's context for `scope`, refusing a thread that is gone or was reclaimed, as every step does
 * before it acts (a reclaimed turn gets nothing back, not even a reply stored before it was reclaimed). With
 * `window`, reads only the first human message and the newest `window` messages, and counts the others (`unread`,
 * when there are any).
 * @throws ThreadNotFoundError, StaleEpochError, BatonDbError when the operation id already wrote to another thread
 */
export async function readModelCallContext(
  db: Queryable,
  scope: Pick<ThreadScope, 'rootThreadId' | 'threadId' | 'epoch'>,
  call: { operationId: string; world: string; window?: number | undefined },
): Promise<ModelCallContext> {
  const values = [scope.threadId, scope.rootThreadId, call.world, call.operationId];
  const { rows } = await db.query<ContextRow>(
    call.window === undefined
      ? { ...MODEL_CALL_CONTEXT, values }
      : { ...MODEL_CALL_CONTEXT_WINDOW, values: [...values, call.window] },
  );
  const first = rows[0];
  if (!first) throw new ThreadNotFoundError(scope.threadId);
  checkOperationThread(call.operationId, scope.threadId, first.storedThreadId);
  checkEpoch(scope.threadId, scope.epoch, first.currentEpoch);
  const transcript = rows
    .filter((row) => row.seq !== null && row.seq !== undefined)
    .map(
      ({
        currentEpoch: _epoch,
        worldVariables: _variables,
        hasEnvData: _env,
        storedThreadId: _stored,
        budget: _budget,
        unreadCount: _count,
        unreadAssistants: _assistants,
        ...message
      }) => message as TranscriptMessage,
    );
  return {
    stored: first.storedThreadId === null ? undefined : transcript.find((m) => m.operationId === call.operationId),
    transcript,
    unread:
      first.unreadCount === undefined || first.unreadCount === 0
        ? undefined
        : { count: first.unreadCount, assistants: first.unreadAssistants ?? 0 },
    worldVariables: first.worldVariables ?? undefined,
    hasEnvData: first.hasEnvData,
    budget: budgetFrom(first.budget),
  };
}

export interface ToolCallContext {
  /** The result an earlier attempt of this call stored, if one did. */
  done: { seq: number; content: string | null } | undefined;
  /** The tool calls of the reply the call belongs to (`undefined` when there is no such message). */
  replyToolCalls: ToolCallRequest[] | null | undefined;
  /** The world's raw variables text, or `undefined` when it has none. */
  worldVariables: string | undefined;
}

/**
 * Reads a tool call's context for `scope`, refusing a thread that is gone or was reclaimed (a reclaimed call runs
 * nothing and gets nothing back, not even a result stored before it was reclaimed).
 * @throws ThreadNotFoundError, StaleEpochError, BatonDbError when the operation id already wrote to another thread
 */
export async function readToolCallContext(
  db: Queryable,
  scope: Pick<ThreadScope, 'rootThreadId' | 'threadId' | 'epoch'>,
  call: { operationId: string; messageSeq: number; world: string },
): Promise<ToolCallContext> {
  const { rows } = await db.query<{
    currentEpoch: number | null;
    worldVariables: string | null;
    doneThreadId: string | null;
    doneSeq: number | null;
    doneContent: string | null;
    replyFound: boolean;
    replyToolCalls: ToolCallRequest[] | null;
  }>({
    name: 'baton-tool-call-context',
    text: `SELECT (SELECT epoch FROM threads WHERE thread_id = $1) AS "currentEpoch",
                  (SELECT variables FROM worlds WHERE name = $3) AS "worldVariables",
                  d.thread_id AS "doneThreadId", d.seq AS "doneSeq", d.content AS "doneContent",
                  r.seq IS NOT NULL AS "replyFound", r.tool_calls AS "replyToolCalls"
             FROM (SELECT 1) one
             LEFT JOIN transcript_messages d ON d.root_thread_id = $2 AND d.operation_id = $4
             LEFT JOIN transcript_messages r ON r.thread_id = $1 AND r.seq = $5`,
    values: [scope.threadId, scope.rootThreadId, call.world, call.operationId, call.messageSeq],
  });
  const row = rows[0];
  if (!row) throw new ThreadNotFoundError(scope.threadId);
  checkOperationThread(call.operationId, scope.threadId, row.doneThreadId);
  checkEpoch(scope.threadId, scope.epoch, row.currentEpoch);
  return {
    done: row.doneSeq === null ? undefined : { seq: row.doneSeq, content: row.doneContent },
    replyToolCalls: row.replyFound ? row.replyToolCalls : undefined,
    worldVariables: row.worldVariables ?? undefined,
  };
}
