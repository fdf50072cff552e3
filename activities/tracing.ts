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
import { BatonAttribute, GenAiAttribute, threadSpanAttributes } from '../common/span-attributes';
import type { ThreadScope } from '../common/types';

export { BatonAttribute, GenAiAttribute };

/** What the activities need to trace: the tracer, and whether prompts and replies go into spans. */
export interface ActivityTracing {
  readonly tracer: Tracer;
  /**
   * Record the messages sent and the reply (`gen_ai.input.messages`, `gen_ai.output.messages`). They hold whatever
   * the agents and tools read and wrote, so it is off unless asked for. @default false
   */
  readonly captureContent?: boolean;
}

/** The attributes every span of a thread's work carries, with the operation's id. */
export function scopeAttributes(scope: ThreadScope, operationId: string): Attributes {
  return { ...threadSpanAttributes(scope), [BatonAttribute.operationId]: operationId };
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
