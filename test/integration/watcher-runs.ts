/** What the tests of watchers' signals read from Temporal: every run of a watcher's workflow, and its signals. */
import type { temporal } from '@temporalio/proto';
import type { BatonClient } from '../../client';
import { ENV_CHANGED_SIGNAL, watcherWorkflowId } from '../../common/watchers';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

export interface WatcherRun {
  runId: string;
  events: HistoryEvent[];
  /** The `envChanged` signals the run received. */
  signals: number;
  /** It ended by continuing as new. */
  continued: boolean;
}

/** Every run of a watcher's workflow so far, oldest first (followed back from the current one). */
export async function watcherRuns(client: BatonClient, rootThreadId: string, watcher: string): Promise<WatcherRun[]> {
  const workflowId = watcherWorkflowId(rootThreadId, watcher);
  const runs: WatcherRun[] = [];
  let runId: string | undefined = (await client.temporal.workflow.getHandle(workflowId).describe()).runId;
  while (runId !== undefined && runId !== '') {
    const history = await client.temporal.workflow.getHandle(workflowId, runId).fetchHistory();
    const events: HistoryEvent[] = history.events ?? [];
    runs.unshift({
      runId,
      events,
      signals: events.filter(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === ENV_CHANGED_SIGNAL,
      ).length,
      continued: events.some((event) => event.workflowExecutionContinuedAsNewEventAttributes),
    });
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
  }
  return runs;
}

/** The `envChanged` signals every run of a watcher's workflow received. */
export async function watcherSignals(client: BatonClient, rootThreadId: string, watcher: string): Promise<number> {
  return (await watcherRuns(client, rootThreadId, watcher)).reduce((sum, run) => sum + run.signals, 0);
}
