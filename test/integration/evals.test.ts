/**
 * Evaluations on the real stack (a Temporal dev server, Postgres, the scripted model over HTTP), through `baton eval`
 * as a user runs it: a dataset of five cases scored by a code scorer and a model-graded one (the scripted model as the
 * judge), run against two versions of an agent, stored and compared; the gate failing below its score; a recorded run
 * of a team (a delegation, a tool with side effects, an env-data write) replayed with the same agent, reproducing it
 * with no call run live; and replayed with a changed prompt whose script calls another tool, reporting the divergence
 * at its step and running nothing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { runCli } from '../../cli/program';
import { createPool } from '../../db/pool';
import { findExperiment } from '../../db/evals';
import { experimentReportSchema, type Comparison, type ExperimentReport } from '../../evals';
import { readTestEnv } from '../../testing/test-env';
import { connect } from '../../client';
import { startExplorer } from '../../explorer';
import { explorerHttp, flat, textOf } from './explorer-http';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'evals-'));
const refunds = path.join(workDir, 'refunds.log');
const pool = createPool({ connectionString: env.databaseUrl, applicationName: 'evals-test' });

after(async () => {
  await pool.end();
});

/** The refund tool: side effects, each run a line in `refunds`, so a test counts every live call. */
const toolModule = path.join(workDir, 'refund-tool.mjs');
fs.writeFileSync(
  toolModule,
  "import fs from 'node:fs';\nimport { z } from 'zod';\n" +
    `export default [{ name: 'refund', description: 'Refunds an order.', sideEffects: true, timeout_s: 30,\n` +
    '  parameters: z.object({ order: z.number().int(), amount: z.number() }),\n' +
    `  run: ({ order, amount }) => { fs.appendFileSync(${JSON.stringify(refunds)}, order + ' ' + amount + '\\n'); ` +
    "return 'refunded ' + amount + ' EUR'; } }];\n",
);

/** An agents directory: the desk (with `prompt`), its helper, the judge, and the model's script. */
function agentsDir(name: string, prompt: string, deskScript: string, grade: number): string {
  const dir = path.join(workDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'desk.md'),
    `---\nname: desk\ndescription: Answers refund requests.\ncapabilities: [lookup, refund, store_env_data]\n---\n${prompt}\n`,
  );
  fs.writeFileSync(path.join(dir, 'lookup.md'), '---\nname: lookup\ndescription: Finds an order.\n---\nYou look up.\n');
  fs.writeFileSync(
    path.join(dir, 'grader.md'),
    '---\nname: grader\ndescription: Grades answers from 1 to 5.\n' +
      'output: { type: object, properties: { score: { type: integer, minimum: 1, maximum: 5 }, reason: { type: string } }, required: [score, reason] }\n' +
      '---\nGrade the answer.\n',
  );
  fs.writeFileSync(
    path.join(dir, 'model-script.yaml'),
    `agents:\n  desk:\n${deskScript}  lookup:\n    - say: "Order 17: 12 EUR."\n  grader:\n` +
      `    - call: final_output\n      args: { score: ${grade}, reason: "graded ${grade}" }\n`,
  );
  return dir;
}

const teamScript = (secondCall: string) => `    - call: lookup
      args: { message: "Find order 17." }
    - ${secondCall}
    - call: store_env_data
      args: { key: refund/17, short_description: "The refund of order 17.", value: { amount: 12 } }
    - say: "Refunded 12 EUR."
`;
const refundCall = 'call: refund\n      args: { order: 17, amount: 12 }';
const v1 = agentsDir('v1', 'Refund what the customer asks.', teamScript(refundCall), 5);
const v2 = agentsDir('v2', 'Leave every refund to a person.', '    - say: "Please wait for a person."\n', 2);
/** A changed prompt whose script asks the lookup agent a different question at the first step. */
const v3 = agentsDir(
  'v3',
  'Refund only after a second look.',
  teamScript(refundCall).replace('Find order 17.', 'Find order 17 and its customer.'),
  5,
);

