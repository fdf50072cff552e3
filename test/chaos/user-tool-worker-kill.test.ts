/**
 * Users' tools when the worker running them dies: a tool with side effects is never run a second time (the model is
 * told its outcome is unknown), and a read-only tool is run again on the next worker, as often as its `retries` allow
 * and no more, with local and batched steps too (whose local activities count their attempts afresh on the next
 * worker). The tools come from a module loaded by `baton worker` through `BATON_TOOLS`, as in production.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';
import { settle, waitFor } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-user-tools-'));
const toolsFile = path.join(workDir, 'tools.mjs');
const chargesLog = path.join(workDir, 'charges.log');
const ratesLog = path.join(workDir, 'rates.log');
/** Each step mode's `probe` runs, one line each. */
const probesLog = (mode: string) => path.join(workDir, `probes-${mode}.log`);
const STEP_MODES = ['local', 'batched'] as const;

/**
 * `charge` has side effects: it logs its run, then takes long enough to be killed mid-run. `fetch_rates` is
 * read-only: its first run hangs the same way, a later one answers at once. Both honour their signal.
 */
const TOOLS_MODULE = `
import fs from 'node:fs';
import { z } from 'zod';
const hang = (signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, 120000);
  signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); });
});
export default [
  {
    name: 'charge',
    description: 'Charges a card.',
    parameters: z.object({ cents: z.int().min(1) }),
    sideEffects: true,
    run: async ({ cents }, ctx) => {
      fs.appendFileSync(${JSON.stringify(chargesLog)}, ctx.operationId + ' ' + cents + '\\n');
      await hang(ctx.signal);
      return 'charged ' + cents;
    },
  },
  {
    name: 'fetch_rates',
    description: 'Reads exchange rates.',
    parameters: z.object({}),
    run: async (_args, ctx) => {
      fs.appendFileSync(${JSON.stringify(ratesLog)}, ctx.operationId + '\\n');
      if (fs.readFileSync(${JSON.stringify(ratesLog)}, 'utf8').trim().split('\\n').length === 1) await hang(ctx.signal);
      return 'EUR/USD 1.10';
    },
  },
  {
    name: 'probe',
    description: 'Reads a sensor, never retried.',
    parameters: z.object({ mode: z.string() }),
    retries: 0,
    run: async ({ mode }, ctx) => {
      const log = ${JSON.stringify(workDir)} + '/probes-' + mode + '.log';
      fs.appendFileSync(log, ctx.operationId + '\\n');
      if (fs.readFileSync(log, 'utf8').trim().split('\\n').length === 1) await hang(ctx.signal);
      return 'probed';
    },
  },
];
`;

const script = parseScript(
  `
agents:
  buyer:
    - calls:
        - { call: charge, args: { cents: 500 } }
        - { call: fetch_rates, args: {} }
    - say: "Checked what happened."
${STEP_MODES.map((mode) => `  prober-${mode}:\n    - { call: probe, args: { mode: ${mode} } }\n    - say: "Probed."\n`).join('')}`,
  'user-tool-worker-kill',
);

/** Two worker start-ups, the 30 s heartbeat timeout that notices the dead worker, the retry: a backstop only. */
const TEST_TIMEOUT_MS = 300_000;

// Written before the workers start: they load it.
fs.writeFileSync(toolsFile, TOOLS_MODULE);
const workers = useKillableWorkers({
  name: 'chaos-user-tools',
  dir: workDir,
  agents: {
    'buyer.md':
      '---\nname: buyer\ndescription: Charges and checks rates.\ncapabilities: [charge, fetch_rates]\n---\nYou buy.\n',
    ...Object.fromEntries(
      STEP_MODES.map((mode) => [
        `prober-${mode}.md`,
        `---\nname: prober-${mode}\ndescription: Probes once.\ncapabilities: [probe]\nsteps: ${mode}\n---\nYou probe.\n`,
      ]),
    ),
  },
  script,
  workerEnv: { BATON_TOOLS: toolsFile },
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);

const lines = (file: string) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];

