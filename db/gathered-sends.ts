/**
 * Sends that wait a moment for others to join them: the change-feed and run-feed announcements (NOTIFYs sent after
 * their writes commit) go out in batches, one statement for everything queued within a few milliseconds, instead of a
 * small transaction each. A notifying transaction costs Postgres a commit of its own (and notifying commits take
 * turns); sent per write it cost a store with one writer about a fifth of each write (bench/README.md, env-data).
 */

/** What a gathered send does with one batch. Best effort: it must not throw (a lost announcement is a wake-up). */
export type SendBatch<T> = (batch: T[]) => Promise<void>;

/**
 * Queues items and sends them in batches: the first item queued waits `gatherMs` for others; items queued while a
 * batch is sent go in the next one, sent at once. One send at a time, so batches go out in the order they were
 * queued. With `keyOf`, an item queued again before its batch is sent is sent once.
 */
export class GatheredSends<T> {
  private readonly queued = new Map<unknown, T>();
  private gathering: NodeJS.Timeout | undefined;
  /** The send loop under way, if one is. */
  private sending: Promise<void> | undefined;
  private unique = 0;

  constructor(
    private readonly options: {
      readonly gatherMs: number;
      readonly maxPerBatch: number;
      readonly send: SendBatch<T>;
      readonly keyOf?: (item: T) => string;
    },
  ) {}

  add(items: Iterable<T>): void {
    for (const item of items) this.queued.set(this.options.keyOf?.(item) ?? this.unique++, item);
    if (this.queued.size === 0 || this.gathering !== undefined || this.sending !== undefined) return;
    this.gathering = setTimeout(() => void this.startSending(), this.options.gatherMs);
  }

  /** Sends what is queued now, without waiting for the gathering; resolves once everything queued so far is sent. */
  async flush(): Promise<void> {
    while (this.queued.size > 0 || this.sending !== undefined) await (this.sending ?? this.startSending());
  }

  private startSending(): Promise<void> {
    clearTimeout(this.gathering);
    this.gathering = undefined;
    // Only with something to send: the loop then awaits before it ends, so `sending` is cleared after it is set.
    if (this.queued.size === 0) return Promise.resolve();
    this.sending = this.sendQueued();
    return this.sending;
  }

  private async sendQueued(): Promise<void> {
    try {
      while (this.queued.size > 0) {
        const batch: T[] = [];
        for (const [key, item] of this.queued) {
          if (batch.length === this.options.maxPerBatch) break;
          batch.push(item);
          this.queued.delete(key);
        }
        await this.options.send(batch).catch(() => undefined);
      }
    } finally {
      this.sending = undefined;
    }
  }
}
