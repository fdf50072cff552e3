/**
 * Graceful shutdown of `baton worker` (issue 13): SIGTERM drains the worker within its grace period
 * (BATON_SHUTDOWN_GRACE_S) and the process exits 0, idle or with a model call in flight.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import { readModelLog } from '../../testing/harness';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startWorkerProcess, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'shutdown-'));
const agentsDir = path.join(workDir, 'agents');
const modelLog = path.join(workDir, 'model.jsonl');
/** Far longer than the grace period: a worker that waited for this call to end would not have shut down. */
const MODEL_DELAY_MS = 120_000;
const GRACE_S = 2;
let model: ScriptedModelServer;
const started: WorkerProcess[] = [];

before(async () => {
  fs.mkdirSync(agentsDir);
  fs.writeFileSync(
    path.join(agentsDir, 'sleeper.md'),
    '---\nname: sleeper\ndescription: Answers slowly.\n---\nSleep.\n',
  );
  model = await startScriptedModelServer({
    script: parseScript(`agents:\n  sleeper:\n    - { say: "late", delay_ms: ${MODEL_DELAY_MS} }\n`, 'shutdown'),
    logFile: modelLog,
  });
});

after(async () => {
  for (const worker of started) await worker.kill();
  await model?.close();
});

async function startWorker(taskQueue: string): Promise<WorkerProcess> {
  const worker = await startWorkerProcess({
    name: 'worker',
    readyTimeoutMs: 120_000,
    env: {
      TEMPORAL_ADDRESS: env.temporalAddress,
      DATABASE_URL: env.databaseUrl,
      BATON_TASK_QUEUE: taskQueue,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: 'scripted',
      BATON_MODEL: 'baton-scripted',
      BATON_AGENTS_DIR: agentsDir,
      BATON_SHUTDOWN_GRACE_S: String(GRACE_S),
      BATON_LOG_LEVEL: 'WARN',
    },
  });
  started.push(worker);
  return worker;
}

test('graceful shutdown: an idle worker exits 0 on SIGTERM', { timeout: 180_000 }, async () => {
  const worker = await startWorker(uniqueTaskQueue('shutdown-idle'));
  worker.child.kill('SIGTERM');
  const exit = await worker.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, worker.output());
});

test(
  'graceful shutdown: a worker with a model call in flight drains within its grace period and exits 0',
  { timeout: 240_000 },
  async () => {
    const taskQueue = uniqueTaskQueue('shutdown-busy');
    const worker = await startWorker(taskQueue);
    let client: BatonClient | undefined;
    try {
      client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
      const threadId = uniqueThreadId('shutdown');
      const thread = await client.startThread({ agent: 'sleeper', threadId });
      void thread.send('Take your time.').catch(() => undefined);
      // The event that matters, not a sleep: the model has received the call the worker is now waiting on.
      for (const deadline = Date.now() + 90_000; ; await new Promise((resolve) => setTimeout(resolve, 100))) {
        if (readModelLog(modelLog).some((entry) => entry.thread === threadId)) break;
        assert.ok(Date.now() < deadline, `the model call never arrived:\n${worker.output()}`);
      }
      const signalled = Date.now();
      worker.child.kill('SIGTERM');
      const exit = await worker.exited;
      const took = Date.now() - signalled;
      assert.deepEqual(exit, { code: 0, signal: null }, worker.output());
      // Drained by cancelling the call after the grace period, not by waiting out its two minutes.
      assert.ok(took < MODEL_DELAY_MS / 2, `exited ${took} ms after SIGTERM`);
      assert.ok(took >= GRACE_S * 1000 - 500, `the call got its grace period (exited after ${took} ms)`);
      await client.temporal.workflow
        .getHandle(`baton/${threadId}`)
        .terminate('test over')
        .catch(() => undefined);
    } finally {
      await client?.close();
    }
  },
);
