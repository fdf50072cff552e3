/**
 * A Jaeger all-in-one for the tracing tests (stack/jaeger.ts builds it): OTLP/HTTP and its query API on free loopback
 * ports, spans kept in memory, and the traces read back through Jaeger's own HTTP API (`/api/traces?service=…`), as
 * its UI reads them. Jaeger is an OpenTelemetry Collector too: metrics it receives over OTLP are served again by its
 * `prometheus` exporter, which is how the tests see what a worker sent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveJaeger } from '../stack/jaeger';
import { freePort } from './mcp-reference-servers';

/** One span as Jaeger's query API returns it, with its tags as a map. */
export interface JaegerSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** The span it is a child of (in this trace or, for a caller's span, outside it), when it has one. */
  readonly parentSpanId?: string;
  /** The spans it links to without being their child (OpenTelemetry links, Jaeger's `FOLLOWS_FROM` references). */
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  readonly name: string;
  readonly service: string;
  readonly tags: Readonly<Record<string, unknown>>;
}

/** A running Jaeger. */
export interface Jaeger {
  /** What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to: `http://127.0.0.1:<port>`. */
  readonly otlpEndpoint: string;
  /** The query API's base: `http://127.0.0.1:<port>`. */
  readonly queryUrl: string;
  /**
   * Where the metrics it received over OTLP are served to Prometheus (its collector's `prometheus` exporter):
   * `http://127.0.0.1:<port>/metrics`.
   */
  readonly metricsUrl: string;
  /** Every span Jaeger holds of `service`'s traces (newest traces first, at most 1000 traces). */
  spans(service: string): Promise<JaegerSpan[]>;
  stop(): Promise<void>;
}

/** Starts Jaeger (building it first when it is not cached) with its files in `dir`. */
export async function startJaeger(dir: string): Promise<Jaeger> {
  const binary = await resolveJaeger({ env: process.env });
  const [otlpPort, queryPort, queryGrpcPort, metricsPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  fs.mkdirSync(dir, { recursive: true });
  const config = path.join(dir, 'jaeger.yaml');
  fs.writeFileSync(
    config,
    [
      'service:',
      '  extensions: [jaeger_storage, jaeger_query]',
      '  pipelines:',
      '    traces: { receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter] }',
      '    metrics: { receivers: [otlp], exporters: [prometheus] }',
      '  telemetry: { metrics: { level: none }, logs: { level: warn } }',
      'extensions:',
      '  jaeger_query:',
      '    storage: { traces: memstore }',
      `    http: { endpoint: "127.0.0.1:${queryPort}" }`,
      `    grpc: { endpoint: "127.0.0.1:${queryGrpcPort}" }`,
      '  jaeger_storage:',
      '    backends: { memstore: { memory: { max_traces: 100000 } } }',
      'receivers:',
      `  otlp: { protocols: { http: { endpoint: "127.0.0.1:${otlpPort}" } } }`,
      'processors:',
      '  batch: { timeout: 100ms }',
      'exporters:',
      '  jaeger_storage_exporter: { trace_storage: memstore }',
      `  prometheus: { endpoint: "127.0.0.1:${metricsPort}" }`,
      '',
    ].join('\n'),
  );
  const log = fs.openSync(path.join(dir, 'jaeger.log'), 'a');
  const child: ChildProcess = spawn(binary, ['--config', `file:${config}`], {
    cwd: dir,
    stdio: ['ignore', log, log],
    env: { PATH: process.env.PATH ?? '', HOME: dir },
  });
  fs.closeSync(log);
  const queryUrl = `http://127.0.0.1:${queryPort}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000).then(() => child.kill('SIGKILL'))]);
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(
        `jaeger exited with code ${child.exitCode}: ${fs.readFileSync(path.join(dir, 'jaeger.log'), 'utf8')}`,
      );
    }
    const ready = await fetch(`${queryUrl}/api/services`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`jaeger did not answer on ${queryUrl} within 30 s`);
    }
    await sleep(200);
  }
  return {
    otlpEndpoint: `http://127.0.0.1:${otlpPort}`,
    queryUrl,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    spans: (service) => readSpans(queryUrl, service),
    stop,
  };
}

interface JaegerApiTrace {
  traceID: string;
  spans: {
    traceID: string;
    spanID: string;
    operationName: string;
    processID: string;
    references?: { refType: string; traceID: string; spanID: string }[];
    tags: { key: string; value: unknown }[];
  }[];
  processes: Record<string, { serviceName: string }>;
}

async function readSpans(queryUrl: string, service: string): Promise<JaegerSpan[]> {
  const response = await fetch(`${queryUrl}/api/traces?service=${encodeURIComponent(service)}&limit=1000`);
  if (!response.ok) throw new Error(`jaeger answered ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as { data: JaegerApiTrace[] | null };
  return (body.data ?? []).flatMap((trace) =>
    trace.spans.map((span) => {
      const parent = span.references?.find((reference) => reference.refType === 'CHILD_OF');
      return {
        traceId: span.traceID,
        spanId: span.spanID,
        ...(parent === undefined ? {} : { parentSpanId: parent.spanID }),
        links: (span.references ?? [])
          .filter((reference) => reference.refType === 'FOLLOWS_FROM')
          .map((reference) => ({ traceId: reference.traceID, spanId: reference.spanID })),
        name: span.operationName,
        service: trace.processes[span.processID]?.serviceName ?? '',
        tags: Object.fromEntries(span.tags.map((tag) => [tag.key, tag.value])),
      };
    }),
  );
}
