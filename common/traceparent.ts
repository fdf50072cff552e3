/**
 * W3C `traceparent` text: checking a caller's, reading one into a span context (a watcher's wake-up links to the
 * write that woke it: the writer's traceparent comes with the signal), and writing the active span's. Pure code
 * apart from reading the OpenTelemetry API's active context, which is empty where nothing traces: the workflows, the
 * activities and the clients share it.
 */
import { trace, TraceFlags, type SpanContext } from '@opentelemetry/api';

/** `00-<trace id>-<parent id>-<flags>`, lowercase hex, as the W3C Trace Context spells it. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Why `value` is no W3C `traceparent`, or `undefined` when it is one. */
export function traceparentProblem(value: string): string | undefined {
  const match = TRACEPARENT.exec(value);
  const rule = 'a traceparent is 00-<32 hex digits of trace id>-<16 of parent span id>-<2 of flags>, in lowercase';
  if (match === null) return `'${value.slice(0, 80)}' is not a W3C traceparent: ${rule}`;
  const [, version, traceId, spanId] = match;
  if (version === 'ff') return `'${value}' is not a W3C traceparent: version ff is invalid`;
  if (/^0+$/.test(traceId ?? '')) return `'${value}' is not a W3C traceparent: its trace id is all zeros`;
  if (/^0+$/.test(spanId ?? '')) return `'${value}' is not a W3C traceparent: its parent span id is all zeros`;
  return undefined;
}

/** The span context a valid `traceparent` names (a remote one), else `undefined`. */
export function spanContextOf(traceparent: unknown): SpanContext | undefined {
  if (typeof traceparent !== 'string' || traceparentProblem(traceparent) !== undefined) return undefined;
  const [, traceId = '', spanId = '', flags = '00'] = traceparent.split('-');
  return { traceId, spanId, traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true };
}

/** The `traceparent` of the span active where this is called, when one records (a traced worker's, an app's). */
export function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  if (span === undefined || !span.isRecording()) return undefined;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${(traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, '0')}`;
}
