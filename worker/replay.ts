/**
 * `baton replay`: replays workflow histories (fetched from a server, or exported files) against the local workflow
 * code, so a user sees before a deploy whether running conversations would break. A determinism error is reported with
 * the history event it tripped on and what the new code did instead.
 */
import fs from 'node:fs';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import {
  DefaultLogger,
  makeTelemetryFilterString,
  Runtime,
  Worker,
  type ReplayWorkerOptions,
} from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { WORKFLOW_BUNDLER_OPTIONS, WORKFLOWS_PATH } from './workflow-bundle';

type History = ReturnType<typeof historyFromJSON>;

/** One history to replay and where it came from. */
export interface ReplayInput {
  workflowId: string;
  /** A file path, or `server`. */
  source: string;
  history: History;
}

/** How one history replayed. */
export interface ReplayOutcome {
  workflowId: string;
  source: string;
  workflowType: string;
  events: number;
  ok: boolean;
  /** Set when it failed. */
  error?: {
    /** `DeterminismViolationError` when the code no longer matches the history. */
    name: string;
    /** The SDK's detail, e.g. `Activity type of scheduled event 'finishTurn' does not match … command 'callModel'`. */
    message: string;
    /** The history event the detail names, when it names one. */
    event?: { eventId: number; eventType: string; activityType?: string };
  };
}

/**
 * Installs the Temporal runtime for replaying: the core logs every failed replay as a WARN on stdout, which would
 * garble `--json` and repeat what the report says; only errors are kept, and they go to stderr. A runtime already
 * installed is kept.
 */
export function installReplayRuntime(): void {
  try {
    Runtime.install({
      logger: new DefaultLogger('ERROR'),
      telemetryOptions: {
        logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }) },
      },
    });
  } catch {
    // Already installed: keep it.
  }
}

/** Reads an exported history (the Web UI's or `temporal workflow show --output json`'s JSON). */
export function readHistoryFile(file: string): History {
  const text = fs.readFileSync(file, 'utf8');
  return historyFromJSON(JSON.parse(text));
}

/** The workflow type a history starts. */
function workflowTypeOf(history: History): string {
  return history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'unknown';
}

const NONDETERMINISM = /Nondeterminism error: ((?:[^"\\]|\\.)*)/;

/** The readable part of a determinism error and the history event it names. */
export function describeReplayError(error: Error, history: History): NonNullable<ReplayOutcome['error']> {
  const detail = NONDETERMINISM.exec(error.message)?.[1]?.replace(/\\"/g, '"') ?? error.message;
  const described: NonNullable<ReplayOutcome['error']> = { name: error.name, message: detail };
  // "… of scheduled event 'finishTurn' does not match …": the first such event of the history is where it broke.
  const named = /scheduled event '([^']+)'/.exec(detail)?.[1];
  if (named) {
    const event = history.events?.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === named);
    if (event) {
      described.event = {
        eventId: Number(event.eventId),
        eventType: 'ActivityTaskScheduled',
        activityType: named,
      };
    }
  }
  return described;
}

/**
 * Replays each history against the workflow code (`workflowsPath`, Baton's own by default) and reports every outcome;
 * it never throws for a history that fails to replay.
 */
export async function replayHistories(
  inputs: readonly ReplayInput[],
  options: Pick<ReplayWorkerOptions, 'workflowsPath' | 'workflowBundle'> = {},
): Promise<ReplayOutcome[]> {
  const byId = new Map(inputs.map((input) => [input.workflowId, input]));
  const code = options.workflowBundle
    ? { workflowBundle: options.workflowBundle }
    : { workflowsPath: options.workflowsPath ?? WORKFLOWS_PATH, bundlerOptions: WORKFLOW_BUNDLER_OPTIONS };
  const outcomes: ReplayOutcome[] = [];
  for await (const result of Worker.runReplayHistories(
    code,
    inputs.map((input) => ({ workflowId: input.workflowId, history: input.history })),
  )) {
    const input = byId.get(result.workflowId);
    if (!input) continue;
    const outcome: ReplayOutcome = {
      workflowId: input.workflowId,
      source: input.source,
      workflowType: workflowTypeOf(input.history),
      events: input.history.events?.length ?? 0,
      ok: !result.error,
    };
    if (result.error) {
      const error = result.error instanceof Error ? result.error : new Error(String(result.error));
      outcome.error = describeReplayError(error, input.history);
    }
    outcomes.push(outcome);
  }
  return outcomes;
}

/** One line per outcome: `ok  <workflow type>  <id>  (<n> events, <source>)`, then the error and its event. */
export function formatReplay(outcomes: readonly ReplayOutcome[]): string {
  const lines: string[] = [];
  for (const outcome of outcomes) {
    lines.push(
      `${outcome.ok ? 'ok    ' : 'FAILED'}  ${outcome.workflowType}  ${outcome.workflowId}  (${outcome.events} events, ${outcome.source})`,
    );
    if (outcome.error) {
      const kind = outcome.error.name === DeterminismViolationError.name ? 'determinism error' : outcome.error.name;
      lines.push(`        ${kind}: ${outcome.error.message}`);
      const event = outcome.error.event;
      if (event) {
        lines.push(
          `        at history event ${event.eventId} (${event.eventType}${event.activityType ? ` ${event.activityType}` : ''}): the code now does something else there`,
        );
      }
    }
  }
  const failed = outcomes.filter((o) => !o.ok).length;
  lines.push(
    failed === 0
      ? `${outcomes.length} workflow${outcomes.length === 1 ? '' : 's'} replayed against the local code.`
      : `${failed} of ${outcomes.length} failed to replay: running conversations would break with this code.`,
  );
  return lines.join('\n');
}
