/**
 * Runs chaos rounds on one chaos stack and prints a table row per round: what `npm run chaos` and the fast variant
 * inside `npm test` (test/chaos/chaos-rounds.test.ts) share.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { StepMode } from '../../common/agent-definition';
import { createPool } from '../../db/pool';
import type { TemporalResolution } from '../../stack/temporal-cli';
import { startChaosStack } from './chaos-stack';
import { stdioServerEntry, writeMcpConfig } from '../../testing/mcp-reference-servers';
import {
  AGENT_FILES,
  describe,
  markedProcesses,
  MCP_SERVER_NAME,
  LAGGARD,
  ROUND_MODEL_LIMITS,
  runRound,
  SCRIPT,
  type RoundReport,
} from './round';

export interface ChaosRunOptions {
  readonly rounds: number;
  /** Round i (from 0) runs with seed `seed + i`; `--rounds 1 --seed <a round's seed>` replays that round. */
  readonly seed: number;
  readonly dir: string;
  readonly temporal: TemporalResolution;
  /** Progress lines (fault by fault) and the table rows. */
  readonly log: (line: string) => void;
  /** Aborted: no further round starts; the stack is torn down after the round under way (or its start). */
  readonly signal?: AbortSignal;
  /** Where the rounds' agents run their steps (each round's world sets it); unset: the workers' default. */
  readonly steps?: StepMode;
  /** How long a round may take before it fails. @default ROUND_TIMEOUT_MS */
  readonly roundTimeoutMs?: number;
  /** A workflow bundle of these sources for the workers (see `ChaosStackOptions.workflowBundle`). */
  readonly workflowBundle?: string;
}

export interface ChaosRunResult {
  reports: RoundReport[];
  /** Worker processes or shell-tool processes still alive after the stack stopped. */
  leftovers: string[];
}

export const TABLE_HEADER =
  'round  seed        ok    secs  faults            roots  401  kills  crashes  5xx/429  drops  at-once  waits  cas    conflicts  answers  approved  mcp  merged  given-up  shell  wakes  hostile  steps local/batched/act';

export function formatRow(report: RoundReport): string {
  const cells = [
    String(report.round).padEnd(5),
    String(report.seed).padEnd(10),
    (report.ok ? 'PASS' : 'FAIL').padEnd(4),
    String(report.seconds).padStart(4),
    report.faults.padEnd(16),
    `${report.rootsCompleted}`.padStart(5),
    (report.moleRefused ? 'yes' : 'NO').padStart(3),
    String(report.workerKills).padStart(5),
    String(report.workerCrashes).padStart(7),
    String(report.modelFaults).padStart(7),
    String(report.modelDrops).padStart(5),
    String(report.modelMostAtOnce).padStart(7),
    String(report.modelWaits).padStart(5),
    String(report.casIncrements).padStart(4),
    String(report.casConflicts).padStart(9),
    String(report.questionsAnswered).padStart(7),
    String(report.approvalsGiven).padStart(8),
    String(report.mcpResults).padStart(3),
    String(report.forkTasksMerged).padStart(6),
    String(report.forkTasksGivenUp).padStart(8),
    String(report.shellRuns).padStart(5),
    String(report.watchWakeups).padStart(5),
    (report.hostileProbed ? 'probed' : 'no run').padStart(7),
    `${report.localSteps}/${report.batchedSteps}/${report.activitySteps}`.padStart(23),
  ];
  return cells.join('  ');
}

export async function runChaos(options: ChaosRunOptions): Promise<ChaosRunResult> {
  const agentsDir = path.join(options.dir, 'agents');
  fs.mkdirSync(agentsDir, { recursive: true });
  for (const [file, text] of Object.entries(AGENT_FILES)) fs.writeFileSync(path.join(agentsDir, file), text);
  // Every worker starts the MCP server the chief calls, over stdio, as its child.
  const mcpConfig = writeMcpConfig(path.join(options.dir, 'mcp.json'), {
    [MCP_SERVER_NAME]: stdioServerEntry('everything'),
  });
  const stack = await startChaosStack({
    dir: path.join(options.dir, 'stack'),
    temporal: options.temporal,
    script: SCRIPT,
    agentsDir,
    // A limit on the model every worker keeps through Postgres, across their kills and the servers' restarts. The
    // laggards' calls, held by the model past the fork's deadline, go to another model name, outside it.
    workerEnv: { BATON_MCP_CONFIG: mcpConfig, BATON_MODEL_LIMITS: JSON.stringify(ROUND_MODEL_LIMITS) },
    modelUncountedAgents: [LAGGARD],
    ...(options.workflowBundle === undefined ? {} : { workflowBundle: options.workflowBundle }),
    log: options.log,
  });
  const reports: RoundReport[] = [];
  const pool = createPool({ connectionString: stack.databaseUrl, applicationName: 'baton-chaos', max: 20 });
  // Postgres restarts under this pool on purpose: idle clients it loses are replaced, not reported.
  pool.removeAllListeners('error');
  pool.on('error', () => undefined);
  let workerPids: number[] = [];
  try {
    await stack.workersReady(120_000);
    options.log(`stack ready: Temporal ${stack.temporalAddress}, 2 workers on task queue '${stack.taskQueue}'`);
    for (let index = 0; index < options.rounds && !options.signal?.aborted; index += 1) {
      const seed = options.seed + index;
      options.log(`round ${index + 1} of ${options.rounds} (seed ${seed})`);
      let report: RoundReport;
      try {
        report = await runRound({
          stack,
          pool,
          round: index + 1,
          seed,
          dir: path.join(options.dir, `round-${index + 1}`),
          log: options.log,
          ...(options.steps === undefined ? {} : { steps: options.steps }),
          ...(options.roundTimeoutMs === undefined ? {} : { timeoutMs: options.roundTimeoutMs }),
        });
      } catch (error) {
        report = failedRound(index + 1, seed, `the round could not run: ${describe(error)}`);
      }
      if (!report.ok) report.violations.push(`worker output:\n${stack.workerOutput()}`);
      reports.push(report);
      options.log(TABLE_HEADER);
      options.log(formatRow(report));
      for (const violation of report.violations) options.log(`  ! ${violation}`);
      // The next round starts with both workers polling, whatever this one left.
      if (index + 1 < options.rounds && !options.signal?.aborted) await stack.workersReady(120_000);
    }
  } finally {
    workerPids = stack.workerPids();
    await pool.end().catch(() => undefined);
    await stack.stop();
  }
  const leftovers = [
    ...workerPids.filter(isAlive).map((pid) => `worker ${pid}`),
    ...(await markedProcesses(workerPids)),
  ];
  return { reports, leftovers };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function failedRound(round: number, seed: number, violation: string): RoundReport {
  return {
    round,
    seed,
    ok: false,
    seconds: 0,
    faults: '',
    rootsCompleted: 0,
    moleRefused: false,
    workerKills: 0,
    workerCrashes: 0,
    modelFaults: 0,
    modelDrops: 0,
    modelMostAtOnce: 0,
    modelWaits: 0,
    modelUnauthorized: 0,
    casIncrements: 0,
    casConflicts: 0,
    questionsAnswered: 0,
    approvalsGiven: 0,
    mcpResults: 0,
    forkTasksMerged: 0,
    forkTasksGivenUp: 0,
    shellRuns: 0,
    watchWakeups: 0,
    hostileProbed: false,
    localSteps: 0,
    batchedSteps: 0,
    activitySteps: 0,
    violations: [violation],
  };
}
