/**
 * Activities that do, in one task, work a turn always does back to back. Each Temporal task costs a dispatch (a round
 * trip to the server and a wait for the next workflow task), which on a fast model is most of what a step costs, so
 * a turn's fixed steps run as one and a step's tool calls run with the model call that always follows them. They
 * compose the single-purpose activities and add no behaviour of their own: every write keeps its operation id, so a
 * retried attempt repeats nothing that landed.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { ResolvedAgent, StepMode } from '../common/agent-definition';
import { ErrorType } from '../common/errors';
import { modelCallInput, runsWithNextModelCall, toolCallInput } from '../common/turn-step-calls';
import type {
  BeginTurnInput,
  BegunTurn,
  BudgetExhaustedDetails,
  EnsureThreadInput,
  EnsureThreadResult,
  CallModelInput,
  CallModelResult,
  ExecuteToolCallInput,
  ExecuteToolCallResult,
  FinishTurnInput,
  RecordMessageInput,
  RecordMessageResult,
  RunStepsInput,
  RunStepsResult,
  RunToolsThenCallModelInput,
  TokenUsage,
} from '../common/types';
import { allSettledOrThrow } from '../common/settled';
import { addUsage, ZERO_USAGE } from '../common/usage';
import type { BudgetLimit } from '../db/budgets';
import type { TranscriptMessage } from '../db/transcripts';
import type { StoredReply } from './model';
import type { RanToolCall } from './tool-calls';
import { limitsFromVariables } from './worlds';

/**
 * A batch of steps (`runSteps`) starts no further step once it has run this long. A step that starts within it still
 * has the step activity's whole 25 minutes (its slowest tool and its model call) before the batch's timeout
 * (`BATCH_PROFILE`); steps left over go to the next batch, and a crash re-runs less.
 */
export const BATCH_BUDGET_MS = 2 * 60_000;

export interface TurnActivityParts {
  resolveAgent(input: { name: string }): Promise<ResolvedAgent>;
  /**
   * Creates the thread record if it is new, marks it running and records the message of the turn that opens it, and
   * reads the variables of `world`, in one round trip: the record's epoch, under which the message went.
   */
  openThreadWithMessage(
    thread: EnsureThreadInput,
    input: RecordMessageInput,
    world: string,
  ): Promise<EnsureThreadResult & { worldVariables: Record<string, string> }>;
  /** A world's variables as they are now. */
  loadWorldVariables(world: string): Promise<Record<string, string>>;
  /** Where a turn of `agent` runs its steps, asking for its world's variables only when the agent sets none. */
  stepModeOf(agent: ResolvedAgent, worldVariables: () => Promise<Record<string, string>>): Promise<StepMode>;
  /** Registers (and starts) the watchers the agent's frontmatter declares, in the turn's root. */
  registerWatchersOf(agent: ResolvedAgent, rootThreadId: string): Promise<void>;
  /** Opens a root thread's budget unless it has one (the first root turn that begins with a budget opens it). */
  openRootBudget(input: { rootThreadId: string; limit: BudgetLimit }): Promise<void>;
  finishTurn(input: FinishTurnInput): Promise<void>;
  recordMessage(input: RecordMessageInput): Promise<RecordMessageResult>;
  /**
   * `callModel`, with the reply it stored itself (`StoredReply`), if it did; awaiting `storeFirst`, the writes of the
   * step before's results, beside the read of its context and before the model is asked.
   */
  callModelStoring(
    input: CallModelInput,
    storeFirst?: () => Promise<readonly TranscriptMessage[]>,
  ): Promise<{ result: CallModelResult; stored?: StoredReply }>;
  /** Runs one call of a stored reply and stores its result. */
  executeToolCall(input: ExecuteToolCallInput): Promise<ExecuteToolCallResult>;
  /**
   * Runs one call of the reply `stored`, as its caller just stored it (without reading it back), and hands it back with
   * its result's write under way, for the next model call to await; `undefined` when the result was stored before.
   */
  runToolCallForNextStep(input: ExecuteToolCallInput, stored: StoredReply): Promise<RanToolCall | undefined>;
}

