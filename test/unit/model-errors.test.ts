import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { classifyModelError, retryAfterMs } from '../../activities/model-errors';

function apiError(status: number, headers: Record<string, string> = {}, code?: string): APIError {
  return APIError.generate(status, { error: { message: `status ${status}`, code } }, undefined, new Headers(headers));
}

const cases: { status: number; type: string; nonRetryable: boolean }[] = [
  { status: 408, type: 'Model.Timeout', nonRetryable: false },
  { status: 409, type: 'Model.Conflict', nonRetryable: false },
  { status: 429, type: 'Model.RateLimited', nonRetryable: false },
  { status: 500, type: 'Model.Unavailable', nonRetryable: false },
  { status: 503, type: 'Model.Unavailable', nonRetryable: false },
  { status: 400, type: 'Model.BadRequest', nonRetryable: true },
  { status: 401, type: 'Model.AuthFailed', nonRetryable: true },
  { status: 403, type: 'Model.AuthFailed', nonRetryable: true },
  { status: 404, type: 'Model.NotFound', nonRetryable: true },
  { status: 422, type: 'Model.Unprocessable', nonRetryable: true },
];

for (const { status, type, nonRetryable } of cases) {
  test(`model errors: HTTP ${status} becomes ${type}${nonRetryable ? ', non-retryable' : ', retryable'}`, () => {
    const failure = classifyModelError(apiError(status));
    assert.ok(failure instanceof ApplicationFailure);
    assert.equal(failure.type, type);
    assert.equal(failure.nonRetryable, nonRetryable);
    assert.match(failure.message, new RegExp(`model endpoint answered ${status}`));
  });
}

test('model errors: the failure names the provider and the model sent, whichever endpoint answered', () => {
  for (const provider of ['default', 'hosted']) {
    const failure = classifyModelError(apiError(401), { provider, model: 'big-model-1' });
    assert.ok(failure instanceof ApplicationFailure);
    assert.equal(failure.type, 'Model.AuthFailed');
    assert.equal(
      failure.message,
      `model endpoint answered 401 (provider '${provider}', model 'big-model-1'): 401 status 401`,
    );
  }
});

test('model errors: retry-after sets the next retry delay', () => {
  const failure = classifyModelError(apiError(429, { 'retry-after': '7' }));
  assert.ok(failure instanceof ApplicationFailure);
  assert.equal(failure.nextRetryDelay, 7000);
});

test('model errors: an exhausted script is its own non-retryable type', () => {
  const failure = classifyModelError(apiError(400, {}, 'script_exhausted'));
  assert.ok(failure instanceof ApplicationFailure);
  assert.equal(failure.type, 'Model.ScriptExhausted');
  assert.equal(failure.nonRetryable, true);
});

test('model errors: a connection error is retryable; an abort and foreign errors pass through', () => {
  const connection = classifyModelError(new APIConnectionError({ message: 'ECONNREFUSED' }));
  assert.ok(connection instanceof ApplicationFailure);
  assert.equal(connection.type, 'Model.Unavailable');
  assert.equal(connection.nonRetryable, false);
  const abort = new APIUserAbortError();
  assert.equal(classifyModelError(abort), abort);
  const other = new TypeError('bug');
  assert.equal(classifyModelError(other), other);
});

test('retry-after: seconds, milliseconds and HTTP dates', () => {
  assert.equal(retryAfterMs(new Headers({ 'retry-after': '2' })), 2000);
  assert.equal(retryAfterMs(new Headers({ 'retry-after-ms': '150' })), 150);
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }), now), 5000);
  assert.equal(retryAfterMs(new Headers({ 'retry-after': 'soon' })), undefined);
  assert.equal(retryAfterMs(undefined), undefined);
});
