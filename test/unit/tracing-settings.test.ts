/**
 * The OTEL_* variables of `baton worker` and `baton dev`: unset means no tracing at all; an endpoint turns it on; the
 * exporter, sampler and lists are read as the OpenTelemetry specification spells them, and a bad value is named.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { context, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { activeTraceparent, spanContextOf, traceparentProblem } from '../../common/traceparent';
import { ConfigError, readWorkerConfig } from '../../worker/config';
import { DEFAULT_SERVICE_NAME, readTracingSettings } from '../../worker/tracing';

test('tracing settings: with no OTLP endpoint, or turned off, nothing is traced', () => {
  assert.equal(readTracingSettings({}), undefined);
  assert.equal(readTracingSettings({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), undefined);
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
  assert.equal(readTracingSettings({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }), undefined);
  assert.equal(readTracingSettings({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' }), undefined);
});

test('tracing settings: an endpoint turns tracing on, with the specification defaults', () => {
  assert.deepEqual(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' }), {
    url: 'http://127.0.0.1:4318/v1/traces',
    headers: {},
    serviceName: DEFAULT_SERVICE_NAME,
    resourceAttributes: {},
    sampler: 'parentbased_always_on',
    samplerRatio: 1,
    captureContent: false,
  });
  const settings = readTracingSettings({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otlp.example.com/api/traces',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc%20def,x-team=one',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-team=two',
    OTEL_SERVICE_NAME: 'agents',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod',
    OTEL_TRACES_SAMPLER: 'ParentBased_TraceIdRatio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
  });
  assert.deepEqual(settings, {
    url: 'https://otlp.example.com/api/traces',
    headers: { 'x-api-key': 'abc def', 'x-team': 'two' },
    serviceName: 'agents',
    resourceAttributes: { 'deployment.environment': 'prod' },
    sampler: 'parentbased_traceidratio',
    samplerRatio: 0.25,
    captureContent: true,
  });
});

test('tracing settings: a bad value stops the worker naming the variable', () => {
  const base = {
    DATABASE_URL: 'postgres://localhost/baton',
    TEMPORAL_ADDRESS: '127.0.0.1:7233',
    OPENAI_API_KEY: 'sk-test',
  };
  const problems = (env: Record<string, string>): string => {
    try {
      readWorkerConfig({ ...base, ...env }, process.cwd());
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      return error.message;
    }
    return 'no error';
  };
  assert.match(
    problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' }),
    /OTEL_EXPORTER_OTLP_ENDPOINT.*http\(s\) URL/,
  );
  assert.match(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /OTEL_EXPORTER_OTLP_PROTOCOL.*http\/protobuf/);
  assert.match(problems({ OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER.*always_on/);
  assert.match(problems({ OTEL_TRACES_SAMPLER_ARG: '2' }), /OTEL_TRACES_SAMPLER_ARG.*ratio from 0 to 1/);
  assert.match(problems({ OTEL_TRACES_EXPORTER: 'zipkin' }), /OTEL_TRACES_EXPORTER.*otlp or none/);
  assert.match(
    problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }),
    /OTEL_EXPORTER_OTLP_HEADERS must be a list of key=value pairs/,
  );
  assert.equal(readWorkerConfig(base, process.cwd()).tracing, undefined, 'unset: the worker traces nothing');
  assert.equal(
    readWorkerConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, process.cwd()).tracing?.url,
    'http://127.0.0.1:4318/v1/traces',
  );
});

test('traceparent: only a W3C traceparent is carried', () => {
  assert.equal(traceparentProblem(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`), undefined);
  assert.match(traceparentProblem('not-a-traceparent') ?? '', /is not a W3C traceparent/);
  assert.match(traceparentProblem(`00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`) ?? '', /lowercase/);
  assert.match(traceparentProblem(`ff-${'a'.repeat(32)}-${'b'.repeat(16)}-01`) ?? '', /version ff/);
  assert.match(traceparentProblem(`00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`) ?? '', /trace id is all zeros/);
  assert.match(traceparentProblem(`00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`) ?? '', /span id is all zeros/);
});

test("traceparent: a writer's active span is named, and read back as the remote span a wake-up links to", () => {
  assert.equal(activeTraceparent(), undefined, 'no span is active');
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  try {
    const tracer = new BasicTracerProvider().getTracer('test');
    const named = tracer.startActiveSpan('write', (span) => {
      const traceparent = activeTraceparent();
      span.end();
      return { traceparent, spanContext: span.spanContext() };
    });
    assert.equal(named.traceparent, `00-${named.spanContext.traceId}-${named.spanContext.spanId}-01`);
    assert.deepEqual(spanContextOf(named.traceparent), {
      traceId: named.spanContext.traceId,
      spanId: named.spanContext.spanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
  } finally {
    context.disable();
  }
  assert.equal(spanContextOf(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`)?.traceFlags, TraceFlags.NONE);
  for (const bad of [undefined, 42, '', 'not-a-traceparent', `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`]) {
    assert.equal(spanContextOf(bad), undefined, `${String(bad)} names no span`);
  }
});

test('metrics settings: the OTLP endpoint sends metrics too, unless Prometheus serves them or they are turned off', () => {
  const base = {
    DATABASE_URL: 'postgres://localhost/baton',
    TEMPORAL_ADDRESS: '127.0.0.1:7233',
    OPENAI_API_KEY: 'sk-test',
  };
  const read = (env: Record<string, string>) => readWorkerConfig({ ...base, ...env }, process.cwd()).otlpMetrics;
  assert.equal(read({}), undefined);
  assert.deepEqual(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_HEADERS: 'k=v' }), {
    url: 'http://127.0.0.1:4318/v1/metrics',
    headers: { k: 'v' },
    intervalMs: 60_000,
  });
  assert.deepEqual(
    read({
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://otlp.example.com/metrics',
      OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'k=w',
      OTEL_EXPORTER_OTLP_HEADERS: 'k=v,a=b',
      OTEL_METRIC_EXPORT_INTERVAL: '5000',
    }),
    { url: 'https://otlp.example.com/metrics', headers: { k: 'w', a: 'b' }, intervalMs: 5000 },
  );
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
  assert.equal(read({ ...endpoint, BATON_METRICS_ADDRESS: '127.0.0.1:9464' }), undefined, 'Prometheus wins');
  assert.equal(read({ ...endpoint, OTEL_METRICS_EXPORTER: 'none' }), undefined);
  assert.throws(
    () => read({ ...endpoint, OTEL_METRIC_EXPORT_INTERVAL: '10' }),
    /OTEL_METRIC_EXPORT_INTERVAL.*at least 100/,
  );
});
