/**
 * `baton/testing`: the test kit for a user's own agents. The scripted model (an OpenAI-compatible server answering
 * from a script, docs/architecture.md §7), the agent harness (a real worker on the scripted model against the
 * user's Temporal server and Postgres, with a client), replaying recorded workflow histories against the
 * installed workflow code before a deploy, and evaluations: experiments on datasets, replays of recorded runs, scorers
 * and the gate on a score (docs/guides/evals.md).
 */
export * from '../scripted-model';
export {
  readModelLog,
  startAgentHarness,
  type AgentHarness,
  type AgentHarnessOptions,
  type ModelLogEntry,
} from './harness';
export {
  describeReplayError,
  formatReplay,
  installReplayRuntime,
  readHistoryFile,
  replayHistories,
  type ReplayInput,
  type ReplayOutcome,
} from '../worker/replay';
export {
  compareExperiments,
  datasetSchema,
  DatasetError,
  defineScorer,
  formatComparison,
  formatExperiment,
  parseDataset,
  passesGate,
  readDataset,
  runExperiment,
  type Comparison,
  type Dataset,
  type DatasetCase,
  type Divergence,
  type EvalCaseRow,
  type ExperimentReport,
  type ExperimentSummary,
  type ReplayPolicy,
  type RunExperimentOptions,
  type Score,
  type ScoreContext,
  type Scorer,
} from '../evals';
