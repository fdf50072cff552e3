import type { Pool } from 'pg';
import type { EnsureThreadInput, ThreadScope, TokenUsage, ToolCallRequest } from '../common/types';
import { OUTPUT_REPAIR_SUFFIX } from '../common/ids';
import { addCost } from '../common/usage';
import { markThreadStatement, threadRecordValues, type Queryable } from './threads';
import { BatonDbError, StaleEpochError, ThreadNotFoundError } from './errors';
import { logStaleRefusal } from './refusals';

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
  /**
   * The endpoint that answered, on assistant messages: a configured provider's name or `default` (null on other
   * messages, and on replies stored before providers were recorded).
   */
  provider: string | null;
  /** The model name sent to that endpoint, without the provider prefix (null where `provider` is). */
  model: string | null;
  operationId: string;
  createdAt: Date;
}

export interface NewTranscriptMessage {
  role: TranscriptRole;
  content: string | null;
  toolCalls?: ToolCallRequest[];
  toolCallId?: string;
  usage?: TokenUsage | null;
  /** The endpoint that answered and the model name sent there (assistant messages). */
  provider?: string;
  model?: string;
}

/** Each column of a message as read, and the field it becomes. */
const MESSAGE_FIELDS: readonly (readonly [column: string, field: keyof TranscriptMessage])[] = [
  ['thread_id', 'threadId'],
  ['seq', 'seq'],
  ['role', 'role'],
  ['agent', 'agent'],
  ['content', 'content'],
  ['tool_calls', 'toolCalls'],
  ['tool_call_id', 'toolCallId'],
  ['usage', 'usage'],
  ['provider', 'provider'],
  ['model', 'model'],
  ['operation_id', 'operationId'],
  ['created_at', 'createdAt'],
];

/** A message's columns as its fields, read from `source` (a table alias, or a row value such as `(r.message)`). */
function messageColumns(source?: string): string {
  return MESSAGE_FIELDS.map(
    ([column, field]) => `${source === undefined ? '' : `${source}.`}${column} AS "${field}"`,
  ).join(', ');
}

export const MESSAGE_COLUMNS = messageColumns();

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
  checkOperationThread(operationId, scope.threadId, found?.threadId);
  return found;
}

/**
 * Refuses an operation id that already wrote to another thread of the root (`writtenTo`): operation ids are unique
 * per root, and one belongs to one thread.
 * @throws BatonDbError
 */
export function checkOperationThread(
  operationId: string,
  threadId: string,
  writtenTo: string | null | undefined,
): void {
  if (writtenTo !== null && writtenTo !== undefined && writtenTo !== threadId) {
    throw new BatonDbError(`operation '${operationId}' already wrote to thread '${writtenTo}'`);
  }
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
  options: { endsTurn?: boolean } = {},
): Promise<{ message: TranscriptMessage; reused: boolean }> {
  return logStaleRefusal(pool, scope, 'transcript', operationId, async () => {
    // One round trip (migration 015): the epoch checked under the thread's row lock first, so a reclaimed turn is
    // refused even for an operation it had already written; then the operation's earlier message, else the insert.
    const { rows } = await pool.query<AppendOutcome>({
      ...(options.endsTurn === true ? APPEND_ENDING_TURN : APPEND),
      values: [
        scope.rootThreadId,
        scope.threadId,
        scope.epoch,
        operationId,
        message.role,
        scope.agent,
        message.content,
        message.toolCalls ? JSON.stringify(message.toolCalls) : null,
        message.toolCallId ?? null,
        message.usage ? JSON.stringify(message.usage) : null,
        message.provider ?? null,
        message.model ?? null,
      ],
    });
    return appended(rows[0], scope, operationId);
  });
}

/** The append of `appendMessage`, over its twelve values. */
const APPEND = {
  name: 'baton-append-message',
  text: `SELECT r.outcome, r.current_epoch AS "currentEpoch", ${messageColumns('(r.message)')}
           FROM append_transcript_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) r`,
};

/**
 * The same append, then, when the message it stored (or found under its operation id) is an answer, one without tool
 * calls, the thread marked `completed` as `markThread` marks it: the turn's end in the statement of its last message,
 * after it (the status change is the later event of the run feed: the update waits for the append it reads).
 */
const APPEND_ENDING_TURN = {
  name: 'baton-append-message-ending-turn',
  text: `WITH r AS (SELECT * FROM append_transcript_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)),
              ended AS (
                ${markThreadStatement('$2', "'completed'", 'NULL')}
                   AND EXISTS (SELECT 1 FROM r WHERE r.outcome IN ('inserted', 'existing')
                                                 AND coalesce(jsonb_array_length((r.message).tool_calls), 0) = 0)
                RETURNING 1)
         SELECT r.outcome, r.current_epoch AS "currentEpoch", ${messageColumns('(r.message)')} FROM r`,
};

