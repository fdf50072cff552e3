/**
 * One activity proxy per timeout/retry profile. Every profile sets a start-to-close timeout
 * and an explicit retry policy; failures marked non-retryable by the activity end retries at once.
 */
import { proxyActivities, proxyLocalActivities, type LocalActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';

/**
 * Postgres reads and writes: short, and retried while the database comes back: 40 attempts back off to 10 s apart,
 * about 6 minutes in all, which outlasts a restart or a failover. Not forever: an error that no retry can fix (data
 * Postgres refuses is marked non-retryable, but an unclassified bug may not be) must end the turn, not retry it
 * endlessly. Retry options are not part of replay, so changing them never breaks a running workflow.
 */
export const DB_PROFILE = {
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '10 seconds',
    maximumAttempts: 40,
  },
} as const;

/**
 * Model calls: long, heartbeating (a dead worker is noticed within the heartbeat timeout, not the whole
 * start-to-close timeout), and retried with backoff a bounded number of times; the activity honours `retry-after`.
 */
export const MODEL_PROFILE = {
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 20 },
} as const;

/**
 * Tool runs: heartbeating like model calls. Tool failures the model can act on are recorded as results, not
 * thrown, so what is retried here is infrastructure trouble.
 */
export const TOOL_PROFILE = {
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
} as const;

/**
 * A scheduled run posting its message: it waits for the agent's whole turn, so it is long and heartbeats. A retry
 * re-attaches to the same Update (its id is derived from the run), so it never runs a second turn.
 */
export const DELIVERY_PROFILE = {
  startToCloseTimeout: '24 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
} as const;

/**
 * A step's tool calls followed by its next model call, in one activity: long enough for the slowest tool and then
 * the model call, heartbeating (tools and the model both do), and retried like a model call. A retry finds the tool
 * results of an earlier attempt stored and runs only what is missing.
 */
export const STEP_PROFILE = {
  startToCloseTimeout: '25 minutes',
  heartbeatTimeout: '30 seconds',
  retry: MODEL_PROFILE.retry,
} as const;

/**
 * Consecutive steps in one local activity (`steps: batched`, `runSteps`): a step's time and the batch's budget, past
 * which it starts no further step (`BATCH_BUDGET_MS`, 2 minutes), so the last step it starts has the step profile's
 * whole 25 minutes. Retried like a step: a retry finds every earlier step's reply and tool results stored.
 */
export const BATCH_PROFILE = {
  startToCloseTimeout: '27 minutes',
  retry: STEP_PROFILE.retry,
} as const;

/**
 * A user tool's own activity: its timeout with a minute to spare (the activity's own timer stops the tool first and
 * records why), heartbeating like every tool, and attempts for its `retries` plus a margin: the activity never runs
 * the tool more often than `retries` allows, and the extra attempts only record the last outcome while Postgres comes
 * back. A tool with side effects runs once whatever the attempt; retries then only report.
 */
export function userToolProfile(call: { timeoutSeconds: number; retries?: number }) {
  return {
    startToCloseTimeout: `${call.timeoutSeconds + 60} seconds`,
    heartbeatTimeout: TOOL_PROFILE.heartbeatTimeout,
    retry: { ...TOOL_PROFILE.retry, maximumAttempts: (call.retries ?? 0) + TOOL_PROFILE.retry.maximumAttempts },
  } as const;
}

/**
 * A profile run as a local activity (`steps: local`): the same timeout and retries, no heartbeat timeout. A local
 * activity runs in the worker that holds the workflow task, which the SDK keeps alive while it runs; if that worker
 * dies, the task times out and the next worker runs the step again, finding what is stored under its operation ids.
 */
export function localProfile(profile: Pick<LocalActivityOptions, 'startToCloseTimeout' | 'retry'>) {
  return { startToCloseTimeout: profile.startToCloseTimeout, retry: profile.retry } satisfies LocalActivityOptions;
}

export const db = proxyActivities<Activities>(DB_PROFILE);
/**
 * Short Postgres steps run inside the workflow task as local activities: no dispatch of their own, which is most of
 * what such a step costs. The same retries as `db`; past a minute of retrying the SDK backs off on timers.
 */
export const localDb = proxyLocalActivities<Activities>(DB_PROFILE);
export const steps = proxyActivities<Activities>(STEP_PROFILE);
export const model = proxyActivities<Activities>(MODEL_PROFILE);
export const tools = proxyActivities<Activities>(TOOL_PROFILE);
export const delivery = proxyActivities<Activities>(DELIVERY_PROFILE);
/** A turn's steps as local activities (`steps: local`): model calls, combined steps and tool runs. */
export const localModel = proxyLocalActivities<Activities>(localProfile(MODEL_PROFILE));
export const localSteps = proxyLocalActivities<Activities>(localProfile(STEP_PROFILE));
export const localTools = proxyLocalActivities<Activities>(localProfile(TOOL_PROFILE));
/** Runs of a turn's consecutive steps, each run in one local activity (`steps: batched`). */
export const localBatch = proxyLocalActivities<Activities>(BATCH_PROFILE);

/**
 * Local activities of `profile` that end by `deadlineAt` (workflow time, in ms) at the latest: each call's
 * schedule-to-close timeout is the time left when it is scheduled, so a call still running then fails with a
 * `SCHEDULE_TO_CLOSE` timeout, which no profile's own timeouts raise, and a retry that would begin past it is refused
 * (`refuseAttemptPastDeadline`: the SDK drops the timeout when it falls while a retry waits); `isPastDeadline` knows
 * both. For a fork's tasks stepping in the fork's workflow task: the fork's deadline timer fires only when that task
 * next completes, which local activities hold open for up to 80% of its timeout, while a local activity's own timeout
 * is kept by the worker.
 */
export function localActivitiesUntil(
  profile: Pick<LocalActivityOptions, 'startToCloseTimeout' | 'retry'>,
  deadlineAt: number,
): typeof localDb {
  const scheduledNow = () =>
    proxyLocalActivities<Activities>({
      ...profile,
      scheduleToCloseTimeout: Math.max(1, deadlineAt - Date.now()),
    }) as unknown as Record<string | symbol, unknown>;
  return new Proxy({} as typeof localDb, { get: (_, name) => scheduledNow()[name] });
}
