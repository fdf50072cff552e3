/**
 * Activities that do, in one task, work a turn always does back to back. Each Temporal task costs a dispatch (a round
 * trip to the server and a wait for the next workflow task), which on a fast model is most of what a step costs, so
 * a turn's fixed steps run as one and a step's tool calls run with the model call that always follows them. They
 * compose the single-purpose activities and add no behaviour of their own: every write keeps its operation id, so a
 * retried attempt repeats nothing that landed.
 */
import type { ResolvedAgent, StepMode } from '../common/agent-definition';
import type {
  BeginTurnInput,
  BegunTurn,
  CallModelInput,
  CallModelResult,
  DelegationLimits,
  ExecuteToolCallInput,
  ExecuteToolCallResult,
  FinishTurnInput,
  RecordMessageInput,
  RecordMessageResult,
  ResolveLimitsInput,
  RunToolsThenCallModelInput,
} from '../common/types';

export interface TurnActivityParts {
  resolveAgent(input: { name: string }): Promise<ResolvedAgent>;
  /** Where a turn of `agent` in `world` runs its steps. */
  stepModeOf(agent: ResolvedAgent, world: string): Promise<StepMode>;
  /** Registers (and starts) the watchers the agent's frontmatter declares, in the turn's root. */
  registerWatchersOf(agent: ResolvedAgent, rootThreadId: string): Promise<void>;
  resolveLimits(input: ResolveLimitsInput): Promise<DelegationLimits>;
  finishTurn(input: FinishTurnInput): Promise<void>;
  recordMessage(input: RecordMessageInput): Promise<RecordMessageResult>;
  callModel(input: CallModelInput): Promise<CallModelResult>;
  executeToolCall(input: ExecuteToolCallInput): Promise<ExecuteToolCallResult>;
}

export function createTurnActivities(parts: TurnActivityParts) {
  /**
   * A turn's start: resolves the agent's version, where its steps run and (a root turn's) delegation limits, marks
   * the thread running, registers the watchers the agent declares in this root and records the incoming message. Short Postgres work, run as a local activity.
   * @throws ApplicationFailure `Agent.NotFound`, `Thread.StaleEpoch`, `Thread.NotFound`
   */
  async function beginTurn(input: BeginTurnInput): Promise<BegunTurn> {
    const agent = await parts.resolveAgent({ name: input.scope.agent });
    const world = input.world ?? 'default';
    // The reads and the thread's mark go to Postgres at once; the message is recorded after the mark (the run feed
    // shows the turn start before its message). Every one settles before a failure fails the attempt.
    const [steps, limits] = await allSettledOrThrow([
      parts.stepModeOf(agent, world),
      input.limits && parts.resolveLimits({ world, ...input.limits }),
      parts.finishTurn({ threadId: input.scope.threadId, status: 'running' }),
      parts.registerWatchersOf(agent, input.scope.rootThreadId),
    ] as const);
    await parts.recordMessage({ scope: input.scope, operationId: input.operationId, message: input.message });
    return { ...agent, steps, ...(limits === undefined ? {} : { limits }) };
  }

  /**
   * The tool calls of the previous model reply (all at once, as the workflow would run them), then the next model
   * call. Only calls the activity itself runs are passed (never `ask_human`, delegations, `fork_join` or `wait`). A
   * retry after the model call failed finds the tool results stored and does not run the tools again.
   */
  async function runToolsThenCallModel(input: RunToolsThenCallModelInput): Promise<CallModelResult> {
    // Every call settles before an error fails the attempt, so a retry never starts a tool still running here.
    await allSettledOrThrow(input.toolCalls.map((call) => parts.executeToolCall(call)));
    return parts.callModel(input.model);
  }

  return { beginTurn, runToolsThenCallModel };
}

/** Waits for every promise to settle, then throws the first rejection, if any; else the values, in order. */
async function allSettledOrThrow<T extends readonly unknown[]>(
  promises: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const outcomes = await Promise.allSettled(promises);
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}
