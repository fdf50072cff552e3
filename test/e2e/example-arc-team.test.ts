/**
 * The example project examples/arc-team (the team `baton demo` runs), run as its README says, on the real stack with
 * its scripted model: a copy outside the repository links Baton from this checkout, `npx baton dev --agents agents`
 * (what `npm start` runs) starts the stack, and the README's three runs go through the CLI: the delegation chain, the
 * fork of three testers, and the watcher that verifies candidate rules. Each run's own commands are run as printed
 * and their output read; test/e2e/team.test.ts and test/e2e/fork-join.test.ts look deeper at the first two.
 *
 * The copy installs with `--ignore-scripts`, as test/e2e/example-research-team.test.ts explains: nothing here needs
 * dist/, since a linked checkout's bin runs its sources.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  baton,
  type Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  installExample,
  ROOT,
  scriptedFinalSay,
  startDev,
  stopExample,
} from './user-project';

const EXAMPLE = path.join(ROOT, 'examples', 'arc-team');
const START = 'baton dev --agents agents';
const RUNS = {
  delegation: ['coordinator', 'Solve ARC task 007bbfb7', 'arc-1'],
  fork: ['arc_lead', 'Solve ARC task 007bbfb7 by testing three hypotheses in parallel.', 'arc-fork'],
  watcher: ['arc_verified_lead', 'Solve ARC task 007bbfb7 and have every candidate rule verified.', 'arc-check'],
} as const;

const finalSay = (agent: string): string => scriptedFinalSay('arc-team', agent);

interface EnvEntry {
  key: string;
  storedBy: { agent: string };
}

describe('the example project (examples/arc-team), run as its README says', () => {
  let example: string;
  let dev: Command | undefined;
  const readme = fs.readFileSync(path.join(EXAMPLE, 'README.md'), 'utf8');
  /** Runs `npx baton <args>` in the copy, failing unless the README runs the same command. */
  const asPrinted = async (args: readonly string[]) => {
    const printed = `npx baton ${args.map((arg) => (arg.includes(' ') ? `"${arg}"` : arg)).join(' ')}`;
    assert.ok(readme.includes(printed), `the README runs ${printed}`);
    return (await baton(example, args)).stdout;
  };
  /** `npx baton run <agent> "<message>" --thread <thread>`, as the README prints it; its reply. */
  const run = async ([agent, message, thread]: readonly [string, string, string]) =>
    (await asPrinted(['run', agent, message, '--thread', thread])).trim();
  const envKeys = async (thread: string) =>
    (JSON.parse((await baton(example, ['env', thread, '--json'])).stdout) as EnvEntry[]).map((entry) => [
      entry.key,
      entry.storedBy.agent,
    ]);

  before(
    async () => {
      const manifest = JSON.parse(fs.readFileSync(path.join(EXAMPLE, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      };
      assert.equal(manifest.scripts.start, START, 'npm start runs baton dev on the agents');
      assert.ok(readme.includes(`npm start        # ${START}`), 'the README says what npm start runs');
      example = copyExampleProject('arc-team');
      await installExample(example);
      ({ dev } = await startDev(example, ['--agents', 'agents'], path.join(example, 'model-requests.jsonl')));
    },
    { timeout: 3 * COMMAND_TIMEOUT_MS },
  );

  after(() => stopExample('baton dev', dev, example));

  test('delegation: the coordinator answers through the solver and the observer, which share the puzzle', async () => {
    assert.equal(await run(RUNS.delegation), finalSay('coordinator'));
    const tree = await asPrinted(['tree', 'arc-1']);
    assert.match(tree, /^coordinator {2}completed .*\(arc-1\)$/m);
    assert.match(tree, /^└─ solver {2}completed .*\(arc-1\/solver-1\)$/m);
    assert.match(tree, /^ {3}└─ observer {2}completed .*\(arc-1\/observer-1\)$/m);
    await asPrinted(['env', 'arc-1']);
    assert.deepEqual(await envKeys('arc-1'), [
      ['arc_task', 'solver'],
      ['observed_patterns', 'observer'],
    ]);
    const observer = await asPrinted(['transcript', 'arc-1/observer-1']);
    assert.match(observer, /^ +Called by: solver$/m, 'the observer was told who called it');
    assert.match(observer, /^ +Delegation chain: human → coordinator → solver → you \(observer\)$/m, 'and by whom');
    assert.match(observer, /^ +- arc_task: /m, 'and what shared data to read');
  });

  test('fork/join: three testers at once; the verdicts merge and the lead accepts the rule that holds', async () => {
    assert.equal(await run(RUNS.fork), finalSay('arc_lead'));
    const tree = await asPrinted(['tree', 'arc-fork']);
    assert.match(tree, /fork 1 {2}isolated → fork\/1\/ {2}success {2}\(3 of 3 succeeded/);
    assert.match(tree, /\[task 3: success\] fractal_tester {2}completed/);
    assert.match(tree, /merged 1 key \(fork\/1\/3\/verdict\), 1 link, proposals p1/);
    await asPrinted(['env', 'arc-fork']);
    assert.deepEqual(await envKeys('arc-fork'), [
      ['arc/rule', 'arc_lead'],
      ['arc_task', 'arc_lead'],
      ['fork/1/1/verdict', 'tiling_tester'],
      ['fork/1/2/verdict', 'scaling_tester'],
      ['fork/1/3/verdict', 'fractal_tester'],
    ]);
  });

  test('the watcher: each candidate the lead stores wakes the verifier, whose verdicts are right', async () => {
    assert.equal(await run(RUNS.watcher), finalSay('arc_verified_lead'));
    // The wake-up runs after the lead's reply: wait for both verdicts.
    const verdicts = ['arc/verdicts/fractal', 'arc/verdicts/scaling'];
    for (const deadline = Date.now() + COMMAND_TIMEOUT_MS; ;) {
      const keys = (await envKeys('arc-check')).map(([key]) => key);
      if (verdicts.every((key) => keys.includes(key))) break;
      assert.ok(
        Date.now() < deadline,
        `the verifier's verdicts within ${COMMAND_TIMEOUT_MS} ms (keys: ${keys.join(', ')})`,
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    const listed = await asPrinted(['watch', 'list', 'arc-check']);
    assert.match(listed, /verifier/);
    await asPrinted(['env', 'arc-check']);
    // The verdicts the verifier stored agree with what check_arc_candidate computed from the real training outputs.
    const stored = async (name: string) =>
      JSON.parse((await baton(example, ['env', 'arc-check', 'get', `arc/verdicts/${name}`, '--json'])).stdout) as {
        value: { verdict: string };
      };
    assert.deepEqual(
      [(await stored('fractal')).value.verdict, (await stored('scaling')).value.verdict],
      ['holds', 'fails'],
    );
    const wakeup = JSON.parse(
      (await baton(example, ['transcript', 'arc-check/watch.verifier.1', '--json'])).stdout,
    ) as {
      role: string;
      content: string | null;
    }[];
    const checked = wakeup
      .filter((message) => message.role === 'tool' && message.content?.includes('"verdict"'))
      .map((message) => JSON.parse(message.content ?? '{}') as { key: string; verdict: string });
    assert.deepEqual(
      // Both checks run at once, so their results are stored in either order.
      checked.map((check) => [check.key, check.verdict]).sort(),
      [
        ['arc/candidates/fractal', 'holds'],
        ['arc/candidates/scaling', 'fails'],
      ],
    );
  });
});
