/**
 * The production topology, natively (no Docker engine here): Temporal's schemas created in fresh Postgres databases
 * by temporal-sql-tool through deploy/temporal/create-schemas.sh, temporal-server on Postgres persistence and
 * visibility from deploy/temporal/production.yaml (the files docker-compose.yml mounts), `baton setup`, and two
 * `baton worker` processes on one task queue. A conversation with a delegation and a fork/join runs while one worker
 * is SIGKILLed mid-call; it completes, every env write is present once, and the workflows are found by Baton's search
 * attributes through the server's Postgres visibility store.
 *
 * The first run builds temporal-server and temporal-sql-tool from Go (minutes, with progress); later runs reuse
 * the cache. Without Go and without a cached build the test is skipped, except under CI=true, where it fails.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { connect, type BatonClient, type ThreadHandle } from '../../client';
import type { ProductionTopology } from '../../stack/production';
import { skipUnlessCi } from '../../testing/ci';
import { readModelLog } from '../../testing/harness';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startTestTopology, TOPOLOGY_SETUP_TIMEOUT_MS, type TestTopology } from '../../testing/test-topology';
import { settle, waitFor } from '../chaos/waiting';
import { startWorkerProcess, type WorkerProcess } from '../../testing/worker-process';

const env = readTestEnv();
const ROOT = path.resolve(__dirname, '..', '..');
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'production-topology-'));
const agentsDir = path.join(workDir, 'agents');
const taskQueue = uniqueTaskQueue('production');
/** Two worker start-ups, the 20 s heartbeat timeout that notices the killed worker, and two model delays. */
const TEST_TIMEOUT_MS = 240_000;
/** Long enough that the SIGKILL surely lands during the call, short next to the heartbeat timeout. */
const MODEL_DELAY_MS = 6_000;
const REPLY = 'Lead done: the helper stored both facts.';

const script = parseScript(
  `
agents:
  lead:
    - call: helper
      args: { message: "Collect two facts." }
    - call: fork_join
      args:
        deadline_seconds: 300
        tasks:
          - { agent: prober, message: "Probe 1." }
          - { agent: prober, message: "Probe 2." }
    - say: "${REPLY}"
  helper:
    - call: store_env_data
      args: { key: facts/a, short_description: "The first fact", value: { n: 1 } }
    - call: store_env_data
      args: { key: facts/b, short_description: "The second fact", value: { n: 2 } }
      delay_ms: ${MODEL_DELAY_MS}
    - say: "Helper done."
  prober:
    - call: store_env_data
      args: { key: probe, short_description: "What the probe found.", value: { ok: true } }
    - say: "probed"
`,
  'production-topology',
);

let started: TestTopology | undefined;
let skipReason: string | undefined;
let topology: ProductionTopology | undefined;
let client: BatonClient | undefined;
const models: { server: ScriptedModelServer; log: string }[] = [];
const workers: WorkerProcess[] = [];

before(
  async () => {
    started = await startTestTopology({ prefix: 'bp', label: 'production topology', stateDir: workDir });
    ({ topology, skipReason } = started);
    if (topology === undefined) return;
    fs.mkdirSync(agentsDir, { recursive: true });
    fs.writeFileSync(
      path.join(agentsDir, 'lead.md'),
      '---\nname: lead\ndescription: Hands the work to the helper, then fans probes out.\ncapabilities: [helper, fork_join, prober]\n---\nYou lead.\n',
    );
    fs.writeFileSync(path.join(agentsDir, 'prober.md'), '---\nname: prober\ndescription: Probes.\n---\nYou probe.\n');
    fs.writeFileSync(
      path.join(agentsDir, 'helper.md'),
      '---\nname: helper\ndescription: Stores facts as shared environment data.\n---\nYou help.\n',
    );
    for (const name of ['a', 'b']) {
      const log = path.join(workDir, `model-${name}.jsonl`);
      models.push({ server: await startScriptedModelServer({ script, logFile: log }), log });
    }
    client = await connect({
      address: topology.temporalAddress,
      namespace: topology.namespace,
      taskQueue,
      databaseUrl: topology.databaseUrl,
    });
  },
  { timeout: TOPOLOGY_SETUP_TIMEOUT_MS },
);

