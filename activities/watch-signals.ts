/**
 * Telling watchers that a change committed, without a signal per write and without losing one (migration 022). A
 * writer claims the signal of each matching watcher that has none claimed since its last look began and sends it,
 * best effort; the others need none. The sweep every worker runs (`worker/watch-sweep.ts`) sends the claims left
 * unsent and signals the watchers of changes no writer told them about. Used by the activities that write env data
 * and by the client SDK (a person accepting a proposal); imports nothing that needs an activity's context.
 */
import type { Client } from '@temporalio/client';
import type { Pool } from 'pg';
import { truncateBytes } from '../common/text';
import { watcherSignalWithStartOptions } from '../common/thread-start';
import { activeTraceparent } from '../common/traceparent';
import { keyMatches, type EnvChangedSignalInput } from '../common/watchers';
import {
  claimWatchSignals,
  markWatchSignalSent,
  recordWatchSweep,
  sweepEventsAfter,
  takeWatchersToSweep,
  watchersToWake,
  type ClaimedSignal,
} from '../db/watchers';

/**
 * How often each worker sweeps for changes no signal told their watcher about, and how old such a change (or a
 * claimed signal never sent) must be before the sweep sends it (`BATON_WATCH_SWEEP_SECONDS`).
 */
export const DEFAULT_WATCH_SWEEP_SECONDS = 10;

/** Fault injection for tests (`BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL`, `failSignalForKey`). */
export interface WatchFaults {
  /** A write of this key kills the worker after its commit, before its watchers are signalled. */
  killBeforeSignalForKey?: string;
  /** A write of this key has its watchers' signals refused, as Temporal refuses a signal past a run's limit. */
  failSignalForKey?: string;
}

/** What sends watchers' signals: the pool holding their claims, a Temporal client, and where their roots run. */
export interface WatchSignalling {
  pool: Pool;
  temporal: Client;
  /** The task queue of the roots concerned: a watcher's workflow that does not run starts there. */
  taskQueue: string;
  /** Seconds after which a claimed signal never sent is sent again (the sweep's interval). */
  graceSeconds: number;
  faults?: WatchFaults;
  /** Where a signal that could not be sent is reported. */
  warn: (message: string, attributes: Record<string, unknown>) => void;
}

/**
 * Wakes the watchers of a root after a change to `keys` (any key: `undefined`) committed, best effort: claims the
 * signal of each matching watcher that has none claimed since its last look began, and sends those, naming the span
 * active here (the writer's, when it traces) for the wake-up to link to. Never throws (see {@link WatchTrigger}).
 */
export async function wakeWatchers(
  signalling: WatchSignalling,
  rootThreadId: string,
  keys?: readonly string[],
): Promise<void> {
  const { faults = {} } = signalling;
  const traceparent = activeTraceparent();
  const writer = traceparent === undefined ? undefined : { traceparent };
  try {
    const woken = await watchersToWake(signalling.pool, rootThreadId, keys);
    if (woken.length === 0) return;
    if (faults.killBeforeSignalForKey !== undefined && keys?.includes(faults.killBeforeSignalForKey)) {
      signalling.warn('fault injection: killing this worker between an env write and its watchers signal', {
        keys,
      });
      process.kill(process.pid, 'SIGKILL');
    }
    const claimed = await claimWatchSignals(
      signalling.pool,
      rootThreadId,
      woken.map((watcher) => watcher.name),
      signalling.taskQueue,
      signalling.graceSeconds,
    );
    const refused = faults.failSignalForKey !== undefined && keys?.includes(faults.failSignalForKey) === true;
    await Promise.all(claimed.map((signal) => sendClaimedSignal(signalling, signal, refused, writer)));
  } catch (error) {
    signalling.warn('the watchers of a committed change were not told of it; the sweep will tell them', {
      rootThreadId,
      keys,
      error: errorText(error),
    });
  }
}

/**
 * Sends a claimed signal and marks it sent; reports a failure (the claim stays unsent: the sweep sends it, naming no
 * writer). Returns whether Temporal accepted it.
 */
async function sendClaimedSignal(
  signalling: WatchSignalling,
  signal: ClaimedSignal,
  refused = false,
  writer?: EnvChangedSignalInput,
): Promise<boolean> {
  try {
    if (refused) throw new Error('fault injection: the signal was refused');
    await signalling.temporal.workflow.signalWithStart(
      'envWatcherWorkflow',
      watcherSignalWithStartOptions(signal, signalling.taskQueue, writer),
    );
  } catch (error) {
    signalling.warn('a watcher was not signalled; the sweep will signal it', {
      rootThreadId: signal.rootThreadId,
      watcher: signal.name,
      error: errorText(error),
    });
    return false;
  }
  // Sent: a lost mark only makes the sweep send it again, which is harmless.
  await markWatchSignalSent(signalling.pool, signal).catch(() => undefined);
  return true;
}

function errorText(error: unknown): string {
  return truncateBytes(error instanceof Error ? error.message : String(error), 500);
}

/** Watchers one sweep takes, and env events it reads per watcher: its work stays bounded however busy the roots. */
const SWEEP_WATCHERS = 100;
const SWEEP_EVENTS_PER_WATCHER = 1000;

/** What one sweep did. */
export interface WatchSweepResult {
  /** Watchers it took. */
  taken: number;
  /** Watchers it signalled. */
  signalled: number;
}

/**
 * One sweep of a task queue's watchers for changes no signal told them about: a claimed signal never sent (its
 * sender died, or Temporal refused it) is sent again, and for a watcher with no claim since its last look, the env
 * events after what it handled, looked at or was checked for are checked against its keys (the shared data's changes,
 * not its own, over `graceSeconds` old); one that matches is claimed and signalled. Stateless (everything is in
 * Postgres, each watcher taken by one worker at a time), and bounded: at most {@link SWEEP_WATCHERS} watchers and
 * {@link SWEEP_EVENTS_PER_WATCHER} events each; how far it checked is recorded, so the next sweep goes on from there.
 */
export async function sweepWatchSignals(signalling: WatchSignalling): Promise<WatchSweepResult> {
  const { pool, graceSeconds } = signalling;
  const taken = await takeWatchersToSweep(pool, signalling.taskQueue, graceSeconds, SWEEP_WATCHERS);
  let signalled = 0;
  for (const watcher of taken) {
    let due = watcher.unsent;
    if (!due) {
      const events = await sweepEventsAfter(
        pool,
        watcher.rootThreadId,
        watcher.from,
        SWEEP_EVENTS_PER_WATCHER,
        graceSeconds,
      );
      let checked = watcher.from;
      for (const event of events) {
        // A younger event may still have its signal on the way; the next sweep checks it.
        if (!event.settled) break;
        checked = event.seq;
        const change = event.action === 'stored' || event.action === 'updated' || event.action === 'deleted';
        const own = event.writerWatcher === watcher.name || event.agent === watcher.agent;
        if (change && event.scope === '' && !own && keyMatches(watcher.keys, event.key)) {
          due = true;
          break;
        }
      }
      if (checked > watcher.from) await recordWatchSweep(pool, watcher.rootThreadId, watcher.name, checked);
    }
    if (!due) continue;
    const claimed = await claimWatchSignals(
      pool,
      watcher.rootThreadId,
      [watcher.name],
      signalling.taskQueue,
      graceSeconds,
    );
    for (const signal of claimed) {
      if (await sendClaimedSignal(signalling, signal)) signalled += 1;
    }
  }
  return { taken: taken.length, signalled };
}
