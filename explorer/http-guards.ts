/**
 * What keeps a loopback HTTP server without authentication (the explorer, `baton mcp serve --http`) to the pages and
 * programs of this machine: a page on another site can still reach loopback from the user's browser, through DNS
 * rebinding (a name of its own resolving to 127.0.0.1) or by posting straight to the address.
 */
import type http from 'node:http';

export function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}

/**
 * The `Host` headers a server listening on `host:port` answers to when `host` is loopback: its own names for
 * loopback, never a rebound name. `undefined` (any) when it listens elsewhere, where names are the operator's.
 */
export function loopbackHostHeaders(host: string, port: number): ReadonlySet<string> | undefined {
  if (!isLoopback(host)) return undefined;
  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  return new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${hostForUrl}:${port}`]);
}

/**
 * Whether a browser sent this request from another site's page: its `Origin` is not this server's own, or
 * `Sec-Fetch-Site` says `cross-site`. Programs other than browsers send neither.
 */
export function crossSiteRequest(req: http.IncomingMessage): 'origin' | 'fetch-site' | undefined {
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${req.headers.host ?? ''}`) return 'origin';
  if (req.headers['sec-fetch-site'] === 'cross-site') return 'fetch-site';
  return undefined;
}
