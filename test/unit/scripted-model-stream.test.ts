/**
 * The scripted model streams (`stream: true`) as the Chat Completions API does, so streaming is testable offline:
 * the real `openai` client reads its Server-Sent Events, the deltas make up the same message as the reply without
 * streaming, tool calls arrive in pieces the client assembles, usage comes last when asked for, a step's
 * `chunk_delay_ms` spaces the chunks, a step's `hold_end` keeps its finish back until released, and a failing step
 * fails before any chunk.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import OpenAI, { APIError } from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { startScriptedModelServer, validateScript, type ScriptedModelServer } from '../../scripted-model';

const REPLY = 'The rule: every coloured cell becomes a copy of the whole input grid.';

const script = validateScript(
  {
    agents: {
      writer: [{ say: REPLY, chunk_delay_ms: 30 }],
      caller: [
        {
          calls: [
            { call: 'load_arc_task', args: { task_id: '007bbfb7' } },
            { call: 'store_env_data', args: { key: 'notes', short_description: 'Notes.', value: 'a long value here' } },
          ],
        },
      ],
      flaky: [{ fail: 503 }, { say: 'recovered' }],
      halting: [{ say: 'Half of it, then the end.', hold_end: 'finish' }],
    },
  },
  'stream-test-script',
);

async function start(t: TestContext): Promise<ScriptedModelServer> {
  const server = await startScriptedModelServer({ script });
  t.after(() => server.close());
  return server;
}

function client(server: ScriptedModelServer, agent: string, thread: string): OpenAI {
  return new OpenAI({
    baseURL: server.baseURL,
    apiKey: 'scripted',
    maxRetries: 0,
    defaultHeaders: { 'x-baton-agent': agent, 'x-baton-thread': thread },
  });
}

const USER: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Go.' }];

test('scripted model streaming: text arrives a word at a time, chunk_delay_ms apart, and makes up the whole reply', async (t) => {
  const server = await start(t);
  const plain = await client(server, 'writer', 'plain').chat.completions.create({ model: 'm', messages: USER });

  const started = Date.now();
  const stream = await client(server, 'writer', 'streamed').chat.completions.create({
    model: 'm',
    messages: USER,
    stream: true,
    stream_options: { include_usage: true },
  });
  const deltas: string[] = [];
  const arrivals: number[] = [];
  let usage: OpenAI.CompletionUsage | null | undefined;
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    arrivals.push(Date.now() - started);
    const choice = chunk.choices[0];
    if (choice?.delta.content) deltas.push(choice.delta.content);
    if (choice?.finish_reason) finish = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(deltas.join(''), plain.choices[0]?.message.content, 'the deltas concatenate to the reply');
  assert.equal(deltas.length, REPLY.split(' ').length, 'one chunk a word');
  assert.equal(finish, 'stop');
  assert.deepEqual(usage, plain.usage, 'the usage chunk, asked for, is the reply’s usage');
  // Chunks are 30 ms apart: the last cannot arrive before the delays between them add up (a lower bound only).
  const chunkCount = arrivals.length;
  assert.ok(
    (arrivals.at(-1) ?? 0) - (arrivals[0] ?? 0) >= (chunkCount - 2) * 30 - 5,
    `arrivals: ${arrivals.join(', ')}`,
  );
});

test('scripted model streaming: tool calls arrive as an id and a name, then their arguments in pieces', async (t) => {
  const server = await start(t);
  const plain = await client(server, 'caller', 'plain').chat.completions.create({ model: 'm', messages: USER });
  const openai = client(server, 'caller', 'streamed');
  const runner = openai.chat.completions.stream({ model: 'm', messages: USER });
  let pieces = 0;
  runner.on('chunk', (chunk) => {
    if ((chunk.choices[0]?.delta.tool_calls ?? []).some((call) => call.function?.arguments)) pieces += 1;
  });
  const assembled = await runner.finalChatCompletion();
  const message = assembled.choices[0]?.message;
  assert.deepEqual(
    message?.tool_calls?.map((call) => call.type === 'function' && { id: call.id, ...call.function }),
    plain.choices[0]?.message.tool_calls?.map((call) => call.type === 'function' && { id: call.id, ...call.function }),
  );
  assert.equal(assembled.choices[0]?.finish_reason, 'tool_calls');
  assert.ok(pieces > 2, `the arguments came in several pieces (${pieces})`);
  // Without stream_options.include_usage, no usage chunk is sent.
  assert.equal(assembled.usage, undefined);
});

test('scripted model streaming: a failing step fails the request before any chunk, and the next step streams', async (t) => {
  const server = await start(t);
  const openai = client(server, 'flaky', 'f');
  await assert.rejects(
    openai.chat.completions.create({ model: 'm', messages: USER, stream: true }),
    (error: unknown) => error instanceof APIError && error.status === 503,
  );
  const stream = await openai.chat.completions.create({ model: 'm', messages: USER, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  assert.equal(text, 'recovered');
});

test('scripted model streaming: chunk_delay_ms is checked like delay_ms', () => {
  assert.throws(
    () => validateScript({ agents: { a: [{ say: 'x', chunk_delay_ms: -1 }] } }, 'bad-script'),
    /chunk_delay_ms must not be negative/,
  );
  assert.throws(
    () => validateScript({ agents: { a: [{ say: 'x', chunk_delay: 5 }] } }, 'bad-script'),
    /unknown field 'chunk_delay' in a say step \(it takes: say, delay_ms, hold, hold_end, chunk_delay_ms\)/,
  );
});

test('scripted model streaming: hold_end sends the text and keeps the finish back until released', async (t) => {
  const server = await start(t);
  const stream = await client(server, 'halting', 'held').chat.completions.create({
    model: 'm',
    messages: USER,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = stream[Symbol.asyncIterator]();
  let text = '';
  // Every word arrives while the name is not released: the reply's text, without its finish.
  while (text !== 'Half of it, then the end.') {
    const next = await chunks.next();
    if (next.done) assert.fail(`the stream ended early after '${text}'`);
    const choice = next.value.choices[0];
    assert.equal(choice?.finish_reason ?? null, null, 'no finish before the release');
    text += choice?.delta.content ?? '';
  }
  const finish = chunks.next();
  // The finish waits for the release: one reply is held now, and it is not sent before it.
  assert.equal(server.release('finish'), 1);
  const rest: OpenAI.ChatCompletionChunk[] = [];
  for (let next = await finish; !next.done; next = await chunks.next()) rest.push(next.value);
  assert.deepEqual(
    rest.map((chunk) => [chunk.choices[0]?.finish_reason ?? null, chunk.usage ? 'usage' : null]),
    [
      ['stop', null],
      [null, 'usage'],
    ],
  );
  // Without streaming the whole reply waits on the name, answered at once once it is released.
  const plain = await client(server, 'halting', 'plain').chat.completions.create({ model: 'm', messages: USER });
  assert.equal(plain.choices[0]?.message.content, 'Half of it, then the end.');
});
