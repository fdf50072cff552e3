/**
 * A production worker (`baton worker`) as a real OS process, so chaos tests can SIGKILL it: an in-process worker
 * cannot die without taking the test with it, and only a killed process drops its sockets the way a crash does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import type { Pool } from 'pg';
import { connect, type BatonClient } from '../client';
import { createPool } from '../db/pool';
import { startScriptedModelServer, type Script, type ScriptedModelServer } from '../scripted-model';
import { readTestEnv, uniqueTaskQueue } from './test-env';
import { generateAccessToken } from '../stack/access-token';

const ROOT = path.resolve(__dirname, '..');
const BATON_BIN = path.join(ROOT, 'bin', 'baton.js');
const READY_PREFIX = 'baton worker: polling';
/**
 * Bundling the workflows with webpack dominates start-up when no bundle is given; a cold machine can take a while, and
 * so can a worker started while the chaos files run side by side (each with its MCP servers and sandboxes): CI saw one
 * take over a minute there. A bound on a hang, not a speed.
 */
const DEFAULT_READY_TIMEOUT_MS = 120_000;
/** Kept for failure messages; a worker's stderr is short unless something is wrong. */
const MAX_OUTPUT_CHARS = 20_000;

export interface WorkerProcessOptions {
  /** A name for failure messages, e.g. 'worker A'. */
  name: string;
  /** The worker's configuration (TEMPORAL_ADDRESS, DATABASE_URL, …); merged over this process's environment. */
  env: Record<string, string>;
  /** @default 60_000 */
  readyTimeoutMs?: number;
}

/** How a worker process ended. */
export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves once the process has exited, however it ended. */
  readonly exited: Promise<WorkerExit>;
  /** Everything the process wrote to stdout and stderr so far (the tail, when long). */
  output(): string;
  /** SIGKILLs the process if it is still running and waits for it to exit. */
  kill(): Promise<WorkerExit>;
}

/**
 * Spawns `node bin/baton.js worker` and resolves once it prints that it is polling.
 * @throws Error (with the worker's output) when it exits or stays silent past `readyTimeoutMs`; the process is
 *   killed first.
 */
export async function startWorkerProcess(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const env: Record<string, string | undefined> = { ...process.env, ...options.env };
  // The test runner marks its children through this variable; the worker is not a test file.
  delete env.NODE_TEST_CONTEXT;
  // Run from the repository, whose `.baton/` holds the test stack and the tests' worlds, which no tool of a worker
  // whose state directory it were could reach: the worker is given one elsewhere (it writes nothing there).
  const stateDir = path.join(os.tmpdir(), 'baton-worker-process-state');
  const child = spawn(process.execPath, [BATON_BIN, '--state-dir', stateDir, 'worker'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-MAX_OUTPUT_CHARS);
  };
  child.stdout.on('data', append);
  child.stderr.on('data', append);
  const exited = new Promise<WorkerExit>((resolve) => {
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal }));
  });
  const worker: WorkerProcess = {
    name: options.name,
    child,
    exited,
    output: () => output,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
  };

  const readyTimeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  let stderr = '';
  let onData: ((chunk: Buffer) => void) | undefined;
  let onExit: ((code: number | null, signal: NodeJS.Signals | null) => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onData = (chunk) => {
        stderr += chunk.toString('utf8');
        if (stderr.split('\n').some((line) => line.startsWith(READY_PREFIX))) resolve();
      };
      onExit = (code, signal) =>
        reject(new Error(`${options.name} exited before polling (code ${code}, signal ${signal}):\n${output}`));
      timer = setTimeout(
        () => reject(new Error(`${options.name} was not polling after ${readyTimeoutMs} ms:\n${output}`)),
        readyTimeoutMs,
      );
      child.stderr.on('data', onData);
      child.once('close', onExit);
    });
  } catch (error) {
    await worker.kill();
    throw error;
  } finally {
    clearTimeout(timer);
    if (onData) child.stderr.off('data', onData);
    if (onExit) child.off('close', onExit);
  }
  return worker;
}

/**
 * A worker process on the stack `npm test` booted, answering from a scripted model and running the agents in a
 * folder, on the given task queue.
 */
