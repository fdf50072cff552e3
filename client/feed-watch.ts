/**
 * Watching a log in Postgres that writers announce on with NOTIFY: the env-data log (`thread.watchEnv`) and the run
 * feed (`thread.events`). One class for both, since both are read the same way: numbered rows, read in order under
 * the root's lock (migrations 008 and 014), so a read never skips a row that commits late.
 */
import type pg from 'pg';
import { BatonClientError } from './errors';

/** A watch ended because its database connection was lost (the feed itself may be fine: connecting again helps). */
export class FeedConnectionLostError extends BatonClientError {
  constructor(message: string) {
    super(message);
    // Users see the client's error, as from every other watch failure; the class is for `thread.events()` to tell.
    this.name = 'BatonClientError';
  }
}

/** A running watch (`thread.watchEnv`; `thread.events` iterates one). */
export interface FeedWatch {
  /**
   * Resolves once `stop()` (or `BatonClient.close()`) has ended the watch; rejects with what ended it otherwise:
   * a lost or failed database connection, a failed read, or a listener that threw. The connection is closed by then.
   */
  readonly done: Promise<void>;
  /**
   * Delivers no further event, waits for a read in flight, UNLISTENs and closes the watch's connection. A listener
   * call already running is not awaited, so a listener may call `stop()` itself. Calling it again is harmless.
   */
  stop(): Promise<void>;
  /** Reads what has committed by now and delivers it; resolves once delivered. */
  catchUp(): Promise<void>;
}

/** What a watch reads and listens to. */
export interface FeedSource<Row extends { seq: number }> {
  /** Named in errors: `the <name> lost its database connection`. */
  name: string;
  rootThreadId: string;
  /** Channels whose announcements (`{ rootThreadId, seq? }`) say rows may have committed. */
  channels: readonly string[];
  /**
   * Rows after `since`, oldest first, at most `limit`: every row up to the last one returned, none that commits later
   * with a lower number (the logs are read under the root's lock, migrations 008 and 014).
   */
  read(since: number, limit: number): Promise<Row[]>;
  /** Called with each row in order, once; the next waits until it settles. */
  deliver(row: Row): void | Promise<void>;
  /** Notifications of other channels the watch also LISTENs to, passed on as they come. */
  extra?: { channels: readonly string[]; receive(channel: string, payload: string | undefined): void };
}

/** Rows read per query while catching up. */
const PAGE = 500;
/** How often a watch reads without an announcement (one lost to a writer that died after its commit). */
const REREAD_MS = 5_000;

/** What a writer announces; the row itself is read from the log. */
interface Announcement {
  rootThreadId: string;
  seq?: number;
}

function parseAnnouncement(payload: string | undefined): Announcement | undefined {
  try {
    const { rootThreadId, seq } = JSON.parse(payload ?? '') as Partial<Record<keyof Announcement, unknown>>;
    if (typeof rootThreadId !== 'string') return undefined;
    return typeof seq === 'number' ? { rootThreadId, seq } : { rootThreadId };
  } catch {
    return undefined;
  }
}

/**
 * One watch: LISTENs, and after each announcement for its root reads the log from the last row it delivered, one
 * read at a time. A read misses no row below the last one it returns (`FeedSource.read`), so every row up to the
 * highest number delivered has been delivered: that number alone tells a row (or an announcement) already seen, and
 * a watch holds the same few fields however long it runs. Writers announce after their commit, so a writer that dies
 * in between announces nothing: the watch also reads every `REREAD_MS`, which delivers such a row.
 */
export class FeedWatcher<Row extends { seq: number }> implements FeedWatch {
  readonly done: Promise<void>;
  private settle!: (failure?: Error) => void;
  private stopped = false;
  private closing: Promise<void> | undefined;
  /** The highest number delivered (or `since`): every row up to it was delivered, or lies at or below `since`. */
  private lastSeq: number;
  /** Whether another read is wanted once the current one is done. */
  private pending = false;
  private draining: Promise<void> | undefined;
  private reading: Promise<unknown> | undefined;
  private reread: ReturnType<typeof setInterval> | undefined;
  private readonly channels: readonly string[];

