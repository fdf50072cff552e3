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
 * - {@link handWrittenThreadWorkflow}: a durable conversation as anyone would start one with Temporal: a workflow per
 *   conversation, its first message sent with its start (Update-with-Start, so the caller gets the turn's result),
 *   its first local activity storing the conversation and its message in one write (what a crash needs kept) and
 *   then making the first model call, then the same loop: the least a durable start with Temporal does, the floor
 *   under Baton's new thread by `run`. Started `batched`, each message's whole turn (the writes, reads and model
 *   calls of every step) runs in one local activity, as a Baton turn with `steps: batched` does: the floor under its
 *   whole turn.
 * - {@link floorTurnWorkflow}: the engine floor, `steps` activities that do nothing, one after another, and
 *   {@link floorLocalTurnWorkflow}: `steps` local activities that do nothing.
 * - {@link fanOutWorkflow}: a plain child-workflow fan-out, `width` {@link fanOutChildWorkflow}s started at once and
 *   awaited (the baseline of Baton's fork/join).
 * - {@link fanOutTurnsWorkflow}: the same fan-out whose children do a fork task's I/O: each a one-step
 *   {@link handWrittenTurnWorkflow} (record the task message, one model call) on a thread of its own.
 */
import {
  allHandlersFinished,
  condition,
  defineSignal,
  defineUpdate,
  executeChild,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';

/** A tool call the model asked for, as the hand-written loop passes it on. */
export interface BenchToolCall {
  readonly id: string;
  readonly name: string;
}

/** The activities of the baselines (created in bench/baselines.ts). */
export interface StepBenchActivities {
  /** Inserts the human message. */
  recordHuman(input: { threadId: string; rootThreadId: string; text: string }): Promise<void>;
  /**
   * A conversation's first step: inserts its record and its first human message in one statement, then does what
   * `callModel` does (one local activity, as Baton's turn begins with its first model call).
   */
  openThreadThenCallModel(input: {
    threadId: string;
    rootThreadId: string;
    text: string;
  }): Promise<{ toolCalls: BenchToolCall[]; text: string }>;
  /** Reads the transcript, asks the model, inserts its reply; returns the tool calls it made. */
  callModel(input: { threadId: string; rootThreadId: string }): Promise<{ toolCalls: BenchToolCall[]; text: string }>;
  /** Runs a tool (only `think`, which does nothing) and inserts its result. */
  runTool(input: { threadId: string; rootThreadId: string; call: BenchToolCall }): Promise<void>;
  /**
   * A whole turn in one activity: its message stored (`opening`: with its conversation's record, in one statement),
   * then what `callModel` and `runTool` do, step after step, until an answer or `maxSteps`; returns the model calls.
   */
  runTurn(input: HandWrittenTurnInput & { opening: boolean }): Promise<number>;
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

/**
 * A turn of at most `maxSteps` model calls, each step through `run`; returns how many it made. Its message is stored
 * first, or (`opening`: a conversation's first) with its conversation's record in the first step's activity.
 */
async function handWrittenLoop(
  run: StepBenchActivities,
  input: HandWrittenTurnInput,
  opening = false,
): Promise<number> {
  if (!opening) await run.recordHuman(input);
  for (let step = 1; step <= input.maxSteps; step++) {
    const reply = opening && step === 1 ? await run.openThreadThenCallModel(input) : await run.callModel(input);
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

/** A message to a {@link handWrittenThreadWorkflow}: its text and the most model calls its turn may make. */
export interface HandWrittenMessage {
  text: string;
  maxSteps: number;
}

/** Sends a {@link handWrittenThreadWorkflow} a message; its result is how many model calls the turn made. */
export const handWrittenMessageUpdate = defineUpdate<number, [HandWrittenMessage]>('sendMessage');
/** Ends a {@link handWrittenThreadWorkflow} once its turns are done. */
export const handWrittenEndSignal = defineSignal('end');

/**
 * One conversation: each message a turn of local activities, one after another (`batched`: one local activity for the
 * whole turn); the first stores the conversation's record with its message. Ends when signalled.
 */
export async function handWrittenThreadWorkflow(thread: {
  threadId: string;
  rootThreadId: string;
  batched?: boolean;
}): Promise<void> {
  let ending = false;
  let opened = false;
  let queue: Promise<unknown> = Promise.resolve();
  setHandler(handWrittenEndSignal, () => {
    ending = true;
  });
  setHandler(handWrittenMessageUpdate, (message) => {
    const opening = !opened;
    opened = true;
    const input = { threadId: thread.threadId, rootThreadId: thread.rootThreadId, ...message };
    const turn = queue.then(() =>
      thread.batched === true
        ? localActivities.runTurn({ ...input, opening })
        : handWrittenLoop(localActivities, input, opening),
    );
    queue = turn.catch(() => undefined);
    return turn;
  });
  await condition(() => ending && allHandlersFinished());
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
