/**
 * The metrics Baton's activities record beside the Temporal SDK's, through the worker's Temporal runtime (so they
 * leave by its Prometheus endpoint, `BATON_METRICS_ADDRESS`, beside the SDK's `temporal_*` ones): model
 * calls, their latency and tokens by provider, model and agent, and tool runs by tool and outcome. Recorded where the
 * work happens, once per model request sent and per tool run (a stored reply re-used after a crash is no call). With
 * no metrics exporter configured the runtime's meter records nothing.
 */
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { BatonMetric } from '../common/metric-names';
import { EnvDataError, type EnvStore, type EnvWriteResult } from '../db/env-data';
import { StaleEpochError } from '../db/errors';

/** What the activities record into. */
export interface ActivityMetrics {
  modelCall(call: {
    provider: string;
    model: string;
    agent: string;
    /** `ok`, or the failure's Baton type (`Model.RateLimited`). */
    outcome: string;
    latencyMs: number;
    inputTokens?: number;
    outputTokens?: number;
  }): void;
  toolCall(call: { tool: string; ok: boolean }): void;
  /** A write to env data: what it did (`stored`, `updated`, `deleted`, `proposed`) or why it was refused. */
  envWrite(write: { operation: 'store' | 'update' | 'delete'; outcome: string }): void;
}

/** The activity metrics of a meter (the worker's runtime's; none records nothing). */
export function createActivityMetrics(meter: MetricMeter = noopMetricMeter): ActivityMetrics {
  const modelCalls = meter.createCounter(BatonMetric.modelCalls, 'calls', 'Model requests sent, by outcome');
  const modelLatency = meter.createHistogram(
    BatonMetric.modelLatency,
    'int',
    'ms',
    'Time from sending a model request to its whole reply',
  );
  const modelTokens = meter.createCounter(BatonMetric.modelTokens, 'tokens', 'Tokens of model calls, by kind');
  const toolCalls = meter.createCounter(BatonMetric.toolCalls, 'calls', 'Tool runs, by tool and outcome');
  const envWrites = meter.createCounter(BatonMetric.envWrites, 'writes', 'Env-data writes, by outcome');
  return {
    modelCall(call) {
      const tags = { provider: call.provider, model: call.model, agent: call.agent };
      modelCalls.add(1, { ...tags, outcome: call.outcome });
      modelLatency.record(Math.max(0, Math.round(call.latencyMs)), tags);
      if (call.inputTokens !== undefined) modelTokens.add(call.inputTokens, { ...tags, kind: 'input' });
      if (call.outputTokens !== undefined) modelTokens.add(call.outputTokens, { ...tags, kind: 'output' });
    },
    toolCall(call) {
      toolCalls.add(1, { tool: call.tool, outcome: call.ok ? 'ok' : 'error' });
    },
    envWrite(write) {
      envWrites.add(1, { operation: write.operation, outcome: write.outcome });
    },
  };
}

/**
 * Counts every `store`, `update` and `delete` of `env` (the tools' and agents' writes) by what it did, or by the type
 * of its refusal (`EnvData.VersionConflict`, `Thread.StaleEpoch`, …). A write that failed for another reason (the
 * database away) is retried, and counted when it ends.
 */
export function meterEnvWrites(env: EnvStore, metrics: ActivityMetrics): EnvStore {
  for (const operation of ['store', 'update', 'delete'] as const) {
    const write = env[operation].bind(env) as (...args: unknown[]) => Promise<EnvWriteResult>;
    const metered = async (...args: unknown[]): Promise<EnvWriteResult> => {
      try {
        const result = await write(...args);
        metrics.envWrite({ operation, outcome: result.action });
        return result;
      } catch (error) {
        if (error instanceof EnvDataError || error instanceof StaleEpochError) {
          metrics.envWrite({ operation, outcome: error instanceof EnvDataError ? error.type : 'Thread.StaleEpoch' });
        }
        throw error;
      }
    };
    Object.assign(env, { [operation]: metered });
  }
  return env;
}
