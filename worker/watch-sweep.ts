/**
 * The watch sweep every worker runs beside its polling: now and then it finds the env-data changes that no signal told
 * their watcher about (the writer's worker died between its commit and the signal, or Temporal refused the signal)
 * and signals those watchers (`sweepWatchSignals`). It keeps nothing in the process: what it checked is in Postgres,
 * so any worker of the task queue goes on from where another stopped, and several sweep at once without doubling up.
 */
import type { Client } from '@temporalio/client';
import type { Pool } from 'pg';
import { sweepWatchSignals } from '../activities/watchers';
import { repeatEvery, type Repeating } from './repeating';

export interface WatchSweepOptions {
  pool: Pool;
  temporal: Client;
  /** The worker's task queue: it sweeps the watchers of roots that run there. */
  taskQueue: string;
  /** Seconds between sweeps, and how old an unannounced change must be before a sweep signals its watcher. */
  intervalSeconds: number;
  /** Where a failed sweep or signal is reported. */
  warn: (message: string, attributes: Record<string, unknown>) => void;
}

/** A running sweep; `stop` waits for a sweep in progress to end. */
export type WatchSweep = Repeating;

/** Starts sweeping every `intervalSeconds` (the first sweep after one interval); sweeps never overlap. */
export function startWatchSweep(options: WatchSweepOptions): WatchSweep {
  const signalling = {
    pool: options.pool,
    temporal: options.temporal,
    taskQueue: options.taskQueue,
    graceSeconds: options.intervalSeconds,
    warn: options.warn,
  };
  return repeatEvery(
    options.intervalSeconds * 1000,
    () => sweepWatchSignals(signalling).then(() => undefined),
    (error) => {
      // Postgres or Temporal away: the next sweep tries again, from what Postgres holds.
      options.warn('the watch sweep failed; the next one tries again', {
        error: error instanceof Error ? error.message : String(error),
      });
    },
  );
}