export function createTurnActivities(parts: TurnActivityParts) {
  /**
   * A turn's start: opens the thread's record when asked (`input.openThread`: a thread's first turn), resolves the
   * agent's version, where its steps run and (a root turn's) delegation limits, opens the root's budget when those set
   * one and it has none yet, marks the thread running, registers the watchers the agent declares in this root and
   * records the incoming message. Short Postgres work, run as a local activity; asked for a first batch
   * (`input.firstBatch`) and the agent's steps `batched`, it then runs the turn's first steps as `runSteps` would,
   * saving the workflow one call back between the two.
   * @throws ApplicationFailure `Agent.NotFound`, `Thread.StaleEpoch`, `Thread.NotFound`
   */
  async function beginTurn(input: BeginTurnInput): Promise<BegunTurn> {
    const agent = await parts.resolveAgent({ name: input.scope.agent });
    const world = input.world ?? 'default';
    const message = { scope: input.scope, operationId: input.operationId, message: input.message };
    // The reads and the thread's mark go to Postgres at once; the message is recorded after the mark (the run feed
    // shows the turn start before its message), once the reads have succeeded. Every one settles before a failure
    // fails the attempt. A turn that opens its thread opens the record, marks it running and records the message in
    // one call beside the reads (a read that fails then leaves the message stored, which the attempt that retries it
    // finds under its operation id); the message goes under the record's epoch, which the workflow learns from the
    // result. Its watchers need the record, so they are registered after it.
    // The world's variables (the step mode of an agent that sets none, a root turn's limits) are read once, and by the
    // opening call itself when the turn opens its thread.
    const opening = input.openThread;
    const open = opening && parts.openThreadWithMessage(opening, message, world);
    let variables: Promise<Record<string, string>> | undefined;
    const worldVariables = () =>
      (variables ??=
        open === undefined ? parts.loadWorldVariables(world) : open.then((opened) => opened.worldVariables));
    const { limits: limitsInput } = input;
    const [steps, limits, opened] = await allSettledOrThrow([
      parts.stepModeOf(agent, worldVariables),
      limitsInput && worldVariables().then((read) => limitsFromVariables(read, limitsInput.overrides)),
      open,
      opening === undefined && parts.finishTurn({ threadId: input.scope.threadId, status: 'running' }),
      opening === undefined && parts.registerWatchersOf(agent, input.scope.rootThreadId),
    ] as const);
    const scope = opened === undefined ? input.scope : { ...input.scope, epoch: opened.epoch };
    // Beside the message, both before the turn's first model call, which finds its root's budget open.
    const budget =
      limits !== undefined && (limits.budgetTokens !== undefined || limits.budgetUsd !== undefined)
        ? { tokens: limits.budgetTokens, usd: limits.budgetUsd }
        : undefined;
    await allSettledOrThrow([
      budget && parts.openRootBudget({ rootThreadId: input.scope.rootThreadId, limit: budget }),
      opened === undefined && parts.recordMessage(message),
      opened !== undefined && parts.registerWatchersOf(agent, input.scope.rootThreadId),
    ] as const);
    const begun = {
      ...agent,
      steps,
      ...(limits === undefined ? {} : { limits }),
      ...(opened === undefined ? {} : { epoch: opened.epoch }),
    };
    if (input.firstBatch === undefined || steps !== 'batched' || agent.maxSteps < 1) return begun;
    const { operationBase } = input.firstBatch;
    const ids = { scope, world, agent, operationBase };
    try {
      const firstBatch = await runSteps({
        toolCalls: [],
        toolNames: [],
        model: modelCallInput(ids, 0, { finishTurnOnAnswer: true }),
        operationBase,
        maxSteps: agent.maxSteps,
      });
      return { ...begun, firstBatch };
    } catch {
      // The turn has begun: its steps go on in a `runSteps` of the workflow's, which finds every step this one stored
      // and meets the error again (or not: it may have passed), failing or retrying as a batch does.
      return begun;
    }
  }

  /**
   * The tool calls of the previous model reply (all at once, as the workflow would run them), then the next model
   * call. Only calls the activity itself runs are passed (never `ask_human`, delegations, `fork_join` or `wait`). A
   * retry after the model call failed finds the tool results stored and does not run the tools again.
   */
  async function runToolsThenCallModel(input: RunToolsThenCallModelInput): Promise<CallModelResult> {
    return (await toolsThenModel(input, undefined)).result;
  }

  /**
   * `runToolsThenCallModel`, running the calls from `stored` when it is the reply they belong to, as this attempt
   * stored it (a batch's step after the first), and handing back the reply the model call stored.
   */
  async function toolsThenModel(
    input: RunToolsThenCallModelInput,
    stored: StoredReply | undefined,
  ): Promise<{ result: CallModelResult; stored?: StoredReply }> {
    // Every call settles before an error fails the attempt, so a retry never starts a tool still running here.
    if (stored === undefined) {
      await allSettledOrThrow(input.toolCalls.map((call) => parts.executeToolCall(call)));
      return parts.callModelStoring(input.model);
    }
    // The calls of a reply this attempt stored: each result's write starts as its call finishes, as when each call
    // stored its own, and the model call reads its context beside the writes still under way, awaiting them before the
    // model is asked.
    const outcomes = await Promise.allSettled(
      input.toolCalls.map((call) => parts.runToolCallForNextStep(call, stored)),
    );
    const writes = outcomes.flatMap((outcome) =>
      outcome.status === 'fulfilled' && outcome.value !== undefined ? [outcome.value.stored] : [],
    );
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed !== undefined) {
      // The results of the calls that finished are stored all the same (a retry runs none of them again); the call's
      // failure is what fails the attempt.
      await Promise.allSettled(writes);
      throw failed.reason;
    }
    return parts.callModelStoring(input.model, () => allSettledOrThrow(writes));
  }

  /**
   * Consecutive steps of a turn in one activity (`steps: batched`), as the workflow would run them one by one: the
   * carried tool calls, then the model call; then, while the reply's calls all go with the next model call, the
   * turn has steps left and the batch its budget (`BATCH_BUDGET_MS`), those calls and the next model call. It stops at
   * an answer, at a reply with a call the workflow carries out (a delegation, a question, an approval …), or at the
   * budget, and hands back that reply for the workflow to go on from. Every step keeps the operation ids the workflow
   * would give it, so a retried batch (or the next worker's, after a crash) finds each stored reply and tool result
   * and asks the model only for the step that had not stored its reply.
   */
  async function runSteps(input: RunStepsInput): Promise<RunStepsResult> {
    const started = Date.now();
    const { scope, world, agentVersion } = input.model;
    const ids = { scope, world, agent: { version: agentVersion }, operationBase: input.operationBase };
    let toolCalls = input.toolCalls;
    let toolNames = input.toolNames;
    let call = input.model;
    let usage: TokenUsage | null = null;
    // The reply the previous step stored in this attempt: its calls run without being read back.
    let stored: StoredReply | undefined;
    const steps: RunStepsResult['steps'] = [];
    for (;;) {
      const step = await toolsThenModel({ toolCalls, model: call }, stored).catch((error: unknown) => {
        throw withBatchUsage(error, usage);
      });
      const reply = step.result;
      stored = step.stored;
      steps.push({ step: call.step, ranTools: toolNames, reused: reply.reused });
      if (reply.usage) usage = addUsage(usage ?? ZERO_USAGE, reply.usage);
      // A typed agent's answer that did not match its schema goes on too: the model is asked to fix it.
      const goesOn =
        (reply.outputRepair === true || (reply.toolCalls.length > 0 && reply.toolCalls.every(runsWithNextModelCall))) &&
        call.step + 1 < input.maxSteps &&
        Date.now() - started < BATCH_BUDGET_MS;
      if (!goesOn) return { ...reply, step: call.step, usage, steps };
      toolCalls = reply.toolCalls.map((made, index) => toolCallInput(ids, made, call.step, index, reply.seq));
      toolNames = reply.toolCalls.map((made) => made.name);
      // The first model call of a turn names the MCP tool list the turn keeps; its later calls offer that list.
      call = modelCallInput(ids, call.step + 1, {
        mcpToolList: call.mcpToolList ?? reply.mcpToolList,
        finishTurnOnAnswer: call.finishTurnOnAnswer === true,
      });
    }
  }

  return { beginTurn, runToolsThenCallModel, runSteps };
}

/**
 * A batch's step that found the turn's budget spent fails the batch saying what the steps before it used, so a turn
 * that goes on after it (`on_budget: ask`) counts them; any other failure is as it was.
 */
function withBatchUsage(error: unknown, usage: TokenUsage | null): unknown {
  if (!(error instanceof ApplicationFailure) || error.type !== ErrorType.BudgetExhausted || usage === null)
    return error;
  const [details] = error.details as [BudgetExhaustedDetails];
  return ApplicationFailure.create({
    type: error.type,
    message: error.message,
    nonRetryable: true,
    details: [{ ...details, batchUsage: usage } satisfies BudgetExhaustedDetails],
  });
}
