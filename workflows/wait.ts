/**
 * `wait` inside an agent turn: a durable workflow timer, so no process or activity stays busy while an agent waits.
 * The turn tells its root thread when a wait starts and ends (`waitChanged`), so the thread's status lists it and the
 * thread can end it early (`wakeTurn`): when a human message arrives (it would otherwise sit behind the wait) or on
 * `baton wake`. Delegated turns tell the root thread too, so one wake reaches every wait of the tree.
 *
 * A turn never continues as new and its thread continues as new only between turns, so the timer, and with it the
 * wait's deadline, lives in one run of the turn from start to end.
 */
import {
  CancellationScope,
  condition,
  defineSignal,
  getExternalWorkflowHandle,
  log,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { threadWorkflowId } from '../common/ids';
import { describeSeconds, describeWait } from '../common/text';
import {
  DEFAULT_MAX_WAIT_SECONDS,
  type DelegationLimits,
  type PlannedToolCall,
  type ThreadScope,
  type WaitChangedInput,
  type WaitInfo,
  type WakeCause,
  type WakeTurnInput,
} from '../common/types';
import { DELEGATION_LIMIT_VARIABLES } from '../common/world-variables';

/** To a turn: end its waits in progress early. Sent by the root thread. */
export const wakeTurnSignal = defineSignal<[WakeTurnInput]>('wakeTurn');
/** To a root thread: a wait in its tree started or ended. Sent by the waiting turn. */
export const waitChangedSignal = defineSignal<[WaitChangedInput]>('waitChanged');

export type PlannedWait = Extract<PlannedToolCall, { kind: 'wait' }>;

/** What a wait needs from the turn that runs it. */
export interface WaitContext {
  scope: ThreadScope;
  limits: DelegationLimits;
  /** Records the call's tool result. */
  record(content: string): Promise<void>;
  /** What the turn shows as its current details once the wait is over. */
  idleDetails: string;
}

/** The waits of one turn. Create it before the turn's first await, so a wake never finds no handler. */
export interface TurnWaits {
  run(context: WaitContext, call: PlannedWait, operationId: string): Promise<void>;
}

export function createTurnWaits(): TurnWaits {
  // Waits in progress in this turn (a reply may hold several): operation id → why it was ended early, once it was.
  const woken = new Map<string, WakeCause | undefined>();
  setHandler(wakeTurnSignal, (input) => {
    const cause: WakeCause = input?.cause === 'message' ? 'message' : 'wake';
    for (const [id, already] of woken) if (already === undefined) woken.set(id, cause);
  });
  return { run: (context, call, operationId) => runWait(woken, context, call, operationId) };
}

async function runWait(
  woken: Map<string, WakeCause | undefined>,
  context: WaitContext,
  call: PlannedWait,
  operationId: string,
): Promise<void> {
  const { scope } = context;
  // Workflow time: the same on replay, so the checks below decide the same way.
  const start = Date.now();
  const limitSeconds = context.limits.maxWaitSeconds ?? DEFAULT_MAX_WAIT_SECONDS;
  const deadline = call.until === undefined ? start + (call.seconds ?? 0) * 1000 : Date.parse(call.until);
  // Also a deadline past the last date there is (a call planned before `seconds` was bounded): `iso` would throw.
  if (!isDate(deadline)) {
    return context.record(
      call.until === undefined
        ? `Error: a wait of ${call.seconds} seconds would end past any date there is. Nothing was waited.`
        : `Error: 'until' (${call.until}) is not a time I can read. Nothing was waited.`,
    );
  }
  if (deadline <= start) {
    return context.record(
      `Error: 'until' (${call.until}) is not in the future: it is now ${iso(start)}. Nothing was waited: give a ` +
        `later time, or 'seconds'.`,
    );
  }
  const planned = (deadline - start) / 1000;
  if (planned > limitSeconds) {
    return context.record(
      `Error: a wait of ${describeSeconds(planned)} (until ${iso(deadline)}) is longer than this world allows: at ` +
        `most ${describeSeconds(limitSeconds)} (${limitSeconds} seconds, world variable ${DELEGATION_LIMIT_VARIABLES.maxWaitSeconds.name}). ` +
        `Nothing was waited: wait at most that long, or answer now and be sent a message later.`,
    );
  }

  const wait: WaitInfo = {
    id: operationId,
    workflowId: workflowInfo().workflowId,
    threadId: scope.threadId,
    agent: scope.agent,
    since: iso(start),
    until: iso(deadline),
    reason: call.reason,
  };
  woken.set(operationId, undefined);
  setCurrentDetails(
    `${scope.agent} is ${describeWait(wait)}\nEnd it early with: baton wake ${scope.rootThreadId} ` +
      '(or send the thread a message)',
  );
  let cause: WakeCause | undefined;
  try {
    // The timer starts at once; the thread hears of the wait meanwhile (it may answer by waking it right away).
    const told = tellThread(scope, { id: operationId, wait });
    await condition(() => woken.get(operationId) !== undefined, deadline - start);
    await told;
    cause = woken.get(operationId);
  } finally {
    woken.delete(operationId);
    // Also when the turn is cancelled (a fork task given up on), so the thread's status does not keep the wait.
    await CancellationScope.nonCancellable(() => tellThread(scope, { id: operationId }));
  }
  const waited = describeSeconds((Date.now() - start) / 1000);
  const content =
    cause === undefined
      ? `Waited ${waited}, until ${wait.until}, as planned (${call.reason}).`
      : `The wait ended early, after ${waited} of the ${describeSeconds(planned)} planned (until ${wait.until}): ` +
        (cause === 'message'
          ? 'a new message from the human arrived in this conversation. It is handled as usual once the current ' +
            'turn ends, so finish what you are doing and answer.'
          : 'someone woke this conversation up (baton wake). Go on with what you were waiting to do.');
  setCurrentDetails(context.idleDetails);
  await context.record(content);
}

/** Tells the root thread a wait started or ended; a turn with no thread workflow above it (a test) goes on alone. */
async function tellThread(scope: ThreadScope, input: WaitChangedInput): Promise<void> {
  try {
    await getExternalWorkflowHandle(threadWorkflowId(scope.rootThreadId)).signal(waitChangedSignal, input);
  } catch (error) {
    log.info('could not tell the root thread about a wait', { rootThreadId: scope.rootThreadId, error });
  }
}

function iso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** Whether a number of milliseconds since 1970 is a date (±100,000,000 days): what `iso` can write. */
function isDate(epochMs: number): boolean {
  return !Number.isNaN(new Date(epochMs).getTime());
}
