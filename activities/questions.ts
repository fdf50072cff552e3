import type { Pool } from 'pg';
import type { CloseQuestionInput, CloseQuestionResult, OpenQuestionInput, OpenQuestionResult } from '../common/types';
import { closeQuestion as closeQuestionRow, openQuestion as openQuestionRow } from '../db/questions';
import { storableText } from '../common/text';
import { toApplicationFailure } from './failures';

/** Activities that store the questions agents ask humans (`ask_human`). */
export function createQuestionActivities({ pool }: { pool: Pool }) {
  /** Stores an open question, once per operation id, fenced by the asking thread's epoch. */
  async function openQuestion(input: OpenQuestionInput): Promise<OpenQuestionResult> {
    try {
      const row = await openQuestionRow(pool, input.scope, input.operationId, {
        workflowId: input.workflowId,
        toolCallId: input.toolCallId,
        // The question comes from a model's tool arguments: clean what Postgres cannot store instead of failing.
        question: storableText(input.question),
        ...(input.timeoutSeconds === undefined ? {} : { timeoutSeconds: input.timeoutSeconds }),
      });
      return { questionId: row.questionId };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * Marks a question answered or expired and returns how it ended: when an answer and a timeout race, the first to
   * reach Postgres wins and both sides see the same outcome; a question its turn's end cancelled stays cancelled.
   * Idempotent.
   */
  async function closeQuestion(input: CloseQuestionInput): Promise<CloseQuestionResult> {
    // An answer is a human's text: clean what Postgres cannot store rather than fail the waiting turn.
    const outcome =
      input.outcome.status === 'answered'
        ? { ...input.outcome, answer: storableText(input.outcome.answer) }
        : input.outcome;
    const row = await closeQuestionRow(pool, input.rootThreadId, input.questionId, outcome);
    if (!row || row.status === 'open') {
      throw new Error(`question '${input.questionId}' of thread '${input.rootThreadId}' could not be closed`);
    }
    if (row.status === 'answered') return { status: 'answered', answer: row.answer ?? '' };
    if (row.status === 'cancelled') return { status: 'cancelled', reason: row.reason ?? 'its turn ended' };
    return { status: 'expired' };
  }

  return { openQuestion, closeQuestion };
}
