import { patched, workflowInfo } from '@temporalio/workflow';
import type { EndedInThread } from '../common/deliveries';
import { operationId } from '../common/ids';
import {
  DEFAULT_DELEGATION_LIMITS,
  type AgentTurnInput,
  type AgentTurnResult,
  type EnsureThreadInput,
} from '../common/types';
import { localDb } from './activity-profiles';
import {
  BATCHED_STEPS_PATCH,
  beginTurnAndFirstBatch,
  runStepsToTheEnd,
  stepProfiles,
  threadTurnOperationBase,
  turnFinisher,
  turnScope,
} from './turn-steps';

/**
 * How a turn begun in another turn's workflow (its thread's, its fork's) goes on; `epoch` when its beginning opened the
 * thread (`BeginHereOptions.openThread`): the thread's epoch, which the turn went on under and a turn workflow of its own
 * must be given.
 */
export type TurnBegunHere = { epoch?: number } & (
  | { kind: 'answered'; result: AgentTurnResult; ended: EndedInThread }
  /** In a turn workflow of its own, from where the workflow that began it left it (`AgentTurnInput.begun`). */
  | { kind: 'go on'; begun: NonNullable<AgentTurnInput['begun']> }
);

/**
 * Begins a root turn inside its thread's workflow task (from the `baton-turns-begin-in-thread` patch): `beginTurn`
 * as a local activity, then, when the agent's steps are `local` or `batched`, its model calls and the tool calls they
 * carry as local activities too (`batched`: each run of consecutive steps in one), until the answer. The turn only
 * becomes a workflow of its own when it needs what only a turn workflow does (a question, an approval, a delegation,
 * a fork, a wait, a tool too long to carry, its last step's calls), or when its steps are activities: it then goes on
 * from the reply whose calls the thread did not run. A turn that answers here costs no workflow start or end: the
 * thread's task that takes the message runs it whole.
 *
 * Operation ids start with the thread run's id and the turn's number, so a re-run after a crash (the thread's task
 * again, on another worker) finds every step it stored. A step that fails fails the turn here as it would in a turn
 * workflow: the thread's row records it, and the message's Update fails with the reason.
 */
export function beginTurnInThread(
  input: AgentTurnInput,
  turn: number,
  runId: string,
  options: Pick<BeginHereOptions, 'openThread'> = {},
): Promise<TurnBegunHere> {
  return beginTurnHere(
    input,
    threadTurnOperationBase(runId, turn),
    `turn ${turn}: ${input.agent} starts, message from ${input.sender}`,
    options,
  );
}

/**
 * A turn stepping in another turn's workflow (`beginTurnHere`) goes on in a workflow of its own once the server
 * suggests that workflow continue as new. Asked only when the server does, so histories that never reached the
 * suggestion carry no marker; a run recorded before it, past the suggestion mid-turn, stepped on.
 */
export const STEPS_LEAVE_LONG_HISTORIES_PATCH = 'baton-steps-leave-long-histories';

/** How `beginTurnHere` runs a turn besides its operation ids and summary. */
export interface BeginHereOptions {
  /**
   * Workflow time (ms) by which every local activity of the turn's beginning and local steps ends
   * (`localActivitiesUntil`): past it, the turn fails with the activity's `SCHEDULE_TO_CLOSE` timeout, or its retry
   * refused (`isPastDeadline`).
   */
  deadlineAt?: number;
  /** Who the steps' summaries name (`StepLoopInput.stepper`). */
  stepper?: string;
  /**
   * Asked once the agent's steps turn out to be `activity`: whether they step here too, as activities of this
   * workflow (a fork's tasks, from `FORK_ACTIVITY_STEPS_IN_FORK_PATCH`), rather than in a turn workflow of their own.
   */
  activityStepsHere?: () => boolean;
  /**
   * The thread's record, which the turn's `beginTurn` opens first (`BeginTurnInput.openThread`): the thread's first turn,
   * whose message came with its start. The turn then goes on under the epoch the record has, not `input.epoch`.
   */
  openThread?: EnsureThreadInput;
}

/**
 * Begins a turn in the workflow task of the workflow that runs this (a root turn in its thread's, a fork task in its
 * fork's), as `beginTurnInThread` describes, with the operation ids under `operationBase`. A turn whose message is
 * stored with its delegation (`delegationOperationId`) records that one.
 *
 * Its steps stay here only while the server does not suggest that this workflow continue as new: past that, a turn
 * still stepping goes on in a turn workflow of its own from its last reply, so many tasks' steps never push one
 * history towards its limit.
 */
export async function beginTurnHere(
  input: AgentTurnInput,
  operationBase: string,
  summary: string,
  options: BeginHereOptions = {},
): Promise<TurnBegunHere> {
  const { deadlineAt, stepper } = options;
  const world = input.world ?? 'default';
  const {
    begun: { limits, firstBatch, epoch: openedEpoch, ...agent },
    firstBatchInBegin,
  } = await beginTurnAndFirstBatch(
    summary,
    {
      scope: turnScope(input),
      operationId: operationId(operationBase, 'in'),
      message:
        input.delegationOperationId === undefined
          ? { role: 'user', content: input.message }
          : { role: 'user', delegationOperationId: input.delegationOperationId },
      world,
      ...(input.limitsFromWorld === undefined ? {} : { limits: input.limitsFromWorld }),
      ...(options.openThread === undefined ? {} : { openThread: options.openThread }),
    },
    operationBase,
    deadlineAt,
  );
  // A beginning that opened the thread learnt its epoch: the turn's later writes go under it.
  const scope = turnScope(openedEpoch === undefined ? input : { ...input, epoch: openedEpoch });
  const opened = openedEpoch === undefined ? {} : { epoch: openedEpoch };
  const begun = { agent, limits: limits ?? input.limits ?? DEFAULT_DELEGATION_LIMITS };
  const batched = agent.steps === 'batched' && (firstBatchInBegin || patched(BATCHED_STEPS_PATCH));
  const mode =
    agent.steps === 'local' || batched
      ? agent.steps
      : agent.steps === 'activity' && options.activityStepsHere?.() === true
        ? 'activity'
        : undefined;
  if (mode === undefined) return { kind: 'go on', begun, ...opened };
  const end = await runStepsToTheEnd(
    {
      scope,
      world,
      agent,
      operationBase,
      activities: stepProfiles(mode, deadlineAt),
      carryToolCalls: true,
      finishTurnOnAnswer: true,
      keepStepping: () => !(workflowInfo().continueAsNewSuggested && patched(STEPS_LEAVE_LONG_HISTORIES_PATCH)),
      ...(firstBatch === undefined ? {} : { firstBatch }),
      ...(stepper === undefined ? {} : { stepper }),
    },
    turnFinisher(localDb, input),
  );
  if (end.kind === 'calls') return { kind: 'go on', begun: { ...begun, progress: end.progress }, ...opened };
  // Its budget is spent and its agent asks for more: a turn workflow of its own waits for the person.
  if (end.kind === 'ask') return { kind: 'go on', begun: { ...begun, resume: end.resume }, ...opened };
  // Without `runCalls` the loop stops at the last step's calls, so what ends here is an answer.
  const { steps, usage } = end.result;
  return {
    kind: 'answered',
    ...opened,
    result: end.result,
    ended: {
      answerOperationId: operationId(operationBase, 'model', steps - 1),
      steps,
      usage,
      ...(end.result.output === undefined ? {} : { typed: true }),
    },
  };
}
