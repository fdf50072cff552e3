/**
 * Baton schedules on Temporal Schedules: each run is a `scheduledRunWorkflow` that posts a message into a standing
 * thread or a new root thread (see workflows/scheduled-run.ts). Everything the user gives is checked before
 * Temporal is asked to create or change anything, so bad input leaves nothing behind.
 */
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type ScheduleDescription,
  type ScheduleHandle,
  type ScheduleOptions,
  type ScheduleSpec,
} from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import type { Pool } from 'pg';
import { AGENT_NAME_PATTERN, threadIdProblem, threadWorkflowId } from '../common/ids';
import {
  cronProblem,
  DEFAULT_MINIMUM_INTERVAL_SECONDS,
  formatDuration,
  parseDuration,
  scheduleId,
  scheduleNameOf,
  scheduleNameProblem,
  SCHEDULE_ID_PREFIX,
  type ScheduledRunInput,
  type ScheduledRunResult,
  type ScheduleTarget,
  type ScheduleTiming,
} from '../common/schedules';
import { BatonSearchAttributes } from '../common/search-attributes';
import { hasUnstorableText, truncateBytes } from '../common/text';
import { checkKnownAgent } from './agents';
import type { scheduledRunWorkflow } from '../workflows';
import { BatonClientError } from './errors';

/** What overlapping runs do, in Baton's words (`--overlap`). */
export const OVERLAP_POLICIES = {
  skip: ScheduleOverlapPolicy.SKIP,
  'buffer-one': ScheduleOverlapPolicy.BUFFER_ONE,
  'allow-all': ScheduleOverlapPolicy.ALLOW_ALL,
} as const;
export type OverlapPolicy = keyof typeof OVERLAP_POLICIES;

/** The longest scheduled message: it travels through every run's workflow history. */
export const MAX_SCHEDULE_MESSAGE_BYTES = 16 * 1024;

export interface ScheduleTimingOptions {
  /** A five-field cron expression (or `@daily`, `@hourly`, …); exactly one of `cron` and `every`. */
  cron?: string;
  /** An interval such as `15m` or `1h30m`, at least the minimum interval (1 minute). */
  every?: string;
  /** IANA time zone of `cron`. @default 'UTC' */
  timezone?: string;
  /** A random delay of up to this much before each run, such as `30s`. */
  jitter?: string;
  /** No run after this time (an ISO time, or a `Date`). */
  until?: string | Date;
}

export interface CreateScheduleOptions extends ScheduleTimingOptions {
  /** 1-40 lowercase letters, digits, `_` or `-`. */
  name: string;
  /** Required with `newThread`; with `thread`, the thread's own agent (given, it must match). */
  agent?: string;
  message: string;
  /** Post every run into this existing root thread (a standing conversation). */
  thread?: string;
  /** Start a new root thread at every run, its id derived from the schedule and the run's time. */
  newThread?: boolean;
  /** The world new threads run in. @default 'default' */
  world?: string;
  /** What a run due while the previous one still works does. @default 'skip' */
  overlap?: OverlapPolicy;
  /** After an outage, runs missed within this window still happen, such as `1h`. @default Temporal's (1 year) */
  catchup?: string;
  /** Create it paused. */
  paused?: boolean;
  /** Why it is paused (with `paused`). */
  note?: string;
}

/** What `update` may change; the agent and the target stay (delete and create again to change them). */
export interface UpdateScheduleOptions extends ScheduleTimingOptions {
  message?: string;
  world?: string;
  overlap?: OverlapPolicy;
  catchup?: string;
}

/** One run in `describe`: when, which workflow and thread, and how it ended. */
export interface ScheduleRun {
  scheduledAt: string;
  startedAt: string;
  workflowId: string;
  runId: string;
  threadId: string | undefined;
  /** `running`, `completed`, `failed`, `terminated`, `timed_out`, `cancelled`, … */
  status: string;
  /** What the run did, once completed. */
  result?: ScheduledRunResult;
  /** Why it failed. */
  error?: string;
}

/** A schedule as `describe` shows it. */
export interface ScheduleDetails {
  name: string;
  scheduleId: string;
  agent: string;
  target: ScheduleTarget;
  world: string;
  message: string;
  timing: ScheduleTiming;
  /** `skip`, `buffer-one`, `allow-all`, or Temporal's name of a policy set elsewhere. */
  overlap: string;
  catchupWindow: string;
  paused: boolean;
  note: string | undefined;
  nextRuns: string[];
  runsTaken: number;
  skippedOverlap: number;
  missedCatchup: number;
  runningWorkflowIds: string[];
  recentRuns: ScheduleRun[];
}

