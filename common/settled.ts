/**
 * Waits for every promise to settle, then throws the first rejection, if any; else the values, in order. An attempt
 * that fails this way leaves nothing it started still running (a write in flight, a tool), so its retry never races it.
 */
export async function allSettledOrThrow<T extends readonly unknown[]>(
  promises: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const outcomes = await Promise.allSettled(promises);
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}