  constructor(
    private readonly listener: pg.Client,
    private readonly source: FeedSource<Row>,
    since: number,
    private readonly onClosed: () => void,
  ) {
    this.lastSeq = since;
    this.channels = [...source.channels, ...(source.extra?.channels ?? [])];
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (failure) => (failure ? reject(failure) : resolve());
    });
    // Whoever never awaits `done` must not get an unhandled rejection; awaiting it still sees the failure.
    this.done.catch(() => undefined);
  }

  /** Connects, LISTENs and delivers what is logged already. @throws what failed, after closing the connection. */
  async start(): Promise<void> {
    this.listener.on('notification', this.onNotification);
    this.listener.on('error', (error) => void this.shutdown(error));
    this.listener.on('end', () => {
      if (!this.stopped) {
        void this.shutdown(new FeedConnectionLostError(`the ${this.source.name} lost its database connection`));
      }
    });
    try {
      await this.listener.connect();
      for (const channel of this.channels)
        await this.listener.query(`LISTEN ${this.listener.escapeIdentifier(channel)}`);
    } catch (error) {
      await this.shutdown(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    // Rows logged before the LISTEN took effect were announced to nobody: read them now.
    await this.schedule();
    if (!this.stopped) {
      this.reread = setInterval(() => void this.schedule(), REREAD_MS);
      // A watch alone does not keep the process running; its connection decides that.
      this.reread.unref();
    }
    await (this.closing ?? Promise.resolve());
    // A watch that already failed reports why; `done` carries the same error.
    if (this.stopped) await this.done;
  }

  stop(): Promise<void> {
    return this.shutdown(undefined);
  }

  catchUp(): Promise<void> {
    return this.stopped ? Promise.resolve() : this.schedule();
  }

  private readonly onNotification = (message: pg.Notification): void => {
    if (this.stopped) return;
    if (!this.source.channels.includes(message.channel)) {
      this.source.extra?.receive(message.channel, message.payload);
      return;
    }
    const announced = parseAnnouncement(message.payload);
    if (announced && announced.rootThreadId !== this.source.rootThreadId) return;
    // A row at or below the last delivered one was delivered with it. Without a number (or a readable announcement),
    // read on from the last row delivered: nothing is lost either way.
    if (announced?.seq !== undefined && announced.seq <= this.lastSeq) return;
    void this.schedule();
  };

  /**
   * Asks for a read from after the last row delivered; merges with a pending one. Resolves when no read is pending
   * any more.
   */
  private schedule(): Promise<void> {
    this.pending = true;
    this.draining ??= this.drain();
    return this.draining;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending && !this.stopped) {
        this.pending = false;
        await this.deliverAfter(this.lastSeq);
      }
    } catch (error) {
      void this.shutdown(error instanceof Error ? error : new Error(String(error)));
    } finally {
      this.draining = undefined;
    }
  }

  private async deliverAfter(from: number): Promise<void> {
    let after = from;
    for (;;) {
      // Notifications of the other channels (streamed text) sent before these rows committed may still be on their
      // way: Postgres hands a listener its notifications before answering its next query, so one query on the
      // listening connection passes them on before the rows are.
      const read = this.source.read(after, PAGE).then(async (rows) => {
        if (rows.length > 0 && this.source.extra) await this.listener.query('SELECT 1');
        return rows;
      });
      this.reading = read;
      const rows = await read.finally(() => (this.reading = undefined));
      for (const row of rows) {
        if (this.stopped) return;
        if (row.seq <= this.lastSeq) continue;
        this.lastSeq = row.seq;
        await this.source.deliver(row);
      }
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.seq;
    }
  }

  private shutdown(failure: Error | undefined): Promise<void> {
    this.closing ??= (async () => {
      this.stopped = true;
      clearInterval(this.reread);
      await this.reading?.catch(() => undefined);
      // After a failure the connection may be gone; UNLISTEN matters only to a connection that goes on.
      if (!failure) await this.listener.query('UNLISTEN *').catch(() => undefined);
      await this.listener.end().catch(() => undefined);
      this.onClosed();
      this.settle(failure);
    })();
    return this.closing;
  }
}
