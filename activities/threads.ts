import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import { ErrorType } from '../common/errors';
import type { EnsureThreadInput, EnsureThreadResult, RecordMessageInput, RecordMessageResult } from '../common/types';
import { openRootBudget as openRootBudgetRow, type BudgetLimit } from '../db/budgets';
import { ensureThread as ensureThreadRow } from '../db/threads';
import { appendMessage } from '../db/transcripts';
import { findDelegationMessage } from '../db/delegations';
import { storableText } from '../common/text';
import { toApplicationFailure } from './failures';

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
    const { message } = input;
    try {
      let content: string;
      if ('delegationOperationId' in message) {
        const stored = await findDelegationMessage(pool, input.scope.rootThreadId, message.delegationOperationId);
        if (stored === undefined) {
          throw ApplicationFailure.create({
            type: ErrorType.ThreadNotFound,
            message: `no delegation '${message.delegationOperationId}' in root '${input.scope.rootThreadId}' holds this thread's message`,
            nonRetryable: true,
          });
        }
        content = stored;
      } else {
        // A tool result the workflow composed (a human's answer, a child's reply) is cleaned of what Postgres cannot
        // store rather than failing the turn; a human's own message with such text is refused by the Update
        // validator before it gets here.
        content = message.role === 'tool' ? storableText(message.content) : message.content;
      }
      const { message: stored } = await appendMessage(pool, input.scope, input.operationId, {
        role: message.role,
        content,
        ...(message.role === 'tool' ? { toolCallId: message.toolCallId } : {}),
      });
      return { seq: stored.seq };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /** Opens a root thread's budget unless it has one. Idempotent. */
  async function openRootBudget(input: { rootThreadId: string; limit: BudgetLimit }): Promise<void> {
    await openRootBudgetRow(pool, input.rootThreadId, input.limit);
  }

  return { ensureThread, recordMessage, openRootBudget };
}
