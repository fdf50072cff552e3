/**
 * The `fetch` Baton's `openai` clients send their requests through: Node's own `http`/`https` modules over
 * keep-alive connections, in place of the global `fetch`. Through the global `fetch` of Node 20 (undici) a request
 * of the `openai` client took about 0.3 ms more CPU (`npm run bench -- model-transport`: 0.72× with this one), and a
 * worker makes one request per step: with fast models that is a share of every step a user can see.
 *
 * It keeps what the `openai` client relies on: a standard `Response` (a buffered body for JSON, a stream for server-sent
 * events, read as it arrives), an abort through the request's signal that rejects with the signal's `AbortError` (the
 * client's timeout is such an abort), compressed bodies inflated. A request it was not written for (a body that is a
 * stream or form data, a `Request` object) goes to the global `fetch` unchanged.
 */
import http from 'node:http';
import https from 'node:https';
import { Readable, type Transform } from 'node:stream';
import zlib from 'node:zlib';

/** One keep-alive pool of connections per protocol for the whole process, as the global `fetch` keeps. */
const agents = {
  'http:': new http.Agent({ keepAlive: true }),
  'https:': new https.Agent({ keepAlive: true }),
} as const;

/** Response statuses that carry no body (the `Response` constructor refuses one for them). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export async function modelFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const body = init.body;
  const sendsPlainBody = body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
  if (!(typeof input === 'string' || input instanceof URL) || !sendsPlainBody) return fetch(input, init);
  const url = new URL(input);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fetch(input, init);
  const method = (init.method ?? 'GET').toUpperCase();
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, name) => {
    headers[name] = value;
  });
  // What the global `fetch` asks for; this transport inflates those (and brotli, should a server send it anyway).
  headers['accept-encoding'] ??= 'gzip, deflate';
  const signal = init.signal ?? undefined;
  signal?.throwIfAborted();
  return new Promise<Response>((resolve, reject) => {
    /** The body being read, once the response has begun. */
    let content: Readable | undefined;
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      { method, headers, agent: agents[url.protocol as keyof typeof agents] },
      (response) => {
        const status = response.statusCode ?? 0;
        const responseInit = { status, statusText: response.statusMessage ?? '', headers: responseHeaders(response) };
        if (NULL_BODY_STATUSES.has(status) || method === 'HEAD') {
          response.resume();
          resolve(new Response(null, responseInit));
          return;
        }
        content = inflated(response);
        content.on('error', reject);
        if (/^text\/event-stream\b/i.test(response.headers['content-type'] ?? '')) {
          // Events are read as they arrive: the response is handed over at once, its body still streaming.
          resolve(new Response(Readable.toWeb(content) as ReadableStream<Uint8Array>, responseInit));
          return;
        }
        const chunks: Buffer[] = [];
        content.on('data', (chunk: Buffer) => chunks.push(chunk));
        content.on('end', () => resolve(new Response(Buffer.concat(chunks), responseInit)));
      },
    );
    // An aborted request fails with its signal's reason (an `AbortError`, which the client reads as its timeout or
    // its caller's abort), wherever it was: connecting, waiting, or reading the body.
    const abort = () => {
      const reason = signal?.reason instanceof Error ? signal.reason : abortError();
      content?.destroy(reason);
      request.destroy(reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
    request.on('error', reject);
    request.on('close', () => signal?.removeEventListener('abort', abort));
    request.end(body ?? undefined);
  });
}

function responseHeaders(response: http.IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.set(name, value);
  }
  // The body handed on is inflated: its encoding and compressed length no longer describe it.
  if (inflaterFor(response) !== undefined) {
    headers.delete('content-encoding');
    headers.delete('content-length');
  }
  return headers;
}

const INFLATERS: Readonly<Record<string, () => Transform>> = {
  gzip: zlib.createGunzip,
  'x-gzip': zlib.createGunzip,
  deflate: zlib.createInflate,
  br: zlib.createBrotliDecompress,
};

/** What inflates the response's body, or `undefined` when it did not come compressed. */
function inflaterFor(response: http.IncomingMessage): (() => Transform) | undefined {
  const encoding = (response.headers['content-encoding'] ?? '').trim().toLowerCase();
  return Object.hasOwn(INFLATERS, encoding) ? INFLATERS[encoding] : undefined;
}

/** The response's body, inflated when it came compressed. */
function inflated(response: http.IncomingMessage): Readable {
  const createInflater = inflaterFor(response);
  if (createInflater === undefined) return response;
  const inflate = createInflater();
  response.on('error', (error) => inflate.destroy(error));
  return response.pipe(inflate);
}

/** What an aborted request rejects with when its signal gave no reason of its own: the standard `AbortError`. */
function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}
