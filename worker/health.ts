import http from 'node:http';
import type { State } from '@temporalio/worker';

/** A running `/healthz` endpoint; `close()` stops it. */
export interface HealthServer {
  /** `host:port` it listens on (the real port when 0 was asked for). */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /healthz` for supervisors (Docker, Kubernetes, systemd): 200 with `{"status":"RUNNING",…}` while the
 * worker polls, 503 with its state otherwise (starting, draining, stopped, failed). Any other path is a 404.
 */
export async function startHealthServer(
  listen: string,
  status: () => { readonly state: State; readonly identity: string; readonly taskQueue: string },
): Promise<HealthServer> {
  const separator = listen.lastIndexOf(':');
  const host = listen.slice(0, separator).replace(/^\[(.*)\]$/, '$1');
  const port = Number(listen.slice(separator + 1));
  const server = http.createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/healthz') {
      response.writeHead(404).end();
      return;
    }
    const current = status();
    response
      .writeHead(current.state === 'RUNNING' ? 200 : 503, { 'content-type': 'application/json' })
      .end(`${JSON.stringify({ status: current.state, identity: current.identity, taskQueue: current.taskQueue })}\n`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => resolve());
  });
  const bound = server.address();
  const actual = typeof bound === 'object' && bound !== null ? bound.port : port;
  return {
    address: `${host.includes(':') ? `[${host}]` : host}:${actual}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
