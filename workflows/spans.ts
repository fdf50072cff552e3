/**
 * Baton's spans made in workflow code: a turn (`invoke_agent <agent>`, as the GenAI semantic conventions name an
 * agent's run), a fork, and the durable waits (an approval, a question, a `wait`). They exist only in a traced worker,
 * whose bundle holds Temporal's tracing interceptors: those register a tracer provider in the sandbox, whose spans
 * leave through a sink Temporal does not call while a history replays. Elsewhere the OpenTelemetry API hands out a
 * tracer that records nothing. A span creates no command, so adding or removing one changes no history.
 */
import { SpanStatusCode, trace, type Attributes, type Link, type Span, type SpanContext } from '@opentelemetry/api';

/** Where a span sits: under the active span (the default), or first of a trace of its own, linked to others. */
export interface WorkflowSpanPlace {
  /** Start a trace of its own instead of a child of the active span. */
  root?: boolean;
  /** Spans it follows from without being their child (a watcher's wake-up: the writes that woke it). */
  links?: Link[];
}

/**
 * The span active here, when one records (a traced worker's): the thread's workflow span, read as its run begins,
 * which each turn in a trace of its own links to.
 */
export function activeSpanContext(): SpanContext | undefined {
  const span = trace.getActiveSpan();
  return span?.isRecording() === true ? span.spanContext() : undefined;
}

/** Runs `work` in a span named `name`; it ends with the work, with an error status when the work throws. */
export function inWorkflowSpan<T>(
  name: string,
  attributes: Attributes,
  work: (span: Span) => Promise<T>,
  place: WorkflowSpanPlace = {},
): Promise<T> {
  return trace.getTracer('baton').startActiveSpan(name, { attributes, ...place }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}