test(
  'chaos: a worker SIGKILLed mid-tool runs a read-only user tool again, never a side-effect one, and says so',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const workerA = await startWorker('worker A');
    assert.match(
      workerA.output(),
      /tools charge, fetch_rates, probe from .*tools\.mjs/,
      'the ready line names the tools',
    );
    const threadId = uniqueThreadId('user-tool-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'buyer', threadId });
      const sending = settle(thread.send('Pay and check the rate.'));
      await waitFor('both tools running on worker A', 60_000, () =>
        lines(chargesLog).length === 1 && lines(ratesLog).length === 1 ? true : undefined,
      );
      assert.deepEqual(await workerA.kill(), { code: null, signal: 'SIGKILL' });
      t.diagnostic('worker A killed while both tools ran');

      await startWorker('worker B');
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, 'Checked what happened.');

      const transcript = await listMessages(pool, threadId);
      const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
      const [charge, rates] = transcript.flatMap((m) => (m.toolCalls ?? []).map((call) => resultOf.get(call.id)));
      assert.match(
        charge ?? '',
        /^Error: an earlier attempt of this 'charge' call started at .+ and ended without recording its result \(its worker stopped\)\. It was not run again, so it may or may not have taken effect: check before calling it again\.$/,
      );
      assert.equal(lines(chargesLog).length, 1, 'the card was charged at most once');
      assert.equal(rates, 'EUR/USD 1.10', 'the read-only tool ran again and answered');
      const runs = lines(ratesLog);
      assert.equal(runs.length, 2);
      assert.equal(runs[0], runs[1], 'both runs carried the same operation id');
    } finally {
      await thread?.end();
    }
  },
);

for (const mode of STEP_MODES) {
  test(
    `chaos: under ${mode} steps, a read-only tool with retries: 0 whose worker was SIGKILLed mid-run is not run again`,
    { timeout: TEST_TIMEOUT_MS },
    async (t) => {
      const { client, pool } = workers();
      // The tests share a task queue: no worker of an earlier test may pick the turn up.
      for (const worker of workers().alive()) await worker.kill();
      const workerA = await startWorker(`worker A (${mode})`);
      const threadId = uniqueThreadId(`probe-${mode}`);
      let thread: ThreadHandle | undefined;
      try {
        thread = await client.startThread({ agent: `prober-${mode}`, threadId });
        const sending = settle(thread.send('Probe the sensor.'));
        await waitFor('the probe running on worker A', 60_000, () =>
          lines(probesLog(mode)).length === 1 ? true : undefined,
        );
        assert.deepEqual(await workerA.kill(), { code: null, signal: 'SIGKILL' });
        t.diagnostic(`worker A killed while the probe ran in a local activity (${mode} steps)`);

        // Worker B runs the step again in a local activity of its own, whose attempt number starts from 1 again.
        await startWorker(`worker B (${mode})`);
        const outcome = await sending;
        if (!outcome.ok) throw outcome.error;
        assert.equal(outcome.value.reply, 'Probed.');

        const transcript = await listMessages(pool, threadId);
        const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
        const [probe] = transcript.flatMap((m) => (m.toolCalls ?? []).map((call) => resultOf.get(call.id)));
        assert.equal(
          probe,
          "Error: tool 'probe' did not finish in 1 attempt (the worker running the last one stopped). It was not run again.",
        );
        assert.equal(lines(probesLog(mode)).length, 1, 'the probe ran once, as its retries: 0 allow');
        const { rows } = await pool.query<{ attempts: number }>(
          'SELECT attempts FROM tool_attempts WHERE root_thread_id = $1',
          [threadId],
        );
        assert.deepEqual(rows, [{ attempts: 2 }], "worker B counted its start as the call's second");
      } finally {
        await thread?.end();
      }
    },
  );
}
