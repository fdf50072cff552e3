import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  currentUpdateInfo,
  defineQuery,
  defineSignal,
  defineUpdate,
  executeChild,
  getExternalWorkflowHandle,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { carriedDeliveries, MAX_CARRIED_FAILURE_BYTES, messageTextProblem, type Delivery } from '../common/deliveries';
import { ErrorType } from '../common/errors';
import { rootTurnWorkflowId } from '../common/ids';
import { BatonSearchAttributes } from '../common/search-attributes';
import { describeWait, truncateBytes, turnSummary } from '../common/text';
import type {
  AgentTurnInput,
  EnsureThreadInput,
  SendMessageInput,
  SendMessageResult,
  ThreadStatus,
  ThreadWorkflowInput,
  WaitInfo,
  WakeCause,
  WakeResult,
} from '../common/types';
import { db, localDb } from './activity-profiles';
import { agentTurnWorkflow, FEWER_DISPATCHES_PATCH, rootTurnWorkflow } from './agent-turn';
import { rootMessage } from './failure-text';
import { beginTurnInThread } from './thread-turns';
import { waitChangedSignal, wakeTurnSignal } from './wait';
import { BatonAttribute, GenAiAttribute, threadSpanAttributes } from '../common/span-attributes';
import { activeSpanContext, inWorkflowSpan } from './spans';

/**
 * A message sent again under an id an earlier run of the thread handled gets that turn's outcome (read back by a
 * local activity) instead of running a second turn. Earlier runs carried no ids, so their histories never get here.
 */
export const DELIVERIES_ACROSS_RUNS_PATCH = 'baton-deliveries-across-runs';

/** Turns one run of a thread takes before it continues as new. */
/**
 * A turn resolves its delegation limits from the world as it begins (in `beginTurn`), instead of the thread reading
 * them in a local activity of its own before it starts the turn: the thread's workflow task that takes a message
 * only starts the turn. Histories recorded before read them here.
 */
export const LIMITS_IN_TURN_PATCH = 'baton-limits-in-turn';

/**
 * A thread that ends stops the watchers of its root (they wake no more, and their workflows end). Threads that ended
 * before watchers existed had none.
 */
export const STOP_WATCHERS_PATCH = 'baton-thread-end-stops-watchers';

/**
 * A turn begins in the thread's own workflow task, and a turn whose steps are local runs them there too until it
 * answers or needs a turn workflow (`beginTurnInThread`): one workflow start and end fewer per turn. Histories recorded
 * before started every turn as a child workflow that began itself.
 */
export const TURNS_BEGIN_IN_THREAD_PATCH = 'baton-turns-begin-in-thread';

/**
 * The thread opens its record in Postgres in a local activity, inside its first workflow task: a message sent as the
 * thread starts no longer waits for an activity task's round trip through the server. Histories recorded before ran
 * an activity.
 */
export const THREAD_OPENS_IN_ITS_TASK_PATCH = 'baton-thread-opens-in-its-task';

/**
 * A message taken in the thread's first workflow task (sent with its start by `run`, Update-with-Start, or a `send`
 * that reached the task) begins its turn at once, and the turn's `beginTurn` opens the thread's record first
 * (`BeginTurnInput.openThread`), handing back its epoch: one local activity's round trip fewer before the turn's first
 * model call. Should that beginning fail, the thread opens its record itself, as before. Histories recorded before
 * opened the record first in every run.
 */
export const FIRST_TURN_OPENS_THREAD_PATCH = 'baton-first-turn-opens-thread';

export const DEFAULT_CONTINUE_AS_NEW_AFTER_TURNS = 100;

/** Sends a human message to the thread; resolves with the agent's reply once its turn ends. */
export const sendMessageUpdate = defineUpdate<SendMessageResult, [SendMessageInput]>('sendMessage');
/** What the thread is doing now. */
export const statusQuery = defineQuery<ThreadStatus>('status');
/** Ends the thread after the turns in progress finish. */
export const endThreadSignal = defineSignal('endThread');
/** Ends every `wait` in progress in the thread's tree early (`baton wake`); resolves with the waits it ended. */
export const wakeUpdate = defineUpdate<WakeResult, []>('wake');

/**
 * A root thread: a long-lived conversation a human talks to. Each message runs as one child
 * `agentTurnWorkflow`, one at a time in arrival order, so the transcript reads as a conversation. The transcript is
 * in Postgres, so the thread continues as new (after draining its handlers) whenever its history grows, without
 * losing anything.
 */
