/**
 * The two sides the benchmarks compare, started on a bench's stack: Baton's worker(s) answering from the scripted
 * model, and the baselines of bench/baseline-workflows.ts run by plain Temporal workers whose activities do the same
 * I/O as Baton's (the same chat-completions request to the same scripted model, the transcript read, the inserts).
 * Each returns functions that prepare one turn (untimed) and hand back its timed part, for `runConcurrently`.
 */
import type { BatonWorkerTracing } from '../worker/tracing';
import type { ModelLimits } from '../activities/model-limits';
import type { ModelPrices } from '../activities/model-prices';
import path from 'node:path';
import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { NativeConnection, Worker } from '@temporalio/worker';
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import type { BatonClient, StartThreadOptions, ThreadHandle } from '../client';
import type { StepMode } from '../common/agent-definition';
import { ensureThread } from '../db/threads';
import { listMessages } from '../db/transcripts';
import { startAgentHarness, type AgentHarness } from '../testing/harness';
import { parseScript, type Script } from '../scripted-model';
import { uniqueTaskQueue, uniqueThreadId } from '../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../worker/agents';
import { createModelClient } from '../worker/model-client';
import type { BenchContext, Untimed } from './common';
import {
  handWrittenEndSignal,
  handWrittenMessageUpdate,
  type HandWrittenMessage,
  type BenchToolCall,
  type fanOutTurnsWorkflow,
  type fanOutWorkflow,
  type floorTurnWorkflow,
  type handWrittenThreadWorkflow,
  type handWrittenTurnWorkflow,
  type StepBenchActivities,
} from './baseline-workflows';

/** The message every benchmark turn starts with. */
export const TURN_MESSAGE = 'Check every part of the task.';

/**
 * An agent file with no capabilities beyond the universal ones, a context limit when `maxMessages` sets one, and a
 * step mode when `steps` sets one (else the worker's: activities).
 */
export function benchAgentFile(
  name: string,
  capabilities: readonly string[] = [],
  frontmatter: { readonly maxMessages?: number; readonly steps?: StepMode } = {},
): string {
  const contextLine =
    frontmatter.maxMessages === undefined ? '' : `context: { max_messages: ${frontmatter.maxMessages} }\n`;
  const stepsLine = frontmatter.steps === undefined ? '' : `steps: ${frontmatter.steps}\n`;
  return (
    `---\nname: ${name}\ndescription: The ${name} agent of a benchmark.\ncapabilities: [${capabilities.join(', ')}]\n` +
    `${contextLine}${stepsLine}---\nYou think step by step, then answer.\n`
  );
}

/** Agents from their files' text, as the harness takes them. */
export function benchAgents(files: Record<string, string>): AgentRegistry {
  return new Map(Object.entries(files).map(([name, text]) => [name, parseAgentFile(text, `${name}.md`)]));
}

/**
 * Script lines of an agent that thinks `steps - 1` times, then answers: a turn of `steps` model calls; with `turns`,
 * that many such turns one after another (a standing thread's).
 */
export function stepsScript(agent: string, steps: number, turns = 1): string {
  const turn =
    Array.from(
      { length: steps - 1 },
      (_, i) => `    - call: think\n      args: { thought: "Step ${i + 1}: checking the next part of the task." }\n`,
    ).join('') + '    - say: "Done: every part checked."\n';
  return `  ${agent}:\n` + turn.repeat(turns);
}

/** A script from the agents' lines (`stepsScript` and the like). */
export function benchScript(agentLines: readonly string[], name: string): Script {
  return parseScript(`agents:\n${agentLines.join('')}`, name);
}

/** Baton's side: `workers` Baton workers on one task queue, each a `Worker` of its own in this process. */
export interface BatonSide {
  readonly client: BatonClient;
  /** The first worker's harness (its pool, its scripted model, its request log). */
  readonly harness: AgentHarness;
  readonly taskQueue: string;
}

/**
 * Starts `workers` harnesses on one task queue: each is a Baton `Worker` with its own scripted model server, pool and
 * connection, in this process (so two workers share this process's CPU and event loop, not a second process).
 */
