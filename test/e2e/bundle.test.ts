/** `baton bundle <file>` writes the workflow bundle a worker can start from (`BATON_WORKFLOW_BUNDLE`). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { readTestEnv, uniqueTaskQueue } from '../../testing/test-env';
import { startWorkerProcess } from '../../testing/worker-process';
import { TRACING_MODULE_MARK } from '../../worker/tracing';
import { workflowBundleProblem } from '../../worker/workflow-bundle';
import { baton, describeRun, parseJson, ROOT, stackEnv, writeStaleBundle } from './cli-process';

test('baton bundle writes the workflow bundle and reports it as JSON', async () => {
  const dir = fs.mkdtempSync(path.join(readTestEnv().stateDir, 'bundle-'));
  const file = path.join(dir, 'nested', 'workflows.js');
  const result = await baton(['bundle', file, '--json'], process.env);
  assert.equal(result.code, 0, describeRun(result));
  assert.deepEqual(parseJson(result), { file, bytes: fs.statSync(file).size, tracing: false });
  const code = fs.readFileSync(file, 'utf8');
  assert.match(code, /threadWorkflow/, 'the bundle holds the thread workflow');
  assert.match(code, /agentTurnWorkflow/, 'and the turn workflow');
  assert.ok(!code.includes(TRACING_MODULE_MARK), 'and no tracing interceptors');
  // For workers that trace: the same, with Temporal's tracing interceptors, and it checks against these sources.
  const traced = path.join(dir, 'traced.js');
  const tracedResult = await baton(['bundle', traced, '--tracing', '--json'], process.env);
  assert.equal(tracedResult.code, 0, describeRun(tracedResult));
  assert.deepEqual(parseJson(tracedResult), { file: traced, bytes: fs.statSync(traced).size, tracing: true });
  assert.ok(fs.readFileSync(traced, 'utf8').includes(TRACING_MODULE_MARK), 'the tracing interceptors are in');
  assert.equal(workflowBundleProblem(traced), undefined, 'a traced bundle matches the sources too');
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a worker starts from a bundle of its own sources and refuses a stale one, naming what changed', async () => {
  const stack = readTestEnv();
  const dir = fs.mkdtempSync(path.join(stack.stateDir, 'bundle-'));
  const file = path.join(dir, 'workflows.js');
  const written = await baton(['bundle', file], process.env);
  assert.equal(written.code, 0, describeRun(written));
  assert.equal(workflowBundleProblem(file), undefined, 'a fresh bundle matches the sources');

  const workerEnv = {
    TEMPORAL_ADDRESS: stack.temporalAddress,
    DATABASE_URL: stack.databaseUrl,
    OPENAI_API_KEY: 'sk-test',
    BATON_TASK_QUEUE: uniqueTaskQueue('bundle'),
    BATON_LOG_LEVEL: 'WARN',
    // Agents it can run, so the bundle is all a worker may refuse.
    BATON_AGENTS_DIR: path.join(ROOT, 'examples', 'arc-team', 'agents'),
  };
  const worker = await startWorkerProcess({
    name: 'worker from a bundle',
    env: { ...workerEnv, BATON_WORKFLOW_BUNDLE: file },
  });
  await worker.kill();

  // The same bundle, as if built before workflows/thread.ts last changed.
  const stale = path.join(dir, 'stale.js');
  writeStaleBundle(file, stale);
  const refused = await baton(['worker'], stackEnv({ ...workerEnv, BATON_WORKFLOW_BUNDLE: stale }));
  assert.equal(refused.code, 1, describeRun(refused));
  assert.match(
    refused.stderr,
    /BATON_WORKFLOW_BUNDLE: .*stale\.js was built from other sources than this worker's \(changed or missing here: workflows\/thread\.ts\); write it again with `baton bundle <file>`/,
  );

  // A worker that traces needs a bundle holding the tracing interceptors, and says how to write one.
  const untraced = await baton(
    ['worker'],
    stackEnv({ ...workerEnv, BATON_WORKFLOW_BUNDLE: file, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }),
  );
  assert.equal(untraced.code, 1, describeRun(untraced));
  assert.match(untraced.stderr, /needs a workflow bundle holding the tracing interceptors: .*`baton bundle --tracing`/);
  fs.rmSync(dir, { recursive: true, force: true });
});