after(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await client?.close();
  await Promise.all(models.map((model) => model.server.close()));
  await started?.stop();
});

function startWorker(index: number): Promise<WorkerProcess> {
  assert.ok(topology);
  return startWorkerProcess({
    name: `worker ${index === 0 ? 'A' : 'B'}`,
    readyTimeoutMs: 120_000,
    env: {
      TEMPORAL_ADDRESS: topology.temporalAddress,
      TEMPORAL_NAMESPACE: topology.namespace,
      BATON_TASK_QUEUE: taskQueue,
      DATABASE_URL: topology.databaseUrl,
      BATON_DB_POOL_SIZE: '4',
      OPENAI_BASE_URL: models[index]?.server.baseURL ?? '',
      OPENAI_API_KEY: 'scripted',
      BATON_MODEL: 'baton-scripted',
      BATON_AGENTS_DIR: agentsDir,
      BATON_HEALTH_ADDRESS: '127.0.0.1:0',
      BATON_LOG_LEVEL: 'WARN',
    },
  });
}

/** Model requests of `agent` in `threadId`'s tree at `step` (assistant messages already in the request). */
function requestsAt(log: string, rootThreadId: string, agent: string, step: number) {
  return readModelLog(log).filter(
    (request) =>
      request.agent === agent &&
      request.headers['x-baton-root-thread'] === rootThreadId &&
      request.messages.filter((message) => message.role === 'assistant').length === step,
  );
}

function runCli(args: string[], cliEnv: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const childEnv: Record<string, string | undefined> = { ...process.env, ...cliEnv };
    delete childEnv.NODE_TEST_CONTEXT;
    execFile(
      process.execPath,
      [path.join(ROOT, 'bin', 'baton.js'), ...args],
      { env: childEnv },
      (error, stdout, stderr) =>
        error ? reject(new Error(`baton ${args.join(' ')} failed: ${stderr}`)) : resolve(stdout),
    );
  });
}

test('production topology: baton setup prepared a fresh server, and running it again changes nothing', async (t) => {
  if (skipReason) return skipUnlessCi(t, skipReason);
  assert.ok(topology);
  assert.equal(topology.setup.namespace.created, true);
  assert.deepEqual([...topology.setup.searchAttributes.added].sort(), [
    'BatonAgent',
    'BatonParentThreadId',
    'BatonRootThreadId',
    'BatonThreadId',
  ]);
  assert.ok(topology.setup.migrations.applied.length > 0);
  const again = JSON.parse(
    await runCli(['setup', '--json'], {
      TEMPORAL_ADDRESS: topology.temporalAddress,
      TEMPORAL_NAMESPACE: topology.namespace,
      DATABASE_URL: topology.databaseUrl,
    }),
  ) as { changed: boolean; namespace: { created: boolean }; searchAttributes: { added: string[]; present: string[] } };
  assert.equal(again.changed, false);
  assert.equal(again.namespace.created, false);
  assert.deepEqual(again.searchAttributes.added, []);
  assert.equal(again.searchAttributes.present.length, 4);
});