/** What `append_transcript_message` answered, as `appendMessage` returns it. */
type AppendOutcome = {
  outcome: 'inserted' | 'existing' | 'stale' | 'no_thread';
  currentEpoch: number | null;
} & TranscriptMessage;

/**
 * The message an append stored or found, from its outcome row.
 * @throws ThreadNotFoundError, StaleEpochError; BatonDbError when the operation id wrote to another thread
 */
function appended(
  row: AppendOutcome | undefined,
  scope: Pick<ThreadScope, 'threadId' | 'epoch'>,
  operationId: string,
): { message: TranscriptMessage; reused: boolean } {
  if (!row || row.outcome === 'no_thread') throw new ThreadNotFoundError(scope.threadId);
  if (row.outcome === 'stale') throw new StaleEpochError(scope.threadId, scope.epoch, row.currentEpoch ?? -1);
  const { outcome, currentEpoch: _epoch, ...stored } = row;
  checkOperationThread(operationId, scope.threadId, stored.threadId);
  return { message: stored, reused: outcome === 'existing' };
}

/**
 * Opens a thread's record and appends its turn's message under the epoch the record has, in one round trip (migration
 * 029), for the turn that opens its thread: the record is created if new (as `ensureThread` does) and marked running
 * (as `markThread(…, 'running')` does, so the turn's start reaches the run feed as every turn's does), then the message
 * appended as `appendMessage` would. A repeated call finds the record and the message its first call stored.
 * With `options.world`, the same statement also reads that world's variables (the turn that opens a thread needs them
 * for its limits and step mode, and one statement takes one connection and one round trip where two would take two).
 * @returns the record's epoch, the message as `appendMessage` returns it, and the world's variables text when asked
 *   for (`undefined` for a world without variables or not created yet)
 * @throws ThreadNotFoundError when no record could be marked (one deleted meanwhile); BatonDbError when the
 *   operation id wrote to another thread of the root
 */
export async function openThreadWithMessage(
  db: Queryable,
  thread: EnsureThreadInput,
  operationId: string,
  message: { role: 'user' | 'tool'; agent: string; content: string; toolCallId?: string },
  options: { world?: string } = {},
): Promise<{ epoch: number; message: TranscriptMessage; reused: boolean; worldVariables: string | undefined }> {
  const { rows } = await db.query<AppendOutcome & { openedEpoch: number | null; worldVariables: string | null }>({
    name: 'baton-open-thread-with-message',
    text: `SELECT r.opened_epoch AS "openedEpoch", r.outcome, r.current_epoch AS "currentEpoch",
                  ${messageColumns('(r.message)')},
                  (SELECT w.variables FROM worlds w WHERE w.name = $12::text) AS "worldVariables"
             FROM open_thread_with_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) r`,
    values: [
      ...threadRecordValues(thread),
      operationId,
      message.role,
      message.agent,
      message.content,
      message.toolCallId ?? null,
      options.world ?? null,
    ],
  });
  const row = rows[0];
  const epoch = row?.openedEpoch;
  if (row === undefined || epoch === null || epoch === undefined) throw new ThreadNotFoundError(thread.threadId);
  const { openedEpoch: _opened, worldVariables, ...outcome } = row;
  return {
    epoch,
    ...appended(outcome, { threadId: thread.threadId, epoch }, operationId),
    worldVariables: worldVariables ?? undefined,
  };
}

/**
 * How many times the turn of the reply at `replySeq` was asked to fix its answer (typed results): the repair
 * messages after the turn's message (the last message of the thread's from a person or a caller) and before the
 * reply. Counted from the transcript, so a step re-run after a crash counts what the first run stored.
 */
export async function countOutputRepairs(db: Queryable, threadId: string, replySeq: number): Promise<number> {
  const { rows } = await db.query<{ repairs: number }>({
    name: 'baton-count-output-repairs',
    text: `SELECT count(*)::int AS repairs FROM transcript_messages
            WHERE thread_id = $1 AND role = 'user' AND seq < $2 AND operation_id LIKE '%' || $3
              AND seq > COALESCE((SELECT max(seq) FROM transcript_messages
                                   WHERE thread_id = $1 AND role = 'user' AND seq < $2
                                     AND operation_id NOT LIKE '%' || $3), 0)`,
    values: [threadId, replySeq, OUTPUT_REPAIR_SUFFIX],
  });
  return rows[0]?.repairs ?? 0;
}