/** A schedule as `list` shows it. */
export interface ScheduleSummaryRow {
  name: string;
  scheduleId: string;
  agent: string | undefined;
  target: string | undefined;
  paused: boolean;
  nextRun: string | undefined;
  lastRun: string | undefined;
}

/** The memo on every Baton schedule and run: what the Web UI shows beside them. */
interface ScheduleMemo {
  batonAgent: string;
  batonTarget: string;
}

function targetText(target: ScheduleTarget): string {
  return target.kind === 'thread' ? `thread ${target.threadId}` : 'new thread per run';
}

/** Baton's schedules on one Temporal namespace and task queue (`client.schedules`). */
export class Schedules {
  constructor(
    private readonly temporal: Client,
    private readonly taskQueue: string,
    private readonly database: () => Pool,
    /** The shortest `every` accepted; lower it only in tests. */
    private readonly minimumIntervalSeconds: number = DEFAULT_MINIMUM_INTERVAL_SECONDS,
  ) {}

  /**
   * Creates a schedule, after checking every option: the name, the timing, the agent (known to a worker on this
   * database), the target thread (an existing root thread), the world and the policies.
   * @throws BatonClientError naming what is wrong; nothing is created then.
   */
  async create(options: CreateScheduleOptions): Promise<BatonScheduleHandle> {
    const name = checkName(options.name);
    if (Boolean(options.thread) === Boolean(options.newThread)) {
      throw new BatonClientError('give exactly one of --thread <id> (a standing conversation) and --new-thread');
    }
    const message = checkMessage(options.message);
    const timing = this.checkTiming(options);
    const world = checkWorld(options.world ?? 'default');
    const overlap = checkOverlap(options.overlap ?? 'skip');
    const catchup = options.catchup === undefined ? undefined : checkDuration('catchup', options.catchup);
    let target: ScheduleTarget;
    let agent: string;
    if (options.thread) {
      target = { kind: 'thread', threadId: options.thread };
      agent = await this.threadAgent(options.thread);
      if (options.agent !== undefined && options.agent !== agent) {
        throw new BatonClientError(
          `thread '${options.thread}' is answered by '${agent}', not '${options.agent}'; leave out --agent or name '${agent}'`,
        );
      }
    } else {
      target = { kind: 'new-thread' };
      if (options.agent === undefined) throw new BatonClientError('--new-thread needs --agent <name>');
      agent = await this.checkAgent(options.agent);
    }
    const input: ScheduledRunInput = { schedule: name, agent, message, target, world, timing };
    const memo: ScheduleMemo = { batonAgent: agent, batonTarget: targetText(target) };
    const schedule: ScheduleOptions = {
      scheduleId: scheduleId(name),
      spec: specOf(timing),
      action: this.action(input, memo),
      policies: { overlap: OVERLAP_POLICIES[overlap], ...(catchup === undefined ? {} : { catchupWindow: catchup }) },
      memo: { ...memo },
      typedSearchAttributes: searchAttributesOf(input),
      state: { paused: Boolean(options.paused), ...(options.note ? { note: options.note } : {}) },
    };
    try {
      await this.temporal.schedule.create(schedule);
    } catch (error) {
      if (error instanceof ScheduleAlreadyRunning) {
        throw new BatonClientError(`schedule '${name}' already exists; update it or delete it first`, { cause: error });
      }
      throw new BatonClientError(`Temporal refused schedule '${name}': ${describeCause(error)}`, { cause: error });
    }
    return this.get(name);
  }

  /** A handle on a schedule by name. @throws BatonClientError for an invalid name. */
  get(name: string): BatonScheduleHandle {
    checkName(name);
    return new BatonScheduleHandle(this, this.temporal, name);
  }

