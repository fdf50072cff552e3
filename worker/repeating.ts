/** A task a worker runs now and then beside its polling (the watch sweep, the waiting metrics). */

/** A repeating task; `stop` waits for a run in progress to end. */
export interface Repeating {
  stop(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` (the first run after one interval); runs never overlap, a failed run is reported to
 * `onError` and the next one goes on, and the timer alone never keeps the process alive.
 */
export function repeatEvery(
  intervalMs: number,
  task: () => Promise<void>,
  onError: (error: unknown) => void,
): Repeating {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = task().catch(onError).finally(schedule);
    }, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
