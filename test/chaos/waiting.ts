/** Waiting helpers of the chaos tests: poll for a condition, hold a promise's outcome without an unhandled rejection. */
import { BatonClientError, type ThreadHandle } from '../../client';
import type { ApprovalRow } from '../../db/approvals';

const POLL_INTERVAL_MS = 100;

/** Polls until `check` returns a value, or fails naming `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
}

export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Holds a promise's outcome without leaving a rejection unhandled while the test does other things. */
export function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/**
 * The pending approvals of `thread`'s tree once there are at least `count`. A run started with `client.run` records
 * its thread in its first workflow task, so until then the thread does not exist: that is waited out too.
 */
export function pendingApprovals(thread: ThreadHandle, count = 1, timeoutMs = 60_000): Promise<ApprovalRow[]> {
  return waitFor(`${count} pending approval(s) in ${thread.threadId}`, timeoutMs, async () => {
    try {
      const rows = await thread.approvals();
      return rows.length >= count ? rows : undefined;
    } catch (error) {
      if (error instanceof BatonClientError && /does not exist/.test(error.message)) return undefined;
      throw error;
    }
  });
}
