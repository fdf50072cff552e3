import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import { ErrorType } from '../common/errors';
import type { EnsureThreadInput, EnsureThreadResult, RecordMessageInput, RecordMessageResult } from '../common/types';
import { openRootBudget as openRootBudgetRow, type BudgetLimit } from '../db/budgets';
import { ensureThread as ensureThreadRow } from '../db/threads';
import { appendMessage, openThreadWithMessage as openThreadWithMessageRow } from '../db/transcripts';
import { findDelegationMessage } from '../db/delegations';
import { storableText } from '../common/text';
import { toApplicationFailure } from './failures';
import { worldVariablesOf } from './worlds';

export interface ThreadActivityOptions {
  pool: Pool;
}

/** Activities that create thread records and append to transcripts. */
export function createThreadActivities({ pool }: ThreadActivityOptions) {
  /** Creates the thread record if it is new and returns its current epoch. Idempotent. */
  async function ensureThread(input: EnsureThreadInput): Promise<EnsureThreadResult> {
    const thread = await ensureThreadRow(pool, input);
    return { epoch: thread.epoch };
  }

  /**
   * Appends a user or tool message to the transcript, once per operation id, fenced by the scope's epoch.
   * @throws ApplicationFailure `Thread.StaleEpoch`, `Thread.NotFound`
   */
  async function recordMessage(input: RecordMessageInput): Promise<RecordMessageResult> {
    try {
      const { message: stored } = await appendMessage(
        pool,
        input.scope,
        input.operationId,
        await messageToStore(input),
      );
      return { seq: stored.seq };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * Opens the thread's record (created if new, marked running) and records the message of the turn that opens it, in
   * one round trip (`recordMessage` fenced by the epoch the record has, which it hands back), reading the variables of
   * `world` (which the opening turn needs) in the same statement. Idempotent.
   * @throws ApplicationFailure `Thread.NotFound`; `InvalidInput` for a message of another thread than the record's
   */
  async function openThreadWithMessage(
    thread: EnsureThreadInput,
    input: RecordMessageInput,
    world: string,
  ): Promise<EnsureThreadResult & RecordMessageResult & { worldVariables: Record<string, string> }> {
    if (input.scope.threadId !== thread.threadId || input.scope.rootThreadId !== thread.rootThreadId) {
      throw ApplicationFailure.create({
        type: ErrorType.InvalidInput,
        message: `the message of thread '${input.scope.threadId}' cannot open thread '${thread.threadId}'`,
        nonRetryable: true,
      });
    }
    try {
      const opened = await openThreadWithMessageRow(
        pool,
        thread,
        input.operationId,
        { ...(await messageToStore(input)), agent: input.scope.agent },
        { world },
      );
      return {
        epoch: opened.epoch,
        seq: opened.message.seq,
        worldVariables: worldVariablesOf(world, opened.worldVariables),
      };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * The message `input` stores: a delegation's is read from where the delegation stored it.
   * @throws ApplicationFailure `Thread.NotFound` for a delegation that holds no message for this thread
   */
  async function messageToStore(
    input: RecordMessageInput,
  ): Promise<{ role: 'user' | 'tool'; content: string; toolCallId?: string }> {
    const { message } = input;
    if ('delegationOperationId' in message) {
      const stored = await findDelegationMessage(pool, input.scope.rootThreadId, message.delegationOperationId);
      if (stored === undefined) {
        throw ApplicationFailure.create({
          type: ErrorType.ThreadNotFound,
          message: `no delegation '${message.delegationOperationId}' in root '${input.scope.rootThreadId}' holds this thread's message`,
          nonRetryable: true,
        });
      }
      return { role: 'user', content: stored };
    }
    // A tool result the workflow composed (a human's answer, a child's reply) is cleaned of what Postgres cannot store
    // rather than failing the turn; a human's own message with such text is refused by the Update validator before it
    // gets here.
    return message.role === 'tool'
      ? { role: 'tool', content: storableText(message.content), toolCallId: message.toolCallId }
      : { role: 'user', content: message.content };
  }

  /** Opens a root thread's budget unless it has one. Idempotent. */
  async function openRootBudget(input: { rootThreadId: string; limit: BudgetLimit }): Promise<void> {
    await openRootBudgetRow(pool, input.rootThreadId, input.limit);
  }

  return { ensureThread, recordMessage, openThreadWithMessage, openRootBudget };
}