test(
  'production topology: two workers, one SIGKILLed mid-delegation; the conversation (delegation, then fork/join) completes with every env write once',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    if (skipReason) return skipUnlessCi(t, skipReason);
    assert.ok(topology && client);
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    workers.push(...(await Promise.all([startWorker(0), startWorker(1)])));
    t.diagnostic(`two workers polling after ${elapsed()}`);

    const health = /health at (http:\/\/\S+\/healthz)/.exec(workers[0]?.output() ?? '')?.[1];
    assert.ok(health, 'worker A serves /healthz');
    const healthResponse = await fetch(health);
    assert.equal(healthResponse.status, 200);
    assert.equal(((await healthResponse.json()) as { status: string }).status, 'RUNNING');

    const threadId = uniqueThreadId('production');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'lead', threadId });
      const sending = settle(thread.send('Collect the facts, please.'));

      // The helper's second model call is slow: whichever worker took it is killed while it waits.
      const victim = await waitFor('the helper call to kill during', 60_000, () => {
        const index = models.findIndex((model) => requestsAt(model.log, threadId, 'helper', 1).length > 0);
        return index === -1 ? undefined : index;
      });
      const exit = await workers[victim]?.kill();
      t.diagnostic(`worker ${victim === 0 ? 'A' : 'B'} killed mid-call after ${elapsed()}`);
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });

      const outcome = await sending;
      t.diagnostic(`reply after ${elapsed()}`);
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.status, 'completed');
      assert.equal(outcome.value.reply, REPLY);

      // The cut-off call was retried on the surviving worker, against its own model server.
      const survivor = models[1 - victim];
      assert.ok(survivor);
      assert.equal(requestsAt(survivor.log, threadId, 'helper', 1).length, 1, 'the retry ran on the other worker');

      // The fork ran both probes after the kill; each merged its finding under its prefix.
      const [fork] = await thread.forks();
      assert.equal(fork?.status, 'success');
      assert.deepEqual(
        fork?.tasks.map((task) => task.status),
        ['success', 'success'],
      );

      // Every env write is there once: each entry at version 1, one `stored` event per key and scope (a probe's
      // own store and its merge into the root), nothing refused.
      assert.deepEqual((await thread.envData()).map((entry) => [entry.key, entry.version]).sort(), [
        ['facts/a', 1],
        ['facts/b', 1],
        ['fork/1/1/probe', 1],
        ['fork/1/2/probe', 1],
      ]);
      const db = new pg.Client({ connectionString: topology.databaseUrl });
      await db.connect();
      try {
        const { rows } = await db.query<{ key: string; scope: string; action: string; n: number }>(
          `SELECT key, scope, action, COUNT(*)::int AS n FROM env_events WHERE root_thread_id = $1
            GROUP BY key, scope, action ORDER BY key, scope, action`,
          [threadId],
        );
        assert.ok(rows.length >= 4, JSON.stringify(rows));
        assert.ok(
          rows.every((row) => row.action === 'stored' && row.n === 1),
          `each write stored once, nothing refused: ${JSON.stringify(rows)}`,
        );
        assert.deepEqual([...new Set(rows.map((row) => row.key))].sort(), [
          'facts/a',
          'facts/b',
          'fork/1/1/probe',
          'fork/1/2/probe',
          'probe',
        ]);
      } finally {
        await db.end();
      }

      // Baton's search attributes, queried through temporal-server's Postgres visibility store (written
      // asynchronously, hence the wait).
      const found = await waitFor('the tree in visibility', 30_000, async () => {
        const rows: { workflowId: string; agent: unknown }[] = [];
        for await (const execution of client!.temporal.workflow.list({
          query: `BatonRootThreadId="${threadId}"`,
        })) {
          rows.push({ workflowId: execution.workflowId, agent: execution.searchAttributes.BatonAgent });
        }
        return rows.length >= 3 ? rows : undefined;
      });
      const agents = found.map((row) => JSON.stringify(row.agent)).sort();
      assert.ok(agents.some((agent) => agent.includes('lead')) && agents.some((agent) => agent.includes('helper')));
      const helperTurns = [];
      for await (const execution of client.temporal.workflow.list({
        query: `BatonRootThreadId="${threadId}" AND BatonAgent="helper"`,
      })) {
        helperTurns.push(execution.workflowId);
      }
      assert.equal(helperTurns.length, 1, `one helper turn: ${helperTurns.join(', ')}`);
    } finally {
      await thread?.end();
    }
  },
);
