/**
 * The fast variant of `npm run chaos`: one seeded round (workers SIGKILLed, Temporal and Postgres restarted, model
 * 5xx/429 bursts, replies cut halfway, a thread refused with 401) on a stack of its own, with every check of a round
 * (an MCP tool's call among them).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { resolveTemporal } from '../../stack/temporal-cli';
import { readTestEnv } from '../../testing/test-env';
import { formatRow, runChaos, TABLE_HEADER } from './rounds';

/** Fixed, so a failure here replays with `npm run chaos -- --rounds 1 --seed 20261123`. */
const SEED = 20261123;

test(
  'chaos: one round of every fault loses nothing, does nothing twice and leaves nothing running',
  { timeout: 600_000 },
  async (t) => {
    const env = readTestEnv();
    const dir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-rounds-'));
    const temporal = env.temporalCli
      ? ({ kind: 'cli', path: env.temporalCli, source: 'TEMPORAL_CLI_PATH', attempts: [] } as const)
      : await resolveTemporal({ env: process.env });
    const result = await runChaos({ rounds: 1, seed: SEED, dir, temporal, log: (line) => t.diagnostic(line) });
    const [report] = result.reports;
    assert.ok(report, 'the round ran');
    t.diagnostic(TABLE_HEADER);
    t.diagnostic(formatRow(report));
    assert.deepEqual(report.violations, [], `round violations (replay: npm run chaos -- --rounds 1 --seed ${SEED})`);
    assert.equal(report.faults.split(' ').length, 7, 'every planned fault ran');
    assert.equal(report.rootsCompleted, 3);
    assert.ok(report.moleRefused, 'the 401 thread failed with Model.AuthFailed');
    assert.ok(report.modelUnauthorized > 0);
    assert.equal(report.workerKills, 2);
    assert.equal(report.mcpResults, 3, "each chief's MCP call stored the server's answer once");
    assert.ok(report.activitySteps > 0 && report.localSteps === 0, 'every model call ran as an activity (the default)');
    assert.deepEqual(result.leftovers, [], 'no worker or shell process outlived the stack');
    fs.rmSync(dir, { recursive: true, force: true });
  },
);
