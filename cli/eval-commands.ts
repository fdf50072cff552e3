/**
 * `baton eval`: run a dataset as an experiment, replay recorded runs against changed agents, compare experiments, and
 * gate a CI job on the score (docs/guides/evals.md).
 */
import path from 'node:path';
import { Option, type Command } from 'commander';
import type { BatonClient, ConnectOptions } from '../client';
import { findExperiment, listExperiments } from '../db/evals';
import { loadScorerModules, startEvalWorker } from '../dev/eval-worker';
import {
  compareExperiments,
  formatComparison,
  formatExperiment,
  newExperimentId,
  passesGate,
  readDataset,
  runExperiment,
  summarize,
  type Dataset,
  type ExperimentReport,
  type ReplayPolicy,
} from '../evals';
import type { OutputStream } from './live-view';

/** What the eval commands use of the program that holds them. */
export interface EvalCommandContext {
  /** The run's streams, environment and working directory (`CliIo`). */
  io: { stdout: OutputStream; stderr: OutputStream; env: NodeJS.ProcessEnv; cwd: string };
  exit: { code: number };
  connectOptions(needs: { database?: boolean }): ConnectOptions;
  withClient<T>(needs: { database?: boolean }, use: (client: BatonClient) => Promise<T>): Promise<T>;
  print(json: boolean, value: unknown, text: string): void;
  /** The state directory, resolved. */
  stateDirPath(): string;
  /** An error the CLI prints as one line. */
  fail(message: string): Error;
}

interface WorkerFlags {
  agents: string;
  modelScript?: string;
  model?: string;
  tools?: string[];
  mcp?: string;
  scorers?: string[];
  minScore?: string;
  json?: boolean;
}

const REPLAY_POLICIES: readonly ReplayPolicy[] = ['stop', 'live-read-only', 'fail'];

/** The flags `eval run` and `eval replay` share: the worker under test, scorers, the gate, the output. */
function withWorkerFlags(command: Command): Command {
  return command
    .requiredOption('--agents <dir>', 'the agents directory under test')
    .option('--model <name>', 'the default model of the agents under test (BATON_MODEL), with OPENAI_API_KEY set')
    .option(
      '--model-script <file>',
      'the scripted model script (default: <agents>/model-script.yaml without OPENAI_API_KEY)',
    )
    .option('--tools <file...>', 'modules of your tools (default: BATON_TOOLS)')
    .option('--mcp <file>', 'a JSON file of MCP servers (default: BATON_MCP_CONFIG)')
    .option('--scorers <file...>', "modules exporting scorers made with defineScorer, beside the dataset's")
    .option('--min-score <score>', "exit 1 when the experiment's score (0 to 1) is below this")
    .option('--json', 'print the report as JSON');
}

