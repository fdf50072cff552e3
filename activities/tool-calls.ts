import { SpanStatusCode } from '@opentelemetry/api';
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { setBounded } from '../common/bounded-map';
import type { ExecuteToolCallInput, ExecuteToolCallResult, ThreadScope, ToolCallRequest } from '../common/types';
import { storableText, truncateBytes } from '../common/text';
import { appendMessage, type TranscriptMessage } from '../db/transcripts';
import { EnvDataError, type EnvStore } from '../db/env-data';
import { BatonDbError } from '../db/errors';
import { readToolCallContext } from '../db/step-context';
import { claimToolRun, finishToolRun, startToolAttempt } from '../db/tool-runs';
import { findApprovalByOperation } from '../db/approvals';
import { approvalOperationId } from '../common/ids';
import type { AgentDefinition } from '../common/agent-definition';
import type { AgentStore } from './agent-store';
import { describeDataError, isDataError, toApplicationFailure } from './failures';
import { createActivityMetrics, type ActivityMetrics } from './metrics';
import { BatonAttribute, GenAiAttribute, inSpan, scopeAttributes, type ActivityTracing } from './tracing';
import type { ToolRegistry } from './tools';
import { approvalFor } from './tools/approval-rule';
import type { EnvWatchers } from './tools/agent-env';
import { createToolContext } from './tools/context';
import { isToolError, type ToolDefinition, type ToolOutput, type WorldContext } from './tools/types';
import { mcpWorldRefusal } from './tools/mcp-world';
import { checkToolCall } from './tools/validate';
import { worldVariablesOf } from './worlds';
import type { ReplayAnswers } from './eval-replay';
import type { StoredReply } from './model';

export interface ToolCallActivityOptions {
  pool: Pool;
  env: EnvStore;
  /** The root's watchers: woken by a key a tool changed, added by `watch_env_data`. @default none */
  watchers?: EnvWatchers;
  agentStore: AgentStore;
  tools: ToolRegistry;
  /** @default 2000 */
  heartbeatIntervalMs?: number;
  /** Spans for the tools run (activities/tracing.ts). @default none: nothing is traced */
  tracing?: ActivityTracing;
  /** Metrics of the tools run (activities/metrics.ts). @default none recorded */
  metrics?: ActivityMetrics;
  /** An evaluation worker's replays: a replayed thread's calls are answered from the record. @default none */
  replay?: ReplayAnswers;
}

/** A tool call run, its result's write to the transcript under way (`runToolCallForNextStep`). */
export interface RanToolCall {
  /** The write of the result, as `executeToolCall` stores it, once per operation id. */
  stored: Promise<TranscriptMessage>;
}

/** Outcomes of tool runs whose recording in Postgres failed, kept for the retry that lands on this worker. */
const MAX_UNRECORDED_OUTCOMES = 1000;

