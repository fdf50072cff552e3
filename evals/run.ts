/**
 * Experiments (docs/guides/evals.md): a dataset's cases run as root threads on the task queue of a client (whose
 * workers run the agents under test), each scored, all stored in Postgres with the agents' versions and the model; a
 * replay runs each recorded root thread again with its calls answered from the record. The report's format is
 * `docs/reference/eval-report.schema.json`.
 */
import { randomBytes } from 'node:crypto';
import { ApplicationFailure, rootCause } from '@temporalio/common';
import type { BatonClient } from '../client';
import { agentVersion } from '../activities/agent-store';
import type { AgentRegistry } from '../common/agent-definition';
import { ErrorType } from '../common/errors';
import {
  findReplay,
  finishExperiment,
  insertExperiment,
  openReplay,
  recordCase,
  recordedRun,
  treeCalls,
} from '../db/evals';
import type { EvalCaseRow, NewExperiment, ReplayPolicy } from '../db/evals';
import type { Dataset, DatasetCase } from './dataset';
import { clampScore, datasetScorers, type ScoreContext, type Scorer } from './scorers';

/** One scorer's figures over an experiment's cases. */
export interface ScorerSummary {
  /** The mean score (0 to 1). */
  mean: number;
  /** Cases scored. */
  count: number;
  /** Cases scored at least 0.5. */
  passed: number;
  /** A 95% confidence interval of the mean (normal approximation), with at least two cases. */
  ci95?: [number, number];
}

export interface ExperimentSummary {
  cases: number;
  /** Cases by how their turn ended. */
  statuses: Record<string, number>;
  scorers: Record<string, ScorerSummary>;
  /** The mean of the scorers' means (0 to 1); absent without scorers. */
  score?: number;
  /** Tokens the cases' trees spent (scorers' judges not counted). */
  totalTokens: number;
}

/** What an experiment stored: the report `baton eval run --json` prints. */
export interface ExperimentReport extends NewExperiment {
  cases: EvalCaseRow[];
  summary: ExperimentSummary;
}

export interface RunExperimentOptions {
  /** A client of the task queue whose workers run the agents under test (and, for a replay, answer from records). */
  client: BatonClient;
  dataset: Dataset;
  /** Scorers of your own, beside those the dataset names. */
  scorers?: readonly Scorer[];
  /** The agents under test, whose versions the experiment records. */
  agents: AgentRegistry;
  /** The workers' default model and providers, recorded with the experiment. */
  model: { model: string; providers: string[] };
  /** Replay each case's recorded root thread (`thread`) instead of running it live, going on at a divergence as said. */
  replay?: { policy: ReplayPolicy };
  /** @default a new one */
  experimentId?: string;
  /** A line per case as it ends. */
  progress?: (line: string) => void;
}

