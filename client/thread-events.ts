/**
 * `thread.events()`: a root thread's run feed as an async iterator that outlives its connection. It watches the feed
 * (`BatonClient.startRunWatch`), and when the watch's connection is lost connects again and reads on after the last
 * event it delivered, so an iteration sees every stored event once, in order.
 */
import {
  StreamTracker,
  runEventsOf,
  type DeltaAnnouncement,
  type RunDeltaEvent,
  type RunEvent,
  type RunFeedRow,
} from '../common/run-events';
import { BatonClientError } from './errors';
import { FeedConnectionLostError, type FeedWatch } from './feed-watch';

/** How long the feed may stay unreachable before the iteration fails. */
const RECONNECT_FOR_MS = 120_000;
const FIRST_RECONNECT_DELAY_MS = 250;
const MAX_RECONNECT_DELAY_MS = 5_000;

/** A queued event; the last one of a feed row carries the row's number, which is taken with it. */
interface Queued {
  event: RunEvent;
  completes?: number;
}

export interface ThreadEventsOptions {
  /** Deliver only events after this feed number. @default 0 (from the start) */
  since?: number;
  /** Deliver streamed model output (`delta` and `stream_abandoned`). @default true */
  deltas?: boolean;
  /** Ends the iteration. */
  signal?: AbortSignal;
}

/** What the iterator needs of its client (`BatonClient`), named here so the two modules do not import each other. */
export interface RunWatchStarter {
  startRunWatch(
    rootThreadId: string,
    onRow: (row: RunFeedRow) => void | Promise<void>,
    since: number,
    onDelta?: (delta: DeltaAnnouncement) => void,
  ): Promise<FeedWatch>;
}

export class ThreadEvents implements AsyncIterableIterator<RunEvent> {
  private readonly queue: Queued[] = [];
  private waiter: { resolve: (result: IteratorResult<RunEvent>) => void; reject: (error: Error) => void } | undefined;
  private watch: FeedWatch | undefined;
  private running: Promise<void> | undefined;
  /** The highest feed number read (or `since`): a reconnected watch reads on after it. */
  private lastSeq: number;
  /** The highest feed number all of whose events were taken (or `since`). */
  private taken: number;
  private ended = false;
  private failure: Error | undefined;
  private readonly tracker = new StreamTracker();
  /**
   * Deltas of streams whose start was not read yet, in arrival order: a delta can arrive before the read that
   * delivers its stream's start, which committed before it was published. Held until that read (or, for a stream
   * that started before `since`, until a catch-up shows it will not come), so a stream's text follows its start.
   */
  private held: RunDeltaEvent[] = [];
  private readonly deltas: boolean;
  /** Settles once a watch runs (what had committed when it started is queued) or the iteration ended. */
  private connected!: Promise<void>;
  private markConnected!: () => void;

