import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { ScriptedModelLogEntry, ScriptedModelServer, ScriptedModelServerOptions } from '../../scripted-model';
import { OMITTED_ASSISTANT_HEADER } from '../../common/context-policy';
import { NonLoopbackHostError, parseScript, startScriptedModelServer, validateScript } from '../../scripted-model';

const script = validateScript(
  {
    agents: {
      coordinator: [{ call: 'solver', args: { message: 'Solve ARC task 007bbfb7' } }, { say: 'The solver is done.' }],
      solver: [
        {
          calls: [
            { call: 'load_arc_task', args: { task_id: '007bbfb7' } },
            { call: 'store_env', args: '{"key": ' },
          ],
        },
        { say: 'Solved.' },
      ],
      flaky: [{ fail: 503, retry_after_s: 2 }, { say: 'recovered' }, { fail: 429, times: 2 }, { say: 'again' }],
      slow: [{ say: 'late', delay_ms: 300 }],
      stuck: [{ say: 'never', delay_ms: 60_000 }],
    },
  },
  'server-test-script',
);

async function start(t: TestContext, options: Partial<ScriptedModelServerOptions> = {}): Promise<ScriptedModelServer> {
  const server = await startScriptedModelServer({ script, ...options });
  t.after(() => server.close());
  return server;
}

function client(server: ScriptedModelServer, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: server.baseURL, apiKey: 'scripted', maxRetries: 0, defaultHeaders: headers });
}

const USER: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Solve ARC task 007bbfb7' }];

