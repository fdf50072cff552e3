/**
 * Approvals as a user runs them: `baton approvals`, `baton approve`, `baton reject` against a turn waiting for a
 * decision in a real `baton worker` process that loads a user tool module (`BATON_TOOLS`). The wait outlives its
 * worker: the worker is SIGKILLed while the approval is pending, and the approval given to the next one runs the call.
 * The workers hold a decision key: the CLI decides with the same `BATON_DECISION_KEY`, and without it decides nothing;
 * beside `baton dev`, which signs with its stack's own token, the CLI needs nothing configured.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startScriptedWorker, useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';
import { settle } from '../chaos/waiting';
import {
  baton,
  childEnv,
  describeRun,
  freshDir,
  parseJson,
  parseJsonArray,
  stackEnv,
  startBaton,
  startDev,
  waitFor,
  batonInProcess,
} from './cli-process';

const dir = freshDir('approvals');
const toolsFile = path.join(dir, 'tools.mjs');
const deployLog = path.join(dir, 'deploys.log');

const TOOLS_MODULE = `
import fs from 'node:fs';
import { z } from 'zod';
export const tools = [
  {
    name: 'deploy',
    description: 'Deploys a service.',
    parameters: z.object({ service: z.string() }),
    sideEffects: true,
    needsApproval: true,
    run: ({ service }) => {
      fs.appendFileSync(${JSON.stringify(deployLog)}, service + '\\n');
      return 'deployed ' + service;
    },
  },
];
`;

const script = parseScript(
  `
agents:
  releaser:
    - { call: deploy, args: { service: "billing" } }
    - say: "Done with the release."
`,
  'approvals-cli',
);

// Written before the workers start: they load it.
fs.writeFileSync(toolsFile, TOOLS_MODULE);
const workers = useKillableWorkers({
  name: 'approvals-cli',
  dir,
  agents: {
    'releaser.md': '---\nname: releaser\ndescription: Releases services.\ncapabilities: [deploy]\n---\nYou release.\n',
  },
  script,
  workerEnv: { BATON_TOOLS: toolsFile },
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);
/** The CLI with the workers' decision key, as an operator deciding their approvals has it. */
const cli = (...args: string[]) =>
  batonInProcess(args, stackEnv({ BATON_TASK_QUEUE: workers().taskQueue, BATON_DECISION_KEY: workers().decisionKey }));
/** The CLI with another key, or none: anyone else who reaches Temporal. */
const cliWithKey = (decisionKey: string, ...args: string[]) =>
  baton(args, stackEnv({ BATON_TASK_QUEUE: workers().taskQueue, BATON_DECISION_KEY: decisionKey }));

const deploys = () => (fs.existsSync(deployLog) ? fs.readFileSync(deployLog, 'utf8').split('\n').filter(Boolean) : []);

/** Sends the release message in the background and waits until its deploy waits for approval. */
async function releaseWaitingForApproval(threadId: string) {
  const thread: ThreadHandle = await workers().client.startThread({ agent: 'releaser', threadId });
  const sending = settle(thread.send('Release billing.'));
  await waitFor('the approval', async () => (await thread.approvals()).length === 1, { timeoutMs: 60_000 });
  return { thread, sending };
}

