import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import { ErrorType } from '../common/errors';
import type {
  CloseApprovalInput,
  CloseApprovalResult,
  ExtendBudgetInput,
  OpenApprovalInput,
  OpenApprovalResult,
} from '../common/types';
import { storableText } from '../common/text';
import { closeApproval as closeApprovalRow, openApproval as openApprovalRow } from '../db/approvals';
import { extendBudget as extendBudgetRows } from '../db/budgets';
import { decisionProofMatches } from './decision-proofs';

export interface ApprovalActivityOptions {
  pool: Pool;
  /**
   * The deployment's decision key (`BATON_DECISION_KEY`): a decision is written only with a proof made with it
   * (activities/decision-proofs.ts). Without one, any decision is written, whoever sent it. @default none
   */
  decisionKey?: string | undefined;
}

/** Activities that store the approvals tool calls wait for (a tool's `needsApproval`, an agent's `approval`). */
export function createApprovalActivities({ pool, decisionKey }: ApprovalActivityOptions) {
  /** Stores a pending approval of a stored tool call, once per operation id, fenced by the calling thread's epoch. */
  async function openApproval(input: OpenApprovalInput): Promise<OpenApprovalResult> {
    const row = await openApprovalRow(pool, input.scope, input.operationId, {
      workflowId: input.workflowId,
      messageSeq: input.messageSeq,
      toolCallId: input.toolCallId,
      ...(input.timeoutSeconds === undefined ? {} : { timeoutSeconds: input.timeoutSeconds }),
      ...(input.request === undefined ? {} : { request: input.request }),
    });
    return { approvalId: row.approvalId };
  }

  /**
   * Adds an approved extension to a turn's budget (`on_budget: ask`), once per approval and only when Postgres holds
   * it approved: the workflow waited for the decision, and the activity checks it again.
   * @returns whether the extension was added (or had been)
   */
  async function extendBudget(input: ExtendBudgetInput): Promise<{ extended: boolean }> {
    const budget = await extendBudgetRows(pool, {
      rootThreadId: input.scope.rootThreadId,
      threadId: input.scope.threadId,
      approvalOperationId: input.approvalOperationId,
      extension: input.extension,
    });
    return { extended: budget !== undefined };
  }

  /**
   * Closes an approval and returns how it ended: when a decision and the timeout race, the first to reach Postgres
   * wins and both sides see the same outcome. Idempotent.
   * @throws ApplicationFailure `Approval.Unauthorized` (non-retryable) for a decision without a valid proof, when this
   * worker has a decision key: nothing is written, and the Update that carried it fails.
   */
  async function closeApproval(input: CloseApprovalInput): Promise<CloseApprovalResult> {
    const { outcome } = input;
    if (decisionKey !== undefined && (outcome.status === 'approved' || outcome.status === 'rejected')) {
      const decision = {
        rootThreadId: input.rootThreadId,
        approvalId: input.approvalId,
        approve: outcome.status === 'approved',
      };
      if (!decisionProofMatches(decisionKey, decision, input.proof)) {
        throw ApplicationFailure.create({
          type: ErrorType.ApprovalUnauthorized,
          nonRetryable: true,
          message:
            `approval '${input.approvalId}' of thread '${input.rootThreadId}' was not ${outcome.status}: the ` +
            `decision carries ${input.proof === undefined ? 'no' : 'no valid'} proof, and only a client holding this ` +
            "deployment's decision key (BATON_DECISION_KEY) can decide approvals",
        });
      }
    }
    // A reason is a person's text: clean what Postgres cannot store rather than fail the waiting turn.
    const cleaned =
      'reason' in outcome && outcome.reason !== undefined
        ? { ...outcome, reason: storableText(outcome.reason) }
        : outcome;
    const row = await closeApprovalRow(pool, input.rootThreadId, input.approvalId, cleaned);
    if (!row || row.status === 'pending') {
      throw new Error(`approval '${input.approvalId}' of thread '${input.rootThreadId}' could not be closed`);
    }
    switch (row.status) {
      case 'approved':
        return { status: 'approved', decidedBy: row.decidedBy ?? '' };
      case 'rejected':
        return {
          status: 'rejected',
          decidedBy: row.decidedBy ?? '',
          ...(row.reason === null ? {} : { reason: row.reason }),
        };
      case 'expired':
        return { status: 'expired' };
      case 'cancelled':
        return { status: 'cancelled', reason: row.reason ?? '' };
    }
  }

  return { openApproval, extendBudget, closeApproval };
}