/** A new experiment id: short (thread ids embed it), sortable by time. */
export function newExperimentId(): string {
  return `x${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/** How a failed turn ended: diverged (a replay's `Eval.Diverged`) or failed, and why. */
function failureOf(error: unknown): { diverged: boolean; message: string } {
  for (let at: unknown = error, depth = 0; at !== undefined && depth < 10; depth++) {
    if (at instanceof ApplicationFailure) {
      return { diverged: at.type === ErrorType.EvalDiverged, message: at.message };
    }
    at = (at as { cause?: unknown }).cause;
  }
  return { diverged: false, message: rootCause(error) ?? (error instanceof Error ? error.message : String(error)) };
}

/** Each scorer's score of one run; a scorer that throws gives 0, saying why. */
async function scoreWith(scorers: readonly Scorer[], context: ScoreContext): Promise<EvalCaseRow['scores']> {
  const scores: EvalCaseRow['scores'] = {};
  for (const scorer of scorers) {
    try {
      const { score, reason } = await scorer.run(context);
      scores[scorer.name] = { score: clampScore(score), ...(reason === undefined ? {} : { reason }) };
    } catch (error) {
      scores[scorer.name] = { score: 0, reason: `the scorer failed: ${failureOf(error).message}` };
    }
  }
  return scores;
}

/** The figures of each scorer, and the whole. */
export function summarize(cases: readonly EvalCaseRow[]): ExperimentSummary {
  const statuses: Record<string, number> = {};
  const byScorer = new Map<string, number[]>();
  let totalTokens = 0;
  for (const c of cases) {
    statuses[c.status] = (statuses[c.status] ?? 0) + 1;
    totalTokens += c.usage?.totalTokens ?? 0;
    for (const [name, { score }] of Object.entries(c.scores))
      byScorer.set(name, [...(byScorer.get(name) ?? []), score]);
  }
  const scorers: Record<string, ScorerSummary> = {};
  for (const [name, scores] of byScorer) {
    const mean = scores.reduce((sum, s) => sum + s, 0) / scores.length;
    const variance =
      scores.length > 1 ? scores.reduce((sum, s) => sum + (s - mean) ** 2, 0) / (scores.length - 1) : undefined;
    const half = variance === undefined ? undefined : 1.96 * Math.sqrt(variance / scores.length);
    scorers[name] = {
      mean,
      count: scores.length,
      passed: scores.filter((s) => s >= 0.5).length,
      ...(half === undefined ? {} : { ci95: [clampScore(mean - half), clampScore(mean + half)] }),
    };
  }
  const means = Object.values(scorers).map((s) => s.mean);
  return {
    cases: cases.length,
    statuses,
    scorers,
    ...(means.length === 0 ? {} : { score: means.reduce((sum, m) => sum + m, 0) / means.length }),
    totalTokens,
  };
}

/**
 * Runs a dataset as an experiment: each case a root thread, one after the other, scored by the dataset's scorers and
 * `scorers`, stored as it ends (a scorer that throws gives 0, saying why).
 * @throws Error for a case whose recorded thread is missing (nothing of it stored), or a database failure
 */
export async function runExperiment(options: RunExperimentOptions): Promise<ExperimentReport> {
  const { client, dataset } = options;
  const db = client.database();
  const experimentId = options.experimentId ?? newExperimentId();
  const kind = options.replay === undefined ? 'run' : 'replay';
  const agents = Object.fromEntries(
    [...options.agents.values()].map((definition) => [definition.name, agentVersion(definition)]),
  );
  const scorers = [...datasetScorers(dataset.scorers), ...(options.scorers ?? [])];
  await insertExperiment(db, { experimentId, kind, dataset: dataset.name, agents, model: options.model });
  const cases: EvalCaseRow[] = [];
  for (const [position, c] of dataset.cases.entries()) {
    const row = await runCase(options, { experimentId, position, case: c, scorers });
    await recordCase(db, experimentId, row);
    cases.push(row);
    const scores = Object.entries(row.scores)
      .map(([name, { score }]) => `${name} ${score.toFixed(2)}`)
      .join(', ');
    options.progress?.(
      `case ${position + 1}/${dataset.cases.length} ${c.id}: ${row.status}${scores ? `, ${scores}` : ''}`,
    );
  }
  const summary = summarize(cases);
  await finishExperiment(db, experimentId, summary);
  return { experimentId, kind, dataset: dataset.name, agents, model: options.model, cases, summary };
}

async function runCase(
  options: RunExperimentOptions,
  run: { experimentId: string; position: number; case: DatasetCase; scorers: readonly Scorer[] },
): Promise<EvalCaseRow> {
  const { client, dataset } = options;
  const db = client.database();
  const c = run.case;
  const threadId = `eval-${run.experimentId}-${c.id}`;
  const recorded = c.thread === undefined ? undefined : await recordedRun(db, c.thread);
  if (options.replay !== undefined && c.thread === undefined) {
    throw new Error(`case '${c.id}' names no recorded thread to replay`);
  }
  const input = c.message ?? recorded?.input ?? '';
  const agent = c.agent ?? recorded?.agent ?? dataset.agent ?? '';
  const world = c.world ?? dataset.world;
  if (options.replay !== undefined && c.thread !== undefined) {
    await openReplay(db, { rootThreadId: threadId, sourceRootThreadId: c.thread, policy: options.replay.policy });
  }
  const started = Date.now();
  let result: ScoreContext['result'];
  let usage: EvalCaseRow['usage'] = null;
  try {
    const { result: turn } = await client.run({ agent, threadId, message: input, ...(world ? { world } : {}) });
    result = {
      status: turn.status,
      reply: turn.reply,
      ...(turn.output === undefined ? {} : { output: turn.output }),
    };
    usage = turn.usage;
  } catch (error) {
    const failure = failureOf(error);
    const diverged = failure.diverged && options.replay?.policy !== 'fail';
    result = { status: diverged ? 'diverged' : 'failed', reply: null, error: failure.message };
  }
  const durationMs = Date.now() - started;
  const replay = options.replay === undefined ? undefined : await findReplay(db, threadId);
  // Each judge's turn is a root thread of its own, numbered within the case.
  let asked = 0;
  /** What a scorer reads of the run `result` of root thread `scored`. */
  const contextOf = (scored: string, outcome: ScoreContext['result']): ScoreContext => ({
    case: c,
    input,
    result: outcome,
    threadId: scored,
    ...(recorded === undefined ? {} : { recorded: { reply: recorded.reply } }),
    client,
    async toolCalls(name) {
      const calls = await treeCalls(db, scored);
      return name === undefined ? calls : calls.filter((call) => call.name === name);
    },
    async ask(judgeAgent, message) {
      asked += 1;
      const { result: judged } = await client.run({
        agent: judgeAgent,
        threadId: `eval-${run.experimentId}-${run.position}-j${asked}`,
        message,
      });
      return { reply: judged.reply, ...(judged.output === undefined ? {} : { output: judged.output }) };
    },
  });
  const scores = await scoreWith(run.scorers, contextOf(threadId, result));
  // A replay scores the recorded run too, by the same scorers, so the report shows both.
  const recordedScores =
    options.replay === undefined || c.thread === undefined || recorded === undefined
      ? null
      : await scoreWith(run.scorers, contextOf(c.thread, { status: 'completed', reply: recorded.reply }));
  return {
    caseId: c.id,
    position: run.position,
    threadId,
    agent,
    input,
    status: result.status,
    reply: result.reply,
    output: result.output,
    error: result.error ?? null,
    usage,
    durationMs,
    scores,
    divergence: replay?.divergence ?? null,
    recordedScores,
    liveCalls: replay?.liveCalls ?? 0,
  };
}
