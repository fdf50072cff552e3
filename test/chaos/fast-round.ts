/**
 * The campaign variant of `npm run chaos` that `npm run test:campaign` runs: {@link ROUNDS} seeded rounds on a stack of
 * their own, with every check of a round, in one step mode (test/chaos/chaos-rounds.test.ts,
 * chaos-rounds-local-steps.test.ts and chaos-rounds-batched-steps.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { STEP_MODES, type StepMode } from '../../common/agent-definition';
import { resolveTemporal } from '../../stack/temporal-cli';
import { readTestEnv } from '../../testing/test-env';
import { formatRow, runChaos, TABLE_HEADER } from './rounds';

/**
 * How long the round may take: a passing one takes 60 to 100 s here. Below the test runner's 300 s per file, less the
 * stack's start and stop, so a round that cannot finish fails with its violations and tears its stack down, rather
 * than being cancelled with its servers and workers still running.
 */
const ROUND_TIMEOUT_MS = 200_000;

/** Rounds per step mode, from the file's seed on (seeds `seed`, `seed + 1`): several seeds, within the 600 s per test. */
const ROUNDS = 2;

/** Runs {@link ROUNDS} rounds from `seed` with every agent's steps in `steps`, and asserts that each kept every promise. */
export async function runFastRound(t: TestContext, seed: number, steps: StepMode): Promise<void> {
  const env = readTestEnv();
  const dir = fs.mkdtempSync(path.join(env.stateDir, `chaos-rounds-${steps}-`));
  const temporal = env.temporalCli
    ? ({ kind: 'cli', path: env.temporalCli, source: 'TEMPORAL_CLI_PATH', attempts: [] } as const)
    : await resolveTemporal({ env: process.env });
  const result = await runChaos({
    rounds: ROUNDS,
    seed,
    dir,
    temporal,
    steps,
    roundTimeoutMs: ROUND_TIMEOUT_MS,
    // The run's bundle: the round's workers then start without webpack, as the other tests' workers do.
    workflowBundle: env.workflowBundlePath,
    log: (line) => t.diagnostic(line),
  });
  assert.equal(result.reports.length, ROUNDS, 'every round ran');
  t.diagnostic(TABLE_HEADER);
  for (const report of result.reports) t.diagnostic(formatRow(report));
  for (const report of result.reports) {
    const replay = `npm run chaos -- --rounds 1 --seed ${report.seed} --steps ${steps}`;
    assert.deepEqual(report.violations, [], `round violations (replay: ${replay})`);
    assert.equal(report.faults.split(' ').length, 7, 'every planned fault ran');
    assert.equal(report.rootsCompleted, 3);
    assert.ok(report.moleRefused, 'the 401 thread failed with Model.AuthFailed');
    assert.ok(report.modelUnauthorized > 0);
    assert.equal(report.workerKills, 2);
    assert.equal(report.mcpResults, 3, "each chief's MCP call stored the server's answer once");
    const ran = { local: report.localSteps, batched: report.batchedSteps, activity: report.activitySteps };
    assert.ok(
      STEP_MODES.every((mode) => (mode === steps ? ran[mode] > 0 : ran[mode] === 0)),
      `every model call ran ${steps === 'local' ? 'as a local activity' : steps === 'batched' ? 'in a batch of steps' : 'as an activity'}: ${JSON.stringify(ran)}`,
    );
  }
  assert.deepEqual(result.leftovers, [], 'no worker or shell process outlived the stack');
  fs.rmSync(dir, { recursive: true, force: true });
}
