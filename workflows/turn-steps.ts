import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  log,
  patched,
  TemporalFailure,
} from '@temporalio/workflow';
import type { ResolvedAgent, StepMode } from '../common/agent-definition';
import { ErrorType } from '../common/errors';
import { operationId } from '../common/ids';
import { truncateBytes } from '../common/text';
import {
  TurnStatus,
  type AgentTurnInput,
  type AgentTurnResult,
  type BeginTurnInput,
  type BegunTurn,
  type BudgetExhaustedDetails,
  type CallModelResult,
  type ExecuteToolCallInput,
  type RunStepsResult,
  type StepResume,
  type ThreadScope,
  type TurnProgress,
} from '../common/types';
import { addUsage, ZERO_USAGE } from '../common/usage';
import { modelCallInput, runsWithNextModelCall, toolCallInput, type TurnStepIds } from '../common/turn-step-calls';
import {
  BATCH_PROFILE,
  DB_PROFILE,
  localActivitiesUntil,
  localBatch,
  localDb,
  localModel,
  localProfile,
  localSteps,
  model,
  MODEL_PROFILE,
  STEP_PROFILE,
  steps,
} from './activity-profiles';
import { rootMessage } from './failure-text';

/**
 * An error the turn's own workflow code throws (a bug, or input it cannot handle) fails the turn with a reason saying
 * so (`Turn.CodeFailed`), where it used to fail the workflow task, which Temporal retries for ever while the thread's
 * queue waits behind the turn. Histories recorded before this patch never threw there.
 */
export const CODE_ERRORS_FAIL_TURN_PATCH = 'baton-code-errors-fail-the-turn';

/**
 * A turn whose agent's steps are `batched` (from its `beginTurn`) runs each run of consecutive steps in one local
 * activity (`runSteps`) rather than one local activity per step: the workflow is not called back between them. Turns
 * recorded before this code never had the mode, so their histories never reach the patch.
 */
export const BATCHED_STEPS_PATCH = 'baton-batched-steps';

/**
 * A turn asks its `beginTurn` to run its first batch of steps too, when they are `batched`
 * (`BeginTurnInput.firstBatch`): the workflow is not called back between the turn's start and its first steps, and
 * a turn that answers in its first batch is one local activity. Histories recorded before ran `runSteps` after it.
 * The patch is newer than every patch a turn checks after its start (local steps, batched steps, finishing with the
 * answer), so a turn begun under it has them all without asking.
 */
export const FIRST_BATCH_IN_BEGIN_PATCH = 'baton-first-batch-in-begin-turn';

/**
 * A model call that finds its turn's budget spent, under an agent with `on_budget: ask`, asks a person for more (in a
 * turn workflow) or hands the turn to a turn workflow of its own to ask there (a turn stepping in its thread's or its
 * fork's workflow), where it used to fail the turn. Budgets are newer than every recorded history, so none reaches it.
 */
export const BUDGET_ASK_PATCH = 'baton-budget-ask';

/**
 * A typed agent's answer that does not match its `output` schema is followed by a message asking the model to fix it,
 * and the turn takes another step (`CallModelResult.outputRepair`). Typed results are newer than every history
 * recorded before them, whose replies never ask for it.
 */
export const TYPED_OUTPUT_PATCH = 'baton-typed-output';

/**
 * A turn's `beginTurn`, wherever the turn begins: from `FIRST_BATCH_IN_BEGIN_PATCH` on it asks for the turn's first
 * batch (under the batch's profile, which that batch needs), before it as it always ran. `firstBatchInBegin` says
 * which, for the patches the turn then no longer checks.
 */
export async function beginTurnAndFirstBatch(
  summary: string,
  input: Omit<BeginTurnInput, 'firstBatch'>,
  operationBase: string,
  deadlineAt?: number,
): Promise<{ begun: BegunTurn; firstBatchInBegin: boolean }> {
  const firstBatchInBegin = patched(FIRST_BATCH_IN_BEGIN_PATCH);
  const profile = firstBatchInBegin ? BATCH_PROFILE : DB_PROFILE;
  const activities =
    deadlineAt === undefined ? (firstBatchInBegin ? localBatch : localDb) : localActivitiesUntil(profile, deadlineAt);
  const begun = await activities.beginTurn.executeWithOptions({ summary }, [
    { ...input, ...(firstBatchInBegin ? { firstBatch: { operationBase } } : {}) },
  ]);
  return { begun, firstBatchInBegin };
}