export function addEvalCommands(program: Command, context: EvalCommandContext): void {
  const { io } = context;
  const evalCommand = program
    .command('eval')
    .description('evaluate agents: run datasets as experiments, replay recorded runs, compare, gate on a score');

  /** Checks `--min-score` before anything runs. */
  function minScoreOf(flags: WorkerFlags): number | undefined {
    if (flags.minScore === undefined) return undefined;
    const value = Number(flags.minScore);
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw context.fail(`--min-score must be a number from 0 to 1, not '${flags.minScore}'`);
    }
    return value;
  }

  /** Runs `dataset` on a worker of the agents under test, prints the report, and applies the gate. */
  async function experiment(dataset: Dataset, flags: WorkerFlags, replay?: { policy: ReplayPolicy }): Promise<void> {
    const minScore = minScoreOf(flags);
    const scorers = await loadScorerModules((flags.scorers ?? []).map((file) => path.resolve(io.cwd, file)));
    const connection = context.connectOptions({ database: true });
    const databaseUrl = connection.databaseUrl;
    if (databaseUrl === undefined)
      throw context.fail('an evaluation stores its experiment in Postgres: set DATABASE_URL');
    const experimentId = newExperimentId();
    const log = (line: string) => void io.stderr.write(`${line}\n`);
    const worker = await startEvalWorker({
      connection: { ...connection, databaseUrl },
      experimentId,
      agentsDir: path.resolve(io.cwd, flags.agents),
      stateDir: context.stateDirPath(),
      env: flags.model === undefined ? io.env : { ...io.env, BATON_MODEL: flags.model },
      ...(flags.modelScript === undefined ? {} : { modelScript: path.resolve(io.cwd, flags.modelScript) }),
      ...(flags.tools === undefined ? {} : { toolModules: flags.tools.map((file) => path.resolve(io.cwd, file)) }),
      ...(flags.mcp === undefined ? {} : { mcpConfig: path.resolve(io.cwd, flags.mcp) }),
      replays: replay !== undefined,
      log: flags.json ? () => undefined : (line) => log(`eval worker: ${line}`),
    });
    let report: ExperimentReport;
    try {
      report = await runExperiment({
        client: worker.client,
        dataset,
        scorers,
        agents: worker.agents(),
        model: worker.model,
        experimentId,
        ...(replay === undefined ? {} : { replay }),
        progress: log,
      });
    } finally {
      await worker.close();
    }
    const gate = minScore === undefined ? undefined : { minScore, passed: passesGate(report, minScore) };
    context.print(
      Boolean(flags.json),
      { ...report, ...(gate === undefined ? {} : { gate }) },
      formatExperiment(report),
    );
    if (gate !== undefined && !gate.passed) {
      io.stderr.write(
        `baton: the score ${report.summary.score === undefined ? '(none: no scorer)' : report.summary.score.toFixed(2)} ` +
          `is below --min-score ${gate.minScore}\n`,
      );
      context.exit.code = 1;
    }
  }

  withWorkerFlags(
    evalCommand
      .command('run')
      .description('run each case of a dataset (JSON) as a root thread on the agents under test, score it and store it')
      .argument('<dataset>', 'the dataset file'),
  ).action(async (file: string, flags: WorkerFlags) => {
    await experiment(readDataset(path.resolve(io.cwd, file)), flags);
  });

  withWorkerFlags(
    evalCommand
      .command('replay')
      .description(
        'run recorded root threads again on the agents under test, their calls answered from the record until one differs',
      )
      .argument('<threads...>', 'recorded root thread ids')
      .addOption(
        new Option('--on-divergence <policy>', 'at the first call that does not match the record')
          .choices([...REPLAY_POLICIES])
          .default('stop'),
      ),
  ).action(async (threads: string[], flags: WorkerFlags & { onDivergence: ReplayPolicy }) => {
    const dataset: Dataset = {
      name: 'recorded-runs',
      scorers: ['recorded'],
      cases: threads.map((thread, index) => ({
        id: /^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$/.test(thread) ? thread : `case-${index + 1}`,
        thread,
      })),
    };
    await experiment(dataset, flags, { policy: flags.onDivergence });
  });

  evalCommand
    .command('compare')
    .description('two experiments side by side: each case and each scorer, with the change from A to B')
    .argument('<a>', 'an experiment id')
    .argument('<b>', 'another experiment id')
    .option('--json', 'print the comparison as JSON')
    .action(async (a: string, b: string, flags: { json?: boolean }) => {
      await context.withClient({ database: true }, async (client) => {
        const [first, second] = await Promise.all([
          findExperiment(client.database(), a),
          findExperiment(client.database(), b),
        ]);
        if (first === undefined) throw context.fail(`no experiment '${a}'`);
        if (second === undefined) throw context.fail(`no experiment '${b}'`);
        const comparison = compareExperiments(first, second);
        context.print(Boolean(flags.json), comparison, formatComparison(comparison));
      });
    });

  evalCommand
    .command('show')
    .description("an experiment's cases, scores and figures")
    .argument('<experiment>', 'an experiment id')
    .option('--json', 'print the report as JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      await context.withClient({ database: true }, async (client) => {
        const found = await findExperiment(client.database(), id);
        if (found === undefined) throw context.fail(`no experiment '${id}'`);
        // Figured again from the cases: an experiment stopped midway stored none.
        const report = { ...found.experiment, cases: found.cases, summary: summarize(found.cases) };
        context.print(Boolean(flags.json), report, formatExperiment(report));
      });
    });

  evalCommand
    .command('list')
    .description('the newest experiments')
    .option('--json', 'print them as JSON')
    .action(async (flags: { json?: boolean }) => {
      await context.withClient({ database: true }, async (client) => {
        const experiments = await listExperiments(client.database());
        const lines = experiments.map((e) => {
          const score = (e.summary as { score?: number } | null)?.score;
          return `${e.experimentId}  ${e.kind} of ${e.dataset}  ${e.startedAt.toISOString()}  ${
            e.finishedAt === null ? 'unfinished' : `score ${score === undefined ? '-' : score.toFixed(2)}`
          }`;
        });
        context.print(Boolean(flags.json), experiments, lines.join('\n') || 'No experiments yet.');
      });
    });
}
