import { ApplicationFailure } from '@temporalio/common';
import { ErrorType } from '../common/errors';
import { StaleEpochError, ThreadNotFoundError } from '../db/errors';

/**
 * Maps repository errors to typed, non-retryable failures; anything else (a lost connection, say) is returned
 * unchanged so Temporal retries it.
 */
export function toApplicationFailure(error: unknown): unknown {
  if (error instanceof StaleEpochError) {
    return ApplicationFailure.create({
      type: ErrorType.ThreadStaleEpoch,
      message: error.message,
      nonRetryable: true,
      details: [{ threadId: error.threadId, writeEpoch: error.writeEpoch, currentEpoch: error.currentEpoch }],
    });
  }
  if (error instanceof ThreadNotFoundError) {
    return ApplicationFailure.create({ type: ErrorType.ThreadNotFound, message: error.message, nonRetryable: true });
  }
  return error;
}
