/**
 * Baton's spans made in workflow code: a turn (`invoke_agent <agent>`, as the GenAI semantic conventions name an
 * agent's run), a fork, and the durable waits (an approval, a question, a `wait`). They exist only in a traced worker,
 * whose bundle holds Temporal's tracing interceptors: those register a tracer provider in the sandbox, whose spans
 * leave through a sink Temporal does not call while a history replays. Elsewhere the OpenTelemetry API hands out a
 * tracer that records nothing. A span creates no command, so adding or removing one changes no history.
 */
import { SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';

/** Runs `work` in a span named `name`; it ends with the work, with an error status when the work throws. */
export function inWorkflowSpan<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
  return trace.getTracer('baton').startActiveSpan(name, { attributes }, async (span) => {
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
