import {
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  log,
  metricMeter,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Link } from '@opentelemetry/api';
import type { Activities } from '../activities';
import type { WakeupOutcome } from '../activities/watchers';
import { operationId } from '../common/ids';
import { BatonMetric } from '../common/metric-names';
import { BatonSearchAttributes } from '../common/search-attributes';
import { BatonAttribute, threadSpanAttributes } from '../common/span-attributes';
import { truncateBytes, turnSummary } from '../common/text';
import { spanContextOf } from '../common/traceparent';
import { TurnStatus } from '../common/types';
import { ENV_CHANGED_SIGNAL, type EnvChangedSignalInput, type WatcherWorkflowInput } from '../common/watchers';
import { WATCH_LIMIT_VARIABLES } from '../common/world-variables';
import { DELIVERY_PROFILE, localDb } from './activity-profiles';
import { agentTurnWorkflow } from './agent-turn';
import { rootMessage } from './failure-text';
import { inWorkflowSpan } from './spans';

/**
 * A change that may concern the watcher committed (or it was added, or removed): it looks at the log. A traced
 * writer's signal names its span, which the wake-up's trace links to.
 */
export const envChangedSignal = defineSignal<[EnvChangedSignalInput?]>(ENV_CHANGED_SIGNAL);

/** Most writes one wake-up's span links to (writers coalesce their signals, so a wake-up rarely has more than one). */
const LINKS_PER_WAKEUP = 16;

/** What the watcher is doing now, for the Web UI's queries (the CLI and the explorer read the rows in Postgres). */
export interface WatcherState {
  rootThreadId: string;
  watcher: string;
  wakeups: number;
  running?: { wakeup: number; threadId: string };
  pausedUntil?: string;
}
export const watcherStateQuery = defineQuery<WatcherState>('watcherState');

/** Wake-ups one run takes before it continues as new (the history of a run stays short). */
const WAKEUPS_PER_RUN = 50;
const HOUR_MS = 3600_000;

/**
 * Watchers that continue as new on a bound of signals received, which holds while they wait for a change, in their
 * debounce window, during a wake-up's turn, a pause or a cooldown; whose looks during a pause keep the signal claim
 * (migration 022); and whose look that finds only changes past the depth limit and more events after them reads on.
 */
export const WATCH_SIGNALS_BOUND_PATCH = 'baton-watcher-signals-bound';

/**
 * Signals one run receives before it continues as new, wherever it is: far below Temporal's limit per run (10,000 by
 * default, `history.maximumSignalsPerExecution`, which must stay above this), and a history of at most a few hundred
 * events per hundred signals. Writers coalesce their signals, so a run meets it only under a flood (workers of an
 * older version during a deploy, signals sent from outside Baton).
 */
export const SIGNALS_PER_RUN = 100;

/** A wake-up whose turn a run left running when it continued as new: the next run waits for it and records its end. */
export interface RunningWakeup {
  wakeup: number;
  threadId: string;
  workflowId: string;
}

/** The watcher workflow's input: what a run carries into the next includes a wake-up left running. */
export interface EnvWatcherInput extends WatcherWorkflowInput {
  carried?: NonNullable<WatcherWorkflowInput['carried']> & { running?: RunningWakeup };
}

/**
 * Waiting for the turn of a wake-up that an earlier run left running: as long as a scheduled run waits for its turn
 * (see `DELIVERY_PROFILE`), heartbeating, so a dead worker is noticed and another waits instead.
 */
const wakeupWait = proxyActivities<Activities>(DELIVERY_PROFILE);

