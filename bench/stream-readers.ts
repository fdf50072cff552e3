/**
 * The readers of bench/stream.bench.ts, in a process of their own (forked by the bench), as a watcher runs in
 * production (`baton watch`, the explorer, a program of your own): beside the worker, not on its event loop. One
 * `BatonClient` here iterates `thread.events()` once per thread it is told to watch, and reports over IPC:
 *
 * - parent → here: `{ type: 'watch', threadId }`, `{ type: 'finish', threadId }`, `{ type: 'close' }`
 * - here → parent: `{ type: 'ready' }`, `{ type: 'ended', threadId, at }` when the root's `turn_ended` arrives
 *   (`at`: `performance.timeOrigin + performance.now()`, comparable across processes), and after `finish`
 *   `{ type: 'finished', threadId, ids, deltas, lagsMs, error? }` (ids of the stored events in delivery order; per
 *   event the ms from its `at` to its delivery).
 *
 * Arguments: the Temporal address, the task queue, the database URL.
 */
import { performance } from 'node:perf_hooks';
import { connect } from '../client';
import type { ThreadEvents } from '../client/thread-events';
import { tallyEvent, type Tally } from './stream-tally';

export type ToReaders = { type: 'watch'; threadId: string } | { type: 'finish'; threadId: string } | { type: 'close' };

export type FromReaders =
  | { type: 'ready' }
  | { type: 'ended'; threadId: string; at: number }
  | {
      type: 'finished';
      threadId: string;
      ids: string[];
      deltas: number;
      lagsMs: number[];
      error?: string;
    };

interface Watching extends Tally {
  events: ThreadEvents;
  done: Promise<void>;
  error?: string;
}

const tell = (message: FromReaders): void => {
  process.send?.(message);
};

async function main(): Promise<void> {
  const [address, taskQueue, databaseUrl] = process.argv.slice(2);
  if (!address || !taskQueue || !databaseUrl) throw new Error('usage: stream-readers <address> <task-queue> <db-url>');
  const client = await connect({ address, taskQueue, databaseUrl });
  const watching = new Map<string, Watching>();

  const watch = (threadId: string) => {
    const events = client.thread(threadId).events({ since: 0 });
    const entry: Watching = { events, done: Promise.resolve(), ids: [], deltas: 0, lagsMs: [] };
    entry.done = (async () => {
      for await (const event of events) {
        if (tallyEvent(entry, event, threadId)) {
          tell({ type: 'ended', threadId, at: performance.timeOrigin + performance.now() });
        }
      }
    })().catch((error: unknown) => {
      entry.error = error instanceof Error ? error.message : String(error);
    });
    watching.set(threadId, entry);
  };

  const finish = async (threadId: string) => {
    const entry = watching.get(threadId);
    if (!entry) return;
    watching.delete(threadId);
    // Whatever committed after the turn's end (nothing, normally) is read too, then the iteration ends.
    await entry.events.catchUp();
    await entry.events.finish();
    await entry.done;
    tell({
      type: 'finished',
      threadId,
      ids: entry.ids,
      deltas: entry.deltas,
      lagsMs: entry.lagsMs,
      ...(entry.error === undefined ? {} : { error: entry.error }),
    });
  };

  process.on('message', (message: ToReaders) => {
    if (message.type === 'watch') watch(message.threadId);
    else if (message.type === 'finish') void finish(message.threadId);
    else {
      void (async () => {
        for (const entry of watching.values()) await entry.events.finish();
        await client.close();
        process.disconnect();
      })();
    }
  });
  tell({ type: 'ready' });
}

main().catch((error: unknown) => {
  process.stderr.write(`stream readers: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
