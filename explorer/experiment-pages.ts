/**
 * The explorer's pages of evaluations (docs/guides/evals.md): the experiments, one experiment's cases and scores, and
 * two experiments side by side, case by case and scorer by scorer.
 */
import type { EvalCaseRow, ExperimentRow } from '../db/evals';
import type { Comparison, ExperimentSummary } from '../evals';
import { html, type Html } from './html';
import { dateTime, layout, status, threadPath } from './pages';

const figure = (score: number | undefined): string => (score === undefined ? '—' : score.toFixed(2));

function experimentLink(experimentId: string): Html {
  return html`<a href="/experiments/${encodeURIComponent(experimentId)}">${experimentId}</a>`;
}

/** A radio button choosing an experiment as side `side` of the comparison; the newest two are chosen to begin with. */
function choice(side: 'a' | 'b', experimentId: string, checked: boolean): Html {
  return html`<td>
    <input
      type="radio"
      name="${side}"
      value="${experimentId}"
      ${checked ? 'checked' : ''}
      aria-label="${side.toUpperCase()}"
    />
  </td>`;
}

function crumbs(here?: string): Html {
  return html`<nav class="crumbs">
    <a href="/experiments">experiments</a>${here === undefined ? '' : html` / ${here}`}
  </nav>`;
}

