/**
 * The env store's one-call writes (`env_replace`), sent in batches when writers of one store overlap: a write that
 * arrives while the store's previous call is in flight waits for it, and every write that queued meanwhile goes in the
 * next call together (`env_replace_many`, migration 018: one transaction, one commit). A write alone is sent at once,
 * as before, so a store with one writer at a time pays no wait. Each write gets the answer it would have got alone.
 */
import type { Pool } from 'pg';
import { checkOut } from './transaction';

/** One write of the one-call path: `env_replace`'s arguments. */
export interface OneCallWrite {
  threadId: string;
  rootThreadId: string;
  epoch: number;
  key: string;
  operationId: string;
  action: 'stored' | 'updated';
  json: string;
  agent: string;
  shortDescription: string | null;
  type: string | null;
  tags: readonly string[];
  expectedVersion: number | null;
}

/** What `env_replace` answers for one write; `undefined` when the call failed and the caller's full path answers. */
export interface OneCallOutcome {
  outcome: 'written' | 'conflict' | 'general';
  seq: number | null;
  version: number | null;
  /** For a conflict, the entry's value at `version` (migration 019); else null. */
  currentValue: unknown;
}

/** `env_replace` (migrations 008, 009, 016 and 019): one write in one round trip. */
const REPLACE = {
  name: 'baton-env-replace',
  text: `SELECT outcome, seq::float8 AS seq, version, current_value AS "currentValue"
           FROM env_replace($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
};
/** `env_replace_many` (migrations 018 and 019): several writes in one round trip, one transaction. */
const REPLACE_MANY = {
  name: 'baton-env-replace-many',
  text: `SELECT item, outcome, seq::float8 AS seq, version, current_value AS "currentValue"
           FROM env_replace_many($1, $2, $3, $4, $5, $6, $7::jsonb[], $8, $9, $10, $11, $12::jsonb[], $13)`,
};
/** The constraint that makes an operation id write once per root. */
const OPERATION_ID_CONSTRAINT = 'env_events_root_thread_id_operation_id_key';
/** What `env_replace` of migration 008 raised when the thread's epoch moved on between its read and its lock. */
const FENCE_MOVED = 'BTN01';
/** Most writes sent in one call. */
const MAX_WRITES_PER_BATCH = 64;
/**
 * Most bytes of values sent in one call, unless its first write alone is larger: a store's values may reach 16 MiB
 * each (`BATON_ENV_MAX_VALUE_BYTES`), and a call must stay far below what one Postgres message may hold (1 GiB).
 */
const MAX_BYTES_PER_BATCH = 4 * 1024 * 1024;

interface Queued {
  write: OneCallWrite;
  /** The value's size in bytes of UTF-8 (its `value_size`). */
  bytes: number;
  resolve: (outcome: OneCallOutcome | undefined) => void;
  reject: (error: unknown) => void;
}

/**
 * How long a call may be in flight before the writes queued behind it go in a call of their own. A call normally
 * comes back in a few milliseconds; one that waits for a lock (a row another session holds, an epoch change) must not
 * hold up every other writer of the process.
 */
const STALLED_CALL_MS = 100;

export class EnvWriteBatches {
  private readonly queued: Queued[] = [];
  /**
   * Calls being sent, each by a loop of its own. One at a time while calls come back: a second beside it would split
   * the writers queued into two smaller batches, and measured no faster. Another starts only when one stalls.
   */
  private senders = 0;
  /** Calls sent so far. */
  private callsSent = 0;
  private stallCheck: NodeJS.Timeout | undefined;
  /**
   * Writes answered by calls of several (how often writers overlapped), and writes run alone again after their call
   * failed as a whole. For tests and benchmarks.
   */
  readonly counts = { batched: 0, rerunAlone: 0 };

  constructor(private readonly pool: Pool) {}

  /**
   * Runs `write` in one round trip, alone or with the writes queued beside it.
   * @returns what `env_replace` answered, or `undefined` when it could not answer (a repeated operation id rolled
   * back, the fence moved): the caller's full transaction answers then
   */
  submit(write: OneCallWrite): Promise<OneCallOutcome | undefined> {
    return new Promise((resolve, reject) => {
      this.queued.push({ write, bytes: Buffer.byteLength(write.json, 'utf8'), resolve, reject });
      if (this.senders === 0) void this.sendQueued();
      else this.checkForStall();
    });
  }

  /** Once `STALLED_CALL_MS` passed, sends what is still queued beside a call that has not come back. */
  private checkForStall(): void {
    if (this.stallCheck !== undefined) return;
    const newestCall = this.callsSent;
    this.stallCheck = setTimeout(() => {
      this.stallCheck = undefined;
      if (this.queued.length === 0) return;
      // No call was sent since: the newest one is still in flight, that long.
      if (this.senders > 0 && this.callsSent !== newestCall) this.checkForStall();
      else void this.sendQueued();
    }, STALLED_CALL_MS);
  }

  private async sendQueued(): Promise<void> {
    this.senders += 1;
    try {
      while (this.queued.length > 0) {
        const batch = this.takeBatch();
        this.callsSent += 1;
        if (batch.length === 1) {
          // A write alone: its writer is answered and may write again, but there are no others to wait for, and a
          // store with one writer at a time pays nothing for the batching.
          await this.sendOne(batch[0] as Queued);
          continue;
        }
        await this.sendMany(batch);
        // The writers just answered may write again at once (an agent's next step, a loop): let them all queue
        // before the next call is chosen, or the first of them would go alone and the others wait behind it.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      this.senders -= 1;
    }
  }

  /** The queued writes of the next call, oldest first, as many as fit (`MAX_WRITES_PER_BATCH`, `MAX_BYTES_PER_BATCH`). */
  private takeBatch(): Queued[] {
    let count = 0;
    let bytes = 0;
    for (const queued of this.queued) {
      if (count === MAX_WRITES_PER_BATCH || (count > 0 && bytes + queued.bytes > MAX_BYTES_PER_BATCH)) break;
      count += 1;
      bytes += queued.bytes;
    }
    return this.queued.splice(0, count);
  }

  private async sendOne({ write, bytes, resolve, reject }: Queued): Promise<void> {
    try {
      resolve(await this.replaceOne(write, bytes));
    } catch (error) {
      reject(error);
    }
  }

  private async replaceOne(write: OneCallWrite, bytes: number): Promise<OneCallOutcome | undefined> {
    const client = await checkOut(this.pool);
    try {
      const { rows } = await client.query<OneCallOutcome>({
        ...REPLACE,
        values: [
          write.threadId,
          write.rootThreadId,
          write.epoch,
          write.key,
          write.operationId,
          write.action,
          write.json,
          bytes,
          write.agent,
          write.shortDescription,
          write.type,
          write.tags,
          write.expectedVersion,
        ],
      });
      return rows[0];
    } catch (error) {
      // The operation ran before, or the epoch moved during the write: rolled back, and the full transaction
      // returns the first outcome or refuses the stale write.
      const { constraint, code } = error as { constraint?: unknown; code?: unknown };
      if (constraint === OPERATION_ID_CONSTRAINT || code === FENCE_MOVED) return undefined;
      throw error;
    } finally {
      client.release();
    }
  }

  private async sendMany(batch: readonly Queued[]): Promise<void> {
    const writes = batch.map((queued) => queued.write);
    let rows: (OneCallOutcome & { item: number })[];
    try {
      ({ rows } = await this.pool.query<OneCallOutcome & { item: number }>({
        ...REPLACE_MANY,
        values: [
          writes.map((w) => w.threadId),
          writes.map((w) => w.rootThreadId),
          writes.map((w) => w.epoch),
          writes.map((w) => w.key),
          writes.map((w) => w.operationId),
          writes.map((w) => w.action),
          writes.map((w) => w.json),
          batch.map((queued) => queued.bytes),
          writes.map((w) => w.agent),
          writes.map((w) => w.shortDescription),
          writes.map((w) => w.type),
          writes.map((w) => JSON.stringify(w.tags)),
          writes.map((w) => w.expectedVersion),
        ],
      }));
    } catch {
      // One write of the batch failed the whole call (a repeated operation id, a deadlock with another process):
      // nothing of it was written, and each write runs alone, answering as it would have alone.
      this.counts.rerunAlone += batch.length;
      await Promise.all(batch.map((queued) => this.sendOne(queued)));
      return;
    }
    this.counts.batched += batch.length;
    const byItem = new Map(rows.map((row) => [row.item, row]));
    // Answered in the order the writes took effect (by their events' numbers, refusals last), so the store announces
    // them in that order, as writes that ran one after another would be.
    const order = batch
      .map((queued, i) => ({ queued, row: byItem.get(i + 1) }))
      .sort((x, y) => (x.row?.seq ?? Infinity) - (y.row?.seq ?? Infinity));
    for (const { queued, row } of order) {
      queued.resolve(
        row === undefined
          ? undefined
          : { outcome: row.outcome, seq: row.seq, version: row.version, currentValue: row.currentValue },
      );
    }
  }
}