/**
 * Where a turn's model calls and the tool calls carried with them run: activities, local activities (one per step), or
 * (`batched`) also consecutive steps in one local activity (`batch`). With `deadlineAt`, local activities that end by
 * then (`localActivitiesUntil`).
 */
export function stepProfiles(
  mode: StepMode,
  deadlineAt?: number,
): { model: typeof model; steps: typeof steps; batch?: typeof localBatch } {
  if (mode === 'activity') return { model, steps };
  if (deadlineAt !== undefined) {
    return {
      model: localActivitiesUntil(localProfile(MODEL_PROFILE), deadlineAt),
      steps: localActivitiesUntil(localProfile(STEP_PROFILE), deadlineAt),
      ...(mode === 'batched' ? { batch: localActivitiesUntil(BATCH_PROFILE, deadlineAt) } : {}),
    };
  }
  return { model: localModel, steps: localSteps, ...(mode === 'batched' ? { batch: localBatch } : {}) };
}

/** What a turn's steps are run with, wherever the turn runs (its own workflow, or its thread's). */
export interface StepLoopInput extends TurnStepIds {
  agent: ResolvedAgent;
  /** Activities (or local activities) for model calls and combined steps (`stepProfiles`). */
  activities: ReturnType<typeof stepProfiles>;
  /** Tool calls the activity runs go with the next model call (the fewer-dispatches patch). */
  carryToolCalls: boolean;
  /** The model call that gets the answer records the turn completed (the finish-with-answer patch). */
  finishTurnOnAnswer: boolean;
  /**
   * Who the steps' summaries in the Web UI name: the agent, or for a fork task stepping in its fork's workflow, the
   * agent and its task (`kid (fork 1 task 2)`), since its siblings' steps are markers of the same history.
   * @default the agent
   */
  stepper?: string;
  /** Where an earlier part of the turn left off: its last reply's calls are run first, then the next step. */
  from?: TurnProgress;
  /** Where an earlier part of the turn stopped at a spent budget: the loop starts with that step's model call. */
  resume?: StepResume;
  /** The turn's first batch, run by its `beginTurn` (`BeginTurnInput.firstBatch`): the loop goes on from its reply. */
  firstBatch?: RunStepsResult;
  /**
   * Runs the calls of a reply the loop does not carry into the next model call. Without it the loop stops at such a
   * reply and hands back where it is (`{ kind: 'calls' }`), for a turn workflow to go on from there.
   */
  runCalls?: (reply: TurnProgress['reply'], step: number) => Promise<void>;
  /**
   * Asked when a model call finds the turn's budget spent and its agent says `on_budget: ask` (a turn workflow, which
   * can wait for a person): resolves once more was added, and the step is run again; throws when it was not. Without
   * it such a turn is handed back (`{ kind: 'ask' }`) for a turn workflow to ask.
   */
  askForBudget?: (exhausted: ApplicationFailure, step: number) => Promise<void>;
  /**
   * Without `runCalls`: asked at every reply whose calls would go with the next model call; `false` stops the loop
   * there and hands that reply back (`{ kind: 'calls' }`) for a turn workflow to run its calls and go on.
   * @default always `true`
   */
  keepStepping?: () => boolean;
}

export type StepLoopEnd =
  | { kind: 'done'; result: AgentTurnResult; finishedWithAnswer: boolean }
  | { kind: 'calls'; progress: TurnProgress }
  /** The budget is spent and the agent asks for more: a turn workflow goes on with the call that was not made. */
  | { kind: 'ask'; resume: StepResume };

/**
 * The failure of a model call that found its turn's budget spent (`Budget.Exhausted`), or `undefined`: an activity's
 * failure holds it as its cause; a local activity's may be it.
 */
function budgetExhausted(error: unknown): ApplicationFailure | undefined {
  const failure = error instanceof ActivityFailure ? error.cause : error;
  return failure instanceof ApplicationFailure && failure.type === ErrorType.BudgetExhausted ? failure : undefined;
}

/** Where a turn's writes go, fenced by the epoch it was started with. */
export function turnScope(input: AgentTurnInput): ThreadScope {
  return { rootThreadId: input.rootThreadId, threadId: input.threadId, agent: input.agent, epoch: input.epoch };
}

