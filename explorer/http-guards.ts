/**
 * What keeps another site's page in the user's browser away from a loopback HTTP server (the explorer,
 * `baton mcp serve --http`): such a page can reach loopback through DNS rebinding (a name of its own resolving to
 * 127.0.0.1) or by sending straight to the address. These checks stop browsers only; the secret token of access.ts
 * is what stops every other program of the machine.
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
 * Whether a browser sent this request from a page other than this server's own: its `Origin` is not this server's,
 * or `Sec-Fetch-Site` says `cross-site` or `same-site` (a page on another port of the same host is same-site, and
 * cookies do not tell ports apart). `same-origin` and `none` (the person typed or opened the address) pass; programs
 * other than browsers send neither header.
 */
export function crossSiteRequest(req: http.IncomingMessage): 'origin' | 'fetch-site' | undefined {
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${req.headers.host ?? ''}`) return 'origin';
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return 'fetch-site';
  return undefined;
}
