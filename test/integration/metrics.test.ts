/**
 * Baton's metrics on a `baton worker`'s Prometheus endpoint (`BATON_METRICS_ADDRESS`), beside the Temporal SDK's:
 * model calls, tokens and latency by provider, model and agent; tool runs by tool and outcome; what waits on people.
 * Scraped from the real process as Prometheus would.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { connect } from '../../client';
import { startScriptedModelServer, parseScript } from '../../scripted-model';
import { freePort } from '../../testing/mcp-reference-servers';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startScriptedWorker, type WorkerProcess } from '../../testing/worker-process';
import { pendingApprovals, waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'metrics-'));

/** The samples of one metric whose labels include `labels`, summed. */
function sampleSum(text: string, metric: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match || match[1] !== metric) continue;
    const found = new Map<string, string>();
    for (const label of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      found.set(label[1] ?? '', label[2] ?? '');
    }
    if (Object.entries(labels).every(([key, value]) => found.get(key) === value)) sum += Number(match[3]);
  }
  return sum;
}

test('metrics: model calls, tokens, latency, tool outcomes, waiting approvals and watcher wake-ups on the Prometheus endpoint', async () => {
  fs.mkdirSync(path.join(workDir, 'agents'));
  for (const [name, capabilities] of [
    ['counter', '[lookup, fail_lookup]'],
    ['waiter', '[guarded]'],
    ['writer', '[]'],
    ['noticer', '[]'],
  ] as const) {
    fs.writeFileSync(
      path.join(workDir, 'agents', `${name}.md`),
      `---\nname: ${name}\ndescription: The ${name}.\ncapabilities: ${capabilities}\n---\nAct.\n`,
    );
  }
  const toolsFile = path.join(workDir, 'tools.mjs');
  fs.writeFileSync(
    toolsFile,
    `import { z } from 'zod';
export default [
  { name: 'lookup', description: 'Looks up.', parameters: z.object({}), run: () => 'found' },
  { name: 'fail_lookup', description: 'Fails.', parameters: z.object({}), retries: 0, run: () => { throw new Error('down'); } },
  { name: 'guarded', description: 'Needs a person.', parameters: z.object({}), sideEffects: true, needsApproval: () => true, run: () => 'done' },
];
`,
  );
  const model = await startScriptedModelServer({
    script: parseScript(
      `agents:
  counter:
    - calls: [ { call: lookup, args: {} }, { call: fail_lookup, args: {} } ]
    - say: "Counted."
  waiter:
    - { call: guarded, args: {} }
    - say: "Guarded."
  writer:
    - calls:
        - { call: store_env_data, args: { key: "n/1", short_description: "A note.", value: 1 } }
        - { call: update_env_data, args: { key: "missing", value: 2 } }
    - say: "Written."
  noticer:
    - say: "Noticed."
`,
      'metrics',
    ),
  });
  const metricsAddress = `127.0.0.1:${await freePort()}`;
  const taskQueue = uniqueTaskQueue('metrics');
  const client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
  let worker: WorkerProcess | undefined;
  try {
    worker = await startScriptedWorker('metrics worker', {
      taskQueue,
      modelBaseUrl: model.baseURL,
      agentsDir: path.join(workDir, 'agents'),
      env: { BATON_TOOLS: toolsFile, BATON_METRICS_ADDRESS: metricsAddress },
    });
    const { result } = await client.run({ agent: 'counter', threadId: uniqueThreadId('metrics'), message: 'Count.' });
    assert.equal(result.reply, 'Counted.');
    // A watcher woken once by a write.
    const watched = await client.startThread({ agent: 'writer', threadId: uniqueThreadId('metrics-watch') });
    await watched.addWatcher({ agent: 'noticer', keys: ['n/*'], debounceS: 0 });
    assert.equal((await watched.send('Write.')).reply, 'Written.');
    const waiter = uniqueThreadId('metrics-wait');
    const waiting = client.run({ agent: 'waiter', threadId: waiter, message: 'Wait.' });
    waiting.catch(() => undefined);
    const [pending] = await pendingApprovals(client.thread(waiter));
    assert.ok(pending);

    const scrape = async () => (await fetch(`http://${metricsAddress}/metrics`)).text();
    let last = '';
    const text = await waitFor('the metrics of both turns', 60_000, async () => {
      last = await scrape();
      const ready =
        sampleSum(last, 'baton_approvals_waiting', {}) >= 1 &&
        sampleSum(last, 'baton_watcher_wakeups', { watcher: 'noticer' }) >= 1;
      return ready ? last : undefined;
    }).catch((error: unknown) => {
      throw new Error(
        `${String(error)}; Baton's lines: ${last
          .split('\n')
          .filter((line) => line.includes('baton'))
          .join('\n')}`,
      );
    });
    const counter = { agent: 'counter', provider: 'default', model: 'baton-scripted' };
    assert.equal(sampleSum(text, 'baton_model_calls', { ...counter, outcome: 'ok' }), 2, 'two model calls');
    assert.ok(sampleSum(text, 'baton_model_tokens', { ...counter, kind: 'input' }) > 0, 'input tokens');
    assert.ok(sampleSum(text, 'baton_model_tokens', { ...counter, kind: 'output' }) > 0, 'output tokens');
    assert.equal(sampleSum(text, 'baton_model_call_latency_count', counter), 2, 'two latencies');
    assert.equal(sampleSum(text, 'baton_tool_calls', { tool: 'lookup', outcome: 'ok' }), 1);
    assert.equal(sampleSum(text, 'baton_tool_calls', { tool: 'fail_lookup', outcome: 'error' }), 1);
    assert.ok(sampleSum(text, 'baton_approval_oldest_wait_seconds', {}) >= 0);
    assert.equal(sampleSum(text, 'baton_watcher_wakeups', { watcher: 'noticer' }), 1, 'one wake-up, counted once');
    assert.equal(sampleSum(text, 'baton_env_writes', { operation: 'store', outcome: 'stored' }), 1, 'the write');
    assert.equal(
      sampleSum(text, 'baton_env_writes', { operation: 'update', outcome: 'EnvData.NotFound' }),
      1,
      'the refused update',
    );
    // The SDK's own metrics are still there.
    assert.match(text, /^temporal_activity_execution_latency/m);
    // The waiting run ends before the client closes: a call still waiting on a closed client fails after the test.
    await client.thread(waiter).approve(pending.approvalId, { by: 'metrics test' });
    assert.equal((await waiting).result.reply, 'Guarded.');
  } finally {
    await client.close();
    await worker?.kill();
    await model.close();
  }
});
