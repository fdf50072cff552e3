/**
 * What a step reads before it acts, in one round trip each: a model call its thread's epoch, the reply an earlier
 * attempt stored under its operation id, the transcript, the world's variables and whether the root has env data; a
 * tool call its thread's epoch, the result an earlier attempt stored, the reply holding the call and the world's
 * variables. Each used to be a statement of its own, one after another, on every step.
 */
import type { ThreadScope, ToolCallRequest } from '../common/types';
import { ThreadNotFoundError } from './errors';
import { checkEpoch, type Queryable } from './threads';
import { checkOperationThread, MESSAGE_COLUMNS, type TranscriptMessage } from './transcripts';

export interface ModelCallContext {
  /** The reply an earlier attempt of this call stored, if one did. */
  stored: TranscriptMessage | undefined;
  /** The thread's transcript, oldest first. */
  transcript: TranscriptMessage[];
  /** The world's raw variables text, or `undefined` when it has none. */
  worldVariables: string | undefined;
  /** Whether the root thread has any env data. */
  hasEnvData: boolean;
}

interface ContextRow extends Partial<TranscriptMessage> {
  currentEpoch: number | null;
  worldVariables: string | null;
  hasEnvData: boolean;
  storedThreadId: string | null;
}

/**
 * Reads a model call's context for `scope`, refusing a thread that is gone or was reclaimed, as every step does
 * before it acts (a reclaimed turn gets nothing back, not even a reply stored before it was reclaimed).
 * @throws ThreadNotFoundError, StaleEpochError, BatonDbError when the operation id already wrote to another thread
 */
export async function readModelCallContext(
  db: Queryable,
  scope: Pick<ThreadScope, 'rootThreadId' | 'threadId' | 'epoch'>,
  call: { operationId: string; world: string },
): Promise<ModelCallContext> {
  // One row of the scalars joined to each transcript message (one row with null message columns when there is none).
  const { rows } = await db.query<ContextRow>({
    name: 'baton-model-call-context',
    text: `SELECT c.*, m.*
             FROM (SELECT (SELECT epoch FROM threads WHERE thread_id = $1) AS "currentEpoch",
                          (SELECT variables FROM worlds WHERE name = $3) AS "worldVariables",
                          EXISTS (SELECT 1 FROM env_data WHERE root_thread_id = $2) AS "hasEnvData",
                          (SELECT thread_id FROM transcript_messages
                            WHERE root_thread_id = $2 AND operation_id = $4) AS "storedThreadId") c
             LEFT JOIN LATERAL (SELECT ${MESSAGE_COLUMNS} FROM transcript_messages
                                 WHERE thread_id = $1 ORDER BY seq) m ON true`,
    values: [scope.threadId, scope.rootThreadId, call.world, call.operationId],
  });
  const first = rows[0];
  if (!first) throw new ThreadNotFoundError(scope.threadId);
  checkOperationThread(call.operationId, scope.threadId, first.storedThreadId);
  checkEpoch(scope.threadId, scope.epoch, first.currentEpoch);
  const transcript = rows
    .filter((row) => row.seq !== null && row.seq !== undefined)
    .map(
      ({ currentEpoch: _epoch, worldVariables: _variables, hasEnvData: _env, storedThreadId: _stored, ...message }) =>
        message as TranscriptMessage,
    );
  return {
    stored: first.storedThreadId === null ? undefined : transcript.find((m) => m.operationId === call.operationId),
    transcript,
    worldVariables: first.worldVariables ?? undefined,
    hasEnvData: first.hasEnvData,
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
