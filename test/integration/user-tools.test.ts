/**
 * Users' own tools on a real worker: arguments validated by the tool's zod schema before `run`, the result reaching
 * the model, the context a tool gets (ids, caller, world, env data as the caller), and what happens when a tool
 * throws, keeps throwing, runs past its timeout or returns too much.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { defineTool, ToolError, type ToolContext } from '../../activities/tools/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'user-tools-'));
const modelLog = path.join(workDir, 'model.jsonl');

/** What each tool saw, by tool name (the tools run in this process's worker). */
const seen = {
  forecast: [] as { args: unknown; context: Omit<ToolContext, 'env' | 'signal' | 'heartbeat' | 'scope'> }[],
  flakyAttempts: 0,
  brokenAttempts: 0,
  slowAborted: undefined as string | undefined,
  /** Set when the watch tool of a reclaimed fork task saw its signal abort. */
  watchAborted: undefined as string | undefined,
  watchStarted: false,
};

const forecast = defineTool({
  name: 'forecast',
  description: 'The weather forecast for a city.',
  parameters: z.object({ city: z.string().min(1), days: z.int().min(1).max(7) }),
  run: async (args, context) => {
    const { operationId, threadId, rootThreadId, agent, world } = context;
    seen.forecast.push({ args, context: { operationId, threadId, rootThreadId, agent, world } });
    await context.env.store({
      key: `forecast/${args.city}`,
      shortDescription: `The forecast for ${args.city}.`,
      value: { city: args.city, days: args.days, sky: 'sunny' },
    });
    return { city: args.city, days: args.days, sky: 'sunny' };
  },
});

const tools = [
  forecast,
  defineTool({
    name: 'flaky_lookup',
    description: 'Fails twice, then answers.',
    parameters: z.object({}),
    run: () => {
      seen.flakyAttempts += 1;
      if (seen.flakyAttempts <= 2) throw new Error(`lookup service unavailable (attempt ${seen.flakyAttempts})`);
      return `found it on attempt ${seen.flakyAttempts}`;
    },
  }),
  defineTool({
    name: 'broken',
    description: 'Always fails.',
    parameters: z.object({}),
    retries: 1,
    run: () => {
      seen.brokenAttempts += 1;
      throw new Error('the backend is down');
    },
  }),
  defineTool({
    name: 'picky',
    description: 'Refuses with a reason the model can act on.',
    parameters: z.object({}),
    run: () => {
      throw new ToolError('ask for a city first');
    },
  }),
  defineTool({
    name: 'slow',
    description: 'Never finishes by itself.',
    parameters: z.object({}),
    timeout_s: 1,
    retries: 0,
    run: (_args, context) =>
      new Promise<string>((_resolve, reject) => {
        context.signal.addEventListener('abort', () => {
          seen.slowAborted = String(context.signal.reason);
          reject(new Error('aborted'));
        });
      }),
  }),
  defineTool({
    name: 'watch_forever',
    description: 'Watches until stopped.',
    parameters: z.object({}),
    timeout_s: 600,
    run: (_args, context) =>
      new Promise<string>((_resolve, reject) => {
        seen.watchStarted = true;
        context.signal.addEventListener('abort', () => {
          seen.watchAborted = String(context.signal.reason);
          reject(new Error('stopped'));
        });
      }),
  }),
  defineTool({
    name: 'chatty',
    description: 'Answers at length.',
    parameters: z.object({}),
    maxResultBytes: 1000,
    run: () => 'x'.repeat(5000),
  }),
  defineTool({
    name: 'verbose',
    description: 'Answers at length, under the default cut.',
    parameters: z.object({}),
    run: () => 'y'.repeat(70_000),
  }),
];