export async function startBaton(
  context: BenchContext,
  options: {
    agents: AgentRegistry;
    script: Script;
    workers?: number;
    modelLogFile?: string;
    name: string;
    /** Streamed model replies (`BATON_MODEL_STREAM`); the harness default (off) when unset. */
    modelStream?: boolean;
    /** Traced workers (`createBatonWorker({ tracing })`), with this bundle holding the tracing interceptors. */
    tracing?: { readonly tracing: BatonWorkerTracing; readonly bundlePath: string };
    /** Limits on model calls the workers share (`BATON_MODEL_LIMITS`). */
    modelLimits?: ModelLimits;
    /** Prices of model calls, for budgets in dollars (`BATON_MODEL_PRICES`). */
    modelPrices?: ModelPrices;
  },
): Promise<BatonSide> {
  const taskQueue = uniqueTaskQueue(`bench-${options.name}`);
  const harnesses: AgentHarness[] = [];
  for (let i = 0; i < (options.workers ?? 1); i++) {
    const harness = await startAgentHarness({
      temporalAddress: context.stack.temporalAddress,
      databaseUrl: context.stack.databaseUrl,
      taskQueue,
      agents: options.agents,
      script: options.script,
      ...(i === 0 && options.modelLogFile ? { modelLogFile: options.modelLogFile } : {}),
      ...(options.modelStream === undefined ? {} : { modelStream: options.modelStream }),
      ...(options.tracing === undefined ? {} : { tracing: options.tracing.tracing }),
      ...(options.modelLimits === undefined ? {} : { modelLimits: options.modelLimits }),
      ...(options.modelPrices === undefined ? {} : { modelPrices: options.modelPrices }),
      workflowBundle: { codePath: options.tracing?.bundlePath ?? context.stack.workflowBundlePath },
    });
    context.defer(() => harness.close());
    harnesses.push(harness);
  }
  const first = harnesses[0] as AgentHarness;
  return { client: first.client, harness: first, taskQueue };
}

/** A model log file in the stack's state directory. */
export function modelLogFile(context: BenchContext, name: string): string {
  return path.join(context.stack.stateDir, `${name}-model.jsonl`);
}

/**
 * Prepares a Baton turn on a fresh thread id; the timed part starts the thread with its message in one call
 * (`client.run`, as the baselines start their workflows in theirs) and checks that the turn completed after `steps`
 * model calls. `check` (timed too, keep it short) may look at what the turn did. The thread is ended after, untimed.
 */
export function batonTurn(
  client: BatonClient,
  agent: string,
  steps: number,
  options: {
    thread?: Partial<StartThreadOptions>;
    check?: (threadId: string) => Promise<void>;
    /** Told the thread's id as its timed part begins (a bench timing the turn's first model call). */
    started?: (threadId: string) => void;
  } = {},
): () => Promise<() => Promise<Untimed>> {
  return () => {
    const threadId = uniqueThreadId(`bench-${agent}`);
    return Promise.resolve(async () => {
      options.started?.(threadId);
      const { thread, result } = await client.run({ ...options.thread, agent, threadId, message: TURN_MESSAGE });
      if (result.status !== 'completed' || result.steps !== steps) {
        throw new Error(`Baton turn ended ${result.status} after ${result.steps} steps, not completed after ${steps}`);
      }
      await options.check?.(threadId);
      return () => endThread(thread);
    });
  };
}

/**
 * Ends a thread a timed turn started and waits for its workflow to close, untimed (`runConcurrently`): its end's
 * workflow task and local activity then cost the run that started it, not whatever case runs next.
 */
export async function endThread(thread: ThreadHandle): Promise<void> {
  await thread.end();
  await thread.result();
}

/** The system prompt and tools Baton's worker sent, so the baseline's request is the same size. */
export interface RecordedRequest {
  readonly agent: string;
  readonly system: string;
  readonly tools: OpenAI.Chat.Completions.ChatCompletionTool[];
}

/** The first request in a Baton harness's model log, or the first of `agent` (run a turn first). */
export function recordedRequest(harness: AgentHarness, agent?: string): RecordedRequest {
  const first = harness.modelRequests().find((request) => agent === undefined || request.agent === agent);
  const system = first?.messages.find((m) => m.role === 'system')?.content;
  if (!first || typeof system !== 'string') throw new Error('the warm-up turn logged no model request');
  return {
    agent: first.agent,
    system,
    tools: (first.tools ?? []) as OpenAI.Chat.Completions.ChatCompletionTool[],
  };
}