/** A code scorer of the user's: checks the shared data the run left (the refund noted under refund/17). */
const scorerModule = path.join(workDir, 'scorers.mjs');
fs.writeFileSync(
  scorerModule,
  'export const scorers = [{\n' +
    "  name: 'refund-noted',\n" +
    '  async run({ client, threadId }) {\n' +
    "    const entry = await client.thread(threadId).envGet('refund/17');\n" +
    "    return entry ? { score: 1, reason: 'noted ' + JSON.stringify(entry.value) } : { score: 0, reason: 'no note' };\n" +
    '  },\n' +
    '}];\n',
);

const dataset = path.join(workDir, 'refunds.json');
fs.writeFileSync(
  dataset,
  JSON.stringify({
    name: 'refunds',
    agent: 'desk',
    scorers: ['exact', { judge: 'grader', scale: [1, 5] }, { tool: 'refund', at_most: 1 }],
    cases: [
      { id: 'small', message: 'Refund order 17, please.', expected: 'Refunded 12 EUR.' },
      { id: 'again', message: 'Order 17 again.', expected: 'Refunded 12 EUR.' },
      { id: 'polite', message: 'Could you refund 17?', expected: 'Refunded 12 EUR.' },
      { id: 'large', message: 'Refund order 17: 120 EUR.', expected: 'Please wait for a person.' },
      { id: 'unclear', message: 'Money back.', expected: 'Please wait for a person.' },
    ],
  }),
);

/** `baton <args>` in this process, against the test stack; its exit code and output. */
async function baton(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {
      PATH: process.env.PATH,
      TEMPORAL_ADDRESS: env.temporalAddress,
      DATABASE_URL: env.databaseUrl,
      BATON_WORKFLOW_BUNDLE: env.workflowBundlePath,
      BATON_TOOLS: toolModule,
      BATON_SHELL_SANDBOX: 'none',
    },
    cwd: workDir,
  });
  return { code, stdout, stderr };
}

const refundsRun = () => (fs.existsSync(refunds) ? fs.readFileSync(refunds, 'utf8').split('\n').filter(Boolean) : []);

/** The first experiment: the dataset on v1, whose case threads the replays below take as recorded runs. */
let first: ExperimentReport;
/** The refunds paid live by the first experiment. */
let firstRefunds: number;

before(async () => {
  const a = await baton(['eval', 'run', dataset, '--agents', v1, '--scorers', scorerModule, '--json']);
  assert.equal(a.code, 0, a.stderr);
  first = experimentReportSchema.parse(JSON.parse(a.stdout)) as ExperimentReport;
  firstRefunds = refundsRun().length;
});

