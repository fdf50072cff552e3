/**
 * `FeedWatcher` (client/feed-watch.ts), the watch under `thread.events()` and `thread.watchEnv()`, over a listener
 * and a log the test drives: a long watch delivers every row once, in order, whatever the announcements say, and
 * holds no more state after a hundred thousand rows than after ten. (On the real stack: test/integration/run-events
 * and env-store tests.)
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import type pg from 'pg';
import { FeedWatcher, type FeedSource } from '../../client/feed-watch';

/** The part of `pg.Client` a watch uses: connect, LISTEN/UNLISTEN, its notifications, end. */
class DrivenListener extends EventEmitter {
  connect(): Promise<void> {
    return Promise.resolve();
  }
  query(): Promise<{ rows: never[] }> {
    return Promise.resolve({ rows: [] });
  }
  escapeIdentifier(name: string): string {
    return `"${name}"`;
  }
  end(): Promise<void> {
    return Promise.resolve();
  }
  announce(payload: unknown): void {
    this.emit('notification', { channel: 'feed', payload: JSON.stringify(payload), processId: 1 });
  }
}

/** A log whose numbers are shared with other roots (gaps between a root's rows), read as `run_feed_after` reads. */
function drivenLog() {
  const rows: { seq: number }[] = [];
  let next = 0;
  let reads = 0;
  return {
    rows,
    reads: () => reads,
    append(count: number): number[] {
      const added: number[] = [];
      for (let i = 0; i < count; i++) {
        next += 1 + (next % 3); // other roots took the numbers between
        rows.push({ seq: next });
        added.push(next);
      }
      return added;
    },
    read(since: number, limit: number): Promise<{ seq: number }[]> {
      reads += 1;
      // A binary search: the log is long and every read starts near its end.
      let low = 0;
      let high = rows.length;
      while (low < high) {
        const mid = (low + high) >> 1;
        if ((rows[mid]?.seq ?? 0) <= since) low = mid + 1;
        else high = mid;
      }
      return Promise.resolve(rows.slice(low, low + limit));
    },
  };
}

/** The largest collection (Set, Map or array) any field of `object` holds. */
function largestField(object: object): number {
  let largest = 0;
  for (const value of Object.values(object)) {
    if (value instanceof Set || value instanceof Map) largest = Math.max(largest, value.size);
    else if (Array.isArray(value)) largest = Math.max(largest, value.length);
  }
  return largest;
}

test('FeedWatcher: a long watch delivers every row once, in order, and its state stays the same size', async () => {
  const listener = new DrivenListener();
  const log = drivenLog();
  const delivered: number[] = [];
  const source: FeedSource<{ seq: number }> = {
    name: 'test feed',
    rootThreadId: 'root',
    channels: ['feed'],
    read: (since, limit) => log.read(since, limit),
    deliver: (row) => void delivered.push(row.seq),
  };
  log.append(3); // logged before the watch started: read at its start
  const watch = new FeedWatcher(listener as unknown as pg.Client, source, 0, () => undefined);
  await watch.start();
  assert.deepEqual(delivered, [1, 3, 4]);
  const sizeAfterStart = largestField(watch);

  // 100,000 rows in writes of 1 to 7, each announced with its number; now and then an announcement comes twice, late
  // (below what was delivered), without a number, for another root, or not at all (a writer that died).
  for (let write = 0; delivered.length < 100_000; write++) {
    const added = log.append(1 + (write % 7));
    const last = added.at(-1) ?? 0;
    if (write % 11 !== 5) listener.announce({ rootThreadId: 'root', seq: last });
    if (write % 5 === 0) listener.announce({ rootThreadId: 'root', seq: added[0] });
    if (write % 13 === 0) listener.announce({ rootThreadId: 'root', seq: Math.max(1, last - 40) });
    if (write % 17 === 0) listener.announce({ rootThreadId: 'root' });
    if (write % 19 === 0) listener.announce({ rootThreadId: 'other', seq: last + 1 });
    if (write % 23 === 0) await watch.catchUp();
    if (write % 97 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await watch.catchUp();
  assert.deepEqual(
    delivered,
    log.rows.map((row) => row.seq),
    'every row once, in order, none missed',
  );
  assert.ok(
    largestField(watch) <= Math.max(sizeAfterStart, 2),
    `no field of the watch grows with the rows it delivered (largest holds ${largestField(watch)})`,
  );

  // An announcement of a row already delivered reads nothing; one of a row not yet read does.
  const reads = log.reads();
  listener.announce({ rootThreadId: 'root', seq: delivered.at(-1) });
  listener.announce({ rootThreadId: 'root', seq: 1 });
  await watch.catchUp();
  assert.equal(log.reads(), reads + 1, 'only the catch-up read');
  await watch.stop();
  await watch.done;
});