/**
 * Activities of the hand-written baseline: the same reads, request and inserts as Baton's, nothing more. `noopStarts`
 * keeps when each workflow's first `noop` began (the process's clock), to time how soon a workflow's code runs.
 */
function createBaselineActivities(
  pool: Pool,
  openai: OpenAI,
  request: RecordedRequest,
  noopStarts: Map<string, number>,
): StepBenchActivities {
  /**
   * Inserts a message under the activity's operation id (with `part`, one of several the activity inserts). `opening`
   * inserts its conversation's record too, in the same statement: the message's reference to its thread is checked at
   * the statement's end, after the record's insert.
   */
  const insert = async (
    scope: { threadId: string; rootThreadId: string },
    message: { role: string; content: string | null; toolCalls?: unknown; toolCallId?: string },
    { opening = false, part }: { opening?: boolean; part?: string | undefined } = {},
  ): Promise<void> => {
    const info = Context.current().info;
    const openThread = opening
      ? `WITH thread AS (
           INSERT INTO threads (thread_id, root_thread_id, agent) VALUES ($2, $1, $4) ON CONFLICT (thread_id) DO NOTHING
         )`
      : '';
    await pool.query(
      `${openThread}
       INSERT INTO transcript_messages
         (root_thread_id, thread_id, seq, role, agent, content, tool_calls, tool_call_id, operation_id)
       SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $8
         FROM transcript_messages WHERE thread_id = $2
       ON CONFLICT (root_thread_id, operation_id) DO NOTHING`,
      [
        scope.rootThreadId,
        scope.threadId,
        message.role,
        request.agent,
        message.content,
        message.toolCalls === undefined ? null : JSON.stringify(message.toolCalls),
        message.toolCallId ?? null,
        // The opening's message and the first model call's reply are stored by one activity.
        `${info.workflowExecution?.runId ?? 'none'}:${info.activityId}${opening ? ':opening' : ''}` +
          (part === undefined ? '' : `:${part}`),
      ],
    );
  };
  /** `callModel`, its reply inserted under `part` when given (a whole turn's activity inserts one per step). */
  const callModelPart = async (
    input: { threadId: string; rootThreadId: string },
    part?: string,
  ): Promise<{ toolCalls: BenchToolCall[]; text: string }> => {
    const transcript = await listMessages(pool, input.threadId);
    const completion = await openai.chat.completions.create(
      {
        model: 'baton-scripted',
        messages: [
          { role: 'system', content: request.system },
          ...transcript.map((m): OpenAI.Chat.Completions.ChatCompletionMessageParam => {
            if (m.role === 'tool') return { role: 'tool', content: m.content ?? '', tool_call_id: m.toolCallId ?? '' };
            if (m.role === 'user') return { role: 'user', content: m.content ?? '' };
            return {
              role: 'assistant',
              content: m.content,
              ...(m.toolCalls
                ? {
                    tool_calls: m.toolCalls.map((call) => ({
                      id: call.id,
                      type: 'function' as const,
                      function: { name: call.name, arguments: call.arguments },
                    })),
                  }
                : {}),
            };
          }),
        ],
        tools: request.tools,
      },
      {
        headers: {
          'x-baton-agent': request.agent,
          'x-baton-thread': input.threadId,
          'x-baton-root-thread': input.rootThreadId,
        },
      },
    );
    const message = completion.choices[0]?.message;
    const toolCalls = (message?.tool_calls ?? []).flatMap((call) =>
      call.type === 'function' ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments }] : [],
    );
    await insert(
      input,
      { role: 'assistant', content: message?.content ?? null, ...(toolCalls.length > 0 ? { toolCalls } : {}) },
      { part },
    );
    return { toolCalls: toolCalls.map(({ id, name }) => ({ id, name })), text: message?.content ?? '' };
  };
  /** `runTool`, its result inserted under `part` when given. */
  const runTool = (input: { threadId: string; rootThreadId: string; call: BenchToolCall }, part?: string) =>
    insert(input, { role: 'tool', content: 'Thought recorded.', toolCallId: input.call.id }, { part });
  return {
    recordHuman: async (input) => insert(input, { role: 'user', content: input.text }),
    openThreadThenCallModel: async (input) => {
      await insert(input, { role: 'user', content: input.text }, { opening: true });
      return callModelPart(input);
    },
    callModel: callModelPart,
    runTool,
    runTurn: async (input) => {
      await insert(input, { role: 'user', content: input.text }, { opening: input.opening, part: 'message' });
      for (let step = 1; step <= input.maxSteps; step++) {
        const reply = await callModelPart(input, `model-${step}`);
        if (reply.toolCalls.length === 0) return step;
        await Promise.all(reply.toolCalls.map((call, index) => runTool({ ...input, call }, `tool-${step}-${index}`)));
      }
      return input.maxSteps;
    },
    noop: () => {
      const workflowId = Context.current().info.workflowExecution?.workflowId;
      if (workflowId !== undefined && !noopStarts.has(workflowId)) {
        noopStarts.set(workflowId, performance.timeOrigin + performance.now());
      }
      return Promise.resolve();
    },
  };
}

