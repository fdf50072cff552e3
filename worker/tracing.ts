/**
 * OpenTelemetry traces of a worker's runs. The standard `OTEL_*` variables turn export on (an OTLP endpoint set) and
 * say where and how; unset, nothing here is built and the worker runs as before. Spans come from three places:
 *
 * - Temporal's interceptors (`@temporalio/interceptors-opentelemetry`): a span per workflow run, Update, signal,
 *   child workflow and activity, made in the workflow sandbox and handed out through a sink that is not called while
 *   a history replays, so a replayed workflow task exports nothing again; their trace context travels in Temporal's
 *   headers, so a delegated turn's spans sit under the step that delegated, and a caller's `traceparent` (the SDK's
 *   `startThread`/`send`/`run`, `baton run --traceparent`) is the parent of the root's;
 * - Baton's activities (activities/tracing.ts): `chat <model>` for each model request sent, `execute_tool <name>` for
 *   each tool run, with the GenAI semantic conventions' attributes;
 * - nothing else: a span is never made from a process's memory of what another worker did.
 */
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-base';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type { InjectedSinks, WorkerOptions } from '@temporalio/worker';
import { z } from 'zod';
import type { ActivityTracing } from '../activities/tracing';

/** The instrumentation scope of Baton's own spans. */
export const BATON_TRACER_NAME = 'baton';

/**
 * The workflow interceptor modules a traced worker's bundle holds: Baton's (a message without a caller's context
 * starts a trace of its own, workflows/tracing.ts), around Temporal's.
 */
export const WORKFLOW_TRACING_MODULES = [
  require.resolve('../workflows/tracing'),
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors'),
];

/** What a bundle's code holds when it was built with {@link WORKFLOW_TRACING_MODULES} (Temporal's module path). */
export const TRACING_MODULE_MARK = 'interceptors-opentelemetry/lib/workflow-interceptors';

/** How a worker traces, as `createBatonWorker({ tracing })` takes it. */
export interface BatonWorkerTracing {
  /**
   * The provider Baton's spans and Temporal's activity spans are made with: an OpenTelemetry SDK `BasicTracerProvider`
   * (or a `NodeTracerProvider`) from `@opentelemetry/sdk-trace-base` 1.x, yours or the one {@link startTracing} made.
   */
  readonly tracerProvider: BasicTracerProvider;
  /** Record prompts and replies on model spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). @default false */
  readonly captureContent?: boolean;
}

/** A variable's text, trimmed; blank counts as unset. */
const blankAsUnset = (value: unknown): unknown => (typeof value === 'string' ? value.trim() || undefined : value);
/** The same, lowercased: OpenTelemetry's enumerated values are case-insensitive. */
const blankAsUnsetLowercase = (value: unknown): unknown =>
  typeof value === 'string' ? value.trim().toLowerCase() || undefined : value;

/** `true`/`false` as OpenTelemetry's boolean variables spell them (case-insensitive); unset is `false`. */
const otelBoolean = z.preprocess(
  blankAsUnsetLowercase,
  z.enum(['true', 'false'], { message: 'must be true or false' }).optional(),
);
const optionalValue = z.preprocess(blankAsUnset, z.string().optional());
const otlpUrl = z.preprocess(
  blankAsUnset,
  z.url({ protocol: /^https?$/, message: 'must be an http(s) URL, e.g. http://localhost:4318' }).optional(),
);
const httpProtobuf = z.preprocess(
  blankAsUnset,
  z.enum(['http/protobuf'], { message: 'must be http/protobuf (Baton exports OTLP over HTTP only)' }).optional(),
);
/** `OTEL_TRACES_EXPORTER` and `OTEL_METRICS_EXPORTER`: OTLP, or nothing. */
const otlpOrNone = (signal: string) =>
  z.preprocess(
    blankAsUnsetLowercase,
    z.enum(['otlp', 'none'], { message: `must be otlp or none (Baton exports ${signal} over OTLP only)` }).optional(),
  );
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/**
 * The `OTEL_*` variables `baton worker` and `baton dev` read, as the OpenTelemetry specification names them. Only
 * OTLP over HTTP with protobuf is spoken (what Jaeger, Tempo, Honeycomb, Langfuse and the Collector take on 4318).
 */
