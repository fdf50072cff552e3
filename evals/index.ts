/**
 * Evaluations (docs/guides/evals.md): datasets, scorers, experiments, their comparison, counterfactual replays and
 * the gate a CI job runs.
 */
export {
  datasetSchema,
  DatasetError,
  MAX_DATASET_CASES,
  parseDataset,
  readDataset,
  type Dataset,
  type DatasetCase,
  type DatasetScorer,
} from './dataset';
export { clampScore, defineScorer, judgeMessage, type Score, type ScoreContext, type Scorer } from './scorers';
export {
  newExperimentId,
  runExperiment,
  summarize,
  type ExperimentReport,
  type ExperimentSummary,
  type RunExperimentOptions,
  type ScorerSummary,
} from './run';
export { divergenceSchema, evalCaseSchema, experimentReportSchema } from './report';
export { compareExperiments, formatComparison, formatExperiment, type Comparison } from './compare';
export type { Divergence, EvalCaseRow, ReplayPolicy } from '../db/evals';

/**
 * Whether a report's score reaches `minScore` (the gate of `baton eval run --min-score`): an experiment without a
 * score (no scorer) fails it.
 */
export function passesGate(report: { summary: { score?: number } }, minScore: number): boolean {
  return report.summary.score !== undefined && report.summary.score >= minScore;
}
