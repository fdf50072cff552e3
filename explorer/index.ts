/**
 * The thread explorer: a web view of Baton's own data beside the Temporal Web UI (which stays the place for workflow
 * internals). Root threads, delegation trees with forks and their timelines, transcripts, live shared env data with
 * its log and its state as of any event, the questions waiting for a human and the tool calls waiting for approval
 * (answered and decided here too), a root's watchers with their wake-ups, with the same data as JSON under `/api/`.
 * Served by `baton dev`, `baton demo` and `baton explorer`; it has no authentication, so it listens on loopback unless
 * told otherwise. Product code: workflows/ and activities/ never import it.
 */
export {
  DEFAULT_EXPLORER_HOST,
  DEFAULT_EXPLORER_PORT,
  startExplorer,
  validThreadId,
  type ExplorerOptions,
  type ExplorerServer,
} from './server';
export { escapeHtml } from './html';
export { crossSiteRequest, isLoopback, loopbackHostHeaders } from './http-guards';

/** The warning `--host` prints when the explorer listens beyond loopback. */
export function exposedHostWarning(host: string): string | undefined {
  if (host === '127.0.0.1' || host === '::1' || host === 'localhost') return undefined;
  return `warning: the explorer listens on ${host}; it has no authentication, so anyone who can reach that address can read every conversation, answer questions and approve tool calls`;
}