/**
 * One watcher of one root: sleeps (no activity, no timer) until a writer signals that a change may concern it, then
 * waits out its debounce window, reads the root's env events after its cursor and, for the changes to its keys that
 * are not its own, runs a turn of its agent in a thread of its own under the root (`<root>/watch.<name>.<n>`), told
 * what changed (`[Watch Context]`). One turn at a time: a change during a turn is handled by the next wake-up, and
 * nothing is lost, because the cursor (in Postgres, moved with each wake-up) says what was handled. A chain of
 * watchers waking each other stops at the world's depth limit; past its wake-ups per hour it pauses and says so; it
 * ends when removed or when its root thread ends. A new workflow type: no recorded history changes.
 */
export async function envWatcherWorkflow(input: EnvWatcherInput): Promise<WatcherState> {
  const { rootThreadId, watcher } = input;
  const { runId } = workflowInfo();
  // Signals received and those already looked at: a signal that arrives during a look or a turn means another look.
  // The first look is due at once (the start came with a signal, or the previous run left one pending).
  let signals = 0;
  let looked = -1;
  if (input.carried !== undefined && !input.carried.pending) looked = 0;
  let recent = input.carried?.recentWakeups ?? [];
  let lastEndedAt = input.carried?.lastEndedAt;
  let wakeupsThisRun = 0;
  const state: WatcherState = { rootThreadId, watcher, wakeups: input.carried?.wakeupsSoFar ?? 0 };
  // Signals this run received: past SIGNALS_PER_RUN it continues as new, whatever it is doing (under the patch).
  let received = 0;
  // The writes whose signals came since the last wake-up opened: its span links to them (a span makes no command).
  const wokenBy: Link[] = [];
  setHandler(envChangedSignal, (writer?: EnvChangedSignalInput) => {
    signals += 1;
    received += 1;
    const written = spanContextOf(writer?.traceparent);
    if (written !== undefined && wokenBy.length < LINKS_PER_WAKEUP) {
      if (!wokenBy.some((link) => link.context.spanId === written.spanId)) wokenBy.push({ context: written });
    }
  });
  setHandler(watcherStateQuery, () => state);
  const bounded = patched(WATCH_SIGNALS_BOUND_PATCH);
  const overBound = () => bounded && (received >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested);

  /**
   * Continues as new, carrying what the rate limit and the cooldown count, and a wake-up whose turn still runs; the
   * next run looks at the log at once (after that turn).
   */
  const carryOn = (running?: RunningWakeup) =>
    continueAsNew<typeof envWatcherWorkflow>({
      rootThreadId,
      watcher,
      carried: {
        recentWakeups: recent,
        ...(lastEndedAt === undefined ? {} : { lastEndedAt }),
        pending: true,
        wakeupsSoFar: state.wakeups,
        ...(running === undefined ? {} : { running }),
      },
    });

  const look = () =>
    localDb.lookForWatchChanges.executeWithOptions({ summary: `watch: ${watcher} looks at the log` }, [
      { rootThreadId, watcher },
    ]);
  /** During a pause a look only checks for a removal; the signal claim stays, so writers send no more signals. */
  const lookDuringPause = () =>
    bounded
      ? localDb.lookForWatchChanges.executeWithOptions({ summary: `watch: ${watcher} checks it still runs` }, [
          { rootThreadId, watcher, keepSignal: true },
        ])
      : look();
  /** Waits `ms`, or less when the run reaches its bound (then true: it must continue as new). */
  const waitOrBound = async (ms: number): Promise<boolean> => {
    if (!bounded) {
      await sleep(ms);
      return false;
    }
    await condition(overBound, ms);
    return overBound();
  };
  /** Records how a wake-up's turn ended; what changed during it (its own writes among it) is looked at next. */
  const finished = async (wakeup: number, outcome: WakeupOutcome) => {
    if (outcome.status === 'failed') log.warn('a watcher wake-up failed', { watcher, wakeup, error: outcome.error });
    await localDb.finishWatchWakeup.executeWithOptions(
      { summary: `watch: ${watcher} wake-up ${wakeup} ${outcome.status}` },
      [{ rootThreadId, watcher, wakeup, ...outcome }],
    );
    delete state.running;
    lastEndedAt = Date.now();
    signals += 1;
  };
  /**
   * Waits for a wake-up's turn to end, or for the run's bound (then `undefined`: the run continues as new, carrying
   * the wake-up, and its turn runs on: started with `ParentClosePolicy.ABANDON`).
   */
  const outcomeOrBound = async (ending: Promise<WakeupOutcome>): Promise<WakeupOutcome | undefined> => {
    let outcome: WakeupOutcome | undefined;
    void ending.then((ended) => {
      outcome = ended;
    });
    await condition(() => outcome !== undefined || overBound());
    return outcome;
  };

  /**
   * Runs a wake-up's turn in a span of its own trace (`watch_wakeup <watcher>`), linked to the writes whose signals
   * woke it: a watcher runs for as long as its root, so its own workflow span would be exported only when it ends.
   * The turn's spans sit under it. Without a traced worker it only runs `work`.
   */
  const inWakeupSpan = <T>(
    opened: { wakeup: number; threadId: string; agent: string; epoch: number },
    found: { count: number; keys: readonly string[] },
    work: () => Promise<T>,
    outcomeOf: (result: T) => string,
  ): Promise<T> =>
    inWorkflowSpan(
      `watch_wakeup ${watcher}`,
      {
        ...threadSpanAttributes({ rootThreadId, threadId: opened.threadId, agent: opened.agent, epoch: opened.epoch }),
        [BatonAttribute.watcher]: watcher,
        [BatonAttribute.watchWakeup]: opened.wakeup,
        [BatonAttribute.watchChanges]: found.count,
        [BatonAttribute.watchKeys]: truncateBytes(found.keys.join(', '), 300),
      },
      async (span) => {
        const result = await work();
        span.setAttribute(BatonAttribute.watchOutcome, outcomeOf(result));
        return result;
      },
      { root: true, links: wokenBy.splice(0) },
    );

  // A wake-up an earlier run left running: wait for its turn before anything else, one turn at a time.
  const left = bounded ? input.carried?.running : undefined;
  if (left !== undefined) {
    state.running = { wakeup: left.wakeup, threadId: left.threadId };
    setCurrentDetails(`Watcher ${watcher}: wake-up ${left.wakeup} running in ${left.threadId}.`);
    const outcome = await outcomeOrBound(
      wakeupWait.awaitWatchWakeup
        .executeWithOptions({ summary: `watch: ${watcher} waits for wake-up ${left.wakeup}` }, [
          { rootThreadId, watcher, wakeup: left.wakeup, workflowId: left.workflowId },
        ])
        .catch((failure: unknown): WakeupOutcome => ({ status: 'failed', error: rootMessage(failure) })),
    );
    if (outcome === undefined) return carryOn(left);
    await finished(left.wakeup, outcome);
  }

  for (;;) {
    if (overBound()) return carryOn();
    setCurrentDetails(`Watcher ${watcher}: waiting for changes (${state.wakeups} wake-up(s) so far).`);
    await condition(() => signals > looked);
    looked = signals;
    // The writes linked so far; dropped if this look finds nothing to wake for.
    const linked = wokenBy.length;
    let found = await look();
    if (found.state === 'ended') {
      setCurrentDetails(`Watcher ${watcher} ended: ${found.reason}.`);
      return state;
    }
    if (found.count > 0 && found.debounceS > 0) {
      // Changes within the window are one wake-up: wait it out from the first, then look again.
      setCurrentDetails(`Watcher ${watcher}: a change came; waiting ${found.debounceS} s for more.`);
      if (await waitOrBound(found.debounceS * 1000)) return carryOn();
      looked = signals;
      found = await look();
      if (found.state === 'ended') return state;
    }
    if (found.overDepth.keys.length > 0 && found.count === 0) {
      await localDb.settleWatch.executeWithOptions({ summary: `watch: ${watcher} skips a chain too deep` }, [
        {
          rootThreadId,
          watcher,
          cursor: found.cursor,
          skipped: { ...found.overDepth, maxDepth: found.limits.maxDepth },
        },
      ]);
      // The look read one page of the log: the rest may hold changes within the limit.
      if (bounded && found.more) signals += 1;
      wokenBy.splice(0, linked);
      continue;
    }
    if (found.count === 0) {
      if (found.cursor > 0) {
        await localDb.settleWatch.executeWithOptions({ summary: `watch: ${watcher} has nothing to do` }, [
          { rootThreadId, watcher, cursor: found.cursor },
        ]);
      }
      if (found.more) signals += 1;
      wokenBy.splice(0, linked);
      if (workflowInfo().continueAsNewSuggested) return carryOn();
      continue;
    }
    // The rate limit: past `maxPerHour` wake-ups in the last hour, pause until the oldest of them is an hour old.
    const now = Date.now();
    recent = recent.filter((at) => now - at < HOUR_MS);
    if (recent.length >= found.limits.maxPerHour) {
      const until = (recent[0] ?? now) + HOUR_MS;
      const untilText = new Date(until).toISOString();
      state.pausedUntil = untilText;
      metricMeter.createCounter(BatonMetric.watcherPauses, 'pauses', 'Watcher pauses (rate limit)').add(1, { watcher });
      await localDb.pauseWatcher.executeWithOptions({ summary: `watch: ${watcher} paused (rate limit)` }, [
        {
          rootThreadId,
          watcher,
          pause: {
            reason: `${recent.length} wake-ups in the last hour, the most allowed (${WATCH_LIMIT_VARIABLES.maxPerHour.name})`,
            until: untilText,
          },
        },
      ]);
      setCurrentDetails(`Watcher ${watcher}: paused until ${untilText} (rate limit); changes wait, none is lost.`);
      // Changes wait for the pause to end; a removal does not.
      while (Date.now() < until) {
        await condition(() => signals > looked || overBound(), until - Date.now());
        // The next run pauses again: it carries the wake-ups the rate limit counts.
        if (overBound()) return carryOn();
        if (signals > looked) {
          looked = signals;
          const during = await lookDuringPause();
          if (during.state === 'ended') return state;
        }
      }
      delete state.pausedUntil;
      await localDb.pauseWatcher.executeWithOptions({ summary: `watch: ${watcher} resumes` }, [
        { rootThreadId, watcher },
      ]);
      signals += 1;
      continue;
    }
    // The cooldown: the next wake-up starts this long after the last one ended.
    if (lastEndedAt !== undefined && now - lastEndedAt < found.limits.cooldownS * 1000) {
      const wait = found.limits.cooldownS * 1000 - (now - lastEndedAt);
      setCurrentDetails(`Watcher ${watcher}: cooling down for ${Math.ceil(wait / 1000)} s before the next wake-up.`);
      if (await waitOrBound(wait)) return carryOn();
      signals += 1;
      continue;
    }

    if (found.overDepth.keys.length > 0) {
      // Said once, as the wake-up for the changes within the limit opens (it moves the cursor past both).
      await localDb.settleWatch.executeWithOptions({ summary: `watch: ${watcher} skips a chain too deep` }, [
        { rootThreadId, watcher, cursor: 0, skipped: { ...found.overDepth, maxDepth: found.limits.maxDepth } },
      ]);
    }
    const opened = await localDb.openWatchWakeup.executeWithOptions(
      { summary: `watch: ${watcher} wakes for ${found.count} change(s)` },
      [
        {
          rootThreadId,
          watcher,
          operationId: operationId(runId, 'wake', wakeupsThisRun),
          cursor: found.cursor,
        },
      ],
    );
    wakeupsThisRun += 1;
    if ('ended' in opened) {
      setCurrentDetails(`Watcher ${watcher} ended: ${opened.ended}.`);
      return state;
    }
    state.wakeups = opened.wakeup;
    state.running = { wakeup: opened.wakeup, threadId: opened.threadId };
    // Not recorded while a history replays: each wake-up is counted once.
    metricMeter.createCounter(BatonMetric.watcherWakeups, 'wake-ups', 'Watcher wake-ups').add(1, { watcher });
    recent.push(Date.now());
    setCurrentDetails(
      `Watcher ${watcher}: wake-up ${opened.wakeup} running in ${opened.threadId} for ` +
        truncateBytes(found.keys.join(', '), 300),
    );
    const turn = {
      workflowId: opened.workflowId,
      args: [
        {
          rootThreadId,
          threadId: opened.threadId,
          parentThreadId: rootThreadId,
          agent: opened.agent,
          message: opened.message,
          sender: `watcher ${watcher}`,
          epoch: opened.epoch,
          chain: [opened.agent],
          world: opened.world,
          limitsFromWorld: {},
        },
      ] as [Parameters<typeof agentTurnWorkflow>[0]],
      staticSummary: turnSummary(opened.agent, `watch ${watcher}: ${found.keys.join(', ')}`),
      typedSearchAttributes: [
        { key: BatonSearchAttributes.rootThreadId, value: rootThreadId },
        { key: BatonSearchAttributes.threadId, value: opened.threadId },
        { key: BatonSearchAttributes.parentThreadId, value: rootThreadId },
        { key: BatonSearchAttributes.agent, value: opened.agent },
      ],
    };
    if (bounded) {
      // A child the run may leave running: past its bound it continues as new, and the next run waits for the turn.
      const outcome = await inWakeupSpan(
        opened,
        found,
        () => {
          const ending = startChild(agentTurnWorkflow, {
            ...turn,
            parentClosePolicy: ParentClosePolicy.ABANDON,
          }).then((child) => child.result());
          return outcomeOrBound(
            ending.then(
              (result): WakeupOutcome => ({
                status: result.status === TurnStatus.Completed ? 'completed' : 'max_steps',
              }),
              // A failed wake-up does not stop the watcher: the next change wakes it again.
              (failure: unknown): WakeupOutcome => ({ status: 'failed', error: rootMessage(failure) }),
            ),
          );
        },
        // Carried: the run continues as new while the turn runs on; the next run records its end.
        (ended) => ended?.status ?? 'carried',
      );
      if (outcome === undefined) {
        return carryOn({ wakeup: opened.wakeup, threadId: opened.threadId, workflowId: opened.workflowId });
      }
      await finished(opened.wakeup, outcome);
      if (wakeupsThisRun >= WAKEUPS_PER_RUN || workflowInfo().continueAsNewSuggested) return carryOn();
      continue;
    }
    const { status, error } = await inWakeupSpan(
      opened,
      found,
      async (): Promise<{ status: string; error?: string }> => {
        try {
          const result = await executeChild(agentTurnWorkflow, turn);
          return { status: result.status === TurnStatus.Completed ? 'completed' : 'max_steps' };
        } catch (failure) {
          // A failed wake-up does not stop the watcher: the next change wakes it again.
          const error = rootMessage(failure);
          log.warn('a watcher wake-up failed', { watcher, wakeup: opened.wakeup, error });
          return { status: 'failed', error };
        }
      },
      (ended) => ended.status,
    );
    await localDb.finishWatchWakeup.executeWithOptions(
      { summary: `watch: ${watcher} wake-up ${opened.wakeup} ${status}` },
      [{ rootThreadId, watcher, wakeup: opened.wakeup, status, ...(error === undefined ? {} : { error }) }],
    );
    delete state.running;
    lastEndedAt = Date.now();
    // What changed during the turn (its own writes among it) is looked at now.
    signals += 1;
    if (wakeupsThisRun >= WAKEUPS_PER_RUN || workflowInfo().continueAsNewSuggested) return carryOn();
  }
}