export function startScriptedWorker(
  name: string,
  options: {
    taskQueue: string;
    modelBaseUrl: string;
    agentsDir: string;
    /** More of the worker's configuration, e.g. `BATON_TOOLS`. */
    env?: Record<string, string>;
  },
): Promise<WorkerProcess> {
  const stack = readTestEnv();
  return startWorkerProcess({
    name,
    env: {
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      BATON_TASK_QUEUE: options.taskQueue,
      DATABASE_URL: stack.databaseUrl,
      OPENAI_BASE_URL: options.modelBaseUrl,
      OPENAI_API_KEY: 'scripted',
      BATON_MODEL: 'baton-scripted',
      BATON_AGENTS_DIR: options.agentsDir,
      BATON_LOG_LEVEL: 'WARN',
      // The bundle the stack built at its start: bundling again in every worker process takes most of a minute on
      // a busy machine, longer than a test should wait for a replacement worker.
      ...(stack.workflowBundlePath === '' ? {} : { BATON_WORKFLOW_BUNDLE: stack.workflowBundlePath }),
      ...options.env,
    },
  });
}

/**
 * What a test that kills `baton worker` processes sets up: its agents in a folder, a scripted model, a pool and a
 * client on the test stack, and worker processes on one task queue, started as the test needs them.
 */
export interface KillableWorkers {
  readonly model: ScriptedModelServer;
  readonly pool: Pool;
  /** Connected with the workers' decision key, so its decisions are signed. */
  readonly client: BatonClient;
  readonly taskQueue: string;
  /** The workers' `BATON_DECISION_KEY`, generated for them: what a CLI deciding their approvals is given. */
  readonly decisionKey: string;
  /** Starts one more worker process on the task queue (`worker A`, `worker B`, …). */
  start(name: string): Promise<WorkerProcess>;
  /** The workers it started that have not exited. */
  alive(): WorkerProcess[];
  /** Kills every worker it started, then closes the client, the pool and the model. */
  close(): Promise<void>;
}

export async function startKillableWorkers(options: {
  /** Names the task queue and the connections. */
  name: string;
  /** Where the agents folder is written. */
  dir: string;
  /** Agent files by file name. */
  agents: Readonly<Record<string, string>>;
  script: Script;
  /** Where the scripted model appends its requests. */
  modelLog?: string;
  /** More of every worker's configuration, e.g. `BATON_TOOLS`. */
  workerEnv?: Record<string, string>;
}): Promise<KillableWorkers> {
  const stack = readTestEnv();
  const agentsDir = path.join(options.dir, 'agents');
  fs.mkdirSync(agentsDir, { recursive: true });
  for (const [file, text] of Object.entries(options.agents)) fs.writeFileSync(path.join(agentsDir, file), text);
  const taskQueue = uniqueTaskQueue(options.name);
  const model = await startScriptedModelServer({
    script: options.script,
    ...(options.modelLog === undefined ? {} : { logFile: options.modelLog }),
  });
  const pool = createPool({ connectionString: stack.databaseUrl, applicationName: `baton-${options.name}` });
  const decisionKey = generateAccessToken();
  const client = await connect({
    address: stack.temporalAddress,
    taskQueue,
    databaseUrl: stack.databaseUrl,
    decisionKey,
  });
  const workers: WorkerProcess[] = [];
  return {
    model,
    pool,
    client,
    taskQueue,
    decisionKey,
    async start(name) {
      const worker = await startScriptedWorker(name, {
        taskQueue,
        modelBaseUrl: model.baseURL,
        agentsDir,
        env: { BATON_DECISION_KEY: decisionKey, ...options.workerEnv },
      });
      workers.push(worker);
      return worker;
    },
    alive: () => workers.filter((worker) => worker.child.exitCode === null && worker.child.signalCode === null),
    async close() {
      await Promise.all(workers.map((worker) => worker.kill()));
      await client.close();
      await pool.end();
      await model.close();
    },
  };
}

/**
 * `startKillableWorkers` for one test file: set up in its `before` hook, closed in its `after` hook. Returns the
 * fixture's accessor, for the tests (and `before` hooks registered after this call) to use.
 */
export function useKillableWorkers(options: Parameters<typeof startKillableWorkers>[0]): () => KillableWorkers {
  let fixture: KillableWorkers | undefined;
  before(async () => {
    fixture = await startKillableWorkers(options);
  });
  after(async () => {
    await fixture?.close();
  });
  return () => {
    if (fixture === undefined) throw new Error(`the workers of ${options.name} were not set up`);
    return fixture;
  };
}