test('evals: a dataset of five cases scored by code and by a judge, stored, then compared across two agent versions', async () => {
  assert.equal(first.cases.length, 5);
  assert.deepEqual(
    first.cases.map((c) => [c.caseId, c.status, c.scores.exact?.score]),
    [
      ['small', 'completed', 1],
      ['again', 'completed', 1],
      ['polite', 'completed', 1],
      ['large', 'completed', 0],
      ['unclear', 'completed', 0],
    ],
  );
  assert.equal(first.summary.scorers.exact?.mean, 0.6);
  assert.equal(first.summary.scorers['judge:grader']?.mean, 1, 'the judge gave 5 of 5 to every case');
  assert.equal(first.cases[0]?.scores['judge:grader']?.reason, 'graded 5');
  assert.equal(first.summary.scorers['tool:refund<=1']?.mean, 1);
  assert.deepEqual(first.cases[0]?.scores['refund-noted'], { score: 1, reason: 'noted {"amount":12}' });
  assert.equal(firstRefunds, 5, 'each case refunded once, live');
  assert.ok(first.agents.desk && first.agents.lookup, 'the agents versions are recorded');
  // Stored in Postgres as printed.
  const stored = await findExperiment(pool, first.experimentId);
  assert.equal(stored?.cases.length, 5);
  assert.equal(stored?.experiment.kind, 'run');
  assert.deepEqual(stored?.cases[3]?.scores.exact, { score: 0, reason: 'differs from the expected answer' });

  const b = await baton(['eval', 'run', dataset, '--agents', v2, '--scorers', scorerModule, '--json']);
  assert.equal(b.code, 0, b.stderr);
  const second = experimentReportSchema.parse(JSON.parse(b.stdout)) as ExperimentReport;
  assert.equal(second.summary.scorers.exact?.mean, 0.4);
  assert.equal(second.summary.scorers['judge:grader']?.mean, 0.25, 'a 2 of 5 is 0.25 on the scale 1 to 5');
  assert.equal(second.summary.scorers['refund-noted']?.mean, 0, 'v2 notes no refund');
  assert.notEqual(second.agents.desk, first.agents.desk, 'another version of desk');

  const compared = await baton(['eval', 'compare', first.experimentId, second.experimentId, '--json']);
  assert.equal(compared.code, 0, compared.stderr);
  const comparison = JSON.parse(compared.stdout) as Comparison;
  const exact = comparison.scorers.find((s) => s.name === 'exact');
  assert.ok(exact?.delta !== undefined && Math.abs(exact.delta + 0.2) < 1e-9, JSON.stringify(exact));
  assert.deepEqual(
    comparison.cases.map((c) => [c.caseId, c.a?.scores.exact?.score, c.b?.scores.exact?.score]),
    [
      ['small', 1, 0],
      ['again', 1, 0],
      ['polite', 1, 0],
      ['large', 0, 1],
      ['unclear', 0, 1],
    ],
  );
  const table = await baton(['eval', 'compare', first.experimentId, second.experimentId]);
  assert.match(table.stdout, /exact: A 0\.60 {2}B 0\.40 {2}\(-0\.20\)/);

  // The explorer shows them side by side.
  const client = await connect({ address: env.temporalAddress, databaseUrl: env.databaseUrl });
  const explorer = await startExplorer({ client, port: 0 });
  try {
    const http = explorerHttp(() => explorer);
    const page = await http.request(`/experiments/compare?a=${first.experimentId}&b=${second.experimentId}`);
    assert.equal(page.status, 200, page.body);
    const text = textOf(page.body);
    assert.match(text, /exact 0\.60 0\.40 -0\.20/);
    assert.match(text, /judge:grader 1\.00 0\.25 -0\.75/);
    assert.match(
      flat(page.body),
      /<tr data-case="small"><td>small<\/td><td><span class="status status-completed">completed<\/span><\/td><td class="num"[^>]*>1\.00<\/td>/,
    );
    const list = await http.request('/experiments');
    assert.ok(list.body.includes(`data-experiment="${first.experimentId}"`));
    const one = await http.request(`/experiments/${first.experimentId}`);
    assert.match(textOf(one.body), /exact 0\.60 3\/5/);
    assert.equal((await http.request('/experiments/nope')).status, 404);
  } finally {
    await explorer.close();
    await client.close();
  }
});

test('evals: the gate exits 1 below --min-score, saying so, and passes at or above it', async () => {
  const below = await baton(['eval', 'run', dataset, '--agents', v2, '--json', '--min-score', '0.9']);
  assert.equal(below.code, 1);
  assert.match(below.stderr, /baton: the score 0\.55 is below --min-score 0\.9/);
  const report = JSON.parse(below.stdout) as ExperimentReport & { gate: { passed: boolean } };
  assert.equal(report.gate.passed, false);
  const above = await baton(['eval', 'run', dataset, '--agents', v1, '--json', '--min-score', '0.8']);
  assert.equal(above.code, 0, above.stderr);
  const passed = JSON.parse(above.stdout) as ExperimentReport & { gate: { passed: boolean } };
  assert.ok((passed.summary.score ?? 0) >= 0.8 && passed.gate.passed);
  const refused = await baton(['eval', 'run', dataset, '--agents', v2, '--min-score', '2']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /--min-score must be a number from 0 to 1/);
});