/** The baselines' side: plain Temporal workers on one task queue and a client to start their workflows. */
export interface BaselineSide {
  readonly client: Client;
  readonly taskQueue: string;
  readonly pool: Pool;
  /** When each workflow's first no-op activity began, by workflow id (`performance.timeOrigin + performance.now()`). */
  readonly noopStarts: ReadonlyMap<string, number>;
}

/**
 * Starts `workers` plain Temporal `Worker`s (in this process, one task queue) running bench/baseline-workflows.ts,
 * their activities posting to the scripted model at `modelBaseURL` the request Baton sent (`request`).
 */
export async function startBaselines(
  context: BenchContext,
  options: { pool: Pool; modelBaseURL: string; request?: RecordedRequest; workers?: number; name: string },
): Promise<BaselineSide> {
  const taskQueue = uniqueTaskQueue(`bench-${options.name}-baseline`);
  const openai = createModelClient({ baseURL: options.modelBaseURL, apiKey: 'scripted', model: 'baton-scripted' });
  const request = options.request ?? { agent: 'none', system: '', tools: [] };
  const noopStarts = new Map<string, number>();
  for (let i = 0; i < (options.workers ?? 1); i++) {
    const connection = await NativeConnection.connect({ address: context.stack.temporalAddress });
    context.defer(() => connection.close());
    const worker = await Worker.create({
      connection,
      taskQueue,
      workflowsPath: require.resolve('./baseline-workflows'),
      activities: createBaselineActivities(options.pool, openai, request, noopStarts),
    });
    const running = worker.run();
    context.defer(async () => {
      worker.shutdown();
      await running;
    });
  }
  const connection = await Connection.connect({ address: context.stack.temporalAddress });
  context.defer(() => connection.close());
  return { client: new Client({ connection }), taskQueue, pool: options.pool, noopStarts };
}

/**
 * Prepares a hand-written turn of `steps` model calls (its thread row untimed), its steps as activities or, with
 * `local`, as local activities.
 */
export function handWrittenTurn(
  side: BaselineSide,
  agent: string,
  steps: number,
  options: { local?: boolean } = {},
): () => Promise<() => Promise<void>> {
  return async () => {
    const threadId = uniqueThreadId('bench-hand');
    await ensureThread(side.pool, { threadId, rootThreadId: threadId, agent });
    return async () => {
      const made = await side.client.workflow.execute<typeof handWrittenTurnWorkflow>(
        options.local ? 'handWrittenLocalTurnWorkflow' : 'handWrittenTurnWorkflow',
        {
          taskQueue: side.taskQueue,
          workflowId: threadId,
          args: [{ threadId, rootThreadId: threadId, text: TURN_MESSAGE, maxSteps: steps + 5 }],
        },
      );
      if (made !== steps) throw new Error(`hand-written turn took ${String(made)} steps, not ${steps}`);
    };
  };
}

/**
 * Prepares a hand-written conversation's start: a {@link handWrittenThreadWorkflow} started with its first message in
 * one call (Update-with-Start, as Baton's `run`), or with `messageApart` started by a plain start and then sent the
 * message by an Update of its own (as Baton's `startThread` then `send`; both calls timed); the message's turn stores
 * the conversation and the message, then makes `steps` model calls, a local activity each or, `batched`, all in one.
 * `started` is told its id as the timed part begins. Ended after, untimed.
 */
