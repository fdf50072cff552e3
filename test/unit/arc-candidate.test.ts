/**
 * `check_arc_candidate`: a candidate rule stored in env data (its predicted output for each training input) checked
 * against the real training outputs of its task, read from the same task files as `load_arc_task`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createArcCandidateTool, createArcTool, type ArcGrid } from '../../activities/tools/arc';
import { createToolRegistry } from '../../activities/tools/index';
import { ToolError, type ToolDefinition } from '../../activities/tools/types';
import { EnvStore, type EnvEntry, type EnvManifestEntry } from '../../db/env-data';
import { formatCandidateReview, formatDemoProblem, reviewVerdicts, type EnvReader } from '../../dev/demo-check';
import { fakeToolContext } from '../../testing/tool-context';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';

const TASK_ID = '007bbfb7';

/** An env store holding fixed values, for one root; its pool never connects. Records the reads it answered. */
class FixedEnvStore extends EnvStore {
  readonly reads: { rootThreadId: string; key: string }[] = [];

  constructor(private readonly values: Record<string, unknown>) {
    super(new pg.Pool({ connectionString: 'postgres://127.0.0.1:1/unused' }));
  }

  override get(rootThreadId: string, key: string): Promise<EnvEntry | undefined> {
    this.reads.push({ rootThreadId, key });
    if (rootThreadId !== 't' || !(key in this.values)) return Promise.resolve(undefined);
    const at = new Date(0);
    return Promise.resolve({
      key,
      scope: '',
      shortDescription: 'A candidate.',
      value: this.values[key],
      type: null,
      tags: [],
      storedBy: { agent: 'lead', thread: 't' },
      storedByTask: null,
      version: 1,
      createdAt: at,
      updatedAt: at,
    });
  }
}

async function check(
  values: Record<string, unknown>,
  key: string,
  dataDir = DEFAULT_ARC_DATA_DIR,
): Promise<Record<string, unknown>> {
  const tool = createArcCandidateTool({ dataDir });
  assert.ok(tool.run !== undefined);
  const context = fakeToolContext({ envStore: new FixedEnvStore(values) });
  // The caller JSON-encodes the result; check what the model reads.
  const result = await tool.run(tool.parameters.parse({ key }), context);
  return JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
}

async function assertToolError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    assert.match(error.message, message);
    return true;
  });
}

