/**
 * The stack a chaos run breaks: its own Postgres and Temporal server (state on disk, fixed ports, so both can be
 * stopped and started again under the workers' feet), the scripted model behind a fault proxy, and worker processes
 * sharing one task queue, each restarted by a supervisor whenever it dies, as an orchestrator would.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { migrate } from '../../db/migrate';
import {
  createDatabase,
  removeLocalPostgresData,
  startLocalPostgres,
  type LocalPostgres,
} from '../../stack/local-postgres';
import type { TemporalResolution } from '../../stack/temporal-cli';
import { startTemporal, type TemporalServerHandle } from '../../stack/temporal-server';
import { startScriptedModelServer, type Script, type ScriptedModelServer } from '../../scripted-model';
import { bundleBatonWorkflows } from '../../worker/create-worker';
import { startModelFaultProxy, type ModelFaultProxy } from './model-faults';
import { startWorkerProcess, type WorkerProcess } from '../../testing/worker-process';
import { generateAccessToken } from '../../stack/access-token';

export interface ChaosStackOptions {
  /** Scratch directory; the stack keeps its state under it. */
  readonly dir: string;
  readonly temporal: TemporalResolution;
  readonly script: Script;
  readonly agentsDir: string;
  /** More of every worker's configuration, e.g. `BATON_MCP_CONFIG`. */
  readonly workerEnv?: Readonly<Record<string, string>>;
  /** Agents whose model requests the proxy's `mostAtOnce` leaves out (those outside a limit it checks). */
  readonly modelUncountedAgents?: readonly string[];
  /**
   * A workflow bundle of these sources (`npm test` builds one per run) for every worker to start from; bundled here
   * once when omitted (`npm run chaos`).
   */
  readonly workflowBundle?: string;
  /** Worker processes sharing the task queue. @default 2 */
  readonly workers?: number;
  readonly log: (line: string) => void;
}

/** What happened to the workers, for the round table. */
export interface WorkerCounts {
  /** Processes started (the first ones included). */
  starts: number;
  /** SIGKILLs the chaos sent. */
  kills: number;
  /** Exits nobody asked for (a worker that gave up while a server was down), each followed by a restart. */
  crashes: number;
}

export interface ChaosStack {
  readonly databaseUrl: string;
  readonly temporalAddress: string;
  readonly taskQueue: string;
  /** The workers' decision key (`BATON_DECISION_KEY`): a client deciding approvals connects with it. */
  readonly decisionKey: string;
  readonly model: ModelFaultProxy;
  /** SIGKILLs one running worker (the supervisor starts a new one). @returns its name, or undefined if none ran */
  killWorker(pick: (count: number) => number): Promise<string | undefined>;
  /** Stops the Temporal server, keeps it down for `downMs`, starts it again on the same port and state. */
  restartTemporal(downMs: number): Promise<void>;
  /** Stops Postgres (open sessions are cut), keeps it down for `downMs`, starts it again on the same port. */
  restartPostgres(downMs: number): Promise<void>;
  /** Resolves once every worker slot has a polling process. */
  workersReady(timeoutMs: number): Promise<void>;
  workerCounts(): WorkerCounts;
  /** Workers' recent output, for failure reports. */
  workerOutput(): string;
  /** Every worker process started so far, alive or not (to check none outlives the stack). */
  workerPids(): number[];
  stop(): Promise<void>;
}

