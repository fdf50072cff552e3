/**
 * The spans Baton's activities add to a trace: one per model request actually sent (`chat <model>`) and one per tool
 * actually run (`execute_tool <name>`), named and described as the OpenTelemetry GenAI semantic conventions ask, with
 * Baton's own attributes (`baton.*`) beside them. They go under the span of the activity running them (Temporal's
 * activity interceptor opens it from the workflow's headers), so a trace shows each model call and tool run where its
 * turn made it.
 *
 * A span is opened only around work that happens: a retried step whose reply or tool result is stored opens none,
 * so a step re-run after a crash never shows as a second call. With no tracer (the worker's tracing is off) every
 * helper here runs the work and nothing else.
 */
import { SpanKind, SpanStatusCode, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { ThreadScope } from '../common/types';

/** The attribute names of the GenAI semantic conventions Baton sets. */
export const GenAiAttribute = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  requestTemperature: 'gen_ai.request.temperature',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  agentName: 'gen_ai.agent.name',
  conversationId: 'gen_ai.conversation.id',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
} as const;

/** Baton's own attributes on its spans. */
export const BatonAttribute = {
  threadId: 'baton.thread_id',
  rootThreadId: 'baton.root_thread_id',
  agent: 'baton.agent',
  epoch: 'baton.epoch',
  operationId: 'baton.operation_id',
  step: 'baton.step',
  attempt: 'baton.attempt',
  local: 'baton.local_activity',
  mcpServer: 'baton.mcp.server',
  replyReused: 'baton.model.reply_reused',
} as const;

/** What the activities need to trace: the tracer, and whether prompts and replies go into spans. */
export interface ActivityTracing {
  readonly tracer: Tracer;
  /**
   * Record the messages sent and the reply (`gen_ai.input.messages`, `gen_ai.output.messages`). They hold whatever
   * the agents and tools read and wrote, so it is off unless asked for. @default false
   */
  readonly captureContent?: boolean;
}

/** The attributes every span of a thread's work carries. */
export function scopeAttributes(scope: ThreadScope, operationId: string): Attributes {
  return {
    [GenAiAttribute.conversationId]: scope.rootThreadId,
    [GenAiAttribute.agentName]: scope.agent,
    [BatonAttribute.rootThreadId]: scope.rootThreadId,
    [BatonAttribute.threadId]: scope.threadId,
    [BatonAttribute.agent]: scope.agent,
    [BatonAttribute.epoch]: scope.epoch,
    [BatonAttribute.operationId]: operationId,
  };
}

/**
 * Runs `work` in a client span named `name` when tracing is on: the span ends when the work does, with an error
 * status and `error.type` when it throws (the thrown error's `type`, as Baton's typed failures have, else its name).
 */
export async function inSpan<T>(
  tracing: ActivityTracing | undefined,
  name: string,
  attributes: Attributes,
  work: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (tracing === undefined) return work(undefined);
  return tracing.tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setAttribute(GenAiAttribute.errorType, errorTypeOf(error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The type a span names for a failure: a typed failure's `type` (`Model.RateLimited`), else the error's class. */
export function errorTypeOf(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const { type, name } = error as { type?: unknown; name?: unknown };
    if (typeof type === 'string' && type !== '') return type;
    if (typeof name === 'string' && name !== '') return name;
  }
  return 'Error';
}