async function apiError(promise: Promise<unknown>): Promise<APIError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof APIError, `expected an APIError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the request to fail');
}

test('scripted-model server: a call step is a tool-call completion the openai client reads', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'coordinator', 'x-baton-thread': 'th-1' });
  const completion = await openai.chat.completions.create({ model: 'gpt-test', messages: USER });
  assert.equal(completion.id, 'chatcmpl-scripted-coordinator-1');
  assert.equal(completion.object, 'chat.completion');
  assert.equal(completion.model, 'gpt-test');
  assert.equal(completion.choices.length, 1);
  assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
  assert.equal(completion.choices[0]?.message.role, 'assistant');
  assert.equal(completion.choices[0]?.message.content, null);
  assert.deepEqual(completion.choices[0]?.message.tool_calls, [
    {
      id: 'call_coordinator_1_0',
      type: 'function',
      function: { name: 'solver', arguments: '{"message":"Solve ARC task 007bbfb7"}' },
    },
  ]);
  const promptTokens = Math.ceil(JSON.stringify(USER).length / 4);
  const completionTokens = Math.ceil('solver{"message":"Solve ARC task 007bbfb7"}'.length / 4);
  assert.deepEqual(completion.usage, {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  });
});

test('scripted-model server: a calls step returns several tool calls with derived ids and verbatim string args', async (t) => {
  const server = await start(t);
  const completion = await client(server).chat.completions.create(
    { model: 'm', messages: USER },
    { headers: { 'x-baton-agent': 'solver', 'x-baton-thread': 'th-2' } },
  );
  assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
  assert.deepEqual(
    completion.choices[0]?.message.tool_calls?.map((call) => call.type === 'function' && [call.id, call.function]),
    [
      ['call_solver_1_0', { name: 'load_arc_task', arguments: '{"task_id":"007bbfb7"}' }],
      ['call_solver_1_1', { name: 'store_env', arguments: '{"key": ' }],
    ],
  );
});

test('scripted-model server: the step is chosen by the assistant messages already in the request', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'solver', 'x-baton-thread': 'th-3' });
  const first = await openai.chat.completions.create({ model: 'm', messages: USER });
  const assistant = first.choices[0]?.message;
  assert.ok(assistant?.tool_calls);
  const messages: ChatCompletionMessageParam[] = [
    ...USER,
    { role: 'assistant', content: assistant.content, tool_calls: assistant.tool_calls },
    ...assistant.tool_calls.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: 'ok' })),
  ];
  const second = await openai.chat.completions.create({ model: 'm', messages });
  assert.equal(second.id, 'chatcmpl-scripted-solver-2');
  assert.equal(second.choices[0]?.finish_reason, 'stop');
  assert.equal(second.choices[0]?.message.content, 'Solved.');
  assert.equal(second.choices[0]?.message.tool_calls, undefined);
  // The same request again gets the same answer: the server keeps no per-thread position.
  const again = await openai.chat.completions.create({ model: 'm', messages });
  assert.equal(again.choices[0]?.message.content, 'Solved.');
  assert.equal(server.requestCount('solver'), 3);
});

test('scripted-model server: assistant messages a trimmed request left out still count toward the step', async (t) => {
  const server = await start(t);
  // The request carries no assistant message, but says one was left out: the second step answers.
  const trimmed = client(server, { 'x-baton-agent': 'solver', [OMITTED_ASSISTANT_HEADER]: '1' });
  const reply = await trimmed.chat.completions.create({ model: 'm', messages: USER });
  assert.equal(reply.id, 'chatcmpl-scripted-solver-2');
  assert.equal(reply.choices[0]?.message.content, 'Solved.');
  // A header that is not a positive whole number counts nothing.
  const bogus = client(server, { 'x-baton-agent': 'solver', [OMITTED_ASSISTANT_HEADER]: 'many' });
  assert.equal((await bogus.chat.completions.create({ model: 'm', messages: USER })).id, 'chatcmpl-scripted-solver-1');
});

test('scripted-model server: a fail step answers its status and retry-after, then the next step', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'flaky', 'x-baton-thread': 'th-4' });
  const failed = await apiError(openai.chat.completions.create({ model: 'm', messages: USER }));
  assert.equal(failed.status, 503);
  assert.equal(failed.code, 'scripted_failure');
  assert.equal(failed.type, 'server_error');
  assert.equal(failed.headers?.get('retry-after'), '2');
  assert.equal(failed.message, "503 Scripted model: scripted failure 503 for agent 'flaky' at step 1 (1 of 1).");
  const recovered = await openai.chat.completions.create({ model: 'm', messages: USER });
  assert.equal(recovered.choices[0]?.message.content, 'recovered');

  // Step 2 fails twice (429, no retry-after), then answers.
  const later: ChatCompletionMessageParam[] = [...USER, { role: 'assistant', content: 'recovered' }];
  for (const attempt of [1, 2]) {
    const limited = await apiError(openai.chat.completions.create({ model: 'm', messages: later }));
    assert.equal(limited.status, 429);
    assert.equal(limited.headers?.get('retry-after'), null);
    assert.match(limited.message, new RegExp(`at step 2 \\(${attempt} of 2\\)`));
  }
  const answered = await openai.chat.completions.create({ model: 'm', messages: later });
  assert.equal(answered.choices[0]?.message.content, 'again');
  assert.equal(server.requestCount('flaky'), 5);
});

test('scripted-model server: concurrent threads of one agent each get the scripted failure', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'flaky' });
  const ask = (thread: string) =>
    openai.chat.completions.create({ model: 'm', messages: USER }, { headers: { 'x-baton-thread': thread } });
  const firstRound = await Promise.allSettled([ask('th-a'), ask('th-b')]);
  assert.deepEqual(
    firstRound.map((result) => result.status === 'rejected' && (result.reason as APIError).status),
    [503, 503],
  );
  const secondRound = await Promise.all([ask('th-a'), ask('th-b')]);
  assert.deepEqual(
    secondRound.map((completion) => completion.choices[0]?.message.content),
    ['recovered', 'recovered'],
  );
});

test('scripted-model server: a script that runs out answers 400 script_exhausted naming agent and step', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'solver', 'x-baton-thread': 'th-5' });
  const messages: ChatCompletionMessageParam[] = [
    ...USER,
    { role: 'assistant', content: 'one' },
    { role: 'user', content: 'more' },
    { role: 'assistant', content: 'two' },
    { role: 'user', content: 'more' },
  ];
  const error = await apiError(openai.chat.completions.create({ model: 'm', messages }));
  assert.equal(error.status, 400);
  assert.equal(error.code, 'script_exhausted');
  assert.equal(error.type, 'invalid_request_error');
  assert.deepEqual(error.error, {
    message: "Scripted model: the script for agent 'solver' has no step 3 (it has 2 answering steps).",
    type: 'invalid_request_error',
    param: null,
    code: 'script_exhausted',
  });
});

test('scripted-model server: an unknown or missing agent answers 400 unknown_agent listing the agents', async (t) => {
  const server = await start(t);
  const unknown = await apiError(
    client(server, { 'x-baton-agent': 'nobody' }).chat.completions.create({ model: 'm', messages: USER }),
  );
  assert.equal(unknown.status, 400);
  assert.equal(unknown.code, 'unknown_agent');
  assert.equal(
    unknown.message,
    "400 Scripted model: the script has no agent 'nobody' (it has: 'coordinator', 'solver', 'flaky', 'slow', 'stuck').",
  );
  const missing = await apiError(client(server).chat.completions.create({ model: 'm', messages: USER }));
  assert.equal(missing.status, 400);
  assert.equal(missing.code, 'unknown_agent');
  assert.match(missing.message, /no x-baton-agent header.*it has: 'coordinator', 'solver'/);
  assert.equal(server.requestCount(), 2);
  assert.equal(server.requestCount('nobody'), 1);
});

test('scripted-model server: bad requests and unknown routes get OpenAI-style JSON errors', async (t) => {
  const server = await start(t);
  const post = (body: string) =>
    fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-baton-agent': 'solver' },
      body,
    });
  const errorOf = async (response: Response) => [
    response.status,
    ((await response.json()) as { error: { code: string } }).error.code,
  ];

  assert.deepEqual(await errorOf(await post('{"model": ')), [400, 'invalid_json']);
  assert.deepEqual(await errorOf(await post('[1, 2]')), [400, 'invalid_request']);
  assert.deepEqual(await errorOf(await post('{"model": "m"}')), [400, 'invalid_request']);
  assert.deepEqual(await errorOf(await fetch(`${server.url}/v1/embeddings`, { method: 'POST' })), [404, 'not_found']);
  const wrongMethod = await fetch(`${server.baseURL}/chat/completions`);
  assert.equal(wrongMethod.headers.get('allow'), 'POST');
  assert.deepEqual(await errorOf(wrongMethod), [405, 'method_not_allowed']);
});

test('scripted-model server: GET /v1/models lists the scripted model', async (t) => {
  const server = await start(t, { modelId: 'my-scripted' });
  const models = [];
  for await (const model of client(server).models.list()) models.push(model.id);
  assert.deepEqual(models, ['my-scripted']);
  assert.equal(server.url, `http://127.0.0.1:${server.port}`);
  assert.equal(server.baseURL, `${server.url}/v1`);
});

