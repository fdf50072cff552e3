/**
 * Watchers' I/O: waking a root's watchers after a change commits (a claimed, coalesced Signal-with-Start of each
 * matching watcher's workflow, best effort), the sweep that finds the changes no signal told their watcher about, the
 * watcher workflow's reads and records, and registering the watchers an agent's frontmatter declares.
 */
import { Context, log } from '@temporalio/activity';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import type { AgentDefinition } from '../common/agent-definition';
import { isKnownAgent } from '../db/agent-versions';
import { ToolError } from './tools/types';
import { ErrorType } from '../common/errors';
import { threadWorkflowId } from '../common/ids';
import { truncateBytes } from '../common/text';
import { watcherSignalWithStartOptions } from '../common/thread-start';
import { DEFAULT_WATCH_SWEEP_SECONDS, wakeWatchers, type WatchFaults } from './watch-signals';
import { TurnStatus, type AgentTurnResult } from '../common/types';
import {
  DEFAULT_WATCH_LIMITS,
  frontmatterWatcherName,
  ENV_CHANGED_SIGNAL,
  keyMatches,
  watcherWorkflowId,
  MAX_CHANGES_PER_WAKEUP,
  watcherNameProblem,
  watchMessage,
  watchSpecOf,
  watchSpecProblem,
  type WatchChange,
  type Watcher,
  type WatchLimits,
  type WatchSpec,
} from '../common/watchers';
import { variableNames, WATCH_LIMIT_VARIABLES } from '../common/world-variables';
import {
  beginWatchLook,
  changesAfter,
  endWatcher,
  findWatcher,
  finishWakeup,
  openWakeup,
  recordWatchLook,
  registerWatcher,
  setWatcherPause,
  settleWatchChanges,
  stopRootWatchers,
  WatcherExistsError,
  type OpenedWakeup,
} from '../db/watchers';
import { loadWorldVariables } from './worlds';

/** Env events one look of a watcher reads. */
const EVENTS_PER_LOOK = 1000;

export { DEFAULT_WATCH_SWEEP_SECONDS, sweepWatchSignals, wakeWatchers } from './watch-signals';
export type { WatchFaults, WatchSignalling, WatchSweepResult } from './watch-signals';

/**
 * Something that wakes the watchers of a root after a change to `keys` (every watcher when `keys` is undefined)
 * committed. Called by the writer after its commit (and again by a retried writer, which finds its write done). Never
 * fails: a committed write must not fail, nor be reported failed, because a watcher could not be told of it. A signal
 * that was not sent (the worker died first, Temporal refused it) is sent by the sweep from what Postgres holds; a
 * watcher reads the log after its cursor, so an extra signal finds nothing new and wakes nothing.
 */
export type WatchTrigger = (rootThreadId: string, keys?: readonly string[]) => Promise<void>;

/** The writers' trigger of one worker's activities: {@link wakeWatchers} with the activity's client and queue. */
export function createWatchTrigger(
  pool: Pool,
  faults: WatchFaults = {},
  graceSeconds = DEFAULT_WATCH_SWEEP_SECONDS,
): WatchTrigger {
  return async (rootThreadId, keys) => {
    const context = Context.current();
    await wakeWatchers(
      {
        pool,
        temporal: context.client,
        taskQueue: context.info.taskQueue,
        graceSeconds,
        faults,
        warn: (message, attributes) => {
          log.warn(message, attributes);
        },
      },
      rootThreadId,
      keys,
    );
  };
}

/** Registers the watchers an agent's frontmatter declares in a root (at each of its turns there; idempotent). */
export async function registerFrontmatterWatchers(
  pool: Pool,
  rootThreadId: string,
  agent: Pick<AgentDefinition, 'name' | 'watches'>,
): Promise<Watcher[]> {
  const watches = agent.watches ?? [];
  const created: Watcher[] = [];
  for (const [index, entry] of watches.entries()) {
    const registered = await registerWatcher(pool, {
      rootThreadId,
      name: frontmatterWatcherName(agent.name, index, watches.length),
      agent: agent.name,
      spec: {
        keys: entry.keys,
        ...(entry.debounce_s === undefined ? {} : { debounceS: entry.debounce_s }),
        ...(entry.message === undefined ? {} : { message: entry.message }),
      },
      origin: 'frontmatter',
      createdBy: `frontmatter of ${agent.name}`,
      taskQueue: Context.current().info.taskQueue,
    });
    if (registered.created) created.push(registered.watcher);
  }
  return created;
}

/**
 * Signals the workflows of watchers (starting those that do not run): a change they watch committed, or they were
 * just added (each then waits for changes; the Web UI lists it from now on).
 */
