import { appendFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { estimateTokens, OMITTED_ASSISTANT_HEADER } from '../common/context-policy';
import type { AnsweringStep, Script } from './script';
import { ScriptedModelError, describeAgents, selectStep } from './script';

/** Options of {@link startScriptedModelServer}. */
export interface ScriptedModelServerOptions {
  /** The script to answer from (see `loadScript`). */
  readonly script: Script;
  /**
   * Loopback address to listen on. The server has no authentication and its log holds whole transcripts,
   * so other interfaces are refused.
   * @default '127.0.0.1'
   */
  readonly host?: string;
  /**
   * Port to listen on; 0 picks a free one (read it back from {@link ScriptedModelServer.port}).
   * @default 0
   */
  readonly port?: number;
  /**
   * File that every chat-completions request is appended to as one JSON line ({@link ScriptedModelLogEntry}).
   * Its directory is created if missing. No log when unset.
   */
  readonly logFile?: string;
  /**
   * Model id listed by `GET /v1/models`. Requests may name any model; replies echo the requested one.
   * @default 'baton-scripted'
   */
  readonly modelId?: string;
}

/** A running scripted model server. */
export interface ScriptedModelServer {
  /** `http://HOST:PORT`, without a trailing slash. */
  readonly url: string;
  /** `url + '/v1'`: the `baseURL` for an OpenAI client. */
  readonly baseURL: string;
  readonly port: number;
  /** Chat-completions requests received (with a JSON object body), for one agent or for all. */
  requestCount(agent?: string): number;
  /**
   * Lets the replies of steps with `hold: <name>` go out, and the ends of those with `hold_end: <name>`: those
   * waiting now, and every later one. Returns how many were waiting.
   */
  release(name: string): number;
  /** Stops listening and drops open connections, including requests still waiting out a `delay_ms` or a `hold`. */
  close(): Promise<void>;
}

/** One line of the request log. */
export interface ScriptedModelLogEntry {
  /** ISO 8601 time the request was received. */
  readonly time: string;
  /**
   * The same moment in milliseconds since the epoch, with the fraction the process's clock gives
   * (`performance.timeOrigin + performance.now()`): for latencies measured against that clock in the same process.
   */
  readonly receivedMs: number;
  /** `x-baton-agent`, or null when the header is missing. */
  readonly agent: string | null;
  /** `x-baton-thread`, else `x-baton-root-thread`, else null. */
  readonly thread: string | null;
  /** Every `x-baton-*` request header; no other headers (they may carry credentials). */
  readonly headers: Readonly<Record<string, string>>;
  readonly model: unknown;
  /** Exactly as received. */
  readonly messages: unknown;
  /** Exactly as received; null when the request had none. */
  readonly tools: unknown;
  /** Whether the request asked for a streamed reply (`stream: true`). */
  readonly stream: boolean;
  /** Exactly as received (a structured output's `json_schema`, say); absent when the request had none. */
  readonly response_format?: unknown;
}

/** The server was asked to listen on an address other people's machines could reach. */
export class NonLoopbackHostError extends ScriptedModelError {
  constructor(readonly host: string) {
    super(`Scripted model: refusing to listen on '${host}'; use a loopback address (127.0.0.1, ::1 or localhost).`);
  }
}

/** Default model id of `GET /v1/models`. */
export const SCRIPTED_MODEL_ID = 'baton-scripted';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '::1', 'localhost']);
/** Generous for long transcripts, but bounded so a runaway client cannot exhaust memory. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Error bodies follow OpenAI's shape so clients surface `code` and `message` as usual. */
class HttpError extends ScriptedModelError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

function errorType(status: number): string {
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  // The client may have gone away while we waited; writing then would throw or go nowhere.
  if (res.destroyed || res.writableEnded) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
  });
  res.end(text);
}

function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(
    res,
    error.status,
    { error: { message: error.message, type: errorType(error.status), param: null, code: error.code } },
    error.headers,
  );
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'request_too_large', `Scripted model: request body over ${MAX_BODY_BYTES} bytes.`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  const text = Array.isArray(value) ? value.join(', ') : value;
  return text === undefined || text === '' ? undefined : text;
}

function batonHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of Object.keys(headers).sort()) {
    const value = header(headers, name);
    if (name.startsWith('x-baton-') && value !== undefined) picked[name] = value;
  }
  return picked;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Ids must be derived, never random, and stay within the characters OpenAI uses. */