test('evals: a recorded team run replayed with the same agents reproduces it, with no call run live', async () => {
  const recorded = first.cases[0]?.threadId ?? '';
  const before = refundsRun().length;
  const replayed = await baton(['eval', 'replay', recorded, '--agents', v1, '--json']);
  assert.equal(replayed.code, 0, replayed.stderr);
  const report = experimentReportSchema.parse(JSON.parse(replayed.stdout)) as ExperimentReport;
  assert.equal(report.kind, 'replay');
  const [only] = report.cases;
  assert.equal(only?.status, 'completed');
  assert.equal(only?.divergence, null);
  assert.equal(only?.liveCalls, 0);
  assert.equal(only?.reply, 'Refunded 12 EUR.');
  assert.deepEqual(only?.scores.recorded, { score: 1 });
  assert.deepEqual(only?.recordedScores?.recorded, { score: 1 }, 'the recorded run is scored by the same scorers');
  assert.equal(refundsRun().length, before, 'the refund was answered from the record, not run');
  // The delegation was answered too (no child thread), and the env write was not applied.
  const { rows: children } = await pool.query('SELECT 1 FROM threads WHERE root_thread_id = $1 AND thread_id <> $1', [
    only?.threadId,
  ]);
  assert.equal(children.length, 0);
  const { rows: entries } = await pool.query('SELECT 1 FROM env_data WHERE root_thread_id = $1', [only?.threadId]);
  assert.equal(entries.length, 0);
  // Each call's result is the recorded one.
  const { rows: results } = await pool.query<{ content: string }>(
    `SELECT content FROM transcript_messages WHERE thread_id = $1 AND role = 'tool' ORDER BY seq`,
    [only?.threadId],
  );
  const { rows: original } = await pool.query<{ content: string }>(
    `SELECT content FROM transcript_messages WHERE thread_id = $1 AND role = 'tool' ORDER BY seq`,
    [recorded],
  );
  assert.deepEqual(
    results.map((r) => r.content),
    original.map((r) => r.content),
  );
});

test('evals: a replay with a changed prompt reports where it diverged and runs nothing live', async () => {
  const recorded = first.cases[0]?.threadId ?? '';
  const before = refundsRun().length;
  const replayed = await baton(['eval', 'replay', recorded, '--agents', v3, '--json']);
  assert.equal(replayed.code, 0, replayed.stderr);
  const report = JSON.parse(replayed.stdout) as ExperimentReport;
  const [only] = report.cases;
  assert.equal(only?.status, 'diverged');
  assert.equal(only?.divergence?.call, 1);
  assert.equal(only?.divergence?.step, 1);
  assert.equal(only?.divergence?.agent, 'desk');
  assert.equal(only?.divergence?.recorded?.name, 'lookup');
  assert.match(only?.divergence?.made.arguments ?? '', /and its customer/);
  assert.match(only?.error ?? '', /the replay diverged from thread '.+' at call 1 \(step 1, desk\)/);
  assert.deepEqual(only?.scores.recorded, { score: 0, reason: 'differs from the recorded reply' });
  assert.deepEqual(only?.recordedScores?.recorded, { score: 1 });
  assert.equal(refundsRun().length, before, 'nothing ran live');
  const text = await baton(['eval', 'show', report.experimentId]);
  assert.match(text.stdout, /diverged at call 1 \(step 1\): made lookup, recorded lookup/);
});

test('evals: under live-read-only a read-only call past the divergence runs live, counted; later matching calls are answered', async () => {
  const recorded = first.cases[0]?.threadId ?? '';
  const before = refundsRun().length;
  // Lists the shared data (read-only) where the record delegated, then goes on as recorded.
  const v4 = agentsDir(
    'v4',
    'List what is known first.',
    teamScript(refundCall).replace(
      'call: lookup\n      args: { message: "Find order 17." }',
      'call: list_env_data\n      args: {}',
    ),
    5,
  );
  const replayed = await baton([
    'eval',
    'replay',
    recorded,
    '--agents',
    v4,
    '--on-divergence',
    'live-read-only',
    '--json',
  ]);
  assert.equal(replayed.code, 0, replayed.stderr);
  const [only] = experimentReportSchema.parse(JSON.parse(replayed.stdout)).cases;
  assert.equal(only?.status, 'completed');
  assert.equal(only?.liveCalls, 1);
  assert.deepEqual(
    [only?.divergence?.call, only?.divergence?.made.name, only?.divergence?.recorded?.name],
    [1, 'list_env_data', 'lookup'],
  );
  assert.equal(only?.reply, 'Refunded 12 EUR.');
  assert.equal(refundsRun().length, before, 'the refund, matching the record, was answered from it');
  const refused = await baton(['eval', 'replay', recorded, '--agents', v4, '--on-divergence', 'sometimes']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /argument 'sometimes' is invalid/);
});
