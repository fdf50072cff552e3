/**
 * The baselines of the benchmarks, as anyone would write them with Temporal directly (bundled on their own, run by
 * the benches' own workers; Baton's worker never loads them):
 *
 * - {@link handWrittenTurnWorkflow}: the same I/O as a Baton turn. Each step is one activity calling the model
 *   (reads the transcript, posts the same chat-completions request, inserts the reply) and, for a tool call, one
 *   activity running the tool (inserts its result): the model/tool split a hand-written agent loop needs for its
 *   retries too.
 * - {@link handWrittenLocalTurnWorkflow}: the same loop with its activities run as local activities, inside the
 *   workflow task (what a hand-written loop with Temporal's local activities costs, against Baton's `steps: local`).
 * - {@link floorTurnWorkflow}: the engine floor, `steps` activities that do nothing, one after another, and
 *   {@link floorLocalTurnWorkflow}: `steps` local activities that do nothing.
 * - {@link fanOutWorkflow}: a plain child-workflow fan-out, `width` {@link fanOutChildWorkflow}s started at once and
 *   awaited (the baseline of Baton's fork/join).
 * - {@link fanOutTurnsWorkflow}: the same fan-out whose children do a fork task's I/O: each a one-step
 *   {@link handWrittenTurnWorkflow} (record the task message, one model call) on a thread of its own.
 */
import { executeChild, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';

/** A tool call the model asked for, as the hand-written loop passes it on. */
export interface BenchToolCall {
  readonly id: string;
  readonly name: string;
}

/** The activities of the baselines (created in bench/baselines.ts). */
export interface StepBenchActivities {
  /** Inserts the human message. */
  recordHuman(input: { threadId: string; rootThreadId: string; text: string }): Promise<void>;
  /** Reads the transcript, asks the model, inserts its reply; returns the tool calls it made. */
  callModel(input: { threadId: string; rootThreadId: string }): Promise<{ toolCalls: BenchToolCall[]; text: string }>;
  /** Runs a tool (only `think`, which does nothing) and inserts its result. */
  runTool(input: { threadId: string; rootThreadId: string; call: BenchToolCall }): Promise<void>;
  /** Nothing at all. */
  noop(): Promise<void>;
}

const activities = proxyActivities<StepBenchActivities>({ startToCloseTimeout: '1 minute' });
const localActivities = proxyLocalActivities<StepBenchActivities>({ startToCloseTimeout: '1 minute' });

/** What a hand-written turn is given. */
export interface HandWrittenTurnInput {
  threadId: string;
  rootThreadId: string;
  text: string;
  maxSteps: number;
}

/** A turn of at most `maxSteps` model calls, each step through `run`; returns how many it made. */
async function handWrittenLoop(run: StepBenchActivities, input: HandWrittenTurnInput): Promise<number> {
  await run.recordHuman(input);
  for (let step = 1; step <= input.maxSteps; step++) {
    const reply = await run.callModel(input);
    if (reply.toolCalls.length === 0) return step;
    await Promise.all(reply.toolCalls.map((call) => run.runTool({ ...input, call })));
  }
  return input.maxSteps;
}

/** A turn of at most `maxSteps` model calls, an activity task each and one per tool call; returns how many it made. */
export async function handWrittenTurnWorkflow(input: HandWrittenTurnInput): Promise<number> {
  return handWrittenLoop(activities, input);
}

/** The same turn with its steps as local activities, inside the workflow task. */
export async function handWrittenLocalTurnWorkflow(input: HandWrittenTurnInput): Promise<number> {
  return handWrittenLoop(localActivities, input);
}

/** `steps` no-op activities in a row. */
export async function floorTurnWorkflow(steps: number): Promise<number> {
  for (let step = 0; step < steps; step++) await activities.noop();
  return steps;
}

/** `steps` no-op local activities in a row. */
export async function floorLocalTurnWorkflow(steps: number): Promise<number> {
  for (let step = 0; step < steps; step++) await localActivities.noop();
  return steps;
}

/** A child of {@link fanOutWorkflow}: one no-op activity, the least a child that does something costs. */
export async function fanOutChildWorkflow(): Promise<void> {
  await activities.noop();
}

/** Starts `width` children at once and waits for all of them; returns how many ended. */
export async function fanOutWorkflow(width: number): Promise<number> {
  const parent = workflowInfo().workflowId;
  const ended = await Promise.all(
    Array.from({ length: width }, (_, i) =>
      executeChild(fanOutChildWorkflow, { workflowId: `${parent}/child-${i}` }).then(() => 1),
    ),
  );
  return ended.length;
}

/** Starts a one-step {@link handWrittenTurnWorkflow} on each thread at once and waits for all; returns how many ended. */
export async function fanOutTurnsWorkflow(input: { rootThreadId: string; threadIds: string[] }): Promise<number> {
  const parent = workflowInfo().workflowId;
  const ended = await Promise.all(
    input.threadIds.map((threadId, i) =>
      executeChild(handWrittenTurnWorkflow, {
        workflowId: `${parent}/child-${i}`,
        args: [{ threadId, rootThreadId: input.rootThreadId, text: 'Task.', maxSteps: 1 }],
      }).then(() => 1),
    ),
  );
  return ended.length;
}
