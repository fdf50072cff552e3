/**
 * A tool's retries count the runs of one call, not the attempts of the activity that runs it. With `steps: batched`
 * one local activity runs many steps and is retried whole when any model call in it fails, so its attempt number is
 * the batch's: after a burst of 429s on one step, a tool first called in a later step must still get its own runs,
 * no more and no fewer, and its result is the tool's output.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { requestsPerStep, startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'tool-call-attempts-'));
const modelLog = path.join(workDir, 'model.jsonl');

/** The operation id of every run of each tool (the tools run in this process's worker). */
const runs = { lookup: [] as string[], lookup_once: [] as string[], fickle: [] as string[] };

const tools = [
  defineTool({
    name: 'lookup',
    description: 'Reads exchange rates.',
    parameters: z.object({}),
    retries: 2,
    run: (_args, ctx) => {
      runs.lookup.push(ctx.operationId);
      return 'EUR/USD 1.10';
    },
  }),
  defineTool({
    name: 'lookup_once',
    description: 'Reads a value, never retried.',
    parameters: z.object({}),
    retries: 0,
    run: (_args, ctx) => {
      runs.lookup_once.push(ctx.operationId);
      return 'once';
    },
  }),
  defineTool({
    name: 'fickle',
    description: 'Always fails.',
    parameters: z.object({}),
    retries: 1,
    run: (_args, ctx) => {
      runs.fickle.push(ctx.operationId);
      throw new Error('the backend is down');
    },
  }),
];

const agents: AgentRegistry = new Map([
  [
    'burst',
    parseAgentFile(
      '---\nname: burst\ndescription: Thinks, then reads rates.\nsteps: batched\n' +
        'capabilities: [lookup, lookup_once, fickle]\n---\nYou read rates.\n',
      'burst.md',
    ),
  ],
]);

/**
 * Step 2's model call meets four 429s: the first in the turn's first batch (its `beginTurn`, which drops it), three
 * in the turn's own batch, whose fourth attempt gets the reply. Its calls run in that attempt, the fourth, and the
 * failing one again in the fifth.
 */
const script = parseScript(
  `
agents:
  burst:
    - { call: think, args: { thought: "first" } }
    - { fail: 429, times: 4, retry_after_s: 0.2 }
    - calls:
        - { call: lookup, args: {} }
        - { call: lookup_once, args: {} }
        - { call: fickle, args: {} }
    - say: "Done."
`,
  'tool-call-attempts',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('tool-call-attempts', { agents, script, tools, modelLogFile: modelLog });
});

after(async () => {
  await harness?.close();
});

test('tool call attempts: after a 429 burst retried a batch three times, a later step’s tools run as often as their own retries allow', async () => {
  const threadId = uniqueThreadId('burst');
  const thread = await harness.client.startThread({ agent: 'burst', threadId });
  const result = await thread.send('Read the rates.');
  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Done.');
  // Step 2 was asked five times: the burst happened inside the batches, before the tools' step.
  assert.deepEqual(requestsPerStep(modelLog, threadId), { 1: 1, 2: 5, 3: 1 });

  const transcript = await listMessages(harness.pool, threadId);
  const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content]));
  const calls = transcript.flatMap((message) => message.toolCalls ?? []).filter((call) => call.name !== 'think');
  assert.deepEqual(
    calls.map((call) => [call.name, resultOf.get(call.id)]),
    [
      ['lookup', 'EUR/USD 1.10'],
      ['lookup_once', 'once'],
      ['fickle', "Error: tool 'fickle' failed (after 2 attempts): the backend is down"],
    ],
  );
  // Each ran as its own retries say, under one operation id: a retried batch ran none of the stored ones again.
  assert.equal(runs.lookup.length, 1, 'lookup ran once');
  assert.equal(runs.lookup_once.length, 1, 'lookup_once (retries: 0) ran once');
  assert.equal(runs.fickle.length, 2, 'fickle (retries: 1) ran twice');
  assert.equal(runs.fickle[0], runs.fickle[1]);

  // The count behind it: one row per call with retry rules, its starts under its operation id.
  const { rows } = await harness.pool.query<{ tool: string; attempts: number }>(
    'SELECT tool, attempts FROM tool_attempts WHERE root_thread_id = $1 ORDER BY tool',
    [threadId],
  );
  assert.deepEqual(rows, [
    { tool: 'fickle', attempts: 2 },
    { tool: 'lookup', attempts: 1 },
    { tool: 'lookup_once', attempts: 1 },
  ]);
});