const DATABASE = 'baton_chaos';
/** A worker that exits on its own is started again after this pause (longer while it keeps failing). */
const RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 5_000;

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((error: unknown) => options.log(`cleanup failed: ${String(error)}`));
    }
  };
  try {
    fs.mkdirSync(options.dir, { recursive: true });
    const pgDir = path.join(options.dir, 'pg');
    let postgres: LocalPostgres = await startLocalPostgres({ dataDir: pgDir });
    cleanups.push(() => removeLocalPostgresData(pgDir));
    cleanups.push(() => postgres.stop());
    const databaseUrl = await createDatabase(postgres.databaseUrl, DATABASE);
    await migrate(databaseUrl);

    const dbFilename = path.join(options.dir, 'temporal', 'temporal.db');
    let temporal: TemporalServerHandle = await startTemporal({
      resolution: options.temporal,
      dbFilename,
      port: 0,
      ui: false,
    });
    cleanups.push(() => temporal.stop());
    const temporalAddress = temporal.address;
    const temporalPort = Number(temporalAddress.slice(temporalAddress.lastIndexOf(':') + 1));

    const scripted: ScriptedModelServer = await startScriptedModelServer({
      script: options.script,
      logFile: path.join(options.dir, 'model.jsonl'),
    });
    cleanups.push(() => scripted.close());
    const model = await startModelFaultProxy(
      scripted.url,
      options.modelUncountedAgents === undefined ? {} : { uncountedAgents: options.modelUncountedAgents },
    );
    cleanups.push(() => model.close());

    // Bundled once, or given: every worker restart would otherwise spend seconds of CPU in webpack.
    let bundlePath = options.workflowBundle;
    if (bundlePath === undefined) {
      bundlePath = path.join(options.dir, 'workflow-bundle.js');
      fs.writeFileSync(bundlePath, (await bundleBatonWorkflows()).code);
    }

    const taskQueue = 'chaos';
    // The workers write no decision without a proof made with it, as in production.
    const decisionKey = generateAccessToken();
    const workerEnv: Record<string, string> = {
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      BATON_TASK_QUEUE: taskQueue,
      DATABASE_URL: databaseUrl,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: 'chaos',
      BATON_MODEL: 'baton-scripted',
      BATON_AGENTS_DIR: options.agentsDir,
      BATON_WORKFLOW_BUNDLE: bundlePath,
      BATON_LOG_LEVEL: 'WARN',
      BATON_DECISION_KEY: decisionKey,
      ...options.workerEnv,
    };
    const supervisor = new WorkerSupervisor(options.workers ?? 2, workerEnv, options.log);
    cleanups.push(() => supervisor.stop());
    supervisor.start();

    return {
      databaseUrl,
      temporalAddress,
      taskQueue,
      decisionKey,
      model,
      killWorker: (pick) => supervisor.kill(pick),
      restartTemporal: async (downMs) => {
        await temporal.stop();
        await sleep(downMs);
        temporal = await startTemporal({ resolution: options.temporal, dbFilename, port: temporalPort, ui: false });
        if (temporal.address !== temporalAddress) {
          throw new Error(`the Temporal server came back on ${temporal.address}, not ${temporalAddress}`);
        }
      },
      restartPostgres: async (downMs) => {
        await postgres.stop();
        await sleep(downMs);
        postgres = await startLocalPostgres({ dataDir: pgDir, port: postgres.port });
      },
      workersReady: (timeoutMs) => supervisor.ready(timeoutMs),
      workerCounts: () => supervisor.counts(),
      workerOutput: () => supervisor.output(),
      workerPids: () => supervisor.pids(),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** Keeps `slots` worker processes running: whatever ends one (a kill, a crash), a new one takes its place. */
class WorkerSupervisor {
  private readonly running: (WorkerProcess | undefined)[];
  private readonly loops: Promise<void>[] = [];
  private readonly killed = new Set<WorkerProcess>();
  private readonly tally: WorkerCounts = { starts: 0, kills: 0, crashes: 0 };
  private readonly outputs: string[] = [];
  private readonly started: number[] = [];
  private stopping = false;

  constructor(
    slots: number,
    private readonly env: Record<string, string>,
    private readonly log: (line: string) => void,
  ) {
    this.running = Array.from({ length: slots }, () => undefined);
  }

  start(): void {
    // A run that dies (an uncaught error) must not leave its workers polling: 'exit' handlers run synchronously.
    process.once('exit', this.killAllNow);
    for (let slot = 0; slot < this.running.length; slot += 1) this.loops.push(this.keepRunning(slot));
  }

  private readonly killAllNow = (): void => {
    for (const worker of this.running) {
      if (worker && worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
    }
  };

  private async keepRunning(slot: number): Promise<void> {
    let generation = 0;
    let delay = RESTART_DELAY_MS;
    while (!this.stopping) {
      generation += 1;
      const name = `worker ${String.fromCharCode(65 + slot)}${generation}`;
      let worker: WorkerProcess;
      try {
        this.tally.starts += 1;
        worker = await startWorkerProcess({ name, env: { ...this.env, BATON_WORKER_IDENTITY: name } });
      } catch (error) {
        // A server that is down makes start-up fail (migrations, search attributes): try again shortly.
        this.tally.crashes += 1;
        const reason = error instanceof Error ? error.message : String(error);
        this.remember(name, reason);
        // The worker's own last words say why (a server down, a stale workflow bundle): one line of them.
        const [first, ...output] = reason.split('\n').filter((line) => line.trim() !== '');
        const said = output.at(-1)?.trim();
        this.log(`${name} failed to start (${first}${said ? ` … ${said}` : ''}); trying again in ${delay} ms`);
        await sleep(delay);
        delay = Math.min(delay * 2, MAX_RESTART_DELAY_MS);
        continue;
      }
      if (worker.child.pid !== undefined) this.started.push(worker.child.pid);
      if (this.stopping) {
        await worker.kill();
        return;
      }
      delay = RESTART_DELAY_MS;
      this.running[slot] = worker;
      const exit = await worker.exited;
      this.running[slot] = undefined;
      if (this.stopping) return;
      if (!this.killed.has(worker)) {
        this.tally.crashes += 1;
        this.remember(name, `exited on its own (code ${exit.code}, signal ${exit.signal}):\n${worker.output()}`);
        this.log(`${name} exited on its own (code ${exit.code}, signal ${exit.signal}); restarting`);
      }
      await sleep(RESTART_DELAY_MS);
    }
  }

  private remember(name: string, text: string): void {
    this.outputs.push(`--- ${name}\n${text.slice(-4_000)}`);
    if (this.outputs.length > 10) this.outputs.shift();
  }

  async kill(pick: (count: number) => number): Promise<string | undefined> {
    const alive = this.running.filter((worker): worker is WorkerProcess => worker !== undefined);
    const victim = alive[pick(alive.length)];
    if (!victim) return undefined;
    this.killed.add(victim);
    this.tally.kills += 1;
    await victim.kill();
    return victim.name;
  }

  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.running.some((worker) => worker === undefined)) {
      if (Date.now() > deadline) throw new Error(`workers not polling after ${timeoutMs} ms:\n${this.output()}`);
      await sleep(100);
    }
  }

  counts(): WorkerCounts {
    return { ...this.tally };
  }

  pids(): number[] {
    return [...this.started];
  }

  output(): string {
    return this.outputs.join('\n');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    process.off('exit', this.killAllNow);
    await Promise.all(this.running.map((worker) => worker?.kill() ?? Promise.resolve(undefined)));
    await Promise.all(this.loops);
  }
}
