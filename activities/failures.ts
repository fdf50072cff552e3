import { Context } from '@temporalio/activity';
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
 * Refuses a local activity's attempt that would begin past its schedule-to-close deadline, failing it for good as the
 * deadline would have. The SDK keeps that deadline with a timer, but the attempt's start-to-close timeout is clamped to
 * it, so the two timers can fire together; when the start-to-close one wins, or an attempt fails just before the
 * deadline, the SDK schedules a retry, and the deadline's timer, firing during the retry's backoff, finds no attempt
 * to time out and is dropped: the retry would run with no deadline at all. Outside an activity (an activity function
 * called directly) there is nothing to check.
 */
export function refuseAttemptPastDeadline(): void {
  let info: Context['info'];
  try {
    info = Context.current().info;
  } catch {
    return;
  }
  if (!info.isLocal || info.scheduleToCloseTimeoutMs <= 0) return;
  const deadline = info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs;
  if (Date.now() < deadline) return;
  throw ApplicationFailure.create({
    type: ErrorType.ActivityPastDeadline,
    nonRetryable: true,
    message:
      `${info.activityType} attempt ${info.attempt} would begin ${Date.now() - deadline} ms past its ` +
      `schedule-to-close deadline of ${info.scheduleToCloseTimeoutMs} ms`,
  });
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
