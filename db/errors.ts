/** Errors raised by the repositories. Activities turn them into typed `ApplicationFailure`s. */
export class BatonDbError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A write carried an epoch older than the thread's: the turn that issued it was reclaimed. */
export class StaleEpochError extends BatonDbError {
  constructor(
    readonly threadId: string,
    readonly writeEpoch: number,
    readonly currentEpoch: number,
  ) {
    super(`thread '${threadId}' is at epoch ${currentEpoch}; a write issued under epoch ${writeEpoch} was refused`);
  }
}

/** The thread does not exist, or not where the write says it is (another root, a root that does not exist). */
export class ThreadNotFoundError extends BatonDbError {
  constructor(
    readonly threadId: string,
    message = `thread '${threadId}' does not exist`,
  ) {
    super(message);
  }
}