/** Records how a turn ended on its thread's row (for `baton tree`), through `pg`'s `finishTurn`. */
export type FinishTurn = (status: 'completed' | 'max_steps' | 'failed', error?: string) => Promise<void>;

/** `FinishTurn` for `input`'s thread, as an activity or a local one (`pg`). */
export function turnFinisher(pg: Pick<typeof localDb, 'finishTurn'>, input: AgentTurnInput): FinishTurn {
  return (status, error) =>
    pg.finishTurn.executeWithOptions({ summary: `thread: ${input.agent} ${status}` }, [
      { threadId: input.threadId, status, ...(error === undefined ? {} : { error }) },
    ]);
}

/** Operation-id base of turn `turn` when its steps run in its thread's workflow run `runId`. */
export function threadTurnOperationBase(runId: string, turn: number): string {
  return operationId(runId, 'turn', turn);
}

/**
 * A turn's steps: model call → tool calls → model call … until an answer or the agent's `max_steps`. Tool calls the
 * activity runs itself go with the next model call, in one activity; the others go to `runCalls` (or, without it, end
 * the loop). With a batch (`steps: batched`), one activity runs consecutive steps and hands back the last one's reply,
 * which the loop goes on from as from any reply. Control flow only.
 */
export async function runStepLoop(
  loop: StepLoopInput & Required<Pick<StepLoopInput, 'runCalls' | 'askForBudget'>>,
): Promise<Extract<StepLoopEnd, { kind: 'done' }>>;
export async function runStepLoop(loop: StepLoopInput): Promise<StepLoopEnd>;
export async function runStepLoop(loop: StepLoopInput): Promise<StepLoopEnd> {
  const { agent } = loop;
  const stepper = loop.stepper ?? loop.scope.agent;
  let usage = loop.from?.usage ?? loop.resume?.usage ?? ZERO_USAGE;
  // The previous reply's tool calls, when the activity runs them all, left to run in the same activity as the next
  // model call.
  let carried: { names: string[]; calls: ExecuteToolCallInput[] } | undefined;
  // The id of the MCP tool list the first model call offered: the turn keeps that list whatever the servers list
  // later. Data only, no command: histories recorded before it replay the same way.
  let mcpToolList = loop.from?.mcpToolList ?? loop.resume?.mcpToolList;
  let firstStep = loop.resume?.step ?? 0;
  // The first batch the turn's `beginTurn` ran (batched steps only): the loop's first step, taken already.
  let firstBatch = loop.activities.batch === undefined ? undefined : loop.firstBatch;
  if (loop.from !== undefined && loop.runCalls !== undefined) {
    await loop.runCalls(loop.from.reply, loop.from.step);
    firstStep = loop.from.step + 1;
  }
  for (let step = firstStep; step < agent.maxSteps; step++) {
    const modelCall = modelCallInput(loop, step, { mcpToolList, finishTurnOnAnswer: loop.finishTurnOnAnswer });
    const { batch } = loop.activities;
    let reply: CallModelResult;
    try {
      if (batch !== undefined) {
        const ran =
          firstBatch ??
          (await batch.runSteps.executeWithOptions(
            {
              summary:
                `steps: ${stepper} ` +
                `${carried === undefined ? '' : `runs ${carried.names.join(', ')}, then `}model steps from ${step + 1}`,
            },
            [
              {
                toolCalls: carried?.calls ?? [],
                toolNames: carried?.names ?? [],
                model: modelCall,
                operationBase: loop.operationBase,
                maxSteps: agent.maxSteps,
              },
            ],
          ));
        firstBatch = undefined;
        // The batch took the steps up to the one whose reply it hands back.
        step = ran.step;
        reply = ran;
      } else {
        reply =
          carried === undefined
            ? await loop.activities.model.callModel.executeWithOptions(
                { summary: `model: ${stepper} step ${step + 1}` },
                [modelCall],
              )
            : await loop.activities.steps.runToolsThenCallModel.executeWithOptions(
                { summary: `step: ${stepper} runs ${carried.names.join(', ')}, then model step ${step + 1}` },
                [{ toolCalls: carried.calls, model: modelCall }],
              );
      }
    } catch (error) {
      const exhausted = budgetExhausted(error);
      if (exhausted === undefined || agent.onBudget !== 'ask' || !patched(BUDGET_ASK_PATCH)) throw error;
      // Everything before the call that was not made is stored: the calls carried with it, a batch's earlier steps.
      const [details] = exhausted.details as [BudgetExhaustedDetails];
      const resume = {
        step: details.step,
        usage: addUsage(usage, details.batchUsage ?? null),
        ...(mcpToolList === undefined ? {} : { mcpToolList }),
      };
      if (loop.askForBudget === undefined) return { kind: 'ask', resume };
      await loop.askForBudget(exhausted, details.step);
      carried = undefined;
      usage = resume.usage;
      step = details.step - 1;
      continue;
    }
    carried = undefined;
    mcpToolList ??= reply.mcpToolList;
    usage = addUsage(usage, reply.usage);
    // A typed agent's answer that did not match its schema: the model was told why, and is asked again.
    if (reply.outputRepair === true && patched(TYPED_OUTPUT_PATCH)) continue;
    if (reply.toolCalls.length === 0) {
      return {
        kind: 'done',
        result: {
          status: TurnStatus.Completed,
          reply: reply.content ?? '',
          steps: step + 1,
          usage,
          ...(reply.output === undefined ? {} : { output: reply.output }),
        },
        finishedWithAnswer: reply.turnFinished === true,
      };
    }
    if (
      loop.carryToolCalls &&
      step + 1 < agent.maxSteps &&
      reply.toolCalls.every(runsWithNextModelCall) &&
      (loop.runCalls !== undefined || loop.keepStepping?.() !== false)
    ) {
      carried = {
        names: reply.toolCalls.map((call) => call.name),
        calls: reply.toolCalls.map((call, index) => toolCallInput(loop, call, step, index, reply.seq)),
      };
      continue;
    }
    const made = { seq: reply.seq, toolCalls: reply.toolCalls };
    if (loop.runCalls === undefined) {
      return {
        kind: 'calls',
        progress: { step, usage, reply: made, ...(mcpToolList === undefined ? {} : { mcpToolList }) },
      };
    }
    await loop.runCalls(made, step);
  }
  log.warn('turn ran out of steps', { agent: agent.name, maxSteps: agent.maxSteps });
  return {
    kind: 'done',
    result: { status: TurnStatus.MaxSteps, reply: '', steps: agent.maxSteps, usage },
    finishedWithAnswer: false,
  };
}

