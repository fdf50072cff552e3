import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import type { OtlpMetricsSettings } from './tracing';

export const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'] as const;

/** What the Temporal runtime exposes beyond logs. */
export interface RuntimeTelemetryOptions {
  /** Serve the SDK's Prometheus metrics at `http://<address>/metrics` (`host:port`). Off when unset. */
  readonly metricsAddress?: string;
  /** Send the metrics over OTLP/HTTP instead (the runtime has one metrics exporter). Off when unset. */
  readonly otlpMetrics?: OtlpMetricsSettings;
  /**
   * The signals on which the runtime shuts its workers down (the SDK's default: SIGINT, SIGTERM, SIGQUIT, SIGUSR2).
   * Its handlers take the first such signal for that and do not end the process, so a process that runs no worker
   * passes `[]`: otherwise its first Ctrl-C, or a `kill`, would be swallowed.
   */
  readonly shutdownSignals?: NodeJS.Signals[];
}

/**
 * Installs the Temporal runtime with a logger at `level` (Baton defaults to WARN: the SDK's INFO lines, such as
 * webpack's bundle report and every worker state change, drown the output people read), and the Prometheus
 * exporter when asked. Must run before the first worker or native connection is created; later calls are ignored,
 * since the runtime can be installed only once.
 */
export function installRuntime(level: LogLevel = 'WARN', telemetry: RuntimeTelemetryOptions = {}): void {
  try {
    Runtime.install({
      logger: new DefaultLogger(level),
      ...(telemetry.metricsAddress
        ? { telemetryOptions: { metrics: { prometheus: { bindAddress: telemetry.metricsAddress } } } }
        : telemetry.otlpMetrics
          ? {
              telemetryOptions: {
                metrics: {
                  otel: {
                    url: telemetry.otlpMetrics.url,
                    http: true,
                    headers: { ...telemetry.otlpMetrics.headers },
                    metricsExportInterval: telemetry.otlpMetrics.intervalMs,
                  },
                },
              },
            }
          : {}),
      ...(telemetry.shutdownSignals === undefined ? {} : { shutdownSignals: telemetry.shutdownSignals }),
    });
  } catch {
    // Already installed (by an earlier call, or implicitly by a worker): keep the one in place.
  }
}

/** Parses `BATON_LOG_LEVEL`; unset means WARN. @throws Error naming the allowed values. */
export function parseLogLevel(value: string | undefined): LogLevel {
  if (value === undefined || value === '') return 'WARN';
  const upper = value.toUpperCase();
  if ((LOG_LEVELS as readonly string[]).includes(upper)) return upper as LogLevel;
  throw new Error(`BATON_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not '${value}'`);
}
