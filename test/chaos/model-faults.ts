/**
 * A faulty network between the workers and the model: an HTTP proxy in front of the scripted model that, while a
 * fault is switched on, answers with bursts of 5xx or 429 (with `retry-after`), or passes the request on and cuts
 * the connection halfway through the reply; and that always answers 401 for the root threads it is told to refuse.
 * The scripted model behind it stays deterministic; every fault it injects is counted.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the proxy does to requests while a fault is on. */
export type ModelFault =
  | { readonly kind: 'status'; readonly status: 500 | 502 | 503 | 429; readonly retryAfterS?: number }
  /** The upstream reply's headers and half its body reach the worker, then the connection is destroyed. */
  | { readonly kind: 'drop' };

export interface FaultCounts {
  /** Requests that reached the proxy. */
  requests: number;
  /** Requests answered with an injected 5xx or 429. */
  statusFaults: number;
  /** Replies cut off halfway. */
  dropped: number;
  /** Requests answered 401 because their root thread is refused. */
  unauthorized: number;
  /**
   * The most requests the proxy held at once (from receipt to the end of its answer, or its connection's), but for
   * those of the agents it was told not to count.
   */
  mostAtOnce: number;
}

export interface ModelFaultProxy {
  /** `http://127.0.0.1:PORT/v1`, the workers' OPENAI_BASE_URL. */
  readonly baseURL: string;
  /**
   * Switches a fault on for the next `requests` model requests (a burst: requests already passed on are not
   * affected), or until {@link clearFault}.
   */
  setFault(fault: ModelFault, requests: number): void;
  /** Requests the current burst has yet to hit (0 once it is spent or cleared). */
  faultRemaining(): number;
  clearFault(): void;
  /** Every model request of this root thread (`x-baton-root-thread`) gets 401 from now on. */
  refuseRoot(rootThreadId: string): void;
  counts(): FaultCounts;
  /** Starts counting `mostAtOnce` afresh, from the requests held now. */
  resetMostAtOnce(): void;
  close(): Promise<void>;
}

/**
 * @param upstream the scripted model's URL (`http://HOST:PORT`, no `/v1`).
 * @param options.uncountedAgents agents whose requests `mostAtOnce` leaves out (`x-baton-agent`): those outside the
 *   limit it checks
 */
export async function startModelFaultProxy(
  upstream: string,
  options: { uncountedAgents?: readonly string[] } = {},
): Promise<ModelFaultProxy> {
  const target = new URL(upstream);
  let fault: ModelFault | undefined;
  let remaining = 0;
  const refused = new Set<string>();
  const counts: FaultCounts = { requests: 0, statusFaults: 0, dropped: 0, unauthorized: 0, mostAtOnce: 0 };
  let atOnce = 0;
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    counts.requests += 1;
    const agent = headerValue(req, 'x-baton-agent');
    if (agent === undefined || !options.uncountedAgents?.includes(agent)) {
      atOnce += 1;
      counts.mostAtOnce = Math.max(counts.mostAtOnce, atOnce);
      // Once, however it ends: answered, cut off, or its worker gone.
      res.once('close', () => (atOnce -= 1));
    }
    const root = headerValue(req, 'x-baton-root-thread');
    if (root !== undefined && refused.has(root)) {
      counts.unauthorized += 1;
      drain(req, () => sendError(res, 401, 'invalid_api_key', 'Incorrect API key provided (chaos: refused thread).'));
      return;
    }
    const active = remaining > 0 ? fault : undefined;
    if (active) remaining -= 1;
    if (active?.kind === 'status') {
      counts.statusFaults += 1;
      const headers: Record<string, string> =
        active.retryAfterS === undefined ? {} : { 'retry-after': String(active.retryAfterS) };
      const type = active.status === 429 ? 'rate_limit_error' : 'server_error';
      drain(req, () => sendError(res, active.status, type, `chaos: injected ${active.status}`, headers));
      return;
    }
    forward(req, res, target, active?.kind === 'drop' ? () => (counts.dropped += 1) : undefined);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    setFault: (next, requests) => {
      fault = next;
      remaining = requests;
    },
    faultRemaining: () => remaining,
    clearFault: () => {
      fault = undefined;
      remaining = 0;
    },
    refuseRoot: (rootThreadId) => {
      refused.add(rootThreadId);
    },
    counts: () => ({ ...counts }),
    resetMostAtOnce: () => {
      counts.mostAtOnce = atOnce;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Reads the request body to its end (so the client is not left writing into a closed socket), then answers. */
function drain(req: IncomingMessage, then: () => void): void {
  req.resume();
  req.once('end', then);
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ error: { message, type, param: null, code: type } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/**
 * Passes the request to the scripted model and its reply back. With `onDrop`, the reply's headers and the first half
 * of its body are sent, then the socket is destroyed: a connection dropped mid-response.
 */
function forward(req: IncomingMessage, res: ServerResponse, target: URL, onDrop: (() => void) | undefined): void {
  const upstream = request(
    {
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: req.headers,
    },
    (reply) => {
      const chunks: Buffer[] = [];
      reply.on('data', (chunk: Buffer) => chunks.push(chunk));
      reply.once('end', () => {
        const body = Buffer.concat(chunks);
        if (onDrop && reply.statusCode === 200) {
          onDrop();
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
          res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.destroy());
          return;
        }
        res.writeHead(reply.statusCode ?? 502, reply.headers);
        res.end(body);
      });
      reply.once('error', () => res.destroy());
    },
  );
  upstream.once('error', () => res.destroy());
  // A worker that dies mid-request aborts its side; the scripted model's side goes with it.
  res.once('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}
