/**
 * The thread explorer: a web view of Baton's own data beside the Temporal Web UI (which stays the place for workflow
 * internals). Root threads, delegation trees with forks and their timelines, transcripts, live shared env data with
 * its log and its state as of any event, the questions waiting for a human and the tool calls waiting for approval
 * (answered and decided here too), a root's watchers with their wake-ups, with the same data as JSON under `/api/`.
 * Served by `baton dev`, `baton demo` and `baton explorer`, on loopback unless told otherwise, and only to requests
 * that carry its secret token (access.ts). Product code: workflows/ and activities/ never import it.
 */
export {
  DEFAULT_EXPLORER_HOST,
  DEFAULT_EXPLORER_PORT,
  DEFAULT_STREAM_STALL_MS,
  startExplorer,
  validThreadId,
  type ExplorerOptions,
  type ExplorerServer,
} from './server';
export { escapeHtml } from './html';
export { traceUrlProblem, TRACE_URL_PLACEHOLDER } from './pages';
export { crossSiteRequest, isLoopback, loopbackHostHeaders } from './http-guards';
export {
  ACCESS_TOKEN_FILE,
  ACCESS_TOKEN_FILE_MODE,
  AccessTokenError,
  MIN_ACCESS_TOKEN_CHARS,
  accessTokenProblem,
  generateAccessToken,
  requestHasToken,
  resolveAccessToken,
  shownToken,
  stackAccessToken,
  tokenMatches,
  type AccessToken,
} from './access';

/** The warning `--host` prints when the explorer listens beyond loopback. */
export function exposedHostWarning(host: string): string | undefined {
  if (host === '127.0.0.1' || host === '::1' || host === 'localhost') return undefined;
  return `warning: the explorer listens on ${host} over plain HTTP; its token (and the cookie a browser gets for it) cross the network in clear, so put a proxy with TLS in front of it unless that network is yours alone`;
}