export function experimentListPage(experiments: readonly ExperimentRow[]): Html {
  const body = html`<h1>Experiments</h1>
    ${
      experiments.length === 0
        ? html`<p class="muted">
            No experiments yet: run one with \`npx baton eval run &lt;dataset&gt; --agents &lt;dir&gt;\`.
          </p>`
        : html`<form method="get" action="/experiments/compare">
            <table class="experiments">
              <thead>
                <tr>
                  <th>A</th>
                  <th>B</th>
                  <th>experiment</th>
                  <th>kind</th>
                  <th>dataset</th>
                  <th class="num">score</th>
                  <th>started</th>
                </tr>
              </thead>
              <tbody>
                ${experiments.map(
                  (e, index) =>
                    html`<tr data-experiment="${e.experimentId}">
                      ${choice('a', e.experimentId, index === 1)} ${choice('b', e.experimentId, index === 0)}
                      <td>${experimentLink(e.experimentId)}</td>
                      <td>${e.kind}</td>
                      <td>${e.dataset}</td>
                      <td class="num">
                        ${e.finishedAt === null ? 'unfinished' : figure((e.summary as { score?: number } | null)?.score)}
                      </td>
                      <td>${dateTime(e.startedAt)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
            <button type="submit">Compare A and B</button>
          </form>`
    }`;
  return layout('Experiments', body, { crumbs: crumbs() });
}

function summaryTable(summary: ExperimentSummary): Html {
  return html`<table class="scorers">
    <thead>
      <tr>
        <th>scorer</th>
        <th class="num">mean</th>
        <th class="num">passed</th>
        <th>95% CI</th>
      </tr>
    </thead>
    <tbody>
      ${Object.entries(summary.scorers).map(
        ([name, s]) =>
          html`<tr data-scorer="${name}">
            <td>${name}</td>
            <td class="num">${figure(s.mean)}</td>
            <td class="num">${s.passed}/${s.count}</td>
            <td>${s.ci95 === undefined ? '—' : `${figure(s.ci95[0])}–${figure(s.ci95[1])}`}</td>
          </tr>`,
      )}
      <tr>
        <td><strong>score</strong></td>
        <td class="num"><strong>${figure(summary.score)}</strong></td>
        <td></td>
        <td></td>
      </tr>
    </tbody>
  </table>`;
}

function divergenceText(c: EvalCaseRow): string {
  if (c.divergence === null) return '';
  const d = c.divergence;
  return `diverged at call ${d.call} (step ${d.step}): made ${d.made.name}(${d.made.arguments}), recorded ${
    d.recorded === null ? 'nothing' : `${d.recorded.name}(${d.recorded.arguments})`
  }`;
}

export function experimentPage(
  experiment: ExperimentRow,
  cases: readonly EvalCaseRow[],
  summary: ExperimentSummary,
): Html {
  const names = Object.keys(summary.scorers);
  const body = html`<h1>Experiment ${experiment.experimentId}</h1>
    <p>
      ${experiment.kind} of <strong>${experiment.dataset}</strong>, started ${dateTime(experiment.startedAt)}; model
      ${experiment.model.model}; agents
      ${Object.entries(experiment.agents)
        .map(([name, version]) => `${name}@${version.slice(0, 8)}`)
        .join(', ')}
    </p>
    ${summaryTable(summary)}
    <table class="cases">
      <thead>
        <tr>
          <th>case</th>
          <th>status</th>
          ${names.map((name) => html`<th class="num">${name}</th>`)}
          <th>thread</th>
          <th>reply</th>
        </tr>
      </thead>
      <tbody>
        ${cases.map(
          (c) =>
            html`<tr data-case="${c.caseId}">
              <td>${c.caseId}</td>
              <td>
                ${status(c.status)}${c.divergence === null ? '' : html`<div class="muted">${divergenceText(c)}</div>`}
              </td>
              ${names.map((name) => {
                const score = c.scores[name];
                return html`<td class="num" title="${score?.reason ?? ''}">${figure(score?.score)}</td>`;
              })}
              <td><a href="${threadPath(c.threadId)}">${c.threadId}</a></td>
              <td class="muted">${(c.reply ?? c.error ?? '').slice(0, 200)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
  return layout(`Experiment ${experiment.experimentId}`, body, { crumbs: crumbs(experiment.experimentId) });
}

export function comparisonPage(comparison: Comparison): Html {
  const names = comparison.scorers.map((s) => s.name);
  const side = (value: Comparison['cases'][number]['a']) =>
    value === undefined
      ? html`<td class="muted" colspan="${names.length + 1}">not run</td>`
      : html`<td>${status(value.status)}</td>
          ${names.map((name) => html`<td class="num" title="${value.scores[name]?.reason ?? ''}">${figure(value.scores[name]?.score)}</td>`)}`;
  const body = html`<h1>
      ${experimentLink(comparison.a.experimentId)} against ${experimentLink(comparison.b.experimentId)}
    </h1>
    <table class="scorers compare">
      <thead>
        <tr>
          <th>scorer</th>
          <th class="num">A</th>
          <th class="num">B</th>
          <th class="num">B − A</th>
        </tr>
      </thead>
      <tbody>
        ${comparison.scorers.map(
          (s) =>
            html`<tr data-scorer="${s.name}">
              <td>${s.name}</td>
              <td class="num">${figure(s.a)}</td>
              <td class="num">${figure(s.b)}</td>
              <td class="num">${s.delta === undefined ? '—' : `${s.delta >= 0 ? '+' : ''}${s.delta.toFixed(2)}`}</td>
            </tr>`,
        )}
        <tr>
          <td><strong>score</strong></td>
          <td class="num">${figure(comparison.a.summary.score)}</td>
          <td class="num">${figure(comparison.b.summary.score)}</td>
          <td></td>
        </tr>
      </tbody>
    </table>
    <table class="cases compare">
      <thead>
        <tr>
          <th rowspan="2">case</th>
          <th colspan="${names.length + 1}">A: ${comparison.a.experimentId}</th>
          <th colspan="${names.length + 1}">B: ${comparison.b.experimentId}</th>
        </tr>
        <tr>
          ${[0, 1].map(
            () =>
              html`<th>status</th>
                ${names.map((name) => html`<th class="num">${name}</th>`)}`,
          )}
        </tr>
      </thead>
      <tbody>
        ${comparison.cases.map(
          (c) =>
            html`<tr data-case="${c.caseId}">
              <td>${c.caseId}</td>
              ${side(c.a)}${side(c.b)}
            </tr>`,
        )}
      </tbody>
    </table>`;
  return layout('Compare experiments', body, { crumbs: crumbs('compare') });
}
