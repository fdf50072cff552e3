/** A Baton-level error on the client side (invalid arguments, a thread that already exists). */
export class BatonClientError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Turns an error from the client or Temporal into the one line a CLI user needs. */
export function describeError(error: unknown): string {
  // Temporal wraps the real reason in causes: update failed ← child workflow failed ← activity failed ← the reason.
  // Baton's own errors already say what happened, so the walk stops there.
  const chain: Error[] = [];
  let current: unknown = error;
  while (current instanceof Error && chain.length < 10) {
    chain.push(current);
    if (current instanceof BatonClientError) break;
    current = current.cause;
  }
  const root = chain.at(-1);
  if (!root) return String(error);
  const type = (root as { type?: unknown }).type;
  return typeof type === 'string' && type !== '' ? `${root.message} [${type}]` : root.message;
}