/**
 * Runs the turn's steps (`runStepLoop`) and records how the turn ended: a turn that ends here without its answer
 * having recorded it, and a failed one (even while it is being cancelled, so the tree shows why it stopped), whose
 * failure is rethrown as `turnFailure` says. A loop stopped at calls it hands back ended nothing.
 */
export async function runStepsToTheEnd(
  loop: StepLoopInput & Required<Pick<StepLoopInput, 'runCalls' | 'askForBudget'>>,
  finishTurn: FinishTurn,
): Promise<Extract<StepLoopEnd, { kind: 'done' }>>;
export async function runStepsToTheEnd(loop: StepLoopInput, finishTurn: FinishTurn): Promise<StepLoopEnd>;
export async function runStepsToTheEnd(loop: StepLoopInput, finishTurn: FinishTurn): Promise<StepLoopEnd> {
  try {
    const end = await runStepLoop(loop);
    if (end.kind === 'done' && !end.finishedWithAnswer) await finishTurn(end.result.status);
    return end;
  } catch (error) {
    const failure = turnFailure(error);
    await CancellationScope.nonCancellable(() => finishTurn('failed', rootMessage(failure)));
    throw failure;
  }
}

/**
 * What ends a failed turn: a Temporal failure (an activity's, a child's, a cancellation) as it is; a throw of the
 * turn's own code as a non-retryable `Turn.CodeFailed` saying what was thrown.
 */
export function turnFailure(error: unknown): unknown {
  if (error instanceof TemporalFailure || !patched(CODE_ERRORS_FAIL_TURN_PATCH)) return error;
  log.error("the turn's workflow code failed", { error });
  const thrown = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return ApplicationFailure.create({
    type: ErrorType.TurnCodeFailed,
    message: `the turn's workflow code failed (${truncateBytes(thrown, 500)}), so the turn cannot go on`,
    nonRetryable: true,
  });
}
