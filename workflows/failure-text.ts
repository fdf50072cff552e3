import { ChildWorkflowFailure, TimeoutFailure } from '@temporalio/workflow';
import { truncateBytes } from '../common/text';

/** The innermost message of a failure chain: what actually went wrong. */
export function rootMessage(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 10 && current instanceof Error && current.cause instanceof Error; depth++) {
    current = current.cause;
  }
  return truncateBytes(current instanceof Error ? current.message : String(current), 1000);
}

/** Whether a child workflow failed by running past its execution timeout. */
export function isTimeout(error: unknown): boolean {
  return error instanceof ChildWorkflowFailure && error.cause instanceof TimeoutFailure;
}
