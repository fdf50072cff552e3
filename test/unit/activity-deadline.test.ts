import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { refuseAttemptPastDeadline } from '../../activities/failures';
import { ErrorType } from '../../common/errors';
import { isPastDeadline } from '../../workflows/failure-text';

/** Runs the check in an activity whose schedule-to-close deadline is `leftMs` from now (negative: passed). */
function checkWith(info: { isLocal: boolean; scheduleToCloseTimeoutMs: number; leftMs: number; attempt?: number }) {
  const { leftMs, ...rest } = info;
  const environment = new MockActivityEnvironment({
    activityType: 'runSteps',
    attempt: info.attempt ?? 2,
    ...rest,
    scheduledTimestampMs: Date.now() + leftMs - info.scheduleToCloseTimeoutMs,
  });
  return environment.run(() => Promise.resolve().then(refuseAttemptPastDeadline));
}

test('activity deadline: a local attempt past its schedule-to-close deadline is refused for good', async () => {
  await assert.rejects(checkWith({ isLocal: true, scheduleToCloseTimeoutMs: 1_000, leftMs: -2_000 }), (error) => {
    assert.ok(error instanceof ApplicationFailure);
    assert.equal(error.type, ErrorType.ActivityPastDeadline);
    assert.equal(error.nonRetryable, true);
    assert.match(
      error.message,
      /^runSteps attempt 2 would begin \d+ ms past its schedule-to-close deadline of 1000 ms$/,
    );
    return true;
  });
});

test('activity deadline: before the deadline, without one, or not local, the attempt runs', async () => {
  await checkWith({ isLocal: true, scheduleToCloseTimeoutMs: 3_000, leftMs: 1_000 });
  // The SDK passes 0 when a local activity has no schedule-to-close timeout.
  await checkWith({ isLocal: true, scheduleToCloseTimeoutMs: 0, leftMs: -5_000 });
  // A server-side activity's timeouts are the server's to keep.
  await checkWith({ isLocal: false, scheduleToCloseTimeoutMs: 1_000, leftMs: -2_000 });
  // Called outside an activity (as a unit test may), there is nothing to check.
  refuseAttemptPastDeadline();
});

test('activity deadline: the fork gives a task up for its schedule-to-close timeout or its refused retry, not else', () => {
  const timeout = (type: 'SCHEDULE_TO_CLOSE' | 'START_TO_CLOSE') =>
    new ActivityFailure(
      'activity timed out',
      'runSteps',
      '4',
      RetryState.TIMEOUT,
      undefined,
      new TimeoutFailure(undefined, undefined, type),
    );
  assert.equal(isPastDeadline(timeout('SCHEDULE_TO_CLOSE')), true);
  assert.equal(isPastDeadline(ApplicationFailure.create({ type: ErrorType.ActivityPastDeadline })), true);
  assert.equal(isPastDeadline(timeout('START_TO_CLOSE')), false);
  assert.equal(isPastDeadline(ApplicationFailure.create({ type: ErrorType.ModelRateLimited })), false);
  assert.equal(isPastDeadline(new Error('Activity.PastDeadline')), false);
});