/** Activities that run the tools agents call. */
export function createToolCallActivities(options: ToolCallActivityOptions) {
  const { pool } = options;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 2000;
  const metrics = options.metrics ?? createActivityMetrics();
  const unrecorded = new Map<string, { content: string; ok: boolean }>();

  /**
   * Runs one tool call of a stored model reply and records its result in the transcript, once per operation id.
   * The call's arguments are read from Postgres, checked against the agent's capabilities and the tool's schema,
   * and a refusal or a `ToolError` is recorded as an "Error: …" result the model can act on. Other errors (a lost
   * database connection) fail the attempt so Temporal retries it.
   *
   * Nothing runs for a reclaimed turn: the thread's epoch is checked before a stored result is handed back and
   * before a tool runs. A tool with side effects (`sideEffects`) runs at most once per operation id: its run is
   * claimed before it starts and its output recorded before the transcript write, so a retry after a failed write
   * stores the recorded output instead of running the tool again, and a retry after a lost worker reports the run as
   * interrupted. Output Postgres cannot store (U+0000, lone surrogates) is cleaned, not refused.
   * @throws ApplicationFailure `Thread.StaleEpoch`, `Agent.NotFound`, `Input.Invalid` (data Postgres refuses)
   */
  async function executeToolCall(input: ExecuteToolCallInput): Promise<ExecuteToolCallResult> {
    try {
      const ran = await run(input, undefined);
      if ('done' in ran) return ran.done;
      return { seq: (await storeResult(input, ran)).seq, ok: ran.outcome.ok };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * Runs one call of the reply a batch's step has just stored, as `executeToolCall` runs it, and resolves once the
   * tool has finished, its result's write to the transcript started (`stored`): the step's next model call reads its
   * context beside that write and awaits it before the model is asked, so the step waits for the longer of the two,
   * not for both one after the other. `stored` is the reply's calls and the world's variables as its model call read
   * them: no result of its calls can be stored yet, and its append was fenced by the epoch a moment ago, so the call
   * is not read back first (unless `stored` is another reply). `undefined` when an earlier attempt stored the result.
   */
  async function runToolCallForNextStep(
    input: ExecuteToolCallInput,
    stored: StoredReply,
  ): Promise<RanToolCall | undefined> {
    try {
      const ran = await run(input, stored.seq === input.messageSeq ? stored : undefined);
      if ('done' in ran) return undefined;
      const write = storeResult(input, ran).catch((error: unknown) => {
        throw toApplicationFailure(error);
      });
      // Awaited by the model call (or, should a sibling call fail, by the batch before it fails); until then a
      // failed write must not count as unhandled.
      write.catch(() => undefined);
      return { stored: write };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /** Runs the call, or finds the result an earlier attempt stored (see `executeToolCall`); stores nothing. */
  async function run(
    input: ExecuteToolCallInput,
    stored: StoredReply | undefined,
  ): Promise<{ done: ExecuteToolCallResult } | { callId: string; outcome: { content: string; ok: boolean } }> {
    const { scope } = input;
    // A reclaimed call runs nothing and gets nothing back, not even a result stored before it was reclaimed.
    const { done, replyToolCalls, worldVariables } =
      stored === undefined
        ? await readToolCallContext(pool, scope, {
            operationId: input.operationId,
            messageSeq: input.messageSeq,
            world: input.world,
          })
        : { done: undefined, replyToolCalls: stored.toolCalls, worldVariables: stored.worldVariables };
    if (done) return { done: { seq: done.seq, ok: !(done.content ?? '').startsWith('Error: ') } };

    const agent = await options.agentStore.load(input.agentVersion);
    // The world's variables as they are at this call (a batch's: at the model call that stored the reply, just before),
    // for the tool's context, the MCP servers it offers and approvals.
    const world = { name: input.world, variables: worldVariablesOf(input.world, worldVariables) };
    const call = replyToolCalls?.find((candidate) => candidate.id === input.toolCallId);
    if (!call)
      throw new Error(
        `tool call '${input.toolCallId}' is not in message ${input.messageSeq} of thread '${scope.threadId}'`,
      );
    return { callId: call.id, outcome: await outcomeOf(input, call, replyToolCalls ?? [], agent, world) };
  }

  /** Appends a call's result to the transcript, once per operation id. */
  async function storeResult(
    input: ExecuteToolCallInput,
    ran: { callId: string; outcome: { content: string } },
  ): Promise<TranscriptMessage> {
    const { message } = await appendMessage(pool, input.scope, input.operationId, {
      role: 'tool',
      toolCallId: ran.callId,
      content: ran.outcome.content,
    });
    // An outcome kept for a retry is done with once the transcript has it.
    unrecorded.delete(unrecordedKey(input.scope, input.operationId));
    return message;
  }

  /** What the call answers: the tool's output, a refusal, or the recorded answer of a replay. */
  async function outcomeOf(
    input: ExecuteToolCallInput,
    call: ToolCallRequest,
    replyToolCalls: readonly ToolCallRequest[],
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<{ content: string; ok: boolean }> {
    const checkedCall = checkToolCall(call, agent, options.tools);
    // A replay answers the call from the record; past its divergence a read-only tool may run live.
    const replayed = await options.replay?.answer(
      input.scope,
      call,
      { messageSeq: input.messageSeq, operationId: input.operationId },
      checkedCall.ok &&
        checkedCall.kind === 'tool' &&
        checkedCall.tool.run !== undefined &&
        !checkedCall.tool.sideEffects,
    );
    if (replayed?.kind === 'recorded') return { content: replayed.content, ok: replayed.ok };
    // Replies are stored with distinct call ids (`distinctToolCallIds`); one stored before that may repeat an id, and
    // then which call this is cannot be told: none of them runs, rather than one run with another's arguments.
    const repeated = replyToolCalls.filter((candidate) => candidate.id === call.id).length > 1;
    const checked = checkedCall;
    const outsideWorld =
      checked.ok && options.tools.mcpServerOf(call.name) !== undefined
        ? mcpWorldRefusal(options.tools, call.name, world.variables)
        : undefined;
    const unapproved =
      !repeated && checked.ok && checked.kind === 'tool' && checked.tool.run
        ? await approvalRefusal(input, checked.tool, checked.args, agent, world)
        : undefined;
    if (repeated) {
      return {
        content: `Error: this reply has more than one tool call with the id '${call.id}', so none of them ran.`,
        ok: false,
      };
    }
    if (!checked.ok) return { content: `Error: ${checked.error}`, ok: false };
    if (checked.kind === 'agent' || !checked.tool.run) {
      return { content: `Error: '${call.name}' cannot be run as a tool here.`, ok: false };
    }
    if (outsideWorld !== undefined) return { content: `Error: ${outsideWorld}`, ok: false };
    if (unapproved !== undefined) return { content: unapproved, ok: false };
    if (checked.tool.sideEffects) return runOnce(input, checked.tool, checked.args, agent, world);
    return runTool(input, checked.tool, checked.args, agent, world);
  }

  /**
   * A call that needs a person's approval runs only once it was approved. The workflow waits for the decision; the
   * activity checks it again, so that a worker whose workflow code predates approvals (during a rolling deploy)
   * cannot run such a call unapproved. Returns the refusal the model reads, or `undefined` when the call may run.
   */
  async function approvalRefusal(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<string | undefined> {
    const { scope } = input;
    const needed = await approvalFor(tool, args, agent, () =>
      Promise.resolve({ threadId: scope.threadId, rootThreadId: scope.rootThreadId, agent, world }),
    );
    if (needed === undefined) return undefined;
    const approval = await findApprovalByOperation(pool, scope.rootThreadId, approvalOperationId(input.operationId));
    if (approval?.status === 'approved') return undefined;
    const state = approval === undefined ? 'none was asked for' : `its approval is ${approval.status}`;
    return `Error: this call of '${tool.name}' needs a person's approval and ${state}, so it did not run.`;
  }

  /** Runs a tool with side effects at most once per operation id (see {@link executeToolCall}). */
  async function runOnce(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<{ content: string; ok: boolean }> {
    const { scope } = input;
    const key = unrecordedKey(scope, input.operationId);
    const claim = await claimToolRun(pool, scope, input.operationId, tool.name);
    if (claim.status === 'done') return { content: claim.content, ok: claim.ok };
    if (claim.status === 'interrupted') {
      const kept = unrecorded.get(key);
      if (kept) return kept;
      return {
        content:
          `Error: an earlier attempt of this '${tool.name}' call started at ${claim.startedAt.toISOString()} and ` +
          'ended without recording its result (its worker stopped). It was not run again, so it may or may not ' +
          'have taken effect: check before calling it again.',
        ok: false,
      };
    }
    const outcome = await runTool(input, tool, args, agent, world);
    try {
      await finishToolRun(pool, scope.rootThreadId, input.operationId, outcome);
    } catch (error) {
      // The transcript write below will likely fail too; the retry finds the outcome here if it lands on this worker.
      setBounded(unrecorded, key, outcome, MAX_UNRECORDED_OUTCOMES);
      throw error;
    }
    return outcome;
  }

  /**
   * Runs the tool once and says how it went. A `ToolError`, a refused env-data write or data Postgres refuses is a
   * result the model reads. A tool that declares `retries` (every user tool does) is retried by Temporal when it
   * throws anything else, up to its retries (this call's runs, counted in `tool_attempts`, not the activity's
   * attempts), then the model reads the error; Baton's own tools leave a throw to the activity's retry policy. Past
   * its `timeout_s` the tool's signal is aborted and the call ends without it.
   */
  async function runTool(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<{ content: string; ok: boolean }> {
    const outcome =
      options.tracing === undefined
        ? await runToolOnce(input, tool, args, agent, world)
        : await runToolInSpan(options.tracing, input, tool, args, agent, world);
    metrics.toolCall({ tool: tool.name, ok: outcome.ok });
    return outcome;
  }

  /** {@link runToolOnce} in an `execute_tool` span. */
  async function runToolInSpan(
    tracing: ActivityTracing,
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<{ content: string; ok: boolean }> {
    const mcpServer = options.tools.mcpServerOf(tool.name);
    const attributes = {
      ...scopeAttributes(input.scope, input.operationId),
      [GenAiAttribute.operationName]: 'execute_tool',
      [GenAiAttribute.toolName]: tool.name,
      [GenAiAttribute.toolCallId]: input.toolCallId,
      [GenAiAttribute.toolType]: 'function',
      [BatonAttribute.local]: Context.current().info.isLocal,
      ...(mcpServer === undefined ? {} : { [BatonAttribute.mcpServer]: mcpServer }),
    };
    return inSpan(tracing, `execute_tool ${tool.name}`, attributes, async (span) => {
      const outcome = await runToolOnce(input, tool, args, agent, world);
      // The model reads a failed run as an `Error:` result and the turn goes on; the span still says it failed.
      if (!outcome.ok) {
        span?.setAttribute(GenAiAttribute.errorType, 'tool_error');
        span?.setStatus({ code: SpanStatusCode.ERROR, message: outcome.content.slice(0, 200) });
      }
      return outcome;
    });
  }

  /** Runs the tool once: see {@link runTool}. */
  async function runToolOnce(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
    world: WorldContext,
  ): Promise<{ content: string; ok: boolean }> {
    if (!tool.run) return { content: `Error: '${tool.name}' cannot be run as a tool here.`, ok: false };
    const activity = Context.current();
    const runs = tool.sideEffects || tool.retries === undefined ? undefined : tool.retries + 1;
    // The call's own attempt, counted in Postgres: the activity's attempt number is another thing when the activity
    // runs several calls (a batch of steps retried for a later step's model error) or is a local activity run again
    // on the next worker, which counts from 1.
    const attempt = runs === undefined ? 0 : await startToolAttempt(pool, input.scope, input.operationId, tool.name);
    // An attempt past the last run allowed comes only after the last one ended without its result recorded (its
    // worker stopped, or the transcript write failed): report, do not run.
    if (runs !== undefined && attempt > runs) {
      return {
        content:
          `Error: tool '${tool.name}' did not finish in ${runs} attempt${runs === 1 ? '' : 's'} (the worker running ` +
          'the last one stopped). It was not run again.',
        ok: false,
      };
    }
    const timedOut = new AbortController();
    // The tool's own last report (an MCP server's progress, say) stays what the Web UI shows between its reports.
    let details: unknown = { tool: tool.name };
    // A local activity has no heartbeat (the SDK keeps its workflow task alive instead): its tool's reports go nowhere.
    const beat = activity.info.isLocal ? () => undefined : () => activity.heartbeat(details);
    const heartbeat = setInterval(beat, heartbeatIntervalMs);
    let timer: NodeJS.Timeout | undefined;
    try {
      const run = tool.run.bind(tool);
      const context = createToolContext({
        scope: input.scope,
        agent,
        operationId: input.operationId,
        envStore: options.env,
        ...(options.watchers === undefined ? {} : { watchers: options.watchers }),
        world,
        signal: AbortSignal.any([activity.cancellationSignal, timedOut.signal]),
        heartbeat: (reported) => {
          details = reported ?? { tool: tool.name };
          beat();
        },
      });
      const running = Promise.resolve().then(() => run(args, context));
      const limitS = tool.timeout_s;
      const output =
        limitS === undefined
          ? await running
          : await Promise.race([
              running,
              new Promise<typeof TIMED_OUT>((resolve) => {
                timer = setTimeout(() => resolve(TIMED_OUT), limitS * 1000);
              }),
            ]);
      if (output === TIMED_OUT) {
        timedOut.abort(new Error(`tool '${tool.name}' ran past its timeout of ${limitS} seconds`));
        // The run is abandoned: however it ends now, nothing waits for it.
        running.catch(() => undefined);
        return {
          content:
            `Error: tool '${tool.name}' did not finish within ${limitS} seconds and was stopped` +
            (tool.sideEffects ? '; it may have taken effect in part: check before calling it again.' : '.'),
          ok: false,
        };
      }
      return { content: storableText(cutResult(formatOutput(output), tool.maxResultBytes)), ok: true };
    } catch (error) {
      if (isToolError(error) || error instanceof EnvDataError) {
        return { content: storableText(`Error: ${error.message}`), ok: false };
      }
      // Data Postgres refuses (a NUL in a tool's write, say) fails the same way on every retry: the model hears it.
      if (isDataError(error)) return { content: storableText(`Error: ${describeDataError(error)}`), ok: false };
      // A cancelled or reclaimed call, a fenced write, or a tool without retry rules: the attempt fails as a whole.
      if (activity.cancellationSignal.aborted || error instanceof BatonDbError || tool.retries === undefined) {
        throw error;
      }
      if (runs !== undefined && attempt < runs) throw error;
      const message = error instanceof Error ? error.message : String(error);
      const attempts = runs !== undefined && runs > 1 ? ` (after ${attempt} attempts)` : '';
      return { content: storableText(`Error: tool '${tool.name}' failed${attempts}: ${message}`), ok: false };
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timer);
    }
  }

  return { executeToolCall, runToolCallForNextStep };
}

function unrecordedKey(scope: ThreadScope, operationId: string): string {
  return `${scope.rootThreadId}\u0000${operationId}`;
}

/** What `Promise.race` gets from a tool's timer. */
const TIMED_OUT = Symbol('timed out');

function formatOutput(output: ToolOutput): string {
  // A tool returning nothing (a user's `run` may) still answers the model with something it can read.
  if (output === undefined || output === null) return '';
  return typeof output === 'string' ? output : (JSON.stringify(output) ?? '');
}

/** A result over the tool's `maxResultBytes`, cut at that size with a note saying so. */
function cutResult(text: string, maxBytes: number | undefined): string {
  if (maxBytes === undefined) return text;
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxBytes) return text;
  return (
    `${truncateBytes(text, maxBytes)}\n[Baton] The result was cut: it was ${bytes} bytes and at most ` +
    `${maxBytes} are kept.`
  );
}