test('baton approvals lists a waiting call; it outlives its worker and baton approve runs it', async () => {
  const workerA = await startWorker('worker A');
  const threadId = uniqueThreadId('release');
  const { thread, sending } = await releaseWaitingForApproval(threadId);

  const listed = await cli('approvals', threadId);
  assert.equal(listed.code, 0, describeRun(listed));
  const [header, row] = listed.stdout.trimEnd().split('\n');
  assert.match(header ?? '', /^ID\s+AGENT\s+THREAD\s+AGE\s+CALL$/);
  assert.match(
    row ?? '',
    new RegExp(`^a1\\s+releaser\\s+${threadId}\\s+\\d+[smhd]\\s+deploy\\(\\{"service":"billing"\\}\\)$`),
  );
  const rows = parseJsonArray(await cli('approvals', threadId, '--json'));
  assert.deepEqual(
    rows.map((r) => [r.approvalId, r.tool, r.arguments, r.status]),
    [['a1', 'deploy', '{"service":"billing"}', 'pending']],
  );

  // The worker dies while the turn waits: nothing is lost, the wait lives in the workflow and the row in Postgres.
  assert.deepEqual(await workerA.kill(), { code: null, signal: 'SIGKILL' });
  const workerB = await startWorker('worker B');
  assert.match(workerB.output(), /approvals: decisions are signed with the key of BATON_DECISION_KEY/);
  assert.doesNotMatch(workerB.output(), new RegExp(workers().decisionKey), 'the key itself is never printed');
  assert.deepEqual(deploys(), [], 'nothing ran before the approval');

  // Without the workers' decision key the CLI decides nothing, and says why.
  const unsigned = await cliWithKey('', 'approve', threadId, 'a1', '--by', 'mallory');
  assert.equal(unsigned.code, 1, describeRun(unsigned));
  assert.match(
    unsigned.stderr,
    new RegExp(
      `^baton: approval 'a1' of thread '${threadId}' was not approved: the decision carries no proof, and only a ` +
        "client holding this deployment's decision key \\(BATON_DECISION_KEY\\) can decide approvals; this client " +
        'has no decision key: connect with `decisionKey` \\(the CLI reads BATON_DECISION_KEY or BATON_DECISION_KEY_FILE\\)',
    ),
  );
  const wrongKey = await cliWithKey('w'.repeat(40), 'reject', threadId, 'a1', '--reason', 'no');
  assert.equal(wrongKey.code, 1, describeRun(wrongKey));
  assert.match(wrongKey.stderr, /carries no valid proof.*this client's decision key is not the workers'/);
  const short = await cliWithKey('too-short', 'approve', threadId, 'a1');
  assert.equal(short.code, 1, describeRun(short));
  assert.match(short.stderr, /BATON_DECISION_KEY is 9 characters long; a token needs at least 32/);
  assert.deepEqual(
    parseJsonArray(await cli('approvals', threadId, '--json')).map((r) => [r.status, r.decidedBy]),
    [['pending', null]],
    'the approval still waits',
  );
  assert.deepEqual(deploys(), [], 'nothing ran without a signed decision');

  const approved = await cli('approve', threadId, 'a1', '--by', 'carol');
  assert.equal(approved.code, 0, describeRun(approved));
  assert.equal(approved.stdout, 'a1 approved.\n');
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'Done with the release.');
  assert.deepEqual(deploys(), ['billing'], 'the approved call ran once');
  const results = (await listMessages(workers().pool, threadId)).filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, ['deployed billing']);

  const all = await cli('approvals', threadId, '--all');
  // AGE is 12s, then 1m once the call has waited a minute (a slow run gets there).
  assert.match(all.stdout, /a1\s+releaser\s+\S+\s+\d+[smhd]\s+approved by carol\s+deploy/);
  const again = await cli('approve', threadId, 'a1');
  assert.equal(again.code, 1);
  assert.equal(again.stderr, "baton: approval 'a1' is already approved\n");
  await thread.end();
});

test('baton reject gives the agent the reason, and bad ids are one clear error line', async () => {
  // Worker B of the test before serves this one too; a new worker only when that test failed before it.
  if (workers().alive().length === 0) await startWorker('worker C');
  const threadId = uniqueThreadId('reject');
  const { thread, sending } = await releaseWaitingForApproval(threadId);
  const before = deploys().length;

  const missing = await cli('reject', threadId, 'a7');
  assert.equal(missing.code, 1);
  assert.equal(missing.stderr, `baton: thread '${threadId}' has no approval 'a7'\n`);

  const rejected = await cli('reject', threadId, 'a1', '--reason', 'billing is frozen this week', '--json');
  assert.equal(rejected.code, 0, describeRun(rejected));
  assert.deepEqual(parseJson(rejected), { approvalId: 'a1', status: 'rejected' });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  const [result] = (await listMessages(workers().pool, threadId)).filter((m) => m.role === 'tool');
  assert.match(
    result?.content ?? '',
    /^Error: \S+ rejected this call of 'deploy', so it did not run\. Reason: billing is frozen this week$/,
  );
  assert.equal(deploys().length, before, 'the rejected call never ran');
  await thread.end();
});

