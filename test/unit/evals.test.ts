/**
 * Evaluations without a stack: a dataset's checks, Baton's scorers on given runs (the judge's scale, a tool count),
 * an experiment's figures and the gate, two experiments compared, and how a replay compares arguments and words a
 * divergence.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeDivergence, normalizedArguments } from '../../activities/eval-replay';
import type { EvalCaseRow, ExperimentRow } from '../../db/evals';
import {
  compareExperiments,
  defineScorer,
  formatComparison,
  parseDataset,
  passesGate,
  summarize,
  type ScoreContext,
} from '../../evals';
import { datasetScorers } from '../../evals/scorers';

test('evals: a dataset names each problem with its place; defaults are filled', () => {
  const dataset = parseDataset({ name: 'd', agent: 'desk', cases: [{ id: 'a', message: 'Hi.' }] }, 'd.json');
  assert.deepEqual(dataset.scorers, []);
  assert.throws(
    () =>
      parseDataset(
        {
          name: 'd',
          cases: [
            { id: 'a', message: 'Hi.' },
            { id: 'a', thread: 't1' },
            { id: 'b' },
            { id: 'bad id', message: 'x', agent: 'desk' },
          ],
          scorers: [{ judge: 'grader', scale: [5, 1] }],
        },
        'd.json',
      ),
    (error: Error) => {
      assert.match(error.message, /^d\.json: /);
      assert.match(error.message, /cases\.0: names no agent, and the dataset none/);
      assert.match(error.message, /cases\.1\.id: repeats 'a'/);
      assert.match(error.message, /cases\.2: needs a message or a thread/);
      assert.match(error.message, /cases\.3\.id: must be 1-40 letters/);
      assert.match(error.message, /scorers\.0/);
      return true;
    },
  );
  assert.throws(() => parseDataset({ name: 'd', cases: [] }, 'd.json'), /cases: must list at least one case/);
});

/** A score context for a run that ended with `reply` (and `output`), having made `calls`. */
function context(
  reply: string,
  options: { expected?: unknown; output?: unknown; calls?: string[]; judged?: unknown } = {},
): ScoreContext {
  return {
    case: { id: 'c', message: 'Refund 17.', ...(options.expected === undefined ? {} : { expected: options.expected }) },
    input: 'Refund 17.',
    result: { status: 'completed', reply, ...(options.output === undefined ? {} : { output: options.output }) },
    threadId: 'eval-x-c',
    client: {} as ScoreContext['client'],
    toolCalls: (name) =>
      Promise.resolve(
        (options.calls ?? [])
          .filter((call) => name === undefined || call === name)
          .map((call) => ({ name: call, arguments: '{}' })),
      ),
    ask: () =>
      Promise.resolve({ reply: 'graded', ...(options.judged === undefined ? {} : { output: options.judged }) }),
  };
}

test("evals: Baton's scorers: exact on text and objects, a tool count, a judge mapped from its scale", async () => {
  const [exact, tool, judge] = datasetScorers([
    'exact',
    { tool: 'refund', at_most: 1 },
    { judge: 'grader', scale: [1, 5] },
  ]);
  assert.deepEqual(await exact?.run(context(' Done. ', { expected: 'Done.' })), { score: 1 });
  assert.equal((await exact?.run(context('x', { expected: { n: 1 }, output: { n: 1 } })))?.score, 1);
  assert.equal((await exact?.run(context('x', { expected: { n: 1 }, output: { n: 2 } })))?.score, 0);
  assert.deepEqual(await exact?.run(context('x')), { score: 0, reason: 'the case has no expected answer' });
  assert.equal(tool?.name, 'tool:refund<=1');
  assert.deepEqual(await tool?.run(context('x', { calls: ['refund', 'lookup'] })), {
    score: 1,
    reason: 'refund called 1 time',
  });
  assert.equal((await tool?.run(context('x', { calls: ['refund', 'refund'] })))?.score, 0);
  assert.equal(judge?.name, 'judge:grader');
  assert.deepEqual(await judge?.run(context('x', { judged: { score: 4, reason: 'good' } })), {
    score: 0.75,
    reason: 'good',
  });
  assert.equal((await judge?.run(context('x', { judged: { score: 9 } })))?.score, 1, 'clamped');
  assert.match((await judge?.run(context('x')))?.reason ?? '', /the judge gave no numeric score/);
  assert.throws(() => defineScorer({ name: 'has space', run: () => ({ score: 1 }) }), /scorer name 'has space'/);
  const [schema] = datasetScorers([{ schema: { type: 'object', required: ['total'] } }]);
  assert.deepEqual(await schema?.run(context('{"total": 3}')), { score: 1 });
  assert.deepEqual(await schema?.run(context('x', { output: { total: 1 } })), { score: 1 });
  assert.equal(
    (await schema?.run(context('{"n": 3}')))?.reason,
    "the answer does not match the schema: data must have required property 'total'",
  );
});

