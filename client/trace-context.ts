/**
 * A caller's trace context, carried into the runs it starts: `startThread`, `send` and `run` take a W3C `traceparent`
 * (and when they are given none, the active context of an application that runs the OpenTelemetry SDK is used), which
 * goes in the header Temporal's OpenTelemetry interceptors read (`_tracer-data`). A traced worker then makes the
 * thread's spans, and the turn's, children of the caller's span, so an application's request trace continues into the
 * agent tree. Without a traced worker the header is carried and read by nobody.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { context, propagation } from '@opentelemetry/api';
import type {
  Next,
  WorkflowClientInterceptor,
  WorkflowSignalWithStartInput,
  WorkflowStartInput,
  WorkflowStartUpdateInput,
  WorkflowStartUpdateWithStartInput,
} from '@temporalio/client';
import { defaultPayloadConverter, type Headers } from '@temporalio/common';

/** The header Temporal's OpenTelemetry interceptors carry a trace context in (a JSON map of W3C fields). */
export const TRACE_HEADER = '_tracer-data';

/** The traceparent of the call in progress, when its caller gave one. */
const callerTraceparent = new AsyncLocalStorage<string>();

/** Runs `call` with `traceparent` (checked first by the caller) as the parent of what it starts. */
export function withTraceparent<T>(traceparent: string | undefined, call: () => Promise<T>): Promise<T> {
  return traceparent === undefined ? call() : callerTraceparent.run(traceparent, call);
}

/** The fields to carry: the call's own traceparent, else what the application's OpenTelemetry context holds. */
function carrier(): Record<string, string> {
  const traceparent = callerTraceparent.getStore();
  if (traceparent !== undefined) return { traceparent };
  const fields: Record<string, string> = {};
  // A no-op without an application's propagator: nothing is added.
  propagation.inject(context.active(), fields);
  return fields;
}

function withTraceHeader(headers: Headers): Headers {
  const fields = carrier();
  if (fields.traceparent === undefined) return headers;
  return { ...headers, [TRACE_HEADER]: defaultPayloadConverter.toPayload(fields) };
}

/** Adds the caller's trace context to every start, Update and signal-with-start the client sends. */
export const traceContextInterceptor: WorkflowClientInterceptor = {
  start(input: WorkflowStartInput, next: Next<WorkflowClientInterceptor, 'start'>) {
    return next({ ...input, headers: withTraceHeader(input.headers) });
  },
  startUpdate(input: WorkflowStartUpdateInput, next: Next<WorkflowClientInterceptor, 'startUpdate'>) {
    return next({ ...input, headers: withTraceHeader(input.headers) });
  },
  startUpdateWithStart(
    input: WorkflowStartUpdateWithStartInput,
    next: Next<WorkflowClientInterceptor, 'startUpdateWithStart'>,
  ) {
    return next({
      ...input,
      workflowStartHeaders: withTraceHeader(input.workflowStartHeaders),
      updateHeaders: withTraceHeader(input.updateHeaders),
    });
  },
  signalWithStart(input: WorkflowSignalWithStartInput, next: Next<WorkflowClientInterceptor, 'signalWithStart'>) {
    return next({ ...input, headers: withTraceHeader(input.headers) });
  },
};
