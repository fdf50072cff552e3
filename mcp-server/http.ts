/**
 * Baton's MCP server over Streamable HTTP, stateless: each POST to `/mcp` gets a server and a transport of its own
 * (nothing is kept between requests, so nothing is lost when the process restarts), answered as JSON. It listens on
 * loopback only, and every request must carry the secret token as `Authorization: Bearer <token>` (401 otherwise:
 * any process of the machine, a model's shell command among them, reaches loopback). It keeps to the explorer's
 * rules for browsers too: only its own host names are served (421 otherwise: DNS rebinding), a page of another site
 * is refused (403), and a body is limited (413).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  accessTokenProblem,
  AccessTokenError,
  crossSiteRequest,
  loopbackHostHeaders,
  requestHasToken,
} from '../explorer';

/** The port `baton mcp serve --http` listens on unless told otherwise (the explorer's is 8234). */
export const DEFAULT_MCP_PORT = 8235;
/** Loopback only. */
export const MCP_HOST = '127.0.0.1';
export const MCP_PATH = '/mcp';
/** The largest request body read: a message to an agent fits many times over. */
export const MAX_MCP_BODY_BYTES = 1024 * 1024;

export interface McpHttpOptions {
  /** A new server for one request. */
  createServer: () => Server;
  /** 0 picks a free port. @default DEFAULT_MCP_PORT */
  port?: number;
  /**
   * The secret every request carries as `Authorization: Bearer <token>` (see explorer/access.ts); at least
   * `MIN_ACCESS_TOKEN_CHARS` characters.
   * @throws AccessTokenError (from `startMcpHttpServer`) for a token that cannot be used
   */
  token: string;
}

export interface McpHttpServer {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** The headers a client sends with every request: `{ Authorization: 'Bearer <token>' }`. */
  readonly headers: Readonly<Record<string, string>>;
  /** Stops listening and ends the requests in flight. */
  close(): Promise<void>;
}

/** A refusal in the JSON-RPC shape the SDK's transport uses for its own (no request id: none was read). */
function refuse(res: http.ServerResponse, status: number, message: string, headers: http.OutgoingHttpHeaders = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

export async function startMcpHttpServer(options: McpHttpOptions): Promise<McpHttpServer> {
  let allowedHosts: ReadonlySet<string> = new Set();
  const { token } = options;
  const tokenProblem = accessTokenProblem(token);
  if (tokenProblem) throw new AccessTokenError(`the MCP server's token ${tokenProblem}`);

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) res.end();
      else refuse(res, 500, error instanceof Error ? error.message : String(error));
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (!allowedHosts.has((req.headers.host ?? '').toLowerCase())) {
      return refuse(res, 421, `this MCP server answers to ${[...allowedHosts].join(', ')} only`);
    }
    const crossSite = crossSiteRequest(req);
    if (crossSite === 'origin') {
      return refuse(res, 403, `a page from another site (${req.headers.origin ?? ''}) cannot use this MCP server`);
    }
    if (crossSite === 'fetch-site') return refuse(res, 403, 'a cross-site request cannot use this MCP server');
    if (!requestHasToken(req, token)) {
      return refuse(
        res,
        401,
        "this MCP server needs its token: send 'Authorization: Bearer <token>' (`baton mcp serve --http` printed it; " +
          "a local stack's is in its state directory's 'token' file)",
        { 'www-authenticate': 'Bearer realm="Baton MCP"' },
      );
    }
    const { pathname } = new URL(req.url ?? '/', 'http://mcp.invalid');
    if (pathname !== MCP_PATH) return refuse(res, 404, `nothing at ${pathname}: the MCP endpoint is ${MCP_PATH}`);
    if (req.method !== 'POST') {
      // Stateless: no session to stream to (GET) or to end (DELETE).
      return refuse(res, 405, `${req.method ?? 'this method'} is not served: send MCP requests with POST`, {
        allow: 'POST',
      });
    }
    const mcp = options.createServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: MAX_MCP_BODY_BYTES,
    });
    // The request's end (answered, or the client gone) ends its server: a call still running is aborted.
    res.once('close', () => void mcp.close());
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? DEFAULT_MCP_PORT, MCP_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  allowedHosts = loopbackHostHeaders(MCP_HOST, port) ?? new Set();
  return {
    url: `http://${MCP_HOST}:${port}${MCP_PATH}`,
    headers: { Authorization: `Bearer ${token}` },
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