const agents: AgentRegistry = new Map(
  [
    parseAgentFile(
      '---\nname: forecaster\ndescription: Uses every test tool.\n' +
        'capabilities: [forecast, flaky_lookup, broken, picky, slow, chatty, verbose]\n---\nYou forecast.\n',
      'forecaster.md',
    ),
    parseAgentFile('---\nname: bystander\ndescription: Did not declare forecast.\n---\nYou watch.\n', 'bystander.md'),
    parseAgentFile(
      '---\nname: overseer\ndescription: Forks a watcher.\ncapabilities: [fork_join, watcher]\n---\nYou oversee.\n',
      'overseer.md',
    ),
    parseAgentFile(
      '---\nname: watcher\ndescription: Watches.\ncapabilities: [watch_forever]\n---\nYou watch.\n',
      'watcher.md',
    ),
  ].map((agent) => [agent.name, agent]),
);

const script = parseScript(
  `
agents:
  forecaster:
    - calls:
        - { call: forecast, args: { city: "Oslo", days: 3 } }
        - { call: forecast, args: { city: "Bergen", days: 9 } }
        - { call: forecast, args: { city: "Tromsø", days: 2, units: "metric" } }
    - calls:
        - { call: flaky_lookup, args: {} }
        - { call: broken, args: {} }
        - { call: picky, args: {} }
        - { call: slow, args: {} }
        - { call: chatty, args: {} }
        - { call: verbose, args: {} }
    - { call: list_capabilities, args: {} }
    - say: "Sunny in Oslo."
  overseer:
    - call: fork_join
      args: { deadline_seconds: 3, tasks: [ { agent: watcher, message: "Watch." } ] }
    - say: "The watcher was stopped."
  watcher:
    - { call: watch_forever, args: {} }
    - say: "never"
  bystander:
    - { call: forecast, args: { city: "Oslo", days: 1 } }
    - say: "I could not."
`,
  'user-tools',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('user-tools', { agents, script, modelLogFile: modelLog, tools });
});

after(async () => {
  await harness?.close();
});

