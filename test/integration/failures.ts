/** How the integration tests read a failure that crossed Temporal: the `ApplicationFailure` somewhere in its causes. */
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';

/** An error and its causes, outermost first. */
export function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let at = error; at !== undefined && chain.length < 10; at = (at as { cause?: unknown }).cause) chain.push(at);
  return chain;
}

/** That `sending` fails with an `ApplicationFailure` of `type` somewhere in its causes, its message matching `message`. */
export async function rejectsWith(sending: Promise<unknown>, type: string, message: RegExp, what = ''): Promise<void> {
  await assert.rejects(sending, (error: Error) => {
    const failure = causes(error).find((cause) => cause instanceof ApplicationFailure);
    assert.ok(failure instanceof ApplicationFailure, `${what}an application failure under ${String(error)}`);
    assert.equal(failure.type, type, what);
    assert.match(failure.message, message);
    return true;
  });
}
