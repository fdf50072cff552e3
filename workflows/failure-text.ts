import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, TimeoutFailure } from '@temporalio/workflow';
import { ErrorType } from '../common/errors';
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

/**
 * Whether a local activity ran past the deadline `localActivitiesUntil` gave it: a `SCHEDULE_TO_CLOSE` timeout, which
 * no profile's own timeouts (start-to-close only) raise, or a retry refused for beginning past it
 * (`ErrorType.ActivityPastDeadline`: the SDK can lose the timeout while a retry waits). The SDK reports the timeout
 * as an `ActivityFailure` caused by it, and the activity's own failure as it was thrown.
 */
export function isPastDeadline(error: unknown): boolean {
  if (error instanceof ApplicationFailure) return error.type === ErrorType.ActivityPastDeadline;
  return (
    error instanceof ActivityFailure &&
    error.cause instanceof TimeoutFailure &&
    error.cause.timeoutType === 'SCHEDULE_TO_CLOSE'
  );
}
