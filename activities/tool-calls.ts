import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import type { ExecuteToolCallInput, ExecuteToolCallResult, ThreadScope } from '../common/types';
import { storableText } from '../common/text';
import { appendMessage, findMessageByOperation, findMessageBySeq } from '../db/transcripts';
import type { EnvStore } from '../db/env-data';
import { checkThreadEpoch } from '../db/threads';
import { claimToolRun, finishToolRun } from '../db/tool-runs';
import type { AgentDefinition } from '../common/agent-definition';
import type { AgentStore } from './agent-store';
import { describeDataError, isDataError, toApplicationFailure } from './failures';
import type { ToolRegistry } from './tools';
import { ToolError, type ToolDefinition, type ToolOutput } from './tools/types';
import { checkToolCall } from './tools/validate';
import { loadWorldVariables } from './worlds';

export interface ToolCallActivityOptions {
  pool: Pool;
  env: EnvStore;
  agentStore: AgentStore;
  tools: ToolRegistry;
  /** @default 2000 */
  heartbeatIntervalMs?: number;
}

/** Outcomes of tool runs whose recording in Postgres failed, kept for the retry that lands on this worker. */
const MAX_UNRECORDED_OUTCOMES = 1000;

/** Activities that run the tools agents call. */
export function createToolCallActivities(options: ToolCallActivityOptions) {
  const { pool } = options;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 2000;
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
      return await execute(input);
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  async function execute(input: ExecuteToolCallInput): Promise<ExecuteToolCallResult> {
    const { scope } = input;
    const done = await findMessageByOperation(pool, input.operationId, scope);
    if (done) {
      await checkThreadEpoch(pool, scope.threadId, scope.epoch);
      return { seq: done.seq, ok: !(done.content ?? '').startsWith('Error: ') };
    }

    const agent = await options.agentStore.load(input.agentVersion);
    const reply = await findMessageBySeq(pool, scope.threadId, input.messageSeq);
    const call = reply?.toolCalls?.find((candidate) => candidate.id === input.toolCallId);
    if (!call)
      throw new Error(
        `tool call '${input.toolCallId}' is not in message ${input.messageSeq} of thread '${scope.threadId}'`,
      );

    let outcome: { content: string; ok: boolean };
    const checked = checkToolCall(call, agent, options.tools);
    if (!checked.ok) {
      outcome = { content: `Error: ${checked.error}`, ok: false };
    } else if (checked.kind === 'agent' || !checked.tool.run) {
      outcome = { content: `Error: '${call.name}' cannot be run as a tool here.`, ok: false };
    } else if (checked.tool.sideEffects) {
      outcome = await runOnce(input, checked.tool, checked.args, agent);
    } else {
      await checkThreadEpoch(pool, scope.threadId, scope.epoch);
      outcome = await runTool(input, checked.tool, checked.args, agent);
    }

    const { message } = await appendMessage(pool, scope, input.operationId, {
      role: 'tool',
      toolCallId: call.id,
      content: outcome.content,
    });
    unrecorded.delete(unrecordedKey(scope, input.operationId));
    return { seq: message.seq, ok: outcome.ok };
  }

  /** Runs a tool with side effects at most once per operation id (see {@link executeToolCall}). */
  async function runOnce(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
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
    const outcome = await runTool(input, tool, args, agent);
    try {
      await finishToolRun(pool, scope.rootThreadId, input.operationId, outcome);
    } catch (error) {
      // The transcript write below will likely fail too; the retry finds the outcome here if it lands on this worker.
      if (unrecorded.size >= MAX_UNRECORDED_OUTCOMES) unrecorded.delete(unrecorded.keys().next().value ?? '');
      unrecorded.set(key, outcome);
      throw error;
    }
    return outcome;
  }

  async function runTool(
    input: ExecuteToolCallInput,
    tool: ToolDefinition,
    args: unknown,
    agent: AgentDefinition,
  ): Promise<{ content: string; ok: boolean }> {
    if (!tool.run) return { content: `Error: '${tool.name}' cannot be run as a tool here.`, ok: false };
    const context = Context.current();
    const heartbeat = setInterval(() => context.heartbeat({ tool: tool.name }), heartbeatIntervalMs);
    try {
      const output = await tool.run(args, {
        scope: input.scope,
        agent,
        operationId: input.operationId,
        env: options.env,
        world: { name: input.world, variables: await loadWorldVariables(pool, input.world) },
        signal: context.cancellationSignal,
        heartbeat: (details) => context.heartbeat(details),
      });
      return { content: storableText(formatOutput(output)), ok: true };
    } catch (error) {
      if (error instanceof ToolError) return { content: storableText(`Error: ${error.message}`), ok: false };
      // Data Postgres refuses (a NUL in a tool's write, say) fails the same way on every retry: the model hears it.
      if (isDataError(error)) return { content: storableText(`Error: ${describeDataError(error)}`), ok: false };
      throw error;
    } finally {
      clearInterval(heartbeat);
    }
  }

  return { executeToolCall };
}

function unrecordedKey(scope: ThreadScope, operationId: string): string {
  return `${scope.rootThreadId}\u0000${operationId}`;
}

function formatOutput(output: ToolOutput): string {
  return typeof output === 'string' ? output : JSON.stringify(output);
}