test('scripted-model server: delay_ms holds the reply back', async (t) => {
  const server = await start(t);
  const started = performance.now();
  const completion = await client(server, { 'x-baton-agent': 'slow' }).chat.completions.create({
    model: 'm',
    messages: USER,
  });
  assert.equal(completion.choices[0]?.message.content, 'late');
  assert.ok(performance.now() - started >= 250, 'the reply came before the scripted delay');
});

async function untilCounted(server: ScriptedModelServer, count: number): Promise<void> {
  for (let i = 0; i < 500 && server.requestCount() < count; i++) await sleep(10);
  assert.equal(server.requestCount(), count);
}

test('scripted-model server: a client that aborts a delayed request does not disturb the server', async (t) => {
  const server = await start(t);
  const openai = client(server, { 'x-baton-agent': 'stuck' });
  const abort = new AbortController();
  const pending = openai.chat.completions.create({ model: 'm', messages: USER }, { signal: abort.signal });
  await untilCounted(server, 1);
  abort.abort();
  await assert.rejects(pending, APIUserAbortError);
  const next = await openai.chat.completions.create(
    { model: 'm', messages: USER },
    { headers: { 'x-baton-agent': 'coordinator' } },
  );
  assert.equal(next.choices[0]?.finish_reason, 'tool_calls');
  // The aborted request's 60 s timer must be gone, or close() and this test would wait for it.
  const closing = performance.now();
  await server.close();
  assert.ok(performance.now() - closing < 5_000);
});

test('scripted-model server: close() does not wait for in-flight delayed replies', async (t) => {
  const server = await start(t);
  const pending = client(server, { 'x-baton-agent': 'stuck' }).chat.completions.create({ model: 'm', messages: USER });
  await untilCounted(server, 1);
  const closing = performance.now();
  await server.close();
  assert.ok(performance.now() - closing < 5_000);
  await assert.rejects(pending, APIConnectionError);
  await server.close();
});