export const tracingEnvShape = {
  OTEL_SDK_DISABLED: otelBoolean,
  OTEL_TRACES_EXPORTER: otlpOrNone('traces'),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_PROTOCOL: httpProtobuf,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: httpProtobuf,
  OTEL_EXPORTER_OTLP_HEADERS: optionalValue,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optionalValue,
  OTEL_SERVICE_NAME: optionalValue,
  OTEL_RESOURCE_ATTRIBUTES: optionalValue,
  OTEL_TRACES_SAMPLER: z.preprocess(
    blankAsUnsetLowercase,
    z.enum(SAMPLERS, { message: `must be one of ${SAMPLERS.join(', ')}` }).optional(),
  ),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(
    blankAsUnset,
    z.coerce
      .number({ message: 'must be a ratio from 0 to 1' })
      .min(0, { message: 'must be a ratio from 0 to 1' })
      .max(1, { message: 'must be a ratio from 0 to 1' })
      .optional(),
  ),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: otelBoolean,
  OTEL_METRICS_EXPORTER: otlpOrNone('metrics'),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_METRICS_HEADERS: optionalValue,
  OTEL_METRIC_EXPORT_INTERVAL: z.preprocess(
    blankAsUnset,
    z.coerce
      .number({ message: 'must be a whole number of milliseconds' })
      .int({ message: 'must be a whole number of milliseconds' })
      .min(100, { message: 'must be at least 100 (milliseconds)' })
      .optional(),
  ),
};

/** Where a worker's runtime sends its metrics over OTLP/HTTP (the SDK's and Baton's). */
export interface OtlpMetricsSettings {
  /** The OTLP/HTTP metrics URL (`…/v1/metrics`). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** @default 60000, as the OpenTelemetry specification says */
  readonly intervalMs: number;
}

/**
 * The OTLP metrics settings the `OTEL_*` variables describe: `undefined` when no endpoint is set, `OTEL_METRICS_EXPORTER`
 * is `none` or `OTEL_SDK_DISABLED` is `true`.
 * @throws Error naming the variable, for a header list that is not `key=value,…`
 */
export function metricsSettingsFrom(env: TracingEnv): OtlpMetricsSettings | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_METRICS_EXPORTER === 'none') return undefined;
  const url = signalUrl(env, env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, 'metrics');
  if (url === undefined) return undefined;
  return {
    url,
    headers: signalHeaders(env, 'OTEL_EXPORTER_OTLP_METRICS_HEADERS', env.OTEL_EXPORTER_OTLP_METRICS_HEADERS),
    intervalMs: env.OTEL_METRIC_EXPORT_INTERVAL ?? 60_000,
  };
}

/** The service name spans carry when `OTEL_SERVICE_NAME` is unset. */
export const DEFAULT_SERVICE_NAME = 'baton-worker';

/** Where and how a worker exports its spans; `undefined` settings mean it exports none. */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly sampler: (typeof SAMPLERS)[number];
  /** The ratio of the `traceidratio` samplers. @default 1 */
  readonly samplerRatio: number;
  readonly captureContent: boolean;
}

type TracingEnv = z.output<z.ZodObject<typeof tracingEnvShape>>;

/**
 * The tracing settings the `OTEL_*` variables (parsed with {@link tracingEnvShape}) describe: `undefined` when no
 * OTLP endpoint is set, `OTEL_TRACES_EXPORTER` is `none` or `OTEL_SDK_DISABLED` is `true`.
 * @throws Error naming the variable, for a header or resource list that is not `key=value,…`
 */
export function tracingSettingsFrom(env: TracingEnv): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const url = signalUrl(env, env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, 'traces');
  if (url === undefined) return undefined;
  return {
    url,
    headers: signalHeaders(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', env.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
    serviceName: env.OTEL_SERVICE_NAME ?? DEFAULT_SERVICE_NAME,
    resourceAttributes: keyValueList('OTEL_RESOURCE_ATTRIBUTES', env.OTEL_RESOURCE_ATTRIBUTES),
    sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
    samplerRatio: env.OTEL_TRACES_SAMPLER_ARG ?? 1,
    captureContent: env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === 'true',
  };
}