function idPart(text: string): string {
  return text.replace(/[^A-Za-z0-9_-]/g, '_');
}

interface ChatRequest {
  readonly agent: string;
  readonly model: string;
  readonly promptText: string;
}

function completionBody(request: ChatRequest, stepNumber: number, step: AnsweringStep): unknown {
  const agentId = idPart(request.agent);
  const calls = step.kind === 'say' ? [] : step.kind === 'call' ? [step] : step.calls;
  const toolCalls = calls.map((call, index) => ({
    id: call.id ?? `call_${agentId}_${stepNumber}_${index}`,
    type: 'function',
    function: { name: call.call, arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args) },
  }));
  const content = step.kind === 'say' ? step.say : null;
  const completionText = content ?? toolCalls.map((call) => call.function.name + call.function.arguments).join('');
  const promptTokens = estimateTokens(request.promptText);
  const completionTokens = estimateTokens(completionText);
  return {
    id: `chatcmpl-scripted-${agentId}-${stepNumber}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          refusal: null,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
      },
    ],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

/** A completion as the Chat Completions API builds it. */
interface CompletionBody {
  id: string;
  created: number;
  model: string;
  choices: {
    message: { content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
    finish_reason: string;
  }[];
  usage: unknown;
}

/** The longest piece of a tool call's arguments in one streamed chunk. */
const ARGUMENT_CHUNK_CHARS = 16;

/**
 * A completion as the chunks a streamed reply sends (`stream: true`), in the order the Chat Completions API sends
 * them: the role, the content a word at a time, each tool call's id and name and then its arguments in pieces, the
 * finish reason, and the usage last when the request asked for it (`stream_options.include_usage`). Concatenated,
 * the deltas are the completion's message.
 */
export function streamChunks(reply: unknown, includeUsage: boolean): unknown[] {
  const body = reply as CompletionBody;
  const choice = body.choices[0];
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    id: body.id,
    object: 'chat.completion.chunk',
    created: body.created,
    model: body.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  });
  const chunks: unknown[] = [chunk({ role: 'assistant', content: '' })];
  for (const word of choice?.message.content?.match(/\s*\S+\s*/g) ?? []) chunks.push(chunk({ content: word }));
  (choice?.message.tool_calls ?? []).forEach((call, index) => {
    chunks.push(
      chunk({
        tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }],
      }),
    );
    for (let at = 0; at < call.function.arguments.length; at += ARGUMENT_CHUNK_CHARS) {
      const piece = call.function.arguments.slice(at, at + ARGUMENT_CHUNK_CHARS);
      chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  chunks.push(chunk({}, choice?.finish_reason ?? 'stop'));
  if (includeUsage) {
    chunks.push({
      id: body.id,
      object: 'chat.completion.chunk',
      created: body.created,
      model: body.model,
      choices: [],
      usage: body.usage,
    });
  }
  return chunks;
}

/**
 * Sends chunks as Server-Sent Events (`data: <json>`, then `data: [DONE]`), `chunkDelayMs` apart. A client that
 * goes away stops the stream; a pending chunk's timer is kept in `pending` so `close()` can drop it. With `holdEnd`,
 * the chunks from `endAt` on (the finish) go out only once `holdEnd` calls back.
 */
function sendStream(
  res: ServerResponse,
  chunks: readonly unknown[],
  chunkDelayMs: number,
  pending: Set<{ timer: NodeJS.Timeout; res: ServerResponse }>,
  holdEnd?: { endAt: number; wait: (resume: () => void) => void },
): void {
  if (res.destroyed) return;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const lines = [...chunks.map((chunk) => JSON.stringify(chunk)), '[DONE]'];
  let next = 0;
  let held = holdEnd !== undefined;
  let waiting: { timer: NodeJS.Timeout; res: ServerResponse } | undefined;
  res.once('close', () => {
    if (waiting === undefined) return;
    clearTimeout(waiting.timer);
    pending.delete(waiting);
  });
  const write = (): void => {
    while (next < lines.length && !res.destroyed) {
      if (held && holdEnd && next === holdEnd.endAt) {
        held = false;
        holdEnd.wait(write);
        return;
      }
      res.write(`data: ${lines[next] ?? ''}\n\n`);
      next += 1;
      if (chunkDelayMs > 0 && next < lines.length) {
        const timer = setTimeout(() => {
          if (waiting !== undefined) pending.delete(waiting);
          waiting = undefined;
          write();
        }, chunkDelayMs);
        waiting = { timer, res };
        pending.add(waiting);
        return;
      }
    }
    if (!res.destroyed) res.end();
  };
  write();
}

/**
 * Starts the scripted OpenAI-compatible model server (docs/architecture.md §7): `POST /v1/chat/completions` answers
 * from the script, as one JSON completion or, with `stream: true`, as Server-Sent Events (each step's
 * `chunk_delay_ms` apart); `GET /v1/models` lists one model.
 *
 * @throws {@link NonLoopbackHostError} for a host that is not a loopback address.
 */
export async function startScriptedModelServer(options: ScriptedModelServerOptions): Promise<ScriptedModelServer> {
  const { script, host = '127.0.0.1', port = 0, logFile, modelId = SCRIPTED_MODEL_ID } = options;
  if (!LOOPBACK_HOSTS.has(host)) throw new NonLoopbackHostError(host);
  if (logFile !== undefined) {
    // Fail at start-up, not on the first request, when the log cannot be written.
    mkdirSync(dirname(logFile), { recursive: true });
    appendFileSync(logFile, '');
  }

  const counts = new Map<string, number>();
  let total = 0;
  // Failures already served per (agent, thread, step): keyed by thread so concurrent threads of one agent
  // each see the scripted failures.
  const failures = new Map<string, number>();
  const delayed = new Set<{ timer: NodeJS.Timeout; res: ServerResponse }>();
  /** Replies waiting for `release(name)`, and the names released so far. */
  const held = new Set<{ name: string; res: ServerResponse; answer: () => void }>();
  const released = new Set<string>();

  function logRequest(entry: ScriptedModelLogEntry): void {
    if (logFile === undefined) return;
    // One synchronous append per request: lines never interleave, and a line is on disk before its reply.
    appendFileSync(logFile, `${JSON.stringify(entry)}\n`);
  }

  async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new HttpError(400, 'invalid_json', `Scripted model: the request body is not valid JSON (${reason}).`);
    }
    if (!isRecord(body))
      throw new HttpError(400, 'invalid_request', 'Scripted model: the request body must be a JSON object.');

    const agent = header(req.headers, 'x-baton-agent');
    const thread = header(req.headers, 'x-baton-thread') ?? header(req.headers, 'x-baton-root-thread');
    total++;
    if (agent !== undefined) counts.set(agent, (counts.get(agent) ?? 0) + 1);
    const receivedMs = performance.timeOrigin + performance.now();
    logRequest({
      time: new Date(receivedMs).toISOString(),
      receivedMs,
      agent: agent ?? null,
      thread: thread ?? null,
      headers: batonHeaders(req.headers),
      model: body.model,
      messages: body.messages,
      tools: body.tools ?? null,
      stream: body.stream === true,
      ...(body.response_format === undefined ? {} : { response_format: body.response_format }),
    });

    const stream = body.stream === true;
    const includeUsage = stream && isRecord(body.stream_options) && body.stream_options.include_usage === true;
    const messages = body.messages;
    if (!Array.isArray(messages)) {
      throw new HttpError(400, 'invalid_request', "Scripted model: the request needs a 'messages' array.");
    }
    if (agent === undefined) {
      throw new HttpError(
        400,
        'unknown_agent',
        `Scripted model: the request has no x-baton-agent header, so the script cannot tell which agent is asking (${describeAgents(script)}).`,
      );
    }

    // A request trimmed by an agent's context policy says how many assistant messages it left out, so the step
    // stays the number of replies the thread has had, not the number this request happens to carry.
    const omittedAssistant = Number(header(req.headers, OMITTED_ASSISTANT_HEADER) ?? '0');
    const assistantCount =
      messages.filter((message) => isRecord(message) && message.role === 'assistant').length +
      (Number.isSafeInteger(omittedAssistant) && omittedAssistant > 0 ? omittedAssistant : 0);
    const failureKey = JSON.stringify([agent, thread ?? '', assistantCount]);
    const failuresSoFar = failures.get(failureKey) ?? 0;
    const selection = selectStep(script, agent, assistantCount, failuresSoFar);
    switch (selection.kind) {
      case 'unknown_agent':
        throw new HttpError(400, 'unknown_agent', selection.message);
      case 'exhausted':
        throw new HttpError(400, 'script_exhausted', selection.message);
      case 'fail':
        failures.set(failureKey, failuresSoFar + 1);
        throw new HttpError(
          selection.status,
          'scripted_failure',
          selection.message,
          selection.retryAfterS === undefined ? {} : { 'retry-after': String(selection.retryAfterS) },
        );
      case 'answer': {
        const request: ChatRequest = {
          agent,
          model: typeof body.model === 'string' ? body.model : modelId,
          promptText: JSON.stringify(messages) + (body.tools === undefined ? '' : JSON.stringify(body.tools)),
        };
        const reply = completionBody(request, selection.stepNumber, selection.step);
        const delayMs = selection.step.delay_ms ?? 0;
        const endName = selection.step.hold_end;
        const send = () => {
          if (!stream) {
            if (endName === undefined) sendJson(res, 200, reply);
            else waitForRelease(endName, res, () => sendJson(res, 200, reply));
            return;
          }
          const chunks = streamChunks(reply, includeUsage);
          // The finish chunk comes before the usage chunk (when asked) and `[DONE]`.
          const endAt = chunks.length - (includeUsage ? 2 : 1);
          sendStream(
            res,
            chunks,
            selection.step.chunk_delay_ms ?? 0,
            delayed,
            endName === undefined ? undefined : { endAt, wait: (resume) => waitForRelease(endName, res, resume) },
          );
        };
        const answer = () => {
          if (delayMs === 0 || res.destroyed) {
            send();
            return;
          }
          const pending = {
            timer: setTimeout(() => {
              delayed.delete(pending);
              send();
            }, delayMs),
            res,
          };
          delayed.add(pending);
          // A client that gave up (or a close()) gets nothing; the timer must not outlive it.
          res.once('close', () => {
            clearTimeout(pending.timer);
            delayed.delete(pending);
          });
        };
        const holdName = selection.step.hold;
        if (holdName === undefined) return answer();
        waitForRelease(holdName, res, answer);
        return;
      }
    }
  }

  /** Calls `go` once `name` is released (at once when it was already); a client gone meanwhile gets nothing. */
  function waitForRelease(name: string, res: ServerResponse, go: () => void): void {
    if (released.has(name)) return go();
    const waiting = { name, res, answer: go };
    held.add(waiting);
    res.once('close', () => held.delete(waiting));
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://scripted-model').pathname.replace(/\/+$/, '');
    if (path === '/v1/chat/completions') {
      if (req.method !== 'POST') {
        throw new HttpError(405, 'method_not_allowed', `Scripted model: use POST for ${path}.`, { allow: 'POST' });
      }
      await chatCompletions(req, res);
      return;
    }
    if (path === '/v1/models') {
      if (req.method !== 'GET') {
        throw new HttpError(405, 'method_not_allowed', `Scripted model: use GET for ${path}.`, { allow: 'GET' });
      }
      sendJson(res, 200, { object: 'list', data: [{ id: modelId, object: 'model', created: 0, owned_by: 'baton' }] });
      return;
    }
    throw new HttpError(
      404,
      'not_found',
      `Scripted model: no route ${req.method ?? 'GET'} ${path || '/'}; it serves POST /v1/chat/completions and GET /v1/models.`,
    );
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      sendError(
        res,
        error instanceof HttpError
          ? error
          : new HttpError(
              500,
              'internal_error',
              `Scripted model: ${error instanceof Error ? error.message : String(error)}`,
            ),
      );
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;

  let closing: Promise<void> | undefined;
  return {
    url,
    baseURL: `${url}/v1`,
    port: address.port,
    requestCount: (agent) => (agent === undefined ? total : (counts.get(agent) ?? 0)),
    release(name) {
      released.add(name);
      const waiting = [...held].filter((entry) => entry.name === name);
      for (const entry of waiting) {
        held.delete(entry);
        entry.answer();
      }
      return waiting.length;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const entry of held) entry.res.destroy();
        held.clear();
        for (const pending of delayed) {
          clearTimeout(pending.timer);
          pending.res.destroy();
        }
        delayed.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