/** A thread's transcript in order. */
export async function listMessages(db: Queryable, threadId: string): Promise<TranscriptMessage[]> {
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE thread_id = $1 ORDER BY seq`,
    [threadId],
  );
  return rows;
}

/** Up to `limit` messages of a thread after sequence number `after`, in order (the primary key pages them). */
export async function listMessagesPage(
  db: Queryable,
  threadId: string,
  page: { after: number; limit: number },
): Promise<TranscriptMessage[]> {
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
    [threadId, page.after, page.limit],
  );
  return rows;
}

/** The thread's latest final answer: its newest assistant message with text and no tool call. */
export async function findLastReply(db: Queryable, threadId: string): Promise<TranscriptMessage | undefined> {
  const { rows } = await db.query<TranscriptMessage>(
    `SELECT ${MESSAGE_COLUMNS} FROM transcript_messages
      WHERE thread_id = $1 AND role = 'assistant' AND content IS NOT NULL AND tool_calls IS NULL
      ORDER BY seq DESC LIMIT 1`,
    [threadId],
  );
  return rows[0];
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

/** Model calls and their tokens at one provider (in a thread, or in a whole tree). */
export interface ProviderUsage {
  /** A configured provider's name, `default`, or null for replies stored before providers were recorded. */
  provider: string | null;
  modelCalls: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** What those calls cost in US dollars, where their workers had prices for the models (`BATON_MODEL_PRICES`). */
  costUsd?: number;
}

/**
 * The model calls of a delegation tree by thread and provider, in thread and provider order. The messages a clone is
 * seeded with are copies of its caller's, not model calls, and are left out.
 */
export async function listProviderUsage(
  db: Queryable,
  rootThreadId: string,
): Promise<(ProviderUsage & { threadId: string })[]> {
  const { rows } = await db.query<{
    threadId: string;
    provider: string | null;
    calls: string;
    prompt: string;
    completion: string;
    total: string;
    cost: string | null;
  }>(
    `SELECT thread_id AS "threadId", provider, COUNT(*) AS calls,
            COALESCE(SUM((usage->>'promptTokens')::bigint), 0) AS prompt,
            COALESCE(SUM((usage->>'completionTokens')::bigint), 0) AS completion,
            COALESCE(SUM((usage->>'totalTokens')::bigint), 0) AS total,
            SUM((usage->>'costUsd')::numeric) AS cost
       FROM transcript_messages
      WHERE root_thread_id = $1 AND role = 'assistant' AND operation_id NOT LIKE '%:clone:%'
      GROUP BY thread_id, provider ORDER BY thread_id, provider NULLS FIRST`,
    [rootThreadId],
  );
  return rows.map((row) => ({
    threadId: row.threadId,
    provider: row.provider,
    modelCalls: Number(row.calls),
    promptTokens: Number(row.prompt),
    completionTokens: Number(row.completion),
    totalTokens: Number(row.total),
    ...(row.cost === null ? {} : { costUsd: Number(row.cost) }),
  }));
}

/** Usage rows added up by provider, in provider order (null first). */
export function sumByProvider(rows: readonly ProviderUsage[]): ProviderUsage[] {
  const sums = new Map<string | null, ProviderUsage>();
  for (const row of rows) {
    const sum = sums.get(row.provider) ?? {
      provider: row.provider,
      modelCalls: 0,
      promptTokens: 0,
      completionTokens: 0,
      totalTokens: 0,
    };
    sum.modelCalls += row.modelCalls;
    sum.promptTokens += row.promptTokens;
    sum.completionTokens += row.completionTokens;
    sum.totalTokens += row.totalTokens;
    if (row.costUsd !== undefined) sum.costUsd = addCost(sum.costUsd, row.costUsd);
    sums.set(row.provider, sum);
  }
  // Provider names are never empty, so '' puts the unrecorded ones first.
  return [...sums.values()].sort((a, b) => (a.provider ?? '').localeCompare(b.provider ?? ''));
}

/** Token usage summed over every model call in a delegation tree, in all and by provider. */
export async function sumUsage(
  db: Queryable,
  rootThreadId: string,
): Promise<{
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  modelCalls: number;
  costUsd?: number;
  byProvider: ProviderUsage[];
}> {
  const byProvider = sumByProvider(await listProviderUsage(db, rootThreadId));
  const total = (field: 'modelCalls' | 'promptTokens' | 'completionTokens' | 'totalTokens') =>
    byProvider.reduce((sum, row) => sum + row[field], 0);
  const costs = byProvider.flatMap((row) => (row.costUsd === undefined ? [] : [row.costUsd]));
  return {
    promptTokens: total('promptTokens'),
    completionTokens: total('completionTokens'),
    totalTokens: total('totalTokens'),
    modelCalls: total('modelCalls'),
    ...(costs.length === 0 ? {} : { costUsd: costs.reduce<number>((sum, cost) => addCost(sum, cost), 0) }),
    byProvider,
  };
}
