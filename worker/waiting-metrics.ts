/**
 * The gauges of what waits on people (pending approvals, open questions, the age of the oldest of each), read from
 * Postgres now and then by every worker whose runtime exports metrics. The figure is the deployment's, the same from
 * each worker: aggregate it with `max`, not `sum`.
 */
import type { MetricMeter } from '@temporalio/common';
import type { Pool } from 'pg';
import { BatonMetric } from '../common/metric-names';
import { readWaiting } from '../db/waiting';
import { repeatEvery, type Repeating } from './repeating';

/** Seconds between two reads of what waits. */
export const WAITING_METRICS_INTERVAL_SECONDS = 15;

/** Sets the waiting gauges now, then every `intervalSeconds`. */
export function startWaitingMetrics(options: {
  pool: Pool;
  meter: MetricMeter;
  intervalSeconds?: number;
  warn: (message: string, attributes: Record<string, unknown>) => void;
}): Repeating {
  const { meter } = options;
  const approvals = meter.createGauge(BatonMetric.approvalsWaiting, 'int', 'approvals', 'Approvals waiting');
  const approvalAge = meter.createGauge(BatonMetric.approvalOldestWait, 'float', 's', 'Oldest approval wait');
  const questions = meter.createGauge(BatonMetric.questionsWaiting, 'int', 'questions', 'Questions waiting');
  const questionAge = meter.createGauge(BatonMetric.questionOldestWait, 'float', 's', 'Oldest question wait');
  const sample = async () => {
    const waiting = await readWaiting(options.pool);
    approvals.set(waiting.approvals.count);
    approvalAge.set(waiting.approvals.oldestSeconds);
    questions.set(waiting.questions.count);
    questionAge.set(waiting.questions.oldestSeconds);
  };
  const warn = (error: unknown) =>
    options.warn('reading what waits on people for the metrics failed; the next read tries again', {
      error: error instanceof Error ? error.message : String(error),
    });
  sample().catch(warn);
  return repeatEvery((options.intervalSeconds ?? WAITING_METRICS_INTERVAL_SECONDS) * 1000, sample, warn);
}