  constructor(
    private readonly client: RunWatchStarter,
    private readonly rootThreadId: string,
    options: ThreadEventsOptions,
  ) {
    this.lastSeq = options.since ?? 0;
    this.taken = this.lastSeq;
    this.deltas = options.deltas ?? true;
    this.renewConnected();
    const { signal } = options;
    if (signal) {
      if (signal.aborted) this.ended = true;
      else signal.addEventListener('abort', () => void this.return(), { once: true });
    }
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /**
   * The feed number up to which every stored event was taken from this iteration (or `since`): where a later
   * iteration goes on (`events({ since: position })`) without losing or repeating one. Events read but not taken, a
   * write's further events included, are not counted.
   */
  get position(): number {
    return this.taken;
  }

  next(): Promise<IteratorResult<RunEvent>> {
    this.running ??= this.follow();
    const value = this.take();
    if (value !== undefined) return Promise.resolve({ value, done: false });
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** Ends the iteration now: events not yet taken are dropped. */
  async return(): Promise<IteratorResult<RunEvent>> {
    this.queue.length = 0;
    this.held = [];
    await this.finish();
    return { value: undefined, done: true };
  }

  /** Reads what has committed by now; resolves once it is queued. Waits for the watch to connect first. */
  async catchUp(): Promise<void> {
    this.running ??= this.follow();
    await this.connected;
    await this.watch?.catchUp();
  }

  /** Stops watching; events already queued are still taken, then the iteration ends. */
  async finish(): Promise<void> {
    this.ended = true;
    this.markConnected();
    await this.watch?.stop();
    this.settleWaiter();
  }

  private async follow(): Promise<void> {
    if (this.ended) return this.markConnected();
    // The thread's row appears with its first turn, so a thread just started has none yet: only a thread under a
    // root is refused here.
    if (this.rootThreadId.includes('/')) {
      return this.fail(
        new BatonClientError(
          `'${this.rootThreadId}' is a thread under a root thread: watch the root, whose events include it`,
        ),
      );
    }
    let lostSince: number | undefined;
    let delay = FIRST_RECONNECT_DELAY_MS;
    while (!this.ended) {
      try {
        const watch = await this.client.startRunWatch(
          this.rootThreadId,
          (row) => this.onRow(row),
          this.lastSeq,
          this.deltas ? (delta) => this.onDelta(delta) : undefined,
        );
        this.watch = watch;
        this.markConnected();
        lostSince = undefined;
        delay = FIRST_RECONNECT_DELAY_MS;
        if (this.ended) await watch.stop();
        await watch.done;
        return;
      } catch (error) {
        if (this.ended) return;
        if (error instanceof BatonClientError && !(error instanceof FeedConnectionLostError)) {
          return this.fail(error);
        }
        // A catch-up asked for from now on waits for the next connection.
        if (this.watch !== undefined) {
          this.watch = undefined;
          this.renewConnected();
        }
        lostSince ??= Date.now();
        if (Date.now() - lostSince > RECONNECT_FOR_MS) return this.fail(error);
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
      }
    }
  }

  private onRow(row: RunFeedRow): void {
    this.lastSeq = Math.max(this.lastSeq, row.seq);
    const events = runEventsOf(row).flatMap((event) => {
      const out = this.tracker.onStored(event);
      return this.deltas ? out : out.filter((e) => e.type !== 'stream_abandoned');
    });
    const last = this.queue.at(-1);
    if (events.length > 0)
      this.push(...events.map((event, i) => (i === events.length - 1 ? { event, completes: row.seq } : { event })));
    // A row without events (a newer Baton's kind) is taken with what came before it.
    else if (last) last.completes = Math.max(last.completes ?? 0, row.seq);
    else this.taken = Math.max(this.taken, row.seq);
    for (const event of events) if (event.type === 'model_call_started') this.releaseHeld(event.stream);
  }

  private onDelta(delta: DeltaAnnouncement): void {
    // The announcement names its root for the watch's filter; the event, like every other, does not.
    const { rootThreadId: _root, ...fields } = delta;
    const event: RunDeltaEvent = { ...fields, type: 'delta' };
    if (this.tracker.knows(delta.stream)) {
      if (this.tracker.accepts(delta)) this.push({ event });
      return;
    }
    this.held.push(event);
    void this.catchUp().then(
      () => this.releaseHeld(),
      () => undefined,
    );
  }

  /** Passes on the held deltas of `stream` (its start was just queued), or all of them after a catch-up. */
  private releaseHeld(stream?: string): void {
    const release = this.held.filter((delta) => stream === undefined || delta.stream === stream);
    if (release.length === 0) return;
    this.held = this.held.filter((delta) => !release.includes(delta));
    // After a catch-up, a stream still not started began before `since`: it is followed from its deltas.
    if (stream === undefined) for (const delta of release) this.tracker.adopt(delta);
    this.push(...release.filter((delta) => this.tracker.accepts(delta)).map((event) => ({ event })));
  }

  private push(...entries: Queued[]): void {
    if (entries.length === 0) return;
    this.queue.push(...entries);
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      waiter.resolve({ value: this.take() as RunEvent, done: false });
    }
  }

  /** The next queued event, counting its row as taken when it is the row's last. */
  private take(): RunEvent | undefined {
    const entry = this.queue.shift();
    if (entry?.completes !== undefined) this.taken = Math.max(this.taken, entry.completes);
    return entry?.event;
  }

  private renewConnected(): void {
    this.connected = new Promise((resolve) => (this.markConnected = resolve));
  }

  private fail(error: unknown): void {
    this.failure = error instanceof Error ? error : new Error(String(error));
    this.ended = true;
    this.markConnected();
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter && this.queue.length === 0) waiter.reject(this.failure);
    else if (waiter) waiter.resolve({ value: this.take() as RunEvent, done: false });
  }

  private settleWaiter(): void {
    const waiter = this.waiter;
    if (!waiter) return;
    this.waiter = undefined;
    const value = this.take();
    waiter.resolve(value === undefined ? { value: undefined, done: true } : { value, done: false });
  }
}
