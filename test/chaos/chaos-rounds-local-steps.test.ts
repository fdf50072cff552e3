/**
 * The fast variant of `npm run chaos -- --steps local`: the round of test/chaos/chaos-rounds.test.ts with every agent
 * running its steps as local activities inside its turn's workflow task (the round's world sets `BATON_STEPS`), so
 * the faults land between steps that no activity task separates: a SIGKILLed worker's open steps are run again by
 * the other worker from what is stored.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { resolveTemporal } from '../../stack/temporal-cli';
import { readTestEnv } from '../../testing/test-env';
import { formatRow, runChaos, TABLE_HEADER } from './rounds';

/** Fixed, so a failure here replays with `npm run chaos -- --rounds 1 --seed 20261124 --steps local`. */
const SEED = 20261124;

test(
  'chaos, local steps: one round of every fault loses nothing, does nothing twice and leaves nothing running',
  { timeout: 600_000 },
  async (t) => {
    const env = readTestEnv();
    const dir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-rounds-local-'));
    const temporal = env.temporalCli
      ? ({ kind: 'cli', path: env.temporalCli, source: 'TEMPORAL_CLI_PATH', attempts: [] } as const)
      : await resolveTemporal({ env: process.env });
    const result = await runChaos({
      rounds: 1,
      seed: SEED,
      dir,
      temporal,
      steps: 'local',
      log: (line) => t.diagnostic(line),
    });
    const [report] = result.reports;
    assert.ok(report, 'the round ran');
    t.diagnostic(TABLE_HEADER);
    t.diagnostic(formatRow(report));
    assert.deepEqual(
      report.violations,
      [],
      `round violations (replay: npm run chaos -- --rounds 1 --seed ${SEED} --steps local)`,
    );
    assert.equal(report.faults.split(' ').length, 7, 'every planned fault ran');
    assert.equal(report.rootsCompleted, 3);
    assert.ok(report.moleRefused, 'the 401 thread failed with Model.AuthFailed');
    assert.ok(report.modelUnauthorized > 0);
    assert.equal(report.workerKills, 2);
    assert.equal(report.mcpResults, 3, "each chief's MCP call stored the server's answer once");
    assert.ok(report.localSteps > 0 && report.activitySteps === 0, 'every model call ran as a local activity');
    assert.deepEqual(result.leftovers, [], 'no worker or shell process outlived the stack');
    fs.rmSync(dir, { recursive: true, force: true });
  },
);
