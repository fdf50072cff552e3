/**
 * Two experiments side by side (`baton eval compare A B`): each case's status and scores in both, and each scorer's
 * mean in both with the change.
 */
import type { EvalCaseRow, ExperimentRow } from '../db/evals';
import { summarize, type ExperimentSummary } from './run';

export interface ComparedCase {
  caseId: string;
  a?: Pick<EvalCaseRow, 'status' | 'scores' | 'threadId'>;
  b?: Pick<EvalCaseRow, 'status' | 'scores' | 'threadId'>;
}

export interface Comparison {
  a: { experimentId: string; dataset: string; agents: Record<string, string>; summary: ExperimentSummary };
  b: { experimentId: string; dataset: string; agents: Record<string, string>; summary: ExperimentSummary };
  /** Every case of either, in A's order then B's new ones. */
  cases: ComparedCase[];
  /** Each scorer's mean in A and B, and B less A. */
  scorers: { name: string; a?: number; b?: number; delta?: number }[];
}

type Stored = { experiment: ExperimentRow; cases: EvalCaseRow[] };

const pick = (row: EvalCaseRow) => ({ status: row.status, scores: row.scores, threadId: row.threadId });

export function compareExperiments(a: Stored, b: Stored): Comparison {
  const summaryA = summarize(a.cases);
  const summaryB = summarize(b.cases);
  const ids = [...new Set([...a.cases.map((c) => c.caseId), ...b.cases.map((c) => c.caseId)])];
  const byId = (cases: readonly EvalCaseRow[]) => new Map(cases.map((c) => [c.caseId, c]));
  const casesA = byId(a.cases);
  const casesB = byId(b.cases);
  const names = [...new Set([...Object.keys(summaryA.scorers), ...Object.keys(summaryB.scorers)])];
  return {
    a: {
      experimentId: a.experiment.experimentId,
      dataset: a.experiment.dataset,
      agents: a.experiment.agents,
      summary: summaryA,
    },
    b: {
      experimentId: b.experiment.experimentId,
      dataset: b.experiment.dataset,
      agents: b.experiment.agents,
      summary: summaryB,
    },
    cases: ids.map((caseId) => {
      const inA = casesA.get(caseId);
      const inB = casesB.get(caseId);
      return { caseId, ...(inA === undefined ? {} : { a: pick(inA) }), ...(inB === undefined ? {} : { b: pick(inB) }) };
    }),
    scorers: names.map((name) => {
      const meanA = summaryA.scorers[name]?.mean;
      const meanB = summaryB.scorers[name]?.mean;
      return {
        name,
        ...(meanA === undefined ? {} : { a: meanA }),
        ...(meanB === undefined ? {} : { b: meanB }),
        ...(meanA === undefined || meanB === undefined ? {} : { delta: meanB - meanA }),
      };
    }),
  };
}

const figure = (score: number | undefined) => (score === undefined ? '-' : score.toFixed(2));

/** A comparison as a table: a line per case, then each scorer's means. */
export function formatComparison(comparison: Comparison): string {
  const names = comparison.scorers.map((s) => s.name);
  const cell = (side: ComparedCase['a']) =>
    side === undefined
      ? '(not run)'
      : `${side.status} ${names.map((name) => figure(side.scores[name]?.score)).join(' ')}`;
  const lines = [
    `A: ${comparison.a.experimentId} (${comparison.a.dataset})  B: ${comparison.b.experimentId} (${comparison.b.dataset})`,
    `scores in the order: ${names.join(', ') || '(no scorers)'}`,
    ...comparison.cases.map((c) => `  ${c.caseId}: A ${cell(c.a)} | B ${cell(c.b)}`),
    ...comparison.scorers.map(
      (s) =>
        `${s.name}: A ${figure(s.a)}  B ${figure(s.b)}${s.delta === undefined ? '' : `  (${s.delta >= 0 ? '+' : ''}${s.delta.toFixed(2)})`}`,
    ),
    `score: A ${figure(comparison.a.summary.score)}  B ${figure(comparison.b.summary.score)}`,
  ];
  return lines.join('\n');
}

/** An experiment's report as lines: a line per case, then each scorer's figures. */
export function formatExperiment(report: {
  experimentId: string;
  kind: string;
  dataset: string;
  cases: readonly EvalCaseRow[];
  summary: ExperimentSummary;
}): string {
  const lines = [
    `experiment ${report.experimentId} (${report.kind} of ${report.dataset}): ${report.cases.length} cases`,
  ];
  for (const c of report.cases) {
    const scores = Object.entries(c.scores)
      .map(([name, { score, reason }]) => `${name} ${score.toFixed(2)}${reason ? ` (${reason})` : ''}`)
      .join(', ');
    const diverged =
      c.divergence === null
        ? ''
        : `, diverged at call ${c.divergence.call} (step ${c.divergence.step}): made ${c.divergence.made.name}, ` +
          `recorded ${c.divergence.recorded?.name ?? 'nothing'}`;
    const before =
      c.recordedScores === null
        ? ''
        : `; the recorded run: ${Object.entries(c.recordedScores)
            .map(([name, { score }]) => `${name} ${score.toFixed(2)}`)
            .join(', ')}`;
    lines.push(
      `  ${c.caseId}: ${c.status}${diverged}${c.liveCalls > 0 ? `, ${c.liveCalls} live calls` : ''}` +
        `${scores ? `; ${scores}` : ''}${before}  (${c.threadId})`,
    );
  }
  for (const [name, s] of Object.entries(report.summary.scorers)) {
    lines.push(
      `${name}: mean ${s.mean.toFixed(2)}, ${s.passed}/${s.count} passed` +
        (s.ci95 === undefined ? '' : `, 95% CI ${s.ci95[0].toFixed(2)}-${s.ci95[1].toFixed(2)}`),
    );
  }
  if (report.summary.score !== undefined) lines.push(`score: ${report.summary.score.toFixed(2)}`);
  return lines.join('\n');
}
