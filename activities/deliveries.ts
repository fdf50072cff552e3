import { Context } from '@temporalio/activity';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure, rootCause } from '@temporalio/common';
import { ErrorType } from '../common/errors';
import type { Pool } from 'pg';
import { rootTurnWorkflowId } from '../common/ids';
import { findMessageByOperation } from '../db/transcripts';
import { answerObject } from './output';
import { TurnStatus, type AgentTurnResult, type DeliveredTurnInput, type SendMessageResult } from '../common/types';

/** Activities behind message ids that outlive a run of their thread (`common/deliveries.ts`). */
export function createDeliveryActivities(deps: { pool: Pool }) {
  /**
   * The outcome of the turn a message delivered in an earlier run of its thread ran as, so a repeat of the message
   * gets what the first delivery got and runs nothing: read back from the turn's workflow, or, for a turn that ended
   * in its thread's workflow, from what the thread carried (`Delivery.ended`) and the answer stored in Postgres.
   * @throws ApplicationFailure `Turn.Failed` when that turn failed, `Input.Invalid` when Temporal no longer keeps it
   */
  async function deliveredTurnResult(input: DeliveredTurnInput): Promise<SendMessageResult> {
    const workflowId = rootTurnWorkflowId(input.rootThreadId, input.turn);
    const before = `message '${input.messageId}' was delivered before, as turn ${input.turn}`;
    const { ended } = input;
    if (ended !== undefined && 'failed' in ended) {
      throw ApplicationFailure.create({
        type: ErrorType.TurnFailed,
        message: `${before}, which failed: ${ended.failed}`,
        nonRetryable: true,
      });
    }
    if (ended !== undefined) {
      const answer = await findMessageByOperation(deps.pool, ended.answerOperationId, {
        rootThreadId: input.rootThreadId,
        threadId: input.rootThreadId,
      });
      if (answer === undefined) {
        throw ApplicationFailure.create({
          type: ErrorType.InvalidInput,
          message: `${before}, whose answer is no longer stored (operation ${ended.answerOperationId})`,
          nonRetryable: true,
        });
      }
      return {
        status: TurnStatus.Completed,
        reply: answer.content ?? '',
        steps: ended.steps,
        usage: ended.usage,
        ...(ended.typed === true ? { output: answerObject(answer.content) } : {}),
        threadId: input.rootThreadId,
        turn: input.turn,
      };
    }
    try {
      const result = (await Context.current().client.workflow.getHandle(workflowId).result()) as AgentTurnResult;
      return { ...result, threadId: input.rootThreadId, turn: input.turn };
    } catch (error) {
      if (error instanceof WorkflowFailedError) {
        throw ApplicationFailure.create({
          type: ErrorType.TurnFailed,
          message: `${before}, which failed: ${rootCause(error.cause) ?? error.message}`,
          nonRetryable: true,
        });
      }
      if (error instanceof WorkflowNotFoundError) {
        throw ApplicationFailure.create({
          type: ErrorType.InvalidInput,
          message: `${before}; Temporal no longer keeps that turn's outcome (${workflowId}), and it is not run again`,
          nonRetryable: true,
        });
      }
      throw error;
    }
  }
  return { deliveredTurnResult };
}