function tempDir(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-arc-candidate-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const task = JSON.parse(fs.readFileSync(path.join(DEFAULT_ARC_DATA_DIR, `${TASK_ID}.json`), 'utf8')) as {
  train: { input: ArcGrid; output: ArcGrid }[];
};
const realOutputs = task.train.map((pair) => pair.output);

/** Each coloured input cell becomes a copy of the input, each empty cell an empty block: 007bbfb7's rule. */
function fractal(input: ArcGrid): ArcGrid {
  return Array.from({ length: 9 }, (_, r) =>
    Array.from({ length: 9 }, (_, c) =>
      input[Math.floor(r / 3)]?.[Math.floor(c / 3)] === 0 ? 0 : (input[r % 3]?.[c % 3] ?? 0),
    ),
  );
}

/** Each input cell becomes a solid 3x3 block of its colour: a wrong rule for 007bbfb7. */
function scaling(input: ArcGrid): ArcGrid {
  return Array.from({ length: 9 }, (_, r) =>
    Array.from({ length: 9 }, (_, c) => input[Math.floor(r / 3)]?.[Math.floor(c / 3)] ?? 0),
  );
}

const candidate = (rule: string, train_outputs: unknown) => ({ task_id: TASK_ID, rule, train_outputs });

test('check_arc_candidate: a candidate predicting every training output holds', async () => {
  const outputs = task.train.map((pair) => fractal(pair.input));
  assert.deepEqual(outputs, realOutputs, 'the fractal rule is the rule of 007bbfb7');
  const store = new FixedEnvStore({ 'arc/candidates/fractal': candidate('copy where coloured', outputs) });
  const tool = createArcCandidateTool({ dataDir: DEFAULT_ARC_DATA_DIR });
  assert.equal(tool.name, 'check_arc_candidate');
  assert.equal(tool.handledBy, 'activity');
  assert.ok(tool.run !== undefined);
  const result = await tool.run(
    tool.parameters.parse({ key: 'arc/candidates/fractal' }),
    fakeToolContext({ envStore: store }),
  );
  assert.deepEqual(result, {
    task_id: TASK_ID,
    key: 'arc/candidates/fractal',
    rule: 'copy where coloured',
    pairs: 5,
    matched: [0, 1, 2, 3, 4],
    mismatched: [],
    verdict: 'holds',
  });
  // Read through the caller's env view, in the caller's root.
  assert.deepEqual(store.reads, [{ rootThreadId: 't', key: 'arc/candidates/fractal' }]);
});

test('check_arc_candidate: a wrong rule fails, each pair saying how many cells differ and where first', async () => {
  const result = await check(
    {
      'arc/candidates/scaling': candidate(
        'scale each cell up',
        task.train.map((pair) => scaling(pair.input)),
      ),
    },
    'arc/candidates/scaling',
  );
  assert.equal(result.verdict, 'fails');
  assert.deepEqual(result.matched, []);
  assert.deepEqual(result.mismatched, [
    { index: 0, reason: '14 cells differ (the first at row 0, column 3: 0 expected, got 7)' },
    { index: 1, reason: '18 cells differ (the first at row 0, column 1: 0 expected, got 4)' },
    { index: 2, reason: '18 cells differ (the first at row 3, column 6: 0 expected, got 2)' },
    { index: 3, reason: '20 cells differ (the first at row 0, column 2: 0 expected, got 6)' },
    { index: 4, reason: '20 cells differ (the first at row 1, column 0: 0 expected, got 2)' },
  ]);
});

test('check_arc_candidate: wrong sizes and single cells are told apart; the pairs that match are listed', async () => {
  const outputs: ArcGrid[] = structuredClone(realOutputs);
  outputs[1] = task.train[1]?.input ?? []; // 3x3: the input itself
  const row = outputs[3]?.[8];
  assert.ok(row !== undefined);
  row[8] = 0; // one cell of pair 3 (was 6)
  const result = await check({ c: candidate('almost', outputs) }, 'c');
  assert.deepEqual(result, {
    task_id: TASK_ID,
    key: 'c',
    rule: 'almost',
    pairs: 5,
    matched: [0, 2, 4],
    mismatched: [
      { index: 1, reason: 'size 9x9 expected, got 3x3' },
      { index: 3, reason: '1 cell differs (the first at row 8, column 8: 6 expected, got 0)' },
    ],
    verdict: 'fails',
  });
  const wide = await check(
    {
      c: candidate(
        'wide',
        realOutputs.map((grid) => grid.map((r) => [...r, 0])),
      ),
    },
    'c',
  );
  assert.equal((wide.mismatched as { reason: string }[])[0]?.reason, 'size 9x9 expected, got 9x10');
});

test('check_arc_candidate: a missing entry is refused, pointing to list_env_data', async () => {
  await assertToolError(
    check({}, 'arc/candidates/none'),
    /^No environment data under 'arc\/candidates\/none'\. Call list_env_data\(\) to see what exists\.$/,
  );
});

test('check_arc_candidate: a value that is not a candidate is refused, saying what is wrong and what a candidate is', async () => {
  const ragged = structuredClone(realOutputs);
  ragged[2]?.[4]?.pop();
  const colour = structuredClone(realOutputs);
  const cells = colour[0]?.[0];
  assert.ok(cells !== undefined);
  cells[0] = 10;
  const cases: [unknown, RegExp][] = [
    ['a rule in words only', /\(\(top level\): .+\)/],
    [{ rule: 'r', train_outputs: realOutputs }, /\(task_id: /],
    [{ ...candidate('r', realOutputs), task_id: '007BBFB7' }, /\(task_id: must be an ARC task id/],
    [{ task_id: TASK_ID, train_outputs: realOutputs }, /\(rule: /],
    [candidate('  ', realOutputs), /\(rule: must say the rule in words\)/],
    [candidate('r', []), /\(train_outputs: must hold one predicted output grid per training input\)/],
    [candidate('r', ragged), /\(train_outputs\.2: grid rows must all have the same length\)/],
    [candidate('r', colour), /\(train_outputs\.0\.0\.0: /],
    [candidate('r', 'grids'), /\(train_outputs: /],
  ];
  for (const [value, reason] of cases) {
    const error = await check({ k: value }, 'k').then(
      () => assert.fail(`${JSON.stringify(value).slice(0, 60)} was accepted`),
      (thrown: unknown) => thrown,
    );
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    assert.match(error.message, /^'k' is not an ARC candidate \(/);
    assert.match(error.message, reason);
    assert.match(
      error.message,
      /\): a candidate is \{ task_id, rule, train_outputs \} with one predicted output grid \(rows of integers 0-9\) per training input, in order\.$/,
    );
  }
});

test('check_arc_candidate: one prediction per training pair, no more, no fewer', async () => {
  await assertToolError(
    check({ k: candidate('r', realOutputs.slice(0, 3)) }, 'k'),
    /^'k' predicts 3 training outputs, but task 007bbfb7 has 5 training pairs: train_outputs needs one predicted output grid per training input, in order\.$/,
  );
  await assertToolError(
    check({ k: candidate('r', [...realOutputs, realOutputs[0]]) }, 'k'),
    /predicts 6 training outputs, but task 007bbfb7 has 5 training pairs/,
  );
});

test('check_arc_candidate: an unknown task or a missing data directory is refused as load_arc_task refuses it', async (t) => {
  await assertToolError(
    check({ k: { ...candidate('r', realOutputs), task_id: 'ffffffff' } }, 'k'),
    /^Unknown ARC task 'ffffffff'\. The data directory holds 400 tasks\.$/,
  );
  await assertToolError(
    check({ k: candidate('r', realOutputs) }, 'k', path.join(tempDir(t), 'nope')),
    /ARC data directory is missing.*BATON_ARC_DIR/,
  );
});

test('check_arc_candidate: it reads the task files load_arc_task reads, from the same directory', async (t) => {
  const dir = tempDir(t);
  const pair = {
    input: [
      [1, 0],
      [0, 1],
    ],
    output: [[1]],
  };
  fs.writeFileSync(path.join(dir, '0a1b2c3d.json'), JSON.stringify({ train: [pair], test: [{ input: [[1]] }] }));
  fs.writeFileSync(path.join(dir, 'bbbbbbbb.json'), '{ not json');
  const loaded = (await run(createArcTool({ dataDir: dir }), { task_id: '0a1b2c3d' })) as { train: unknown };
  assert.deepEqual(loaded.train, [pair]);
  const value = { task_id: '0a1b2c3d', rule: 'count the diagonal', train_outputs: [[[1]]] };
  assert.equal((await check({ k: value }, 'k', dir)).verdict, 'holds');
  assert.equal((await check({ k: { ...value, train_outputs: [[[2]]] } }, 'k', dir)).verdict, 'fails');
  await assertToolError(
    check({ k: { ...value, task_id: 'bbbbbbbb' } }, 'k', dir),
    /^ARC task 'bbbbbbbb' has a malformed data file: .+/,
  );
});

test('check_arc_candidate: its parameters are one env-data key, nothing else', () => {
  const { parameters } = createArcCandidateTool({ dataDir: DEFAULT_ARC_DATA_DIR });
  assert.equal(parameters.safeParse({ key: 'arc/candidates/fractal' }).success, true);
  for (const args of [{}, { key: '' }, { key: '/a' }, { key: 'a//b' }, { key: 'a b' }, { key: 'k', task_id: 'x' }]) {
    assert.equal(parameters.safeParse(args).success, false, JSON.stringify(args));
  }
  const schema = z.toJSONSchema(parameters) as { additionalProperties?: unknown; required?: string[] };
  assert.equal(schema.additionalProperties, false);
  assert.deepEqual(schema.required, ['key']);
});

test('check_arc_candidate: the tool registry offers it, reading the registry ARC directory', () => {
  const registry = createToolRegistry({
    filesRoot: os.tmpdir(),
    arcDataDir: DEFAULT_ARC_DATA_DIR,
    describeAgent: () => undefined,
  });
  assert.ok(registry.names.includes('check_arc_candidate'));
  assert.equal(registry.get('check_arc_candidate')?.handledBy, 'activity');
  assert.match(registry.toModelTool('check_arc_candidate')?.function.description ?? '', /train_outputs/);
});

/** A root's env data for `baton demo --reactive`'s review: fixed values, listed by prefix. */
function envReader(values: Record<string, unknown>): EnvReader {
  const entry = (key: string) => ({ key, value: values[key] }) as unknown as EnvEntry;
  return {
    envData: (filters = {}) =>
      Promise.resolve(
        Object.keys(values)
          .filter((key) => key.startsWith(filters.prefix ?? ''))
          .sort()
          .map((key) => entry(key) as EnvManifestEntry),
      ),
    envGet: (key) => Promise.resolve(key in values ? entry(key) : undefined),
  };
}

const fractalCandidate = candidate(
  'copy where coloured',
  task.train.map((pair) => fractal(pair.input)),
);
const scalingCandidate = candidate(
  'scale each cell up',
  task.train.map((pair) => scaling(pair.input)),
);
const verdictOf = (verdict: string) => ({ verdict, pairs: 5, matched: verdict === 'holds' ? [0, 1, 2, 3, 4] : [] });
const reviewOptions = {
  arcDataDir: DEFAULT_ARC_DATA_DIR,
  threadId: 'r',
  expect: { fractal: 'holds', scaling: 'fails' },
} as const;

test('demo --reactive review: verdicts that agree with the check pass and are printed from the stored values', async () => {
  const { reviews, problems } = await reviewVerdicts(
    envReader({
      'arc/candidates/fractal': fractalCandidate,
      'arc/candidates/scaling': scalingCandidate,
      'arc/verdicts/fractal': verdictOf('holds'),
      'arc/verdicts/scaling': {
        ...verdictOf('fails'),
        mismatched: [{ index: 0, reason: '14 cells differ (the first at row 0, column 3: 0 expected, got 7)' }],
      },
    }),
    reviewOptions,
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(reviews.map(formatCandidateReview), [
    'fractal: holds (5 of 5 training pairs match)',
    'scaling: fails (0 of 5 training pairs match; pair 0: 14 cells differ (the first at row 0, column 3: 0 expected, got 7))',
  ]);
});

test('demo --reactive review: a missing, a wrong or an unfounded verdict is a problem, and so is a missing candidate', async () => {
  const { reviews, problems } = await reviewVerdicts(
    envReader({
      'arc/candidates/fractal': fractalCandidate,
      'arc/candidates/broken': { rule: 'no grids' },
      'arc/verdicts/fractal': verdictOf('fails'),
      'arc/verdicts/broken': verdictOf('holds'),
    }),
    reviewOptions,
  );
  assert.deepEqual(problems.map(formatDemoProblem), [
    "thread r (verifier): arc/candidates/broken cannot be checked (not a { task_id, rule, train_outputs } candidate), yet arc/verdicts/broken says 'holds'",
    "thread r (verifier): arc/verdicts/fractal says 'fails', but checked against the training pairs arc/candidates/fractal holds",
    'thread r (verifier): the candidate arc/candidates/scaling was not stored',
  ]);
  assert.ok(problems.every((problem) => problem.kind === 'verdict'));
  assert.equal(
    formatCandidateReview(reviews.find((review) => review.name === 'fractal') ?? assert.fail()),
    "fractal: fails (0 of 5 training pairs match) — but the demo's check says: holds",
  );

  const missing = await reviewVerdicts(envReader({ 'arc/candidates/scaling': scalingCandidate }), reviewOptions);
  assert.deepEqual(missing.problems.map(formatDemoProblem), [
    "thread r (verifier): no verdict for arc/candidates/scaling: nothing with a 'verdict' field is stored under arc/verdicts/scaling",
    'thread r (verifier): the candidate arc/candidates/fractal was not stored',
  ]);
  assert.equal(
    formatCandidateReview(missing.reviews[0] ?? assert.fail()),
    "scaling: no verdict stored (the demo's check: fails)",
  );
  const none = await reviewVerdicts(envReader({}), { arcDataDir: DEFAULT_ARC_DATA_DIR, threadId: 'r' });
  assert.deepEqual(none.problems.map(formatDemoProblem), [
    'thread r (verifier): no candidate rule was stored under arc/candidates/',
  ]);
});

async function run(tool: ToolDefinition, args: unknown): Promise<unknown> {
  assert.ok(tool.run !== undefined);
  return tool.run(tool.parameters.parse(args), fakeToolContext());
}
