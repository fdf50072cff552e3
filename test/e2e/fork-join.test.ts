/**
 * The fork/join example as a new user runs it (docs/guides/fork-join.md): `baton dev --agents agents` with the scripted
 * model, `baton run arc_lead …`, then `baton tree` and `baton env` show the fork, each task's status, the merged
 * findings and the proposal the lead accepted.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { uniqueTaskQueue } from '../../testing/test-env';
import {
  ROOT,
  childEnv,
  describeRun,
  freshDir,
  parseJson,
  parseJsonArray,
  stackEnv,
  startDev,
  type CommandResult,
  type DevProcess,
  problemsInTree,
  batonInProcess,
} from './cli-process';
import type { TreeNode } from '../../client';

const AGENTS_DIR = path.join(ROOT, 'examples', 'arc-team', 'agents');
const TESTERS = ['tiling_tester', 'scaling_tester', 'fractal_tester'];

describe('the fork/join example through the CLI', () => {
  const stateDir = freshDir('fork-state');
  let dev: DevProcess | undefined;
  const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());
  let run: CommandResult;
  let threadId = '';

  before(async () => {
    dev = await startDev({
      stateDir,
      args: ['--agents', AGENTS_DIR, '--task-queue', uniqueTaskQueue('fork-e2e')],
      env: stackEnv(),
    });
    run = await cli('run', 'arc_lead', 'Solve ARC task 007bbfb7 by testing three hypotheses in parallel.', '--json');
    const output = run.code === 0 ? parseJson(run) : {};
    threadId = typeof output.threadId === 'string' ? output.threadId : '';
  });

  after(async () => {
    await dev?.stop();
  });

  test('fork e2e: the lead completes after fanning out to three testers, each in its own isolated store', async () => {
    assert.equal(run.code, 0, `${describeRun(run)}\nbaton dev:\n${dev?.output.stderr() ?? ''}`);
    assert.equal(parseJson(run).status, 'completed');
    const tree = await cli('tree', threadId, '--json');
    assert.equal(tree.code, 0, describeRun(tree));
    const root = parseJson(tree) as {
      children: { agent: string; status: string }[];
      forks: {
        number: number;
        status: string;
        store: string;
        prefix: string;
        tasks: { agent: string; status: string }[];
      }[];
    };
    // Children were created in one transaction; the fork's own task list carries the input order.
    assert.deepEqual(
      root.children.map((child) => [child.agent, child.status]).sort(),
      TESTERS.map((agent) => [agent, 'completed']).sort(),
    );
    assert.equal(root.forks.length, 1);
    const [fork] = root.forks;
    assert.deepEqual([fork?.number, fork?.status, fork?.store, fork?.prefix], [1, 'success', 'isolated', 'fork/1']);
    assert.deepEqual(
      fork?.tasks.map((task) => [task.agent, task.status]),
      TESTERS.map((agent) => [agent, 'success']),
    );
  });

  test('fork e2e: no turn of the lead, the testers or their forks failed, and no tool call returned an Error:', async () => {
    const result = await cli('tree', threadId, '--json');
    assert.deepEqual(await problemsInTree(parseJson(result) as unknown as TreeNode), []);
  });

  test('fork e2e: baton tree draws the fork as a group with each task’s status and what it merged', async () => {
    const result = await cli('tree', threadId);
    assert.equal(result.code, 0, describeRun(result));
    const lines = result.stdout.split('\n');
    assert.equal(lines[1], '└─ fork 1  isolated → fork/1/  success  (3 of 3 succeeded, deadline 300 s)');
    TESTERS.forEach((agent, index) => {
      const taskLine = lines.findIndex((line) => line.includes(`[task ${index + 1}: success] ${agent}  completed`));
      assert.ok(taskLine > 1, `a line for task ${index + 1} (${agent}):\n${result.stdout}`);
      assert.match(lines[taskLine + 1] ?? '', new RegExp(`merged 1 key \\(fork/1/${index + 1}/verdict\\), 1 link`));
    });
    assert.match(result.stdout, /proposals p1/);
  });

  test('fork e2e: baton env shows the merged verdicts, attributed to their tasks, and the accepted rule', async () => {
    const manifest = await cli('env', threadId, '--json');
    assert.equal(manifest.code, 0, describeRun(manifest));
    const entries = parseJsonArray(manifest) as { key: string; storedBy: { agent: string }; storedByTask: string }[];
    assert.deepEqual(
      entries.map((entry) => [entry.key, entry.storedBy.agent, entry.storedByTask]),
      [
        ['arc/rule', 'arc_lead', null],
        ['arc_task', 'arc_lead', null],
        ...TESTERS.map((agent, index) => [`fork/1/${index + 1}/verdict`, agent, `fork 1 task ${index + 1}`]),
      ],
    );
    const verdict = await cli('env', threadId, 'get', 'fork/1/3/verdict', '--json');
    assert.deepEqual((parseJson(verdict) as { value: unknown }).value, {
      hypothesis: 'fractal',
      holds: true,
      pairs_checked: 5,
    });

    const proposals = await cli('env', threadId, 'proposals', '--json');
    assert.equal(proposals.code, 0, describeRun(proposals));
    const [proposal] = parseJsonArray(proposals) as {
      proposalId: string;
      key: string;
      status: string;
      value: unknown;
      decidedBy: { agent: string };
      forkTask: string;
    }[];
    assert.deepEqual(
      [proposal?.proposalId, proposal?.key, proposal?.status, proposal?.decidedBy.agent, proposal?.forkTask],
      ['p1', 'arc/rule', 'accepted', 'arc_lead', 'fork 1 task 3'],
    );
    // The accepted proposal's value is what arc/rule holds now: the lead applied it, nobody wrote it by hand.
    const rule = await cli('env', threadId, 'get', 'arc/rule', '--json');
    assert.deepEqual((parseJson(rule) as { value: unknown; version: number }).value, proposal?.value);
    assert.equal((parseJson(rule) as { version: number }).version, 2);

    const again = await cli('env', threadId, 'accept', 'p1');
    assert.equal(again.code, 1, describeRun(again));
    assert.match(again.stderr, /proposal 'p1' is accepted; only pending ones can be accepted/);
    const badId = await cli('env', threadId, 'accept', 'rule');
    assert.equal(badId.code, 1, describeRun(badId));
    assert.match(badId.stderr, /needs a proposal id such as p1/);
  });

  test('fork e2e: the event log shows the merge, the links and who accepted the proposal', async () => {
    const result = await cli('env', threadId, 'events');
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, /stored verdict v1 in its isolated store by tiling_tester \(fork 1 task 1\)/);
    assert.match(
      result.stdout,
      /stored fork\/1\/1\/verdict v1 by tiling_tester \(fork 1 task 1\) .*: merged from fork 1 task 1 \(commit tiling\)/,
    );
    assert.match(result.stdout, /linked fork\/1\/3\/verdict supports arc_task by fractal_tester \(fork 1 task 3\)/);
    assert.match(
      result.stdout,
      /updated arc\/rule v2 by arc_lead \(.*\) .*: accepted proposal p1 \(proposed by fractal_tester, fork 1 task 3\)/,
    );
  });

  test('fork e2e: baton events lists refused writes (none in a fork that met its deadline) and refuses an unknown thread', async () => {
    const none = await cli('events', threadId);
    assert.equal(none.code, 0, describeRun(none));
    assert.equal(none.stdout, 'No refused writes.\n');
    const json = await cli('events', threadId, '--json');
    assert.deepEqual(parseJsonArray(json), []);
    const unknown = await cli('events', 'no-such-thread');
    assert.equal(unknown.code, 1, describeRun(unknown));
    assert.match(unknown.stderr, /no-such-thread/);
  });
});