/** A stored case with `scores`. */
function row(caseId: string, status: EvalCaseRow['status'], scores: Record<string, number>): EvalCaseRow {
  return {
    caseId,
    position: 0,
    threadId: `eval-x-${caseId}`,
    agent: 'desk',
    input: 'x',
    status,
    reply: null,
    output: undefined,
    error: null,
    usage: { totalTokens: 10, promptTokens: 6, completionTokens: 4 },
    durationMs: 5,
    scores: Object.fromEntries(Object.entries(scores).map(([name, score]) => [name, { score }])),
    divergence: null,
    liveCalls: 0,
    recordedScores: null,
  };
}

test('evals: figures of an experiment (mean, passed, a 95% interval), its score and the gate', () => {
  const summary = summarize([
    row('a', 'completed', { exact: 1, judge: 0.5 }),
    row('b', 'completed', { exact: 0, judge: 1 }),
    row('c', 'failed', { exact: 1, judge: 0 }),
  ]);
  assert.deepEqual(summary.statuses, { completed: 2, failed: 1 });
  assert.equal(summary.totalTokens, 30);
  assert.equal(summary.scorers.exact?.mean, 2 / 3);
  assert.equal(summary.scorers.exact?.passed, 2);
  const [low, high] = summary.scorers.exact?.ci95 ?? [NaN, NaN];
  // sd of [1, 0, 1] is 0.577; 1.96 * 0.577 / sqrt(3) = 0.653.
  assert.ok(Math.abs(low - (2 / 3 - 0.6533)) < 1e-3, String(low));
  assert.equal(high, 1, 'clamped to 1');
  assert.equal(summary.score, (2 / 3 + 0.5) / 2);
  assert.equal(passesGate({ summary }, 0.5), true);
  assert.equal(passesGate({ summary }, 0.6), false);
  assert.equal(passesGate({ summary: summarize([row('a', 'completed', {})]) }, 0), false, 'no scorer, no score');
  assert.equal(
    summarize([row('a', 'completed', { exact: 1 })]).scorers.exact?.ci95,
    undefined,
    'one case: no interval',
  );
});

test('evals: two experiments compared case by case and scorer by scorer', () => {
  const experiment = (experimentId: string): ExperimentRow => ({
    experimentId,
    kind: 'run',
    dataset: 'refunds',
    agents: { desk: experimentId },
    model: { model: 'm', providers: [] },
    startedAt: new Date(0),
    finishedAt: new Date(0),
    summary: null,
  });
  const comparison = compareExperiments(
    { experiment: experiment('A'), cases: [row('a', 'completed', { exact: 1 }), row('b', 'completed', { exact: 1 })] },
    { experiment: experiment('B'), cases: [row('a', 'completed', { exact: 0 }), row('c', 'failed', { exact: 0 })] },
  );
  assert.deepEqual(comparison.scorers, [{ name: 'exact', a: 1, b: 0, delta: -1 }]);
  assert.deepEqual(
    comparison.cases.map((c) => [c.caseId, c.a?.status, c.b?.status]),
    [
      ['a', 'completed', 'completed'],
      ['b', 'completed', undefined],
      ['c', undefined, 'failed'],
    ],
  );
  assert.match(formatComparison(comparison), /b: A completed 1\.00 \| B \(not run\)/);
  assert.match(formatComparison(comparison), /exact: A 1\.00 {2}B 0\.00 {2}\(-1\.00\)/);
});

test('evals: a replay compares arguments as JSON with sorted keys, and words a divergence', () => {
  assert.equal(
    normalizedArguments('{"b": 1, "a": {"d": [2, {"f": 1, "e": 0}], "c": 3}}'),
    normalizedArguments('{"a":{"c":3,"d":[2,{"e":0,"f":1}]},"b":1}'),
  );
  assert.notEqual(normalizedArguments('{"a": 1}'), normalizedArguments('{"a": 2}'));
  assert.equal(normalizedArguments('  not json '), 'not json');
  assert.equal(
    describeDivergence({
      step: 2,
      agent: 'desk',
      call: 3,
      recorded: { name: 'refund', arguments: '{"amount":12}' },
      made: { name: 'refund', arguments: '{"amount":120}' },
    }),
    'call 3 (step 2, desk): made refund({"amount":120}), the record has refund({"amount":12})',
  );
});