/**
 * Reads the tracing settings straight from an environment (for `baton dev`, which has no worker schema to parse).
 * @throws Error naming each bad variable
 */
export function readTracingSettings(env: Readonly<Record<string, string | undefined>>): TracingSettings | undefined {
  const parsed = z.object(tracingEnvShape).safeParse(env);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; '));
  }
  return tracingSettingsFrom(parsed.data);
}

/**
 * A signal's OTLP/HTTP URL as the specification reads it: its own endpoint variable as it is, else the common
 * endpoint with `/v1/<signal>` added; `undefined` when neither is set.
 */
function signalUrl(env: TracingEnv, own: string | undefined, signal: 'traces' | 'metrics'): string | undefined {
  if (own !== undefined) return own;
  const common = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return common === undefined ? undefined : `${common.replace(/\/+$/, '')}/v1/${signal}`;
}

/** The common headers, with a signal's own on top (a key set in both takes the signal's value). */
function signalHeaders(env: TracingEnv, variable: string, own: string | undefined): Record<string, string> {
  return {
    ...keyValueList('OTEL_EXPORTER_OTLP_HEADERS', env.OTEL_EXPORTER_OTLP_HEADERS),
    ...keyValueList(variable, own),
  };
}

/** `a=1,b=x%20y` as the OpenTelemetry variables spell a list (values URL-encoded). */
function keyValueList(variable: string, text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  const entries: Record<string, string> = {};
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    const equals = item.indexOf('=');
    const key = equals < 0 ? '' : item.slice(0, equals).trim();
    if (key === '') throw new Error(`${variable} must be a list of key=value pairs separated by commas`);
    try {
      entries[key] = decodeURIComponent(item.slice(equals + 1).trim());
    } catch {
      throw new Error(`${variable} holds a value that is not URL-encoded text (for key '${key}')`);
    }
  }
  return entries;
}

function samplerOf(settings: TracingSettings): Sampler {
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(settings.samplerRatio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.samplerRatio) });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** A tracer provider exporting to the settings' OTLP endpoint, and how to flush and close it. */
export interface StartedTracing extends BatonWorkerTracing {
  /** Sends what is buffered and stops exporting (call after the worker stopped). */
  shutdown(): Promise<void>;
}

/** Builds the tracer provider the settings describe (batched OTLP/HTTP export). */
export function startTracing(settings: TracingSettings): StartedTracing {
  const resource = new Resource({ ...settings.resourceAttributes, 'service.name': settings.serviceName });
  const exporter = new OTLPTraceExporter({ url: settings.url, headers: { ...settings.headers } });
  const tracerProvider = new BasicTracerProvider({
    resource,
    sampler: samplerOf(settings),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  return {
    tracerProvider,
    captureContent: settings.captureContent,
    shutdown: () => tracerProvider.shutdown(),
  };
}

/** What a traced worker adds to its Worker options: Temporal's interceptors, and the sink workflow spans leave by. */
export interface TracedWorkerParts {
  readonly interceptors: NonNullable<WorkerOptions['interceptors']>;
  readonly sinks: InjectedSinks<OpenTelemetrySinks>;
  readonly activityTracing: ActivityTracing;
}

/**
 * The interceptors and sink of a traced worker. Temporal's interceptors find a trace context through the global
 * OpenTelemetry API, so the W3C propagator and an AsyncLocalStorage context manager are registered there unless an
 * application registered its own first (the OpenTelemetry API keeps the first).
 */
export function tracedWorkerParts(tracing: BatonWorkerTracing): TracedWorkerParts {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const tracer = tracing.tracerProvider.getTracer(BATON_TRACER_NAME);
  const temporalTracer = tracing.tracerProvider.getTracer('@temporalio/interceptor-activity');
  return {
    interceptors: {
      workflowModules: WORKFLOW_TRACING_MODULES,
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer: temporalTracer }),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: {
      // Workflow spans are made in the sandbox and leave through this sink, which Temporal does not call while a
      // history replays: a replayed workflow task exports nothing again.
      exporter: makeWorkflowExporter(tracing.tracerProvider.getActiveSpanProcessor(), tracing.tracerProvider.resource),
    },
    activityTracing: { tracer, captureContent: tracing.captureContent === true },
  };
}