  /** Every Baton schedule of the namespace, by name. */
  async list(): Promise<ScheduleSummaryRow[]> {
    const rows: ScheduleSummaryRow[] = [];
    for await (const summary of this.temporal.schedule.list()) {
      const name = scheduleNameOf(summary.scheduleId);
      if (name === undefined) continue;
      const memo = (summary.memo ?? {}) as Partial<ScheduleMemo>;
      const last = summary.info.recentActions.at(-1);
      rows.push({
        name,
        scheduleId: summary.scheduleId,
        agent: memo.batonAgent,
        target: memo.batonTarget,
        paused: summary.state.paused,
        nextRun: summary.info.nextActionTimes[0]?.toISOString(),
        lastRun: last?.scheduledAt.toISOString(),
      });
    }
    return rows.sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * @internal The checked timing of create or update. `until` must lie ahead when it is being set
   * (`untilIsNew`), not when an update keeps one that has passed.
   */
  checkTiming(options: ScheduleTimingOptions, untilIsNew = true): ScheduleTiming {
    if ((options.cron === undefined) === (options.every === undefined)) {
      throw new BatonClientError('give exactly one of --cron "<expression>" and --every <interval>');
    }
    const timing: ScheduleTiming = {};
    if (options.cron !== undefined) {
      const problem = cronProblem(options.cron);
      if (problem) throw new BatonClientError(problem);
      timing.cron = options.cron.trim();
    }
    if (options.every !== undefined) {
      const ms = checkDuration('every', options.every);
      if (ms < this.minimumIntervalSeconds * 1000) {
        throw new BatonClientError(
          `--every ${options.every} is below the minimum interval of ${formatDuration(this.minimumIntervalSeconds * 1000)}`,
        );
      }
      timing.every = formatDuration(ms);
    }
    if (options.timezone !== undefined) timing.timezone = checkTimezone(options.timezone);
    if (options.jitter !== undefined) timing.jitter = formatDuration(checkDuration('jitter', options.jitter));
    if (options.until !== undefined) {
      const until = parseTime('until', options.until);
      if (untilIsNew && until.getTime() <= Date.now())
        throw new BatonClientError(`--until ${until.toISOString()} is in the past`);
      timing.until = until.toISOString();
    }
    return timing;
  }

  /** @internal The schedule's action: start one `scheduledRunWorkflow` on Baton's task queue. */
  action(input: ScheduledRunInput, memo: ScheduleMemo): ScheduleOptions['action'] {
    return {
      type: 'startWorkflow',
      workflowType: 'scheduledRunWorkflow' satisfies (typeof scheduledRunWorkflow)['name'],
      workflowId: scheduleId(input.schedule),
      taskQueue: this.taskQueue,
      args: [input],
      memo: { ...memo },
      typedSearchAttributes: searchAttributesOf(input),
      staticSummary: truncateBytes(`schedule ${input.schedule}: ${input.agent}, ${targetText(input.target)}`, 200),
    };
  }

  /** The agent of a running root thread. @throws BatonClientError for an invalid, unknown or ended thread. */
  private async threadAgent(threadId: string): Promise<string> {
    const problem = threadIdProblem(threadId);
    if (problem) throw new BatonClientError(problem);
    try {
      const description = await this.temporal.workflow.getHandle(threadWorkflowId(threadId)).describe();
      const agent = description.typedSearchAttributes.get(BatonSearchAttributes.agent);
      if (description.type !== 'threadWorkflow' || agent === undefined) {
        throw new BatonClientError(`'${threadId}' is not a Baton root thread`);
      }
      if (description.status.name !== 'RUNNING') {
        throw new BatonClientError(`thread '${threadId}' has ended; a schedule needs a thread that is still open`);
      }
      return agent;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        throw new BatonClientError(`thread '${threadId}' does not exist`, { cause: error });
      }
      throw error;
    }
  }

  /** @throws BatonClientError unless a worker on Baton's database has defined the agent. */
  private checkAgent(agent: string): Promise<string> {
    return checkKnownAgent(this.database(), agent);
  }
}

/** One Baton schedule. */
export class BatonScheduleHandle {
  readonly scheduleId: string;
  readonly temporal: ScheduleHandle;

  constructor(
    private readonly schedules: Schedules,
    private readonly client: Client,
    readonly name: string,
  ) {
    this.scheduleId = scheduleId(name);
    this.temporal = client.schedule.getHandle(this.scheduleId);
  }