export function handWrittenStart(
  side: BaselineSide,
  steps: number,
  started: (threadId: string) => void,
  options: { messageApart?: boolean; batched?: boolean } = {},
): () => Promise<() => Promise<Untimed>> {
  const batched = options.batched === true;
  return () =>
    Promise.resolve(async () => {
      const threadId = uniqueThreadId(
        `bench-hand${batched ? '-batched' : ''}-start${options.messageApart === true ? '-send' : ''}`,
      );
      started(threadId);
      const start = {
        taskQueue: side.taskQueue,
        workflowId: threadId,
        args: [{ threadId, rootThreadId: threadId, ...(batched ? { batched } : {}) }] as Parameters<
          typeof handWrittenThreadWorkflow
        >,
      };
      const message = { args: [{ text: TURN_MESSAGE, maxSteps: steps + 5 }] as [HandWrittenMessage] };
      const made =
        options.messageApart === true
          ? await (
              await side.client.workflow.start<typeof handWrittenThreadWorkflow>('handWrittenThreadWorkflow', start)
            ).executeUpdate(handWrittenMessageUpdate, message)
          : await side.client.workflow.executeUpdateWithStart(handWrittenMessageUpdate, {
              ...message,
              startWorkflowOperation: new WithStartWorkflowOperation<typeof handWrittenThreadWorkflow>(
                'handWrittenThreadWorkflow',
                { ...start, workflowIdConflictPolicy: 'FAIL' },
              ),
            });
      if (made !== steps) throw new Error(`hand-written start's turn took ${String(made)} steps, not ${steps}`);
      return async () => {
        const handle = side.client.workflow.getHandle(threadId);
        await handle.signal(handWrittenEndSignal);
        await handle.result();
      };
    });
}

/**
 * Prepares a floor turn: `steps` no-op activities in a row (with `local`, local activities). `started` is told the
 * workflow's id as the timed part begins (its first no-op's start is then in `side.noopStarts`).
 */
export function floorTurn(
  side: BaselineSide,
  steps: number,
  options: { local?: boolean; started?: (workflowId: string) => void } = {},
): () => Promise<() => Promise<void>> {
  return () =>
    Promise.resolve(async () => {
      const workflowId = uniqueThreadId('bench-floor');
      options.started?.(workflowId);
      await side.client.workflow.execute<typeof floorTurnWorkflow>(
        options.local ? 'floorLocalTurnWorkflow' : 'floorTurnWorkflow',
        { taskQueue: side.taskQueue, workflowId, args: [steps] },
      );
    });
}

/** Prepares a plain fan-out of `width` children. */
export function fanOut(side: BaselineSide, width: number): () => Promise<() => Promise<void>> {
  return () =>
    Promise.resolve(async () => {
      const ended = await side.client.workflow.execute<typeof fanOutWorkflow>('fanOutWorkflow', {
        taskQueue: side.taskQueue,
        workflowId: uniqueThreadId('bench-fan-out'),
        args: [width],
      });
      if (ended !== width) throw new Error(`fan-out ended ${ended} children, not ${width}`);
    });
}

/**
 * Prepares a fan-out of `width` one-step hand-written turns, each on a thread row of its own under one root (rows
 * untimed): a fork's children with the same I/O as Baton's, and none of its bookkeeping.
 */
export function fanOutTurns(side: BaselineSide, agent: string, width: number): () => Promise<() => Promise<void>> {
  return async () => {
    const rootThreadId = uniqueThreadId('bench-fan-out-turns');
    await ensureThread(side.pool, { threadId: rootThreadId, rootThreadId, agent });
    const threadIds = Array.from({ length: width }, (_, i) => `${rootThreadId}-${i}`);
    for (const threadId of threadIds) await ensureThread(side.pool, { threadId, rootThreadId, agent });
    return async () => {
      const ended = await side.client.workflow.execute<typeof fanOutTurnsWorkflow>('fanOutTurnsWorkflow', {
        taskQueue: side.taskQueue,
        workflowId: rootThreadId,
        args: [{ rootThreadId, threadIds }],
      });
      if (ended !== width) throw new Error(`fan-out of turns ended ${ended} children, not ${width}`);
    };
  };
}