test('scripted-model server: the request log holds one JSON line per request with x-baton headers only', async (t) => {
  const logFile = join(mkdtempSync(join(tmpdir(), 'baton-scripted-model-')), 'nested', 'model.jsonl');
  const server = await start(t, { logFile });
  const tools: ChatCompletionTool[] = [
    {
      type: 'function',
      function: { name: 'load_arc_task', description: 'Load a task', parameters: { type: 'object', properties: {} } },
    },
  ];
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: 'You are the solver.' },
    ...USER,
    { role: 'assistant', content: 'thinking' },
    { role: 'user', content: 'go on' },
  ];
  const openai = client(server, { 'x-baton-agent': 'solver', 'x-baton-root-thread': 'root-1', 'x-other': 'hidden' });
  await openai.chat.completions.create(
    { model: 'gpt-log', messages, tools },
    { headers: { 'x-baton-thread': 'th-6' } },
  );
  await openai.chat.completions.create({ model: 'gpt-log', messages: USER });

  const lines = readFileSync(logFile, 'utf8').split('\n');
  assert.equal(lines.pop(), '');
  const entries = lines.map((line) => JSON.parse(line) as ScriptedModelLogEntry);
  assert.equal(entries.length, 2);
  for (const entry of entries) {
    assert.ok(!Number.isNaN(Date.parse(entry.time)));
    assert.equal(new Date(entry.time).toISOString(), entry.time);
    // The same moment with its fraction: within the millisecond `time` names.
    assert.equal(Math.floor(entry.receivedMs), Date.parse(entry.time));
  }
  const [first, second] = entries;
  assert.deepEqual(
    { ...first, time: undefined, receivedMs: undefined },
    {
      time: undefined,
      receivedMs: undefined,
      agent: 'solver',
      thread: 'th-6',
      headers: { 'x-baton-agent': 'solver', 'x-baton-root-thread': 'root-1', 'x-baton-thread': 'th-6' },
      model: 'gpt-log',
      messages,
      tools,
      stream: false,
    },
  );
  assert.deepEqual(
    { ...second, time: undefined, receivedMs: undefined },
    {
      time: undefined,
      receivedMs: undefined,
      agent: 'solver',
      thread: 'root-1',
      headers: { 'x-baton-agent': 'solver', 'x-baton-root-thread': 'root-1' },
      model: 'gpt-log',
      messages: USER,
      tools: null,
      stream: false,
    },
  );
});

test('scripted-model server: refuses to listen on a non-loopback address', async () => {
  await assert.rejects(startScriptedModelServer({ script, host: '0.0.0.0' }), (error: unknown) => {
    assert.ok(error instanceof NonLoopbackHostError);
    assert.equal(error.host, '0.0.0.0');
    assert.match(error.message, /refusing to listen on '0\.0\.0\.0'/);
    return true;
  });
});

test('scripted model server: a step with hold answers only once its name is released, and later ones at once', async () => {
  const server = await startScriptedModelServer({
    script: parseScript('agents:\n  a:\n    - say: "held"\n      hold: gate\n    - say: "free"\n', 'hold.yaml'),
  });
  try {
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'scripted', maxRetries: 0 });
    const ask = (messages: { role: 'user' | 'assistant'; content: string }[]) =>
      client.chat.completions.create({ model: 'm', messages }, { headers: { 'x-baton-agent': 'a' } });
    let answered = false;
    const first = ask([{ role: 'user', content: 'hi' }]).then((reply) => {
      answered = true;
      return reply;
    });
    // The request arrives, and stays unanswered while the name is held.
    for (let tries = 0; server.requestCount('a') === 0; tries += 1) {
      assert.ok(tries < 200, 'the request reached the server');
      await sleep(10);
    }
    assert.equal(answered, false);
    assert.equal(server.release('gate'), 1, 'one reply was waiting');
    assert.equal((await first).choices[0]?.message.content, 'held');
    // Released once, released for good: the same step asked again is answered at once.
    const again = await ask([{ role: 'user', content: 'hi' }]);
    assert.equal(again.choices[0]?.message.content, 'held');
    assert.equal(server.release('gate'), 0);
  } finally {
    await server.close();
  }
});