export async function threadWorkflow(input: ThreadWorkflowInput): Promise<ThreadStatus> {
  const { rootThreadId, agent } = input;
  const world = input.world ?? 'default';
  const limit = input.continueAsNewAfterTurns ?? DEFAULT_CONTINUE_AS_NEW_AFTER_TURNS;
  const runs = (input.runsSoFar ?? 0) + 1;
  const turnsAtStart = input.turnsSoFar ?? 0;
  // Set once the thread record exists. Handlers are registered before the first await (an Update that arrives
  // with the first workflow task and finds no handler is rejected), so turns wait for this instead.
  let epoch: number | undefined = undefined;
  // The thread's record as its first turn opens it (FIRST_TURN_OPENS_THREAD_PATCH): asked for by the run's start,
  // taken by the turn that begins first, and settled once that turn's beginning has opened it or failed.
  let firstTurnOpens: EnsureThreadInput | undefined = undefined;
  let openingSettled = false;
  let turns = turnsAtStart;
  let busy = false;
  let ending = false;
  // Turns run one after another: each handler waits for the one before it.
  let queue: Promise<unknown> = Promise.resolve();
  // Messages accepted but whose turn has not started: while there are any, no wait in the tree may go on (the
  // message would sit behind it).
  let pending = 0;
  // `wait` calls in progress in the running turn's tree, as the waiting turns reported them.
  const waits = new Map<string, WaitInfo>();
  // Messages by Update id: those earlier runs handled, and those this run handled, carried on.
  const earlierDeliveries = new Map((input.deliveries ?? []).map((delivery) => [delivery.id, delivery]));
  const deliveries: Delivery[] = [];

  // The thread's workflow span (a traced worker's): a turn in a trace of its own links to it.
  const threadSpan = activeSpanContext();

  const status = (): ThreadStatus => ({ rootThreadId, agent, turns, busy, runs, waits: [...waits.values()] });
  const shouldContinueAsNew = () => turns - turnsAtStart >= limit || workflowInfo().continueAsNewSuggested;

  /** Ends the waits in progress early. Sends nothing when none is (always, in histories from before `wait`). */
  function wakeWaits(cause: WakeCause): WaitInfo[] {
    const woken = [...waits.values()];
    for (const workflowId of new Set(woken.map((wait) => wait.workflowId))) {
      // A turn that has just finished cannot be signalled: its wait is over anyway.
      getExternalWorkflowHandle(workflowId)
        .signal(wakeTurnSignal, { cause })
        .catch((error: unknown) => log.info('could not wake a waiting turn', { workflowId, error }));
    }
    return woken;
  }

  const turnDetails = (turn: number) => {
    const [first, ...more] = waits.values();
    return first === undefined
      ? `Running turn ${turn}: ${agent} is answering a human message.`
      : `Running turn ${turn}: ${first.agent} is ${describeWait(first)}` +
          (more.length > 0 ? ` (and ${more.length} more wait${more.length === 1 ? '' : 's'})` : '');
  };

  /**
   * One turn of the thread, in a span of its own (an `invoke_agent` span, workflows/spans.ts). A turn whose message
   * came without a caller's trace is a trace of its own (workflows/tracing.ts): its span links to the thread's.
   */
  function runTurn(message: string, messageId: string | undefined): Promise<SendMessageResult> {
    const apart = threadSpan !== undefined && activeSpanContext()?.traceId !== threadSpan.traceId;
    return inWorkflowSpan(
      `invoke_agent ${agent}`,
      {
        ...threadSpanAttributes({ rootThreadId, threadId: rootThreadId, agent }),
        [GenAiAttribute.operationName]: 'invoke_agent',
        [BatonAttribute.turn]: turns + 1,
      },
      () => runTurnNow(message, messageId),
      apart ? { links: [{ context: threadSpan }] } : {},
    );
  }

  async function runTurnNow(message: string, messageId: string | undefined): Promise<SendMessageResult> {
    pending -= 1;
    const openThread = firstTurnOpens;
    firstTurnOpens = undefined;
    if (openThread === undefined) await condition(() => epoch !== undefined);
    turns += 1;
    const turn = turns;
    const delivery: Delivery | undefined = messageId === undefined ? undefined : { id: messageId, turn };
    if (delivery !== undefined) deliveries.push(delivery);
    busy = true;
    setCurrentDetails(turnDetails(turn));
    // Read at every turn, so a change to the world's limits applies from the next message on: by the turn as it
    // begins, or (histories from before) here, in a local activity from the fewer-dispatches patch on.
    const overrides = input.limits ? { overrides: input.limits } : {};
    const limits = patched(LIMITS_IN_TURN_PATCH)
      ? { limitsFromWorld: overrides }
      : {
          limits: await (patched(FEWER_DISPATCHES_PATCH) ? localDb : db).resolveLimits.executeWithOptions(
            { summary: `world: ${world} limits` },
            [{ world, ...overrides }],
          ),
        };
    const turnInput: AgentTurnInput = {
      rootThreadId,
      threadId: rootThreadId,
      agent,
      message,
      sender: 'human',
      epoch: epoch ?? 0,
      chain: [agent],
      world,
      ...limits,
    };
    try {
      let childInput = turnInput;
      let childType = agentTurnWorkflow;
      if (patched(TURNS_BEGIN_IN_THREAD_PATCH)) {
        let begun;
        try {
          begun = await beginTurnInThread(
            turnInput,
            turn,
            workflowInfo().runId,
            openThread === undefined ? {} : { openThread },
          );
        } catch (error) {
          // The turn failed here, so no turn workflow keeps why: the delivery carries it, cut so that the last 100
          // deliveries a run hands its successor stay far below a payload's limit.
          if (delivery !== undefined)
            delivery.ended = { failed: truncateBytes(rootMessage(error), MAX_CARRIED_FAILURE_BYTES) };
          throw error;
        } finally {
          if (openThread !== undefined) openingSettled = true;
        }
        if (begun.epoch !== undefined) {
          epoch = begun.epoch;
          childInput = { ...childInput, epoch: begun.epoch };
        }
        if (begun.kind === 'answered') {
          if (delivery !== undefined) delivery.ended = begun.ended;
          return { ...begun.result, threadId: rootThreadId, turn };
        }
        childInput = { ...childInput, begun: begun.begun };
        childType = rootTurnWorkflow;
      }
      const result = await executeChild(childType, {
        workflowId: rootTurnWorkflowId(rootThreadId, turn),
        args: [childInput],
        staticSummary: turnSummary(agent, message),
        typedSearchAttributes: [
          { key: BatonSearchAttributes.rootThreadId, value: rootThreadId },
          { key: BatonSearchAttributes.threadId, value: rootThreadId },
          { key: BatonSearchAttributes.agent, value: agent },
        ],
      });
      return { ...result, threadId: rootThreadId, turn };
    } finally {
      busy = false;
      // Whatever the turn's tree did not report as ended is over with the turn.
      waits.clear();
      setCurrentDetails(`Idle after ${turn} turn(s); waiting for a message.`);
    }
  }

  setHandler(
    sendMessageUpdate,
    (update) => {
      const messageId = currentUpdateInfo()?.id;
      const earlier = messageId === undefined ? undefined : earlierDeliveries.get(messageId);
      if (messageId !== undefined && earlier !== undefined && patched(DELIVERIES_ACROSS_RUNS_PATCH)) {
        return localDb.deliveredTurnResult.executeWithOptions(
          { summary: `thread: message ${messageId} was turn ${earlier.turn}` },
          [
            {
              rootThreadId,
              turn: earlier.turn,
              messageId,
              ...(earlier.ended === undefined ? {} : { ended: earlier.ended }),
            },
          ],
        );
      }
      pending += 1;
      wakeWaits('message');
      const next = queue.then(() => runTurn(update.message, messageId));
      queue = next.catch(() => undefined);
      return next;
    },
    {
      validator: (update: SendMessageInput) => {
        if (ending) {
          throw ApplicationFailure.create({ type: ErrorType.InvalidInput, message: 'the thread has ended' });
        }
        const problem = messageTextProblem((update as Partial<SendMessageInput> | undefined)?.message);
        if (problem !== undefined) throw ApplicationFailure.create({ type: ErrorType.InvalidInput, message: problem });
      },
    },
  );
  setHandler(statusQuery, status);
  setHandler(waitChangedSignal, (change) => {
    if (change.wait === undefined) waits.delete(change.id);
    // A report that arrives after its turn ended is stale.
    else if (busy) {
      waits.set(change.id, change.wait);
      if (pending > 0) wakeWaits('message');
    }
    if (busy) setCurrentDetails(turnDetails(turns));
  });
  setHandler(wakeUpdate, () => ({ threadId: rootThreadId, woken: wakeWaits('wake') }));
  setHandler(endThreadSignal, () => {
    ending = true;
  });

  const record = { threadId: rootThreadId, rootThreadId, agent, world };
  // A message taken with the start (its handler ran as the handlers were set, above) opens the record in its turn's
  // beginning; the thread opens it here only if that beginning fails before it could.
  if (pending > 0 && patched(FIRST_TURN_OPENS_THREAD_PATCH)) {
    firstTurnOpens = record;
    await condition(() => epoch !== undefined || openingSettled);
  } else if (input.recordOpenedByStarter === true) {
    // The starter opened the record: the first message's turn takes its epoch (no patch: only inputs from this code
    // on ask for it). A thread ended before any message opens it below, harmlessly again.
    firstTurnOpens = record;
    await condition(() => epoch !== undefined || openingSettled || ending);
    firstTurnOpens = undefined;
  }
  if (epoch === undefined) {
    const opened = await (patched(THREAD_OPENS_IN_ITS_TASK_PATCH) ? localDb : db).ensureThread.executeWithOptions(
      { summary: `thread: open ${rootThreadId}` },
      [record],
    );
    epoch = opened.epoch;
  }
  if (!busy) setCurrentDetails('Waiting for a message.');
  await condition(() => (ending || (shouldContinueAsNew() && !busy)) && allHandlersFinished());
  if (ending) {
    if (patched(STOP_WATCHERS_PATCH)) {
      await localDb.stopWatchers.executeWithOptions({ summary: `thread: ${rootThreadId} ends; its watchers stop` }, [
        { rootThreadId, reason: `its root thread '${rootThreadId}' has ended` },
      ]);
    }
    return status();
  }
  // Messages that arrive from here on are delivered to the next run: Temporal retries an Update that reaches a
  // run which has closed by continuing as new.
  const { recordOpenedByStarter: _opened, ...carried } = input;
  return continueAsNew<typeof threadWorkflow>({
    ...carried,
    turnsSoFar: turns,
    runsSoFar: runs,
    deliveries: carriedDeliveries(input.deliveries ?? [], deliveries),
  });
}