export async function startWatchers(
  watchers: readonly Pick<Watcher, 'rootThreadId' | 'name' | 'agent' | 'keys'>[],
): Promise<void> {
  if (watchers.length === 0) return;
  const context = Context.current();
  await Promise.all(
    watchers.map((watcher) =>
      context.client.workflow.signalWithStart(
        'envWatcherWorkflow',
        watcherSignalWithStartOptions(watcher, context.info.taskQueue),
      ),
    ),
  );
}

/** Most keys a look names (in its summaries, and in a `watch_skipped` event); the changes themselves stay in Postgres. */
const KEYS_NAMED = 20;

/**
 * What one look of a watcher found: counts and a few keys, for the workflow to decide with. The changes stay in
 * Postgres (the wake-up reads them again, up to `cursor`), so none of them goes through the workflow's history.
 */
export type WatchLook =
  | { state: 'ended'; reason: string }
  | {
      state: 'active';
      /** How many changes it wakes for (its keys, not its own, within the depth limit). */
      count: number;
      /** The first of their keys, at most `KEYS_NAMED`. */
      keys: string[];
      /** Keys left because their chain reached the depth limit (at most `KEYS_NAMED`), and that depth. */
      overDepth: { keys: string[]; depth: number };
      /** Where the cursor goes once these are handled: the last event the look read. */
      cursor: number;
      /** More events are waiting after `cursor`. */
      more: boolean;
      limits: WatchLimits;
      debounceS: number;
      /** The watcher is paused until then (rate limit). */
      pausedUntil?: string;
    };

/**
 * The changes after `watcher`'s cursor (up to `upTo` when given) that wake it: in the shared data, to its keys, not
 * its own (its agent's, wherever it runs, or those of the turns its wake-ups started, whose threads carry its name),
 * and within the depth limit; the depth a wake-up for them runs at; and the keys the depth limit left.
 */
async function watchedChanges(
  pool: Pool,
  watcher: Watcher,
  maxDepth: number,
  upTo?: number,
): Promise<{
  changes: WatchChange[];
  depth: number;
  overDepth: { keys: string[]; depth: number };
  lastSeq: number;
  full: boolean;
}> {
  const read = await changesAfter(pool, watcher.rootThreadId, watcher.cursor, EVENTS_PER_LOOK);
  const changes: WatchChange[] = [];
  const overDepth = { keys: [] as string[], depth: 0 };
  let depth = 1;
  for (const change of read.changes) {
    if (upTo !== undefined && change.seq > upTo) break;
    const own = change.writerWatcher === watcher.name || change.writer.agent === watcher.agent;
    if (change.scope !== '' || own || !keyMatches(watcher.keys, change.key)) continue;
    const changeDepth = change.writerDepth + 1;
    if (changeDepth > maxDepth) {
      overDepth.keys.push(change.key);
      overDepth.depth = Math.max(overDepth.depth, changeDepth);
      continue;
    }
    depth = Math.max(depth, changeDepth);
    const { scope: _scope, writerWatcher: _watcher, writerDepth: _depth, ...plain } = change;
    changes.push(plain);
  }
  return { changes, depth, overDepth, lastSeq: read.lastSeq, full: read.full };
}

/** The watch limits of a world: its variables over the defaults. */
export function watchLimitsFrom(
  variables: Readonly<Record<string, string>>,
  warn: (message: string, attributes: Record<string, unknown>) => void = (message, attributes) => {
    log.warn(message, attributes);
  },
): WatchLimits {
  const limits: WatchLimits = { ...DEFAULT_WATCH_LIMITS };
  for (const [field, name] of Object.entries(variableNames(WATCH_LIMIT_VARIABLES)) as [keyof WatchLimits, string][]) {
    const raw = variables[name]?.trim();
    if (raw === undefined || raw === '') continue;
    const value = /^[0-9]{1,9}(\.[0-9]+)?$/.test(raw) ? Number(raw) : Number.NaN;
    // Depth and the hourly count must be at least 1; the two durations may be 0.
    const least = field === 'maxDepth' || field === 'maxPerHour' ? 1 : 0;
    if (Number.isFinite(value) && value >= least) limits[field] = value;
    else warn('ignoring a world variable that is not a watch limit', { name, value: raw, least });
  }
  return limits;
}

export interface WatcherActivityOptions {
  pool: Pool;
  /** How often `awaitWatchWakeup` heartbeats. @default 5000 */
  heartbeatIntervalMs?: number;
}

/** How a wake-up's turn ended, as its watcher records it. */
export interface WakeupOutcome {
  status: 'completed' | 'max_steps' | 'failed';
  error?: string;
}

