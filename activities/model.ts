import { randomBytes } from 'node:crypto';
import { trace, type Attributes } from '@opentelemetry/api';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import {
  DEFAULT_FALLBACK_AFTER_ATTEMPTS,
  DEFAULT_OUTPUT_REPAIRS,
  type AgentDefinition,
} from '../common/agent-definition';
import { setBounded } from '../common/bounded-map';
import { OMITTED_ASSISTANT_HEADER, trimContext, trimWindow } from '../common/context-policy';
import { ErrorType } from '../common/errors';
import { interpolate } from '../common/env-text';
import { buildSystemPrompt } from '../common/system-context';
import { distinctToolCallIds, outputRepairOperationId } from '../common/ids';
import type {
  BudgetExhaustedDetails,
  CallModelInput,
  CallModelResult,
  PlannedToolCall,
  TokenUsage,
  ToolCallRequest,
} from '../common/types';
import { allSettledOrThrow } from '../common/settled';
import { storableText } from '../common/text';
import { readModelCallContext } from '../db/step-context';
import { markThread } from '../db/delegations';
import type { Budget, BudgetAmount } from '../db/budgets';
import { priceOf, pricedUsage, type ModelPrices } from './model-prices';
import { appendMessage, countOutputRepairs, type TranscriptMessage } from '../db/transcripts';
import { loadMcpToolList, saveMcpToolList } from '../db/mcp-tool-lists';
import { recordModelCallStarted, recordModelCallWaiting } from '../db/run-events';
import type { AgentStore } from './agent-store';
import { classifyModelError, movesToNextModelAtOnce } from './model-errors';
import { DeltaPublisher } from './model-stream';
import { holdScopes, limitedScopes, withCapacity, type ModelLimits } from './model-limits';
import { DEFAULT_PROVIDER, modelEndpointsFor, type ModelEndpoint, type ModelProviders } from './model-providers';
import { asOutputReply, checkOutput, outputRequest, repairMessage, type OutputMode } from './output';
import type { LimitedScope } from '../db/model-limits';
import { toApplicationFailure } from './failures';
import { createActivityMetrics, type ActivityMetrics } from './metrics';
import { BatonAttribute, errorTypeOf, GenAiAttribute, inSpan, scopeAttributes, type ActivityTracing } from './tracing';
import type { ModelTool, ToolRegistry } from './tools';
import {
  DEFAULT_FORK_DEADLINE_SECONDS,
  DEFAULT_FORK_MAX_PARALLEL,
  forkJoinTool,
  type ForkJoinArguments,
} from './tools/fork-join';
import { approvalFor } from './tools/approval-rule';
import type { ApprovalContext } from './tools/types';
import { checkToolCall } from './tools/validate';
import { waitTool, type WaitArguments } from './tools/universal';
import { contextLimitsFor, worldVariablesOf } from './worlds';
import type { ReplayAnswers } from './eval-replay';

export interface ModelActivityOptions {
  pool: Pool;
  /** An `openai` client constructed with `maxRetries: 0`: Temporal's retry policy owns retries. */
  openai: OpenAI;
  /** Model name sent when the agent names none. */
  model: string;
  /** The other endpoints an agent's `model` may name as `provider/model`. @default none */
  providers?: ModelProviders;
  /** Limits on model calls every worker of the task queue shares (`BATON_MODEL_LIMITS`). @default none */
  limits?: ModelLimits;
  /** What model calls cost, for budgets in dollars (`BATON_MODEL_PRICES`). @default none */
  prices?: ModelPrices;
  /**
   * Providers (`default` for the default endpoint) whose endpoints take `response_format: json_schema`: a typed
   * agent's calls there ask for its output that way; elsewhere through the `final_output` tool
   * (`BATON_STRUCTURED_OUTPUT`). @default none
   */
  structuredOutput?: readonly string[];
  /** An evaluation worker's replays: every call of a replayed thread goes to the tool activity. @default none */
  replay?: ReplayAnswers;
  agentStore: AgentStore;
  tools: ToolRegistry;
  /**
   * How often the activity heartbeats while waiting for the model; must be well under the heartbeat timeout.
   * @default 2000
   */
  heartbeatIntervalMs?: number;
  /**
   * Ask every endpoint for a streamed reply (`stream: true`, usage included) and assemble it: the stored reply is
   * the same as without streaming (`BATON_MODEL_STREAM`). @default false
   */
  stream?: boolean;
  /** Spans for the model requests sent (activities/tracing.ts). @default none: nothing is traced */
  tracing?: ActivityTracing;
  /** Metrics of the model requests sent (activities/metrics.ts). @default none recorded */
  metrics?: ActivityMetrics;
}

