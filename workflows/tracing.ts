/**
 * The workflow interceptors a traced worker's bundle holds besides Temporal's (worker/tracing.ts), outside them: a
 * message to a standing thread that brings no trace context of its caller starts a trace of its own, instead of
 * hanging under the thread's workflow span, which is exported only when the thread ends or continues as new (days
 * later, for a thread people come back to). A turn is then one trace, found by the thread's and the turn's ids on its
 * spans. A caller's context, when the message carries one, stays the parent. Not bundled unless the worker traces.
 */
import { context, ROOT_CONTEXT } from '@opentelemetry/api';
import type { Next, UpdateInput, WorkflowInboundCallsInterceptor, WorkflowInterceptors } from '@temporalio/workflow';

/** The header Temporal's OpenTelemetry interceptors carry a caller's trace context in. */
const TRACE_HEADER = '_tracer-data';

class TurnPerTraceInterceptor implements WorkflowInboundCallsInterceptor {
  handleUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>): Promise<unknown> {
    return input.headers[TRACE_HEADER] === undefined ? context.with(ROOT_CONTEXT, () => next(input)) : next(input);
  }
}

export const interceptors = (): WorkflowInterceptors => ({ inbound: [new TurnPerTraceInterceptor()] });
