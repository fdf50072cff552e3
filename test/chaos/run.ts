/**
 * `npm run chaos -- [--rounds N] [--seed S] [--steps local|batched|activity] [--json]`: chaos rounds against a stack of this run's own (see
 * test/chaos/round.ts for the workload, the faults and the checks). Prints a table row per round; exits 1 when a
 * round broke a promise or a process outlived the run. A failing round replays with `--rounds 1 --seed <its seed>`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { STEP_MODES, type StepMode } from '../../common/agent-definition';
import { resolveTemporal } from '../../stack/temporal-cli';
import { formatRow, runChaos, TABLE_HEADER } from './rounds';

const MAX_ROUNDS = 200;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      seed: { type: 'string' },
      json: { type: 'boolean', default: false },
      steps: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      'usage: npm run chaos -- [--rounds N (1-200, default 3)] [--seed S] [--steps local|batched|activity] [--json]\n',
    );
    return 0;
  }
  const rounds = Number(values.rounds);
  if (!/^\d+$/.test(values.rounds) || rounds < 1 || rounds > MAX_ROUNDS) {
    throw new Error(`--rounds must be a whole number from 1 to ${MAX_ROUNDS}, got '${values.rounds}'`);
  }
  if (values.seed !== undefined && !/^\d{1,9}$/.test(values.seed)) {
    throw new Error(`--seed must be a whole number (up to 9 digits), got '${values.seed}'`);
  }
  const steps = values.steps;
  if (steps !== undefined && !(STEP_MODES as readonly string[]).includes(steps)) {
    throw new Error(`--steps takes ${STEP_MODES.join(', ')}, got '${steps}'`);
  }
  const seed = values.seed === undefined ? Math.floor(Math.random() * 1_000_000) : Number(values.seed);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-chaos-'));
  // Ctrl-C or a SIGTERM stops the rounds with the stack (servers and workers) torn down, not left running.
  const interrupted = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`chaos: ${signal}: finishing the round under way, then tearing the stack down (again: quit at once)`);
      interrupted.abort();
    });
  }
  log(`chaos: ${rounds} round(s) from seed ${seed}; state in ${dir}`);
  try {
    const temporal = await resolveTemporal({ env: process.env, progress: process.stderr });
    const result = await runChaos({
      rounds,
      seed,
      dir,
      temporal,
      log,
      signal: interrupted.signal,
      ...(steps === undefined ? {} : { steps: steps as StepMode }),
    });
    const failed = result.reports.filter((report) => !report.ok);
    if (values.json) {
      process.stdout.write(
        `${JSON.stringify({ seed, rounds: result.reports, leftovers: result.leftovers }, null, 2)}\n`,
      );
    } else {
      process.stdout.write(`${TABLE_HEADER}\n${result.reports.map(formatRow).join('\n')}\n`);
      process.stdout.write(
        `${result.reports.length - failed.length} of ${result.reports.length} rounds passed; ` +
          `${result.leftovers.length} processes left behind${result.leftovers.length ? `: ${result.leftovers.join(', ')}` : ''}\n`,
      );
      for (const report of failed) {
        process.stdout.write(`round ${report.round} (replay: npm run chaos -- --rounds 1 --seed ${report.seed}):\n`);
        for (const violation of report.violations) process.stdout.write(`  ${violation}\n`);
      }
    }
    return failed.length === 0 && result.leftovers.length === 0 ? 0 : 1;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`chaos: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