  /** @throws BatonClientError when the schedule does not exist. */
  private async call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ScheduleNotFoundError) {
        throw new BatonClientError(`there is no schedule '${this.name}'`, { cause: error });
      }
      throw error;
    }
  }

  /** The schedule with its next runs and its recent runs (each with its thread and outcome). */
  async describe(): Promise<ScheduleDetails> {
    const description = await this.call(() => this.temporal.describe());
    const input = runInput(description);
    const recentRuns = await Promise.all(
      description.info.recentActions.map(async (action) => {
        const { workflowId, firstExecutionRunId } = action.action.workflow;
        return {
          scheduledAt: action.scheduledAt.toISOString(),
          startedAt: action.takenAt.toISOString(),
          workflowId,
          runId: firstExecutionRunId,
          ...(await this.runOutcome(workflowId, firstExecutionRunId)),
        };
      }),
    );
    const overlap = Object.entries(OVERLAP_POLICIES).find(([, policy]) => policy === description.policies.overlap);
    return {
      name: this.name,
      scheduleId: this.scheduleId,
      agent: input.agent,
      target: input.target,
      world: input.world ?? 'default',
      message: input.message,
      timing: input.timing,
      overlap: overlap?.[0] ?? String(description.policies.overlap),
      catchupWindow: formatDuration(description.policies.catchupWindow),
      paused: description.state.paused,
      note: description.state.note || undefined,
      nextRuns: description.info.nextActionTimes.map((time) => time.toISOString()),
      runsTaken: description.info.numActionsTaken,
      skippedOverlap: description.info.numActionsSkippedOverlap,
      missedCatchup: description.info.numActionsMissedCatchupWindow,
      runningWorkflowIds: description.info.runningActions.map((action) => action.workflow.workflowId),
      recentRuns,
    };
  }

  private async runOutcome(
    workflowId: string,
    runId: string,
  ): Promise<Pick<ScheduleRun, 'threadId' | 'status' | 'result' | 'error'>> {
    const handle = this.client.workflow.getHandle<typeof scheduledRunWorkflow>(workflowId, runId);
    let described;
    try {
      described = await handle.describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return { threadId: undefined, status: 'gone' };
      throw error;
    }
    const threadId = described.typedSearchAttributes.get(BatonSearchAttributes.threadId);
    const status = described.status.name.toLowerCase();
    if (status === 'completed') return { threadId, status, result: await handle.result() };
    if (status === 'failed') {
      try {
        await handle.result();
      } catch (error) {
        return { threadId, status, error: describeCause(error) };
      }
    }
    return { threadId, status };
  }

  /** Stops runs until `unpause`; the note says why (shown by `describe` and the Web UI). */
  async pause(note?: string): Promise<void> {
    await this.call(() => this.temporal.pause(note ?? 'paused with baton schedule pause'));
  }

  async unpause(note?: string): Promise<void> {
    await this.call(() => this.temporal.unpause(note ?? 'unpaused with baton schedule unpause'));
  }

  /**
   * Runs it now, under its own overlap policy unless `overlap` is given: with `skip`, not while a run is still
   * working. (The Temporal SDK's `trigger()` alone would start a run whatever is running.)
   */
  async trigger(options: { overlap?: OverlapPolicy } = {}): Promise<void> {
    const overlap =
      options.overlap === undefined
        ? (await this.call(() => this.temporal.describe())).policies.overlap
        : OVERLAP_POLICIES[checkOverlap(options.overlap)];
    await this.call(() => this.temporal.trigger(overlap));
  }

  /**
   * Takes the runs scheduled from `from` to `to` now, one after another (overlap `buffer-all` unless given). A time
   * run before starts no second thread: its thread id and message are derived from the time.
   * @throws BatonClientError for unreadable times or `from` not before `to`.
   */
  async backfill(from: string | Date, to: string | Date, options: { overlap?: OverlapPolicy } = {}): Promise<void> {
    const start = parseTime('from', from);
    const end = parseTime('to', to);
    if (start.getTime() >= end.getTime()) {
      throw new BatonClientError(
        `backfill needs <from> before <to> (got ${start.toISOString()} and ${end.toISOString()})`,
      );
    }
    const overlap =
      options.overlap === undefined
        ? ScheduleOverlapPolicy.BUFFER_ALL
        : OVERLAP_POLICIES[checkOverlap(options.overlap)];
    await this.call(() => this.temporal.backfill({ start, end, overlap }));
  }

  /**
   * Changes the message, timing, world or policies; what is not given stays. The agent and target do not change.
   * @throws BatonClientError naming what is wrong; nothing is changed then.
   */
  async update(options: UpdateScheduleOptions): Promise<void> {
    const current = await this.call(() => this.temporal.describe());
    const previous = runInput(current);
    const retimed =
      options.cron !== undefined ||
      options.every !== undefined ||
      options.timezone !== undefined ||
      options.jitter !== undefined ||
      options.until !== undefined;
    let timing = previous.timing;
    if (retimed) {
      const merged: ScheduleTimingOptions = { ...previous.timing, ...options };
      // A new cron replaces the interval and the other way round.
      if (options.cron !== undefined) delete merged.every;
      if (options.every !== undefined) delete merged.cron;
      timing = this.schedules.checkTiming(merged, options.until !== undefined);
    }
    const input: ScheduledRunInput = {
      ...previous,
      timing,
      ...(options.message === undefined ? {} : { message: checkMessage(options.message) }),
      ...(options.world === undefined ? {} : { world: checkWorld(options.world) }),
    };
    const overlap = options.overlap === undefined ? undefined : OVERLAP_POLICIES[checkOverlap(options.overlap)];
    const catchup = options.catchup === undefined ? undefined : checkDuration('catchup', options.catchup);
    // Temporal keeps a schedule's memo as created; it names only what `update` never changes.
    const memo: ScheduleMemo = { batonAgent: input.agent, batonTarget: targetText(input.target) };
    await this.call(() =>
      this.temporal.update((prev) => ({
        ...prev,
        spec: retimed ? specOf(timing) : (prev.spec as ScheduleSpec),
        action: this.schedules.action(input, memo),
        policies: {
          ...prev.policies,
          ...(overlap === undefined ? {} : { overlap }),
          ...(catchup === undefined ? {} : { catchupWindow: catchup }),
        },
        state: { paused: prev.state.paused, ...(prev.state.note ? { note: prev.state.note } : {}) },
      })),
    );
  }

  /** Deletes the schedule; runs already started go on, threads stay. */
  async delete(): Promise<void> {
    await this.call(() => this.temporal.delete());
  }
}

