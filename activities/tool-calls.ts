import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import type { ExecuteToolCallInput, ExecuteToolCallResult } from '../common/types';
import { appendMessage, findMessageByOperation, findMessageBySeq } from '../db/transcripts';
import type { EnvStore } from '../db/env-data';
import type { AgentStore } from './agent-store';
import { toApplicationFailure } from './failures';
import type { ToolRegistry } from './tools';
import { ToolError, type ToolOutput } from './tools/types';
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

/** Activities that run the tools agents call. */
export function createToolCallActivities(options: ToolCallActivityOptions) {
  const { pool } = options;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 2000;

  /**
   * Runs one tool call of a stored model reply and records its result in the transcript, once per operation id.
   * The call's arguments are read from Postgres, checked against the agent's capabilities and the tool's schema,
   * and a refusal or a `ToolError` is recorded as an "Error: …" result the model can act on. Other errors (a lost
   * database connection) fail the attempt so Temporal retries it.
   * @throws ApplicationFailure `Thread.StaleEpoch`, `Agent.NotFound`
   */
  async function executeToolCall(input: ExecuteToolCallInput): Promise<ExecuteToolCallResult> {
    const { scope } = input;
    const done = await findMessageByOperation(pool, input.operationId);
    if (done) return { seq: done.seq, ok: !(done.content ?? '').startsWith('Error: ') };

    const agent = await options.agentStore.load(input.agentVersion);
    const reply = await findMessageBySeq(pool, scope.threadId, input.messageSeq);
    const call = reply?.toolCalls?.find((candidate) => candidate.id === input.toolCallId);
    if (!call)
      throw new Error(
        `tool call '${input.toolCallId}' is not in message ${input.messageSeq} of thread '${scope.threadId}'`,
      );

    let content: string;
    let ok = false;
    const checked = checkToolCall(call, agent, options.tools);
    if (!checked.ok) {
      content = `Error: ${checked.error}`;
    } else if (checked.kind === 'agent' || !checked.tool.run) {
      content = `Error: '${call.name}' cannot be run as a tool here.`;
    } else {
      const context = Context.current();
      const heartbeat = setInterval(() => context.heartbeat({ tool: call.name }), heartbeatIntervalMs);
      try {
        content = formatOutput(
          await checked.tool.run(checked.args, {
            scope,
            agent,
            operationId: input.operationId,
            env: options.env,
            world: { name: input.world, variables: await loadWorldVariables(pool, input.world) },
            signal: context.cancellationSignal,
            heartbeat: (details) => context.heartbeat(details),
          }),
        );
        ok = true;
      } catch (error) {
        if (!(error instanceof ToolError)) throw toApplicationFailure(error);
        content = `Error: ${error.message}`;
      } finally {
        clearInterval(heartbeat);
      }
    }
    try {
      const { message } = await appendMessage(pool, scope, input.operationId, {
        role: 'tool',
        toolCallId: call.id,
        content,
      });
      return { seq: message.seq, ok };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  return { executeToolCall };
}

function formatOutput(output: ToolOutput): string {
  return typeof output === 'string' ? output : JSON.stringify(output);
}
