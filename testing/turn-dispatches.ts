/**
 * What a turn's workflow history dispatched, read as the Web UI shows it: activities scheduled on the server, child
 * workflows, and local activities, which leave no scheduled event but a marker carrying their type and summary. The
 * tests of local steps read a turn's history through this.
 */
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The marker name the SDK records for a completed local activity. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/**
 * One event as a dispatch: an activity's type, `child:<workflow type>`, or `local:<type> (<summary>)` for a local
 * activity's marker; undefined for any other event.
 */
export function dispatchOf(event: HistoryEvent): string | undefined {
  const scheduled = event.activityTaskScheduledEventAttributes?.activityType?.name;
  if (scheduled) return scheduled;
  const child = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name;
  if (child) return `child:${child}`;
  const marker = event.markerRecordedEventAttributes;
  if (marker?.markerName !== LOCAL_ACTIVITY_MARKER) return undefined;
  const type = localActivityType(marker);
  const summary = eventSummary(event);
  return `local:${type ?? '?'}${summary === undefined ? '' : ` (${summary})`}`;
}

/** The summary an event carries as the Web UI shows it (an activity's, a local activity marker's), or undefined. */
export function eventSummary(event: HistoryEvent): string | undefined {
  const data = event.userMetadata?.summary?.data;
  return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as string) : undefined;
}

/** The ids of the patches a history's markers record, in order. */
export function patchesOf(events: readonly HistoryEvent[]): string[] {
  return events.flatMap((event) =>
    (event.markerRecordedEventAttributes?.details?.['patch-data']?.payloads ?? []).map(
      (payload) => (JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as { id: string }).id,
    ),
  );
}

/** Every dispatch of a history, in order (see `dispatchOf`). */
export function turnDispatches(events: readonly HistoryEvent[]): string[] {
  return events.flatMap((event) => {
    const dispatch = dispatchOf(event);
    return dispatch === undefined ? [] : [dispatch];
  });
}

/** The type of the local activity a marker records. */
function localActivityType(marker: temporal.api.history.v1.IMarkerRecordedEventAttributes): string | undefined {
  const data = marker.details?.data?.payloads?.[0]?.data;
  return (JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { activity_type?: string }).activity_type;
}

/** The results of a history's local activities of type `type`, in order, as their markers recorded them. */
export function localActivityResults(events: readonly HistoryEvent[], type: string): unknown[] {
  return events.flatMap((event) => {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== LOCAL_ACTIVITY_MARKER || localActivityType(marker) !== type) return [];
    const result = marker.details?.result?.payloads?.[0]?.data;
    return result ? [JSON.parse(Buffer.from(result).toString('utf8')) as unknown] : [];
  });
}

/** A workflow's whole history, as the server has it. */
export async function workflowHistory(client: Client, workflowId: string): Promise<HistoryEvent[]> {
  return (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
}

/**
 * What a thread's workflow dispatched after its opening: a local activity of its first task (checked, not the turn's),
 * or none when its first message came with its first workflow task (`run`, or a `send` quick enough): its first turn's
 * `beginTurn` opened it then (checked to come first).
 */
export async function threadDispatches(client: Client, threadId: string): Promise<string[]> {
  return afterOpening(turnDispatches(await workflowHistory(client, `baton/${threadId}`)), threadId);
}

/** A thread's dispatches (`turnDispatches` of its history) less its opening, as `threadDispatches` says. */
export function afterOpening(dispatches: readonly string[], threadId: string): string[] {
  if (dispatches[0] === `local:ensureThread (thread: open ${threadId})`) return dispatches.slice(1);
  assert.match(
    dispatches[0] ?? '',
    /^local:beginTurn \(turn 1: /,
    `thread ${threadId} opened by neither itself nor its first turn`,
  );
  return [...dispatches];
}