function runInput(description: ScheduleDescription): ScheduledRunInput {
  const input = description.action.args?.[0] as ScheduledRunInput | undefined;
  if (description.action.workflowType !== 'scheduledRunWorkflow' || !input) {
    throw new BatonClientError(`schedule '${description.scheduleId}' is not one Baton made`);
  }
  return input;
}

function specOf(timing: ScheduleTiming): ScheduleSpec {
  return {
    ...(timing.cron === undefined ? {} : { cronExpressions: [timing.cron] }),
    ...(timing.every === undefined ? {} : { intervals: [{ every: parseDuration(timing.every) ?? 0 }] }),
    ...(timing.timezone === undefined ? {} : { timezone: timing.timezone }),
    ...(timing.jitter === undefined ? {} : { jitter: parseDuration(timing.jitter) ?? 0 }),
    ...(timing.until === undefined ? {} : { endAt: new Date(timing.until) }),
  };
}

/** Baton's search attributes on a schedule and its runs: the agent, and the thread of a `--thread` schedule. */
function searchAttributesOf(input: ScheduledRunInput): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: BatonSearchAttributes.agent, value: input.agent }];
  if (input.target.kind === 'thread') {
    pairs.push(
      { key: BatonSearchAttributes.rootThreadId, value: input.target.threadId },
      { key: BatonSearchAttributes.threadId, value: input.target.threadId },
    );
  }
  return pairs;
}

function checkName(name: string): string {
  const problem = scheduleNameProblem(name);
  if (problem) throw new BatonClientError(problem);
  return name;
}

function checkMessage(message: string): string {
  if (typeof message !== 'string' || message.trim() === '') throw new BatonClientError('--message must not be empty');
  if (hasUnstorableText(message)) {
    throw new BatonClientError('--message must not hold a NUL character (U+0000) or a lone UTF-16 surrogate');
  }
  if (Buffer.byteLength(message) > MAX_SCHEDULE_MESSAGE_BYTES) {
    throw new BatonClientError(`--message is too long (at most ${MAX_SCHEDULE_MESSAGE_BYTES} bytes)`);
  }
  return message;
}

function checkWorld(world: string): string {
  if (!AGENT_NAME_PATTERN.test(world)) {
    throw new BatonClientError(`world name '${world}' must be lowercase letters, digits, '_' or '-' (at most 64)`);
  }
  return world;
}

function checkOverlap(overlap: string): OverlapPolicy {
  if (!Object.hasOwn(OVERLAP_POLICIES, overlap)) {
    throw new BatonClientError(
      `--overlap must be one of ${Object.keys(OVERLAP_POLICIES).join(', ')}, not '${overlap}'`,
    );
  }
  return overlap as OverlapPolicy;
}

function checkDuration(option: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) {
    throw new BatonClientError(`--${option} '${text}' is not a duration such as 90s, 15m, 1h30m or 1d`);
  }
  return ms;
}

function checkTimezone(timezone: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return timezone;
  } catch {
    throw new BatonClientError(`--timezone '${timezone}' is not an IANA time zone such as UTC or Europe/Paris`);
  }
}

function parseTime(option: string, value: string | Date): Date {
  const time = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(time.getTime())) {
    throw new BatonClientError(`${option} '${String(value)}' is not a time such as 2025-01-31T09:00:00Z`);
  }
  return time;
}

function describeCause(error: unknown): string {
  if (error instanceof WorkflowFailedError) return error.cause?.message ?? error.message;
  return error instanceof Error ? error.message : String(error);
}

export { SCHEDULE_ID_PREFIX };
