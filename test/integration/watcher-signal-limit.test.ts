/**
 * Env writes never fail because of a watcher's signals: Temporal refuses signals to a run past its limit
 * (`history.maximumSignalsPerExecution`, 10,000 by default), and a write used to signal every matching watcher and
 * fail when that failed. Run on a Temporal server of its own whose limit is 20 signals per run: a tool writes three
 * times that many keys a watcher watches; every write succeeds, and the watcher wakes for every change.
 */
import assert from 'node:assert/strict';
import { after, before, test, type TestContext } from 'node:test';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { parseScript } from '../../scripted-model';
import { skipUnlessCi } from '../../testing/ci';
import { startAgentHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startOwnTemporal } from '../../testing/test-stack';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';
import { watcherRuns } from './watcher-runs';

/** Signals the server lets one run receive. */
const SIGNAL_LIMIT = 20;
const WRITES = SIGNAL_LIMIT * 3;

const agents: AgentRegistry = new Map(
  [
    '---\nname: limwriter\ndescription: Writes many keys.\ncapabilities: [write_many]\n---\nYou write.\n',
    '---\nname: limwatch\ndescription: Watches them.\n---\nYou watch.\n',
  ].map((text) => {
    const agent = parseAgentFile(text, 'watcher-signal-limit');
    return [agent.name, agent];
  }),
);

const writeMany = defineTool({
  name: 'write_many',
  description: 'Stores `count` keys under `prefix/`, one write each.',
  parameters: z.object({ prefix: z.string(), count: z.int().min(1).max(1000) }),
  timeout_s: 300,
  run: async ({ prefix, count }, context) => {
    for (let index = 0; index < count; index += 1) {
      await context.env.store({ key: `${prefix}/${index}`, shortDescription: 'One of many.', value: index });
    }
    return `${count} written`;
  },
});

const script = parseScript(
  `
agents:
  limwriter:
    - { call: write_many, args: { prefix: lim, count: ${WRITES} } }
    - say: "Written."
  limwatch:
    - say: "Seen."
`,
  'watcher-signal-limit',
);

const env = readTestEnv();
let server: Awaited<ReturnType<typeof startOwnTemporal>> | undefined;
let harness: AgentHarness | undefined;

before(async () => {
  if (env.temporalCli === undefined) return;
  server = await startOwnTemporal(env.temporalCli, [`history.maximumSignalsPerExecution=${SIGNAL_LIMIT}`]);
  harness = await startAgentHarness({
    temporalAddress: server.address,
    databaseUrl: env.databaseUrl,
    taskQueue: uniqueTaskQueue('watcher-signal-limit'),
    workflowBundle: { codePath: env.workflowBundlePath },
    agents,
    script,
    tools: [writeMany],
  });
});

after(async () => {
  await harness?.close();
  await server?.stop();
});

/** The harness on the second server, or `undefined` (the test skipped) where no local Temporal CLI can start one. */
function limitedHarness(t: TestContext): AgentHarness | undefined {
  if (harness === undefined) skipUnlessCi(t, 'no local Temporal CLI to start a second server with');
  return harness;
}

test("writes to a watcher's keys past the server's signal limit per run all succeed, and wake it for each change", async (t) => {
  const h = limitedHarness(t);
  if (h === undefined) return;
  const thread = await h.client.startThread({ agent: 'limwriter', threadId: uniqueThreadId('siglimit') });
  await thread.addWatcher({ agent: 'limwatch', keys: ['lim/*'], debounceS: 0 });
  const result = await thread.send('Write them.');
  assert.equal(result.status, 'completed');
  const toolResults = (await thread.transcript()).filter((message) => message.role === 'tool');
  assert.deepEqual(
    toolResults.map((message) => message.content),
    [`${WRITES} written`],
  );
  const { rows } = await h.pool.query<{ key: string }>(
    "SELECT key FROM env_events WHERE root_thread_id = $1 AND action = 'stored' ORDER BY seq",
    [thread.threadId],
  );
  assert.equal(rows.length, WRITES, 'each key stored once');

  // Every change reaches the watcher, in wake-ups that each finished.
  const keys = await waitFor('wake-ups for every change', 120_000, async () => {
    const wakeups = await thread.wakeups({ watcher: 'limwatch' });
    const seen = new Set(wakeups.flatMap((wakeup) => wakeup.changes.map((change) => change.key)));
    return seen.size === WRITES && wakeups.every((wakeup) => wakeup.status === 'completed') ? seen : undefined;
  });
  assert.deepEqual([...keys].sort(), rows.map((row) => row.key).sort());
  // No run of its workflow came near the limit.
  for (const run of await watcherRuns(h.client, thread.threadId, 'limwatch')) {
    assert.ok(run.signals < SIGNAL_LIMIT, `run ${run.runId} received ${run.signals} signals`);
  }
});