/** Stored MCP tool lists a worker keeps in memory (each a few hundred bytes). */
const MAX_CACHED_TOOL_LISTS = 1000;
/** Worlds whose message limit a worker remembers (a name and a number each). */
const MAX_REMEMBERED_WORLDS = 1000;

/**
 * A reply a model call has just stored (not one it found stored): its calls with their arguments, and the world's
 * variables text the call read. A batch runs those calls from it in the same attempt, without reading them back: no
 * earlier attempt can have stored a result for a reply this attempt stored.
 */
export interface StoredReply {
  seq: number;
  toolCalls: ToolCallRequest[];
  worldVariables: string | undefined;
}

/** Activities that talk to the model endpoint. */
export function createModelActivities(options: ModelActivityOptions) {
  const { pool } = options;
  /** How a call to `provider`'s endpoint asks a typed agent for its output. */
  const outputModeOf = (provider: string | null): OutputMode =>
    options.structuredOutput?.includes(provider ?? DEFAULT_PROVIDER) === true ? 'json_schema' : 'tool';
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 2000;
  const metrics = options.metrics ?? createActivityMetrics();
  /**
   * The message limit of each world's context policy as last seen by this worker: how much of a transcript the next
   * model call of an agent without a limit of its own reads. Only a guess, checked at every call (another worker or
   * an edit of the world may change it); a wrong one costs a second read, never a different request.
   */
  const worldMessageLimits = new Map<string, number>();
  function rememberWorldMessageLimit(world: string, limit: number | undefined): void {
    if (limit === undefined) worldMessageLimits.delete(world);
    else setBounded(worldMessageLimits, world, limit, MAX_REMEMBERED_WORLDS);
  }
  /** Stored MCP tool lists by id: an id names one list for ever, so a list read once serves every later step. */
  const mcpToolLists = new Map<string, string[]>();

  async function mcpToolList(listId: string): Promise<string[] | undefined> {
    const cached = mcpToolLists.get(listId);
    if (cached !== undefined) return cached;
    const names = await loadMcpToolList(pool, listId);
    if (names === undefined) return undefined;
    setBounded(mcpToolLists, listId, names, MAX_CACHED_TOOL_LISTS);
    return names;
  }

  /**
   * Calls the model with the thread's transcript and stores the reply. A retried call whose reply is already
   * stored returns it without calling the model again (docs/architecture.md §4, invariant 2).
   * @throws ApplicationFailure `Agent.NotFound`, `Model.*` (classified; `Model.UnknownProvider` for an agent version
   * naming a provider this worker lacks), `Thread.StaleEpoch`
   */
  async function callModel(input: CallModelInput): Promise<CallModelResult> {
    return (await callModelStoring(input)).result;
  }

  /**
   * `callModel`, also handing back, when this call stored the reply, what a batch needs to run the reply's calls
   * without reading them back (`StoredReply`). A reply found stored (a retry's) hands back nothing. `storeFirst`
   * awaits the writes of the results of the step before, which a batch started as its calls finished
   * (`runToolCallForNextStep`): beside the read of the call's context, before the model is asked.
   */
  async function callModelStoring(
    input: CallModelInput,
    storeFirst?: () => Promise<readonly TranscriptMessage[]>,
  ): Promise<{ result: CallModelResult; stored?: StoredReply }> {
    const { scope } = input;
    const agent = await options.agentStore.load(input.agentVersion);
    // With a message limit, only the thread's first human message and its newest messages are read (the limit is the
    // agent's, else its world's as last seen here: a guess, checked below once the world's variables are read).
    const window = agent.context?.max_messages ?? worldMessageLimits.get(input.world);
    // A reclaimed turn gets nothing back, not even a reply stored before it was reclaimed, and calls no model.
    // The results of the step before (`storeFirst`) are stored beside the read, both before the model is asked: the
    // step waits for the longer of the two, not for both one after the other. The read may or may not see them.
    const [read, storedResults] = await allSettledOrThrow([
      readModelCallContext(pool, scope, { operationId: input.operationId, world: input.world, window }),
      storeFirst?.() ?? [],
    ] as const);
    const { stored, worldVariables, hasEnvData, budget } = read;
    const transcript = withStoredResults(read.transcript, storedResults);
    if (stored) {
      if (options.tracing !== undefined) trace.getActiveSpan()?.setAttribute(BatonAttribute.replyReused, true);
      // What the first attempt offered is not recorded with its reply; the turn's list, when it has one, goes on.
      const result = await toResult(stored, true, agent, input, worldVariablesOf(input.world, worldVariables));
      return { result: input.mcpToolList === undefined ? result : { ...result, mcpToolList: input.mcpToolList } };
    }
    const endpoints = modelEndpointsFor(agent, options);
    // Checked once no reply is stored: a re-run of a call that was made returns its reply whatever the budget says.
    if (budget !== undefined) checkBudget(budget, agent, input.step, endpoints, options.prices ?? {});
    const activity = Context.current();
    const { attempt, isLocal } = activity.info;
    // A fallback chain: each model gets `fallback_after_attempts` attempts for failures a retry can fix, then the
    // next is asked; a failure only another model can fix (auth, an unknown model) moves on within the attempt.
    const first = Math.min(
      Math.floor((attempt - 1) / (agent.fallback_after_attempts ?? DEFAULT_FALLBACK_AFTER_ATTEMPTS)),
      endpoints.length - 1,
    );
    // A local step run again by the next worker after a crash starts counting its attempts afresh: its stream is told
    // apart from the dead worker's by a tag of its own.
    const attemptStream = isLocal
      ? `${input.operationId}#${attempt}.${randomBytes(4).toString('hex')}`
      : `${input.operationId}#${attempt}`;
    /** The endpoint at `index` of the chain (every index used is within it). */
    const endpointAt = (index: number): ModelEndpoint => {
      const endpoint = endpoints[index];
      if (endpoint === undefined) throw new Error(`the model chain of ${agent.name} has no endpoint ${index}`);
      return endpoint;
    };
    /**
     * The run feed's mark that a request to `endpoints[index]` started, with its stream (a fallback's has a tag of
     * its own, so a reader drops the text of the model that failed). The first is written while the request is put
     * together and, unless the reply is streamed, while it is on its way: the mark needs to come before the deltas
     * and the stored reply, not before the request.
     */
    const markStarted = (index: number) => {
      const { provider, model } = endpointAt(index);
      const stream = index === first ? attemptStream : `${attemptStream}~${index}`;
      const started = recordModelCallStarted(pool, {
        rootThreadId: scope.rootThreadId,
        threadId: scope.threadId,
        agent: scope.agent,
        operationId: input.operationId,
        step: input.step,
        attempt,
        stream,
        streaming: options.stream === true,
        provider,
        model,
      });
      started.catch(() => undefined);
      return { stream, started };
    };
    const firstMark = markStarted(first);

    // The world's variables as they are at this call: an edit mid-thread shows at the next call.
    const variables = worldVariablesOf(input.world, worldVariables);
    // `mcp:<server>` spelled out as the server's tools, less those of servers the world leaves out.
    const offered = options.tools.offered(agent.capabilities, variables);
    const kept = input.mcpToolList === undefined ? undefined : await mcpToolList(input.mcpToolList);
    const declared =
      kept === undefined
        ? offered
        : offered.filter((name) => options.tools.mcpServerOf(name) === undefined || kept.includes(name));
    const mcpTools = declared.filter((name) => options.tools.mcpServerOf(name) !== undefined);
    const mcpToolListId =
      input.mcpToolList ?? (mcpTools.length > 0 ? await saveMcpToolList(pool, mcpTools) : undefined);
    const systemPrompt = buildSystemPrompt(interpolate(agent.body || agent.description, variables), {
      name: agent.name,
      declared,
      universal: options.tools.universal,
      hasEnvData,
    });
    // The agent's context policy trims what this request carries; the transcript in Postgres keeps everything.
    const limits = contextLimitsFor(agent, variables);
    if (agent.context?.max_messages === undefined) rememberWorldMessageLimit(input.world, limits.maxMessages);
    const chat = (transcript: readonly TranscriptMessage[]): ChatCompletionMessageParam[] => [
      { role: 'system', content: systemPrompt },
      ...transcript.map(toChatMessage),
    ];
    const note = (text: string): ChatCompletionMessageParam => ({ role: 'system', content: text });
    // What was read in part tells what the whole would, or the whole is read (the guessed limit was off, or the
    // newest tool call reaches back further).
    const context =
      (read.unread === undefined
        ? trimContext(chat(transcript), limits, note)
        : trimWindow(chat(transcript), limits, note, read.unread)) ??
      trimContext(
        chat(
          (await readModelCallContext(pool, scope, { operationId: input.operationId, world: input.world })).transcript,
        ),
        limits,
        note,
      );
    const { messages } = context;
    const tools = [...options.tools.universal, ...declared]
      .map((name) => options.tools.toModelTool(name))
      .filter((tool): tool is ModelTool => tool !== undefined);

    const captureContent = options.tracing?.captureContent === true;
    /** Sends the request to one endpoint of the chain, streaming its text under `mark`'s stream when asked to. */
    const ask = async (
      { provider, openai, model }: ModelEndpoint,
      mark: { stream: string; started: Promise<unknown> },
    ): Promise<OpenAI.Chat.Completions.ChatCompletion> => {
      if (options.stream) await mark.started;
      // Room under the limits every worker shares, before the request (and its timeout) starts.
      const scopes = limitedScopes(options.limits ?? {}, provider, model);
      let said: string | undefined;
      const waiting = {
        waiting: (why: { scope: string; reason: string }) => {
          const waitingFor = `${why.scope}: ${why.reason}`;
          // A local activity has no heartbeat: the SDK keeps its workflow task alive instead.
          if (!isLocal) activity.heartbeat({ step: input.step, waitingForCapacity: waitingFor });
          // The run feed hears of each new reason once; a lost mark costs the live view a line, never the call.
          if (said === waitingFor) return;
          said = waitingFor;
          recordModelCallWaiting(pool, {
            rootThreadId: scope.rootThreadId,
            threadId: scope.threadId,
            agent: scope.agent,
            operationId: input.operationId,
            step: input.step,
            ...why,
          }).catch(() => undefined);
        },
        signal: activity.cancellationSignal,
      };
      return withCapacity(
        pool,
        scopes,
        waiting,
        () => send({ provider, openai, model }, mark, scopes),
        (reply) => reply.usage?.total_tokens ?? 0,
      );
    };
    /** Sends the request to one endpoint once it has room. */
    const send = async (
      { provider, openai, model }: ModelEndpoint,
      mark: { stream: string; started: Promise<unknown> },
      scopes: readonly LimitedScope[],
    ): Promise<OpenAI.Chat.Completions.ChatCompletion> => {
      const heartbeat = isLocal
        ? undefined
        : setInterval(() => activity.heartbeat({ step: input.step }), heartbeatIntervalMs);
      const deltas = options.stream
        ? new DeltaPublisher(pool, {
            rootThreadId: scope.rootThreadId,
            threadId: scope.threadId,
            agent: scope.agent,
            stream: mark.stream,
            step: input.step,
            attempt,
          })
        : undefined;
      // A typed agent's output: the provider's structured output, else the `final_output` tool.
      const asked = agent.output === undefined ? undefined : outputRequest(agent.output, outputModeOf(provider));
      const offeredTools = asked !== undefined && 'tool' in asked ? [...tools, asked.tool] : tools;
      const request = {
        model,
        messages,
        ...(offeredTools.length > 0 ? { tools: offeredTools } : {}),
        ...(asked !== undefined && 'response_format' in asked ? { response_format: asked.response_format } : {}),
        ...(agent.temperature === undefined ? {} : { temperature: agent.temperature }),
      };
      const spanAttributes = {
        ...scopeAttributes(scope, input.operationId),
        [GenAiAttribute.operationName]: 'chat',
        [GenAiAttribute.providerName]: provider,
        [GenAiAttribute.requestModel]: model,
        ...(agent.temperature === undefined ? {} : { [GenAiAttribute.requestTemperature]: agent.temperature }),
        [BatonAttribute.step]: input.step,
        [BatonAttribute.attempt]: attempt,
        [BatonAttribute.local]: isLocal,
        ...(captureContent ? { [GenAiAttribute.inputMessages]: JSON.stringify(messages) } : {}),
      };
      const requestOptions = {
        signal: activity.cancellationSignal,
        headers: {
          'x-baton-agent': scope.agent,
          'x-baton-thread': scope.threadId,
          'x-baton-root-thread': scope.rootThreadId,
          'x-baton-provider': provider,
          ...(context.omitted > 0 ? { [OMITTED_ASSISTANT_HEADER]: String(context.omittedAssistant) } : {}),
        },
      };
      // The span covers the request only: a stored reply returned above opens none, so a step re-run after a crash
      // never shows as a second call.
      const metricTags = { provider, model, agent: scope.agent };
      const sentAt = Date.now();
      return inSpan(options.tracing, `chat ${model}`, spanAttributes, async (span) => {
        try {
          // Streamed, the client assembles the chunks into the completion the endpoint would have sent whole, and
          // the chunks are published as they come.
          const reply = deltas
            ? await openai.chat.completions
                .stream({ ...request, stream_options: { include_usage: true } }, requestOptions)
                .on('chunk', (chunk) => deltas.add(chunk))
                .finalChatCompletion()
            : await openai.chat.completions.create(request, requestOptions);
          // The last batch goes out before the reply is stored, so a reader has the whole text when it arrives.
          await deltas?.flush();
          span?.setAttributes(completionAttributes(reply, captureContent));
          metrics.modelCall({
            ...metricTags,
            outcome: 'ok',
            latencyMs: Date.now() - sentAt,
            ...(reply.usage
              ? { inputTokens: reply.usage.prompt_tokens, outputTokens: reply.usage.completion_tokens }
              : {}),
          });
          return reply;
        } catch (error) {
          deltas?.discard();
          // The failed attempt's mark lands before the failure is reported (a failure to write it is not this error).
          await mark.started.catch(() => undefined);
          // A cancelled activity reports the cancellation (a CancelledFailure), not the abort error it caused.
          if (activity.cancellationSignal.aborted) throw activity.cancellationSignal.reason ?? error;
          const failure = classifyModelError(error, { provider, model });
          // A provider's Retry-After holds every worker's calls under its limits, not only this call's retry.
          const retryAfter: unknown = failure instanceof ApplicationFailure ? failure.nextRetryDelay : undefined;
          if (typeof retryAfter === 'number') await holdScopes(pool, scopes, retryAfter).catch(() => undefined);
          metrics.modelCall({ ...metricTags, outcome: errorTypeOf(failure), latencyMs: Date.now() - sentAt });
          throw failure;
        } finally {
          clearInterval(heartbeat);
        }
      });
    };

    // The model that answers is the one recorded with the reply: a re-run of this step returns that reply, and asks
    // no model, whichever served it.
    let served = first;
    let mark = firstMark;
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    for (;;) {
      try {
        completion = await ask(endpointAt(served), mark);
        break;
      } catch (failure) {
        if (served + 1 >= endpoints.length || !movesToNextModelAtOnce(failure)) throw failure;
        served += 1;
        mark = markStarted(served);
      }
    }
    const { provider, model } = endpointAt(served);
    const started = mark.started;

    const choice = completion.choices[0];
    if (!choice) {
      throw ApplicationFailure.create({ type: ErrorType.ModelInvalidReply, message: 'the model reply had no choices' });
    }
    // A repeated id is made distinct: each call is handled as itself, never as another call holding its id.
    const madeCalls: ToolCallRequest[] = distinctToolCallIds(
      (choice.message.tool_calls ?? []).flatMap((call) =>
        call.type === 'function'
          ? [
              {
                id: storableText(call.id),
                name: storableText(call.function.name),
                arguments: storableText(call.function.arguments),
              },
            ]
          : [],
      ),
    );
    const madeContent = typeof choice.message.content === 'string' ? storableText(choice.message.content) : null;
    // A typed agent's `final_output` call is its answer, stored as the reply's text.
    const { content, toolCalls } =
      agent.output === undefined
        ? { content: madeContent, toolCalls: madeCalls }
        : asOutputReply(madeContent, madeCalls);
    const usage: TokenUsage | null = completion.usage
      ? pricedUsage(
          {
            promptTokens: completion.usage.prompt_tokens,
            completionTokens: completion.usage.completion_tokens,
            totalTokens: completion.usage.total_tokens,
          },
          priceOf(options.prices ?? {}, provider, model),
        )
      : null;
    // An answer that ends the turn records the thread completed in the statement that stores it (a typed agent's
    // answer is checked against its schema first, in `toResult`, which then records it).
    const endsTurn = input.finishTurnOnAnswer === true && toolCalls.length === 0 && agent.output === undefined;
    try {
      await started;
      const { message, reused } = await appendMessage(
        pool,
        scope,
        input.operationId,
        {
          role: 'assistant',
          // Cleaned, not refused: the model call already happened, and a refusal would only make a retry repeat it.
          content,
          ...(toolCalls.length > 0 ? { toolCalls: [...toolCalls] } : {}),
          usage,
          provider,
          model,
        },
        { endsTurn },
      );
      const result = {
        ...(await toResult(message, reused, agent, input, variables, { threadMarked: endsTurn })),
        ...(mcpToolListId === undefined ? {} : { mcpToolList: mcpToolListId }),
      };
      return reused
        ? { result }
        : { result, stored: { seq: message.seq, toolCalls: message.toolCalls ?? [], worldVariables } };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * What the workflow does with each tool call. Computed from the stored reply, so a reused reply plans the same
   * way; arguments stay in Postgres except those the workflow itself needs (a question for a human).
   */
  async function planToolCall(
    call: ToolCallRequest,
    agent: AgentDefinition,
    approvalContext: () => Promise<ApprovalContext>,
  ): Promise<PlannedToolCall> {
    const checked = checkToolCall(call, agent, options.tools);
    if (checked.ok && checked.kind === 'agent') {
      return {
        id: call.id,
        name: call.name,
        kind: 'agent',
        message: checked.args.message,
        contextKeys: checked.args.context_keys ?? [],
        thread: checked.args.thread ?? 'new',
      };
    }
    if (checked.ok && checked.tool.name === forkJoinTool.name) {
      const args = checked.args as ForkJoinArguments;
      return {
        id: call.id,
        name: call.name,
        kind: 'fork_join',
        agents: args.tasks.map((task) => task.agent),
        failFast: args.fail_fast ?? false,
        deadlineSeconds: args.deadline_seconds ?? DEFAULT_FORK_DEADLINE_SECONDS,
        maxParallel: args.max_parallel ?? DEFAULT_FORK_MAX_PARALLEL,
        store: args.store ?? 'isolated',
      };
    }
    if (checked.ok && checked.tool.name === 'ask_human') {
      const args = checked.args as { question: string; timeout_s?: number };
      return {
        id: call.id,
        name: call.name,
        kind: 'ask_human',
        question: args.question,
        ...(args.timeout_s === undefined ? {} : { timeoutSeconds: args.timeout_s }),
      };
    }
    if (checked.ok && checked.tool.name === waitTool.name) {
      const args = checked.args as WaitArguments;
      return {
        id: call.id,
        name: call.name,
        kind: 'wait',
        ...(args.seconds === undefined ? {} : { seconds: args.seconds }),
        ...(args.until === undefined ? {} : { until: args.until }),
        reason: args.reason,
      };
    }
    // A refused call (bad arguments, not a capability) runs nothing: the tool activity records the refusal.
    if (!checked.ok) return { id: call.id, name: call.name, kind: 'tool' };
    const { tool } = checked;
    const approval = await approvalFor(tool, checked.args, agent, approvalContext);
    return {
      id: call.id,
      name: call.name,
      kind: 'tool',
      ...(tool.timeout_s === undefined ? {} : { timeoutSeconds: tool.timeout_s }),
      ...(tool.retries === undefined ? {} : { retries: tool.retries }),
      ...(tool.sideEffects && tool.timeout_s !== undefined ? { sideEffects: true } : {}),
      ...(approval === undefined ? {} : { approval }),
    };
  }

  /**
   * The call's result from the stored reply. `threadMarked`: the reply's append recorded the thread completed if the
   * reply ends the turn (`appendMessage`'s `endsTurn`), so it is not recorded again.
   */
  async function toResult(
    message: TranscriptMessage,
    reused: boolean,
    agent: AgentDefinition,
    input: CallModelInput,
    variables: Readonly<Record<string, string>>,
    { threadMarked = false }: { threadMarked?: boolean } = {},
  ): Promise<CallModelResult> {
    const approvalContext = (): Promise<ApprovalContext> =>
      Promise.resolve({
        threadId: input.scope.threadId,
        rootThreadId: input.scope.rootThreadId,
        agent,
        world: { name: input.world, variables },
      });
    // A replay's every call (a delegation, a fork, a question included) is answered by the tool activity.
    const replaying = options.replay !== undefined && (await options.replay.isReplay(input.scope.rootThreadId));
    const toolCalls = await Promise.all(
      (message.toolCalls ?? []).map((call): Promise<PlannedToolCall> =>
        replaying
          ? Promise.resolve({ id: call.id, name: call.name, kind: 'tool' })
          : planToolCall(call, agent, approvalContext),
      ),
    );
    // A typed agent's answer is checked against its schema (from the stored reply, so a re-run decides the same).
    const checked =
      toolCalls.length === 0 && agent.output !== undefined ? checkOutput(agent.output, message.content) : undefined;
    if (checked?.ok === false) return askForRepair(message, reused, agent, input, checked.problem);
    // The answer ends the turn: its thread is recorded completed here rather than in a step of its own.
    const turnFinished = input.finishTurnOnAnswer === true && toolCalls.length === 0;
    if (turnFinished && !threadMarked) await markThread(pool, input.scope.threadId, 'completed');
    return {
      seq: message.seq,
      content: message.content,
      toolCalls,
      usage: message.usage,
      reused,
      ...(turnFinished ? { turnFinished } : {}),
      ...(checked?.ok === true ? { output: checked.value } : {}),
    };
  }

  /**
   * A typed agent's answer that did not match its `output`: the model is told why in a message stored after it (once
   * per step, however often it is re-run) and the turn takes another step, until the agent's `output_repairs` are
   * used up; then the turn fails.
   * @throws ApplicationFailure `Output.Invalid`, non-retryable
   */
  async function askForRepair(
    message: TranscriptMessage,
    reused: boolean,
    agent: AgentDefinition,
    input: CallModelInput,
    problem: string,
  ): Promise<CallModelResult> {
    const allowed = agent.output_repairs ?? DEFAULT_OUTPUT_REPAIRS;
    try {
      const repairs = await countOutputRepairs(pool, input.scope.threadId, message.seq);
      if (repairs >= allowed) {
        throw ApplicationFailure.create({
          type: ErrorType.OutputInvalid,
          message:
            `the answer of ${agent.name} does not match its output schema` +
            `${allowed > 0 ? ` after ${allowed} ${allowed === 1 ? 'repair' : 'repairs'}` : ''}: ${problem}`,
          nonRetryable: true,
        });
      }
      await appendMessage(pool, input.scope, outputRepairOperationId(input.operationId), {
        role: 'user',
        content: repairMessage(problem, outputModeOf(message.provider), allowed - repairs),
      });
    } catch (error) {
      throw toApplicationFailure(error);
    }
    return {
      seq: message.seq,
      content: message.content,
      toolCalls: [],
      usage: message.usage,
      reused,
      outputRepair: true,
    };
  }

  return { callModel, callModelStoring };
}

/**
 * The transcript as read, with the results stored beside it (`storeFirst`): those it did not see come after
 * what it did (they are the thread's newest messages, so a window read stays the newest messages, in one run).
 */
function withStoredResults(
  transcript: readonly TranscriptMessage[],
  results: readonly TranscriptMessage[],
): readonly TranscriptMessage[] {
  if (results.length === 0) return transcript;
  const read = new Set(transcript.map((message) => message.seq));
  return [...transcript, ...results.filter((message) => !read.has(message.seq))].sort((a, b) => a.seq - b.seq);
}

/**
 * Refuses a model call whose turn has spent its budget, or whose budget is in dollars and a model of its chain has no
 * price (its cost could not be counted). Not retried: only the turn's end frees what it holds, and only a person can
 * give it more; said so its caller and the person reading the thread know why the turn stopped.
 * @throws ApplicationFailure `Budget.Exhausted`, `Budget.Unpriced`
 */
function checkBudget(
  budget: Budget,
  agent: Pick<AgentDefinition, 'budget'>,
  step: number,
  endpoints: readonly ModelEndpoint[],
  prices: ModelPrices,
): void {
  const spent = (
    [
      ['token', budget.tokens, (n: number) => String(n)],
      ['dollar', budget.usd, (n: number) => `$${n}`],
    ] as const
  ).find(([, amount]) => amount !== undefined && amount.left <= 0);
  if (spent !== undefined) {
    const [unit, amount, show] = spent;
    if (amount === undefined) return;
    const held = amount.granted - amount.spent - amount.left;
    // What a person would be asked to add (`on_budget: ask`), in each unit that is spent.
    const more = (unitAmount: BudgetAmount | undefined, asked: number | undefined) =>
      unitAmount !== undefined && unitAmount.left <= 0 ? (asked ?? unitAmount.granted) : undefined;
    const tokens = more(budget.tokens, agent.budget?.tokens);
    const usd = more(budget.usd, agent.budget?.usd);
    const details: BudgetExhaustedDetails = {
      extension: { ...(tokens === undefined ? {} : { tokens }), ...(usd === undefined ? {} : { usd }) },
      step,
    };
    throw ApplicationFailure.create({
      type: ErrorType.BudgetExhausted,
      message:
        `the ${unit} budget of this turn is spent (${show(amount.granted)} granted, ${show(amount.spent)} spent` +
        `${held > 0 ? `, ${show(held)} held by its delegations` : ''}), so the model was not asked again`,
      nonRetryable: true,
      details: [details],
    });
  }
  if (budget.usd === undefined) return;
  const unpriced = endpoints.find(({ provider, model }) => priceOf(prices, provider, model) === undefined);
  if (unpriced === undefined) return;
  throw ApplicationFailure.create({
    type: ErrorType.BudgetUnpriced,
    message:
      `this turn has a dollar budget and BATON_MODEL_PRICES has no price for ${unpriced.provider}/${unpriced.model} ` +
      '(nor for its provider), so its cost could not be counted: the model was not asked',
    nonRetryable: true,
  });
}

/** What a span of a model request says of its reply (the GenAI conventions' response and usage attributes). */
function completionAttributes(reply: OpenAI.Chat.Completions.ChatCompletion, captureContent: boolean): Attributes {
  const finishReasons = reply.choices.map((choice) => choice.finish_reason);
  return {
    [GenAiAttribute.responseModel]: reply.model,
    [GenAiAttribute.responseId]: reply.id,
    ...(finishReasons.length > 0 ? { [GenAiAttribute.finishReasons]: finishReasons } : {}),
    ...(reply.usage
      ? {
          [GenAiAttribute.inputTokens]: reply.usage.prompt_tokens,
          [GenAiAttribute.outputTokens]: reply.usage.completion_tokens,
        }
      : {}),
    ...(captureContent
      ? { [GenAiAttribute.outputMessages]: JSON.stringify(reply.choices.map((choice) => choice.message)) }
      : {}),
  };
}

/** A stored transcript message in the shape the Chat Completions API takes. */
export function toChatMessage(message: TranscriptMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: message.content ?? '' };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId ?? '', content: message.content ?? '' };
    case 'assistant':
      return {
        role: 'assistant',
        content: message.content,
        ...(message.toolCalls && message.toolCalls.length > 0
          ? {
              tool_calls: message.toolCalls.map((call) => ({
                id: call.id,
                type: 'function' as const,
                function: { name: call.name, arguments: call.arguments },
              })),
            }
          : {}),
      };
  }
}