test('a baton worker without a decision key warns at start that anyone who reaches Temporal can decide', async () => {
  // On a task queue of its own: a worker that checks nothing must not take this file's turns.
  const unsigned = await startScriptedWorker('worker without a key', {
    taskQueue: uniqueTaskQueue('approvals-cli-unsigned'),
    modelBaseUrl: workers().model.baseURL,
    agentsDir: path.join(dir, 'agents'),
    env: { BATON_TOOLS: toolsFile, BATON_DECISION_KEY: '' },
  });
  try {
    assert.match(
      unsigned.output(),
      /^baton worker: warning: approvals: decisions are not signed \(no BATON_DECISION_KEY\): anyone who reaches this Temporal namespace can decide them$/m,
    );
  } finally {
    await unsigned.kill();
  }
});

test("baton dev checks decisions with its stack's token, and baton approve beside it needs nothing configured", async () => {
  const stateDir = freshDir('approvals-dev-state');
  const agentsDir = freshDir('approvals-dev-agents');
  fs.writeFileSync(
    path.join(agentsDir, 'releaser.md'),
    '---\nname: releaser\ndescription: Releases services.\ncapabilities: [deploy]\n---\nYou release.\n',
  );
  fs.writeFileSync(
    path.join(agentsDir, 'model-script.yaml'),
    'agents:\n  releaser:\n    - { call: deploy, args: { service: "payments" } }\n    - say: "Done with the release."\n',
  );
  const taskQueue = uniqueTaskQueue('approvals-dev');
  const dev = await startDev({
    stateDir,
    args: ['--agents', agentsDir, '--tools', toolsFile, '--task-queue', taskQueue],
  });
  const runs: ReturnType<typeof startBaton>[] = [];
  try {
    const token = path.join(stateDir, 'token');
    assert.match(
      dev.output.stderr(),
      new RegExp(`^approvals: decisions are signed with the key of ${token}; only clients holding it can decide$`, 'm'),
    );
    // The CLI finds the stack through its stack.json, or is pointed at its Temporal server: it signs either way.
    const foundByStackFile = (...args: string[]) => baton(['--state-dir', stateDir, ...args], childEnv());
    const pointedAtTemporal = (...args: string[]) =>
      baton(['--state-dir', stateDir, ...args], stackEnv({ BATON_TASK_QUEUE: taskQueue }));
    for (const [cli, decision, status] of [
      [foundByStackFile, 'approve', 'approved'],
      [pointedAtTemporal, 'reject', 'rejected'],
    ] as const) {
      const threadId = uniqueThreadId(`dev-${decision}`);
      const run = startBaton(
        ['--state-dir', stateDir, 'run', 'releaser', 'Release payments.', '--thread', threadId, '--json'],
        childEnv(),
      );
      runs.push(run);
      await waitFor(
        'the approval',
        async () => {
          const listed = await foundByStackFile('approvals', threadId, '--json');
          return listed.code === 0 && parseJsonArray(listed).length === 1;
        },
        { timeoutMs: 60_000, child: run.child, describe: run.output.stderr },
      );
      const decided = await cli(decision, threadId, 'a1', '--json');
      assert.equal(decided.code, 0, describeRun(decided));
      assert.deepEqual(parseJson(decided), { approvalId: 'a1', status });
      const finished = await run.finished();
      assert.equal(finished.code, 0, describeRun(finished));
    }
    assert.equal(deploys().filter((service) => service === 'payments').length, 1, 'the approved call ran, once');
  } finally {
    // A run whose call was never decided would wait on: it goes with the test.
    for (const run of runs) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await dev.stop();
  }
});