test('user tools: validated arguments reach run, results reach the model, and every failure is an Error: result', async () => {
  const threadId = uniqueThreadId('forecast');
  const thread = await harness.client.startThread({ agent: 'forecaster', threadId, world: 'default' });
  const result = await thread.send('What will the weather be?');
  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'Sunny in Oslo.');

  // Only the calls with valid arguments ran (at once, so in either order), with the parsed values; z.object drops
  // the unknown 'units'.
  const ran = seen.forecast.map((entry) => entry.args as { city: string });
  assert.deepEqual(
    ran.sort((a, b) => a.city.localeCompare(b.city)),
    [
      { city: 'Oslo', days: 3 },
      { city: 'Tromsø', days: 2 },
    ],
  );
  const context = seen.forecast.find((entry) => (entry.args as { city: string }).city === 'Oslo')?.context;
  assert.equal(context?.threadId, threadId);
  assert.equal(context?.rootThreadId, threadId);
  assert.equal(context?.agent.name, 'forecaster');
  assert.equal(context?.world.name, 'default');
  assert.match(context?.operationId ?? '', /^[0-9a-f-]+:tool:0:0$/, 'the workflow-derived id of call 0 of step 0');

  // Calls of one reply run at once and store their results as they finish: read them in the order of the calls.
  const transcript = await listMessages(harness.pool, threadId);
  const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
  const toolResults = transcript.flatMap((message) => (message.toolCalls ?? []).map((call) => resultOf.get(call.id)));
  const [oslo, bergen, tromso, flaky, broken, picky, slow, chatty, verbose, capabilities] = toolResults;
  assert.equal(oslo, '{"city":"Oslo","days":3,"sky":"sunny"}');
  assert.match(bergen ?? '', /^Error: Invalid arguments for 'forecast': 'days' Too big: expected number to be <=7/);
  // The tool ran, but the env store refused its key: the model reads the refusal, as from Baton's own tools.
  assert.match(tromso ?? '', /^Error: the key 'forecast\/Tromsø' may hold only letters, digits and _ - \. \//);
  assert.equal(flaky, 'found it on attempt 3', 'a read-only tool is retried until its retries (2 by default) run out');
  assert.equal(seen.flakyAttempts, 3);
  assert.equal(broken, "Error: tool 'broken' failed (after 2 attempts): the backend is down");
  assert.equal(seen.brokenAttempts, 2, 'retries: 1 means two runs, then the model hears why');
  assert.equal(picky, 'Error: ask for a city first');
  assert.equal(slow, "Error: tool 'slow' did not finish within 1 seconds and was stopped.");
  assert.equal(seen.slowAborted, "Error: tool 'slow' ran past its timeout of 1 seconds", 'its signal was aborted');
  assert.ok(chatty?.startsWith('x'.repeat(900)));
  assert.match(chatty ?? '', /\n\[Baton\] The result was cut: it was 5000 bytes and at most 1000 are kept\.$/);
  // Without maxResultBytes, the README's default: 64 KiB kept (the text and an ellipsis), then the note.
  const [kept, note] = (verbose ?? '').split('\n');
  assert.equal(note, '[Baton] The result was cut: it was 70000 bytes and at most 65536 are kept.');
  assert.ok(kept === `${'y'.repeat(65_533)}…`, `64 KiB kept (${Buffer.byteLength(kept ?? '')} bytes)`);
  assert.match(capabilities ?? '', /- forecast: The weather forecast for a city\./, 'list_capabilities shows it');

  // The model read the results, and was offered the tool with the JSON Schema of its parameters.
  const requests = harness.modelRequests().filter((request) => request.thread === threadId);
  const second = requests[1];
  assert.ok(second?.messages.some((m) => m.role === 'tool' && m.content === oslo));
  const offered = (second?.tools ?? []) as { function: { name: string; parameters: unknown } }[];
  assert.deepEqual(offered.find((tool) => tool.function.name === 'forecast')?.function.parameters, {
    type: 'object',
    properties: {
      city: { type: 'string', minLength: 1 },
      days: { type: 'integer', minimum: 1, maximum: 7 },
    },
    required: ['city', 'days'],
  });

  // The tool wrote env data as its calling agent, in its conversation.
  const stored = await thread.envGet('forecast/Oslo');
  assert.deepEqual(stored?.value, { city: 'Oslo', days: 3, sky: 'sunny' });
  assert.deepEqual(stored?.storedBy, { agent: 'forecaster', thread: threadId });
});

test('user tools: an agent that did not declare a user tool cannot call it', async () => {
  const threadId = uniqueThreadId('bystander');
  const before = seen.forecast.length;
  const thread = await harness.client.startThread({ agent: 'bystander', threadId });
  const result = await thread.send('Forecast Oslo.');
  assert.equal(result.reply, 'I could not.');
  const [refusal] = (await listMessages(harness.pool, threadId)).filter((message) => message.role === 'tool');
  assert.match(refusal?.content ?? '', /^Error: 'forecast' is not one of your capabilities\./);
  assert.equal(seen.forecast.length, before, 'the tool did not run');
});

test("user tools: a reclaimed fork task's running tool sees its signal abort", async () => {
  const threadId = uniqueThreadId('reclaim');
  const thread = await harness.client.startThread({ agent: 'overseer', threadId });
  const result = await thread.send('Watch, but not for long.');
  assert.equal(result.reply, 'The watcher was stopped.');
  assert.ok(seen.watchStarted, 'the tool ran');
  // The task was reclaimed at the fork's deadline and its activity cancelled; the cancellation reaches the tool
  // through its heartbeat, within a few seconds.
  await waitFor('the watch tool to see its signal abort', 30_000, () => seen.watchAborted);
  assert.match(seen.watchAborted ?? '', /CancelledFailure|cancel/i);
  const [fork] = await thread.forks();
  assert.equal(fork?.tasks[0]?.status, 'timeout');
});
