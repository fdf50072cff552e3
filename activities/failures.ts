import { ApplicationFailure } from '@temporalio/common';
import { DatabaseError } from 'pg';
import { ErrorType } from '../common/errors';
import { StaleEpochError, ThreadNotFoundError } from '../db/errors';

/**
 * Whether Postgres refused the data itself (SQLSTATE class 22, "data exception": a NUL character or a lone surrogate
 * in text, a number out of range). Sending the same data again fails the same way, so it must not be retried.
 */
export function isDataError(error: unknown): error is DatabaseError {
  return error instanceof DatabaseError && typeof error.code === 'string' && error.code.startsWith('22');
}

/** What a data error means, for the person or model who sent the data. */
export function describeDataError(error: DatabaseError): string {
  const hint =
    error.code === '22021' || error.code === '22P05'
      ? ': text holding a NUL character (U+0000) or a lone UTF-16 surrogate cannot be stored'
      : '';
  return `Postgres refused the data (SQLSTATE ${error.code ?? '22'}: ${error.message})${hint}`;
}

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
  if (isDataError(error)) {
    return ApplicationFailure.create({
      type: ErrorType.InvalidInput,
      message: describeDataError(error),
      nonRetryable: true,
      cause: error,
    });
  }
  return error;
}
