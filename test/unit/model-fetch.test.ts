/**
 * `modelFetch`, the transport of Baton's `openai` clients (`node:http` in place of the global `fetch`), against a real
 * HTTP server on loopback, through the real `openai` client where the client's behaviour is what counts: JSON replies
 * with the request as sent, server-sent events read as they arrive, the client's timeout and a caller's abort as
 * `AbortError`s (so the client names them as the global `fetch` would make it), a refused connection, compressed and
 * empty bodies, and bodies it leaves to the global `fetch`.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import zlib from 'node:zlib';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError } from 'openai';
import { modelFetch } from '../../worker/model-fetch';

const COMPLETION = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'done', refusal: null } }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
};

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A loopback server answering with `handle`; resolves to its base URL and what it received. */
async function serve(
  t: TestContext,
  handle: (request: http.IncomingMessage, response: http.ServerResponse, body: string) => void,
): Promise<{ baseURL: string; received: Received[] }> {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
      handle(request, response, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // Connections left open (a response that never ends) are cut, or closing would wait for them.
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, received };
}

const client = (baseURL: string, options: { timeout?: number } = {}) =>
  new OpenAI({ baseURL, apiKey: 'key-1', maxRetries: 0, fetch: modelFetch, ...options });

const json = (response: http.ServerResponse, status: number, value: unknown) => {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(value));
};

test('model fetch: a chat completion comes back parsed, and the request arrives as the client built it', async (t) => {
  const { baseURL, received } = await serve(t, (_request, response) => json(response, 200, COMPLETION));
  const completion = await client(baseURL).chat.completions.create({
    model: 'm',
    messages: [{ role: 'user', content: 'Héllo, wörld.' }],
  });
  assert.equal(completion.choices[0]?.message.content, 'done');
  assert.equal(completion.usage?.total_tokens, 4);
  const [request] = received;
  assert.equal(request?.method, 'POST');
  assert.equal(request?.url, '/v1/chat/completions');
  assert.equal(request?.headers.authorization, 'Bearer key-1');
  assert.match(String(request?.headers['content-type']), /^application\/json/);
  assert.deepEqual(JSON.parse(request?.body ?? '{}'), {
    model: 'm',
    messages: [{ role: 'user', content: 'Héllo, wörld.' }],
  });
});

test('model fetch: an API error keeps its status and body, as the client reports them', async (t) => {
  const { baseURL } = await serve(t, (_request, response) =>
    json(response, 429, { error: { message: 'slow down', type: 'rate_limit', code: 'rate_limited' } }),
  );
  await assert.rejects(
    client(baseURL).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Go.' }] }),
    (error: unknown) =>
      error instanceof OpenAI.RateLimitError && error.status === 429 && /slow down/.test(error.message),
  );
});

// A transport that waited for the whole body would wait here for ever: the server ends only once the client has read.
test(
  'model fetch: server-sent events are read as they arrive, before the response ends',
  { timeout: 10_000 },
  async (t) => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const chunk = (content: string, finish: string | null) =>
      `data: ${JSON.stringify({
        id: 'c',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'm',
        choices: [{ index: 0, delta: { content }, finish_reason: finish }],
      })}\n\n`;
    const { baseURL } = await serve(t, (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(chunk('first ', null));
      // The rest waits until the client has read the first event.
      void released.then(() => response.end(chunk('second', 'stop') + 'data: [DONE]\n\n'));
    });
    const stream = await client(baseURL).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'Go.' }],
      stream: true,
    });
    const parts: string[] = [];
    for await (const event of stream) {
      parts.push(event.choices[0]?.delta.content ?? '');
      if (parts.length === 1) release();
    }
    assert.deepEqual(parts, ['first ', 'second']);
  },
);

test('model fetch: the client’s timeout aborts a request the server never answers (APIConnectionTimeoutError)', async (t) => {
  const { baseURL } = await serve(t, () => undefined);
  const started = Date.now();
  await assert.rejects(
    client(baseURL, { timeout: 150 }).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'Go.' }],
    }),
    APIConnectionTimeoutError,
  );
  assert.ok(Date.now() - started < 5000, 'the timeout ended the request');
});

test('model fetch: a caller’s abort while the body is arriving rejects with an AbortError', async (t) => {
  const { baseURL } = await serve(t, (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.write('{"id": "partial"');
  });
  const controller = new AbortController();
  const pending = modelFetch(`${baseURL}/chat/completions`, { method: 'POST', body: '{}', signal: controller.signal });
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(pending, (error: unknown) => error instanceof Error && error.name === 'AbortError');
  // A signal aborted before the request is not sent at all.
  await assert.rejects(
    modelFetch(`${baseURL}/chat/completions`, { method: 'POST', body: '{}', signal: AbortSignal.abort() }),
    (error: unknown) => error instanceof Error && error.name === 'AbortError',
  );
});

test('model fetch: a refused connection is an APIConnectionError, not a timeout', async () => {
  // A port nothing listens on: bound, then closed.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  await assert.rejects(
    client(`http://127.0.0.1:${port}/v1`).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'Go.' }],
    }),
    (error: unknown) =>
      error instanceof APIConnectionError &&
      !(error instanceof APIConnectionTimeoutError) &&
      /ECONNREFUSED/.test(String((error as { cause?: unknown }).cause)),
  );
});

test('model fetch: gzip and brotli bodies are inflated; an empty 204 has no body', async (t) => {
  const body = Buffer.from(JSON.stringify(COMPLETION));
  const { baseURL, received } = await serve(t, (request, response) => {
    if (request.url?.endsWith('/empty')) {
      response.writeHead(204);
      response.end();
      return;
    }
    const brotli = request.url?.endsWith('/br');
    const compressed = brotli ? zlib.brotliCompressSync(body) : zlib.gzipSync(body);
    response.writeHead(200, {
      'content-type': 'application/json',
      'content-encoding': brotli ? 'br' : 'gzip',
      'content-length': compressed.length,
    });
    response.end(compressed);
  });
  for (const path of ['/gzip', '/br']) {
    const response = await modelFetch(`${baseURL}${path}`);
    assert.equal(response.headers.get('content-encoding'), null);
    assert.deepEqual(await response.json(), COMPLETION);
  }
  assert.match(String(received[0]?.headers['accept-encoding']), /gzip/);
  // Sent by node:http, which adds no user agent (the global fetch sends `node`).
  assert.equal(received[0]?.headers['user-agent'], undefined);
  const empty = await modelFetch(`${baseURL}/empty`, { method: 'DELETE' });
  assert.equal(empty.status, 204);
  assert.equal(empty.body, null);
});

test('model fetch: a body it does not send itself (form data) goes to the global fetch and arrives whole', async (t) => {
  const { baseURL, received } = await serve(t, (_request, response) => json(response, 200, { ok: true }));
  const response = await modelFetch(`${baseURL}/form`, {
    method: 'POST',
    body: new URLSearchParams({ purpose: 'batch', name: 'a b' }),
  });
  assert.deepEqual(await response.json(), { ok: true });
  assert.equal(received[0]?.body, 'purpose=batch&name=a+b');
  assert.match(String(received[0]?.headers['content-type']), /application\/x-www-form-urlencoded/);
  assert.equal(received[0]?.headers['user-agent'], 'node', 'sent by the global fetch');
});