export function createWatcherActivities({ pool, heartbeatIntervalMs = 5000 }: WatcherActivityOptions) {
  /**
   * A watcher's look at its root: whether it still runs (removed, or its root thread ended: then it is stopped and
   * says why), and the changes after its cursor that it wakes for. It clears the watcher's signal claim before it
   * reads the log (a change committed after the read then signals again), unless `keepSignal` (a look during a pause,
   * which only checks for a removal: the changes wait for the pause's end, which looks again, and need no signal
   * until then). It records how far it read.
   */
  async function lookForWatchChanges(input: {
    rootThreadId: string;
    watcher: string;
    keepSignal?: boolean;
  }): Promise<WatchLook> {
    const watcher =
      input.keepSignal === true
        ? await findWatcher(pool, input.rootThreadId, input.watcher)
        : await beginWatchLook(pool, input.rootThreadId, input.watcher);
    if (watcher === undefined) return { state: 'ended', reason: 'no such watcher' };
    if (watcher.status === 'removed' || watcher.status === 'stopped') {
      return { state: 'ended', reason: watcher.reason ?? watcher.status };
    }
    if (!(await rootRunning(input.rootThreadId))) {
      const reason = `its root thread '${input.rootThreadId}' has ended`;
      await endWatcher(pool, input.rootThreadId, input.watcher, 'stopped', reason);
      return { state: 'ended', reason };
    }
    const world = await rootWorld(input.rootThreadId);
    const limits = watchLimitsFrom(await loadWorldVariables(pool, world));
    const found = await watchedChanges(pool, watcher, limits.maxDepth);
    await recordWatchLook(pool, input.rootThreadId, input.watcher, found.lastSeq);
    return {
      state: 'active',
      count: found.changes.length,
      keys: [...new Set(found.changes.map((change) => change.key))].slice(0, KEYS_NAMED),
      overDepth: { keys: [...new Set(found.overDepth.keys)].slice(0, KEYS_NAMED), depth: found.overDepth.depth },
      cursor: found.lastSeq,
      more: found.full,
      limits,
      debounceS: watcher.debounceS ?? limits.debounceS,
      ...(watcher.pausedUntil === undefined ? {} : { pausedUntil: watcher.pausedUntil }),
    };
  }

  async function rootRunning(rootThreadId: string): Promise<boolean> {
    try {
      const described = await Context.current().client.workflow.getHandle(threadWorkflowId(rootThreadId)).describe();
      return described.status.name === 'RUNNING';
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  async function rootWorld(rootThreadId: string): Promise<string> {
    const { rows } = await pool.query<{ world: string }>('SELECT world FROM threads WHERE thread_id = $1', [
      rootThreadId,
    ]);
    return rows[0]?.world ?? 'default';
  }

  /** Moves the cursor past changes that woke nothing, reporting those the depth limit left. */
  async function settleWatch(input: {
    rootThreadId: string;
    watcher: string;
    cursor: number;
    skipped?: { keys: string[]; depth: number; maxDepth: number };
  }): Promise<void> {
    await settleWatchChanges(pool, input);
  }

  /**
   * Opens a wake-up for the changes a look found (read again from Postgres, after the watcher's cursor up to the look's
   * `cursor`: the same ones, since the log and the writers' threads do not change): its thread, its `[Watch Context]`
   * message, its record; once per operation id.
   */
  async function openWatchWakeup(input: {
    rootThreadId: string;
    watcher: string;
    operationId: string;
    cursor: number;
  }): Promise<OpenedWakeup | { ended: string }> {
    const watcher = await findWatcher(pool, input.rootThreadId, input.watcher);
    if (watcher === undefined) {
      throw ApplicationFailure.create({
        type: ErrorType.InvalidInput,
        message: `no watcher named '${input.watcher}' in thread '${input.rootThreadId}'`,
        nonRetryable: true,
      });
    }
    const limits = watchLimitsFrom(await loadWorldVariables(pool, await rootWorld(input.rootThreadId)));
    const found = await watchedChanges(pool, watcher, limits.maxDepth, input.cursor);
    const listed = found.changes.slice(-MAX_CHANGES_PER_WAKEUP);
    return openWakeup(pool, {
      rootThreadId: input.rootThreadId,
      watcher: input.watcher,
      operationId: input.operationId,
      depth: found.depth,
      changes: listed,
      cursor: input.cursor,
      message: (wakeup) =>
        watchMessage({
          watcher: watcher.name,
          agent: watcher.agent,
          rootThreadId: input.rootThreadId,
          keys: watcher.keys,
          changes: listed,
          moreChanges: found.changes.length - listed.length,
          depth: found.depth,
          wakeup,
          ...(watcher.message === undefined ? {} : { message: watcher.message }),
        }),
    });
  }

  /** Records how a wake-up's turn ended. */
  async function finishWatchWakeup(input: {
    rootThreadId: string;
    watcher: string;
    wakeup: number;
    status: string;
    error?: string;
  }): Promise<void> {
    await finishWakeup(pool, input);
  }

  /**
   * Waits for the turn of a wake-up that an earlier run of its watcher started and left running when it continued as
   * new (too many signals came during it), heartbeating, and says how it ended. A retry waits again.
   */
  async function awaitWatchWakeup(input: {
    rootThreadId: string;
    watcher: string;
    wakeup: number;
    workflowId: string;
  }): Promise<WakeupOutcome> {
    const context = Context.current();
    const beat = setInterval(() => context.heartbeat(), heartbeatIntervalMs);
    try {
      const result = await Promise.race([
        context.client.workflow.getHandle(input.workflowId).result() as Promise<AgentTurnResult>,
        context.cancelled,
      ]);
      return { status: result.status === TurnStatus.Completed ? 'completed' : 'max_steps' };
    } catch (error) {
      if (error instanceof CancelledFailure) throw error;
      if (error instanceof WorkflowNotFoundError) {
        return { status: 'failed', error: `its turn's workflow '${input.workflowId}' was not found` };
      }
      if (error instanceof WorkflowFailedError) return { status: 'failed', error: innermostMessage(error) };
      throw error;
    } finally {
      clearInterval(beat);
    }
  }

  /** Pauses a watcher (its rate limit) until a time, saying why, or resumes it. */
  async function pauseWatcher(input: {
    rootThreadId: string;
    watcher: string;
    pause?: { reason: string; until: string };
  }): Promise<void> {
    await setWatcherPause(pool, input.rootThreadId, input.watcher, input.pause);
  }

  /** Stops every watcher of a root that ended, and tells their workflows, which end at their look. */
  async function stopWatchers(input: { rootThreadId: string; reason: string }): Promise<{ stopped: string[] }> {
    const stopped = await stopRootWatchers(pool, input.rootThreadId, input.reason);
    const { client } = Context.current();
    await Promise.all(
      stopped.map((name) =>
        client.workflow
          .getHandle(watcherWorkflowId(input.rootThreadId, name))
          .signal(ENV_CHANGED_SIGNAL)
          .catch((error: unknown) => {
            // A watcher no change ever woke has no workflow yet; one that ended needs no word.
            if (!(error instanceof WorkflowNotFoundError)) throw error;
          }),
      ),
    );
    return { stopped };
  }

  return {
    lookForWatchChanges,
    settleWatch,
    openWatchWakeup,
    finishWatchWakeup,
    awaitWatchWakeup,
    pauseWatcher,
    stopWatchers,
  };
}

/** The innermost message of a failure chain, as a watcher's wake-up records why its turn failed. */
function innermostMessage(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 10 && current instanceof Error && current.cause instanceof Error; depth++) {
    current = current.cause;
  }
  return truncateBytes(current instanceof Error ? current.message : String(current), 1000);
}

/** A run-time watcher an agent asks for (`watch_env_data`). */
export interface AddWatcherRequest extends WatchSpec {
  rootThreadId: string;
  agent: string;
  name?: string;
  createdBy: string;
}

/**
 * Adds a run-time watcher for an agent's tool call and starts its workflow. A retried call finds the watcher it added
 * (same agent and spec) and returns it; any other watcher of that name is a refusal the model reads.
 */
export async function addWatcherFromTool(pool: Pool, request: AddWatcherRequest): Promise<Watcher> {
  const name = request.name ?? request.agent;
  const problem = watcherNameProblem(name) ?? watchSpecProblem(request);
  if (problem !== undefined) throw new ToolError(problem);
  if (!(await isKnownAgent(pool, request.agent))) throw new ToolError(`no agent named '${request.agent}' is defined`);
  const spec: WatchSpec = watchSpecOf(request);
  try {
    const { watcher } = await registerWatcher(pool, {
      rootThreadId: request.rootThreadId,
      name,
      agent: request.agent,
      spec,
      origin: 'run_time',
      createdBy: request.createdBy,
      taskQueue: Context.current().info.taskQueue,
    });
    await startWatchers([watcher]);
    return watcher;
  } catch (error) {
    if (!(error instanceof WatcherExistsError)) throw error;
    const existing = await findWatcher(pool, request.rootThreadId, name);
    const same =
      existing !== undefined &&
      existing.agent === request.agent &&
      JSON.stringify(existing.keys) === JSON.stringify(spec.keys) &&
      existing.debounceS === spec.debounceS &&
      existing.message === spec.message;
    if (same) return existing;
    throw new ToolError(error.message);
  }
}
