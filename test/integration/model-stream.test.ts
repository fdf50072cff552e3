/**
 * Model calls with streamed replies (`BATON_MODEL_STREAM=on`): the worker asks the scripted model for a stream, the
 * `openai` client assembles it, and the stored transcript is what the same turn stores without streaming: the text,
 * the tool calls and the usage. A transient failure is retried the same way.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'model-stream-'));

const agents: AgentRegistry = new Map(
  ['writer', 'flaky'].map((name) => [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name}.\n---\nWrite.\n`, `${name}.md`),
  ]),
);
const script = parseScript(
  `
agents:
  writer:
    - calls:
        - { call: think, args: { thought: "Plan a reply of several words." } }
        - { call: list_env_data, args: {} }
      chunk_delay_ms: 2
    - { say: "A streamed answer, assembled word by word into the same message.", chunk_delay_ms: 2 }
  flaky:
    - { fail: 503, times: 1 }
    - say: "Recovered while streaming."
`,
  'model-stream.yaml',
);

/**
 * A thread's stored messages without what differs between two runs (ids, times, operation ids). The results of one
 * reply's tool calls are stored as each call finishes (they run at once), so each run of them is sorted.
 */
async function storedTurn(pool: Parameters<typeof listMessages>[0], threadId: string) {
  const messages = (await listMessages(pool, threadId)).map((message) => ({
    role: message.role,
    content: message.content,
    toolCalls: message.toolCalls?.map((call) => ({ name: call.name, arguments: call.arguments })),
    usage: message.usage,
  }));
  const sorted: typeof messages = [];
  for (const message of messages) {
    let at = sorted.length;
    while (message.role === 'tool' && at > 0 && sorted[at - 1]?.role === 'tool') {
      if ((sorted[at - 1]?.content ?? '') <= (message.content ?? '')) break;
      at -= 1;
    }
    sorted.splice(at, 0, message);
  }
  return sorted;
}

test('streamed model replies store the same transcript as whole ones, and a failed attempt is retried', async () => {
  const runs: Record<string, unknown> = {};
  for (const modelStream of [true, false]) {
    const modelLogFile = path.join(workDir, `model-${modelStream ? 'on' : 'off'}.jsonl`);
    const harness = await startTestHarness(`model-stream-${modelStream ? 'on' : 'off'}`, {
      agents,
      script,
      modelLogFile,
      modelStream,
    });
    try {
      const threadId = uniqueThreadId(modelStream ? 'streamed' : 'whole');
      const thread = await harness.client.startThread({ agent: 'writer', threadId });
      const result = await thread.send('Write.');
      assert.equal(result.reply, 'A streamed answer, assembled word by word into the same message.');
      runs[modelStream ? 'on' : 'off'] = await storedTurn(harness.pool, threadId);

      const flakyThread = uniqueThreadId('flaky');
      const flaky = await harness.client.startThread({ agent: 'flaky', threadId: flakyThread });
      assert.equal((await flaky.send('Try.')).reply, 'Recovered while streaming.');

      const requests = harness.modelRequests();
      assert.ok(requests.length >= 4, `${requests.length} requests`);
      assert.ok(
        requests.every((request) => request.stream === modelStream),
        `every request asked for ${modelStream ? 'a stream' : 'a whole reply'}`,
      );
      assert.equal(requests.filter((request) => request.thread === flakyThread).length, 2, 'the 503 was retried');
    } finally {
      await harness.close();
    }
  }
  const streamed = runs.on as { role: string; usage: unknown }[];
  assert.deepEqual(streamed, runs.off, 'the same messages, tool calls and usage');
  assert.ok(
    streamed.filter((message) => message.role === 'assistant').every((message) => message.usage !== null),
    'a streamed reply stores its usage (stream_options.include_usage)',
  );
});
