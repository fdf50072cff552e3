/**
 * The explorer's JSON API: every address under `/api/` it serves. The server refuses any other address under `/api/`
 * before it looks at the request further (404, or 405 for a method a listed address does not take), so this list is
 * the API, and the generated reference (docs/reference/explorer-api.md, `npm run docs`) is written from it.
 */

/** One endpoint. */
export interface ExplorerApiRoute {
  /** `GET` routes also answer `HEAD`. */
  readonly method: 'GET' | 'POST';
  /** The address, `:name` for one path segment (a thread id is URL-encoded: `root%2Fhelper-1`). */
  readonly path: string;
  /** What it returns or does. */
  readonly summary: string;
  /** Query parameters, by name, with their meaning. */
  readonly query?: Readonly<Record<string, string>>;
  /** For a POST: what the body carries (a form or a JSON object), named in the refusal of another method. */
  readonly body?: { readonly what: string; readonly fields: string };
  /** `true` for a Server-Sent Events stream (`text/event-stream`) instead of one JSON value. */
  readonly stream?: boolean;
}

export const EXPLORER_API_ROUTES: readonly ExplorerApiRoute[] = [
  {
    method: 'GET',
    path: '/api/threads',
    summary: 'The root threads, newest first.',
    query: { q: 'only roots whose thread id, agent or first human message contains this text' },
  },
  {
    method: 'GET',
    path: '/api/threads/:thread',
    summary:
      "A root's overview (its tree, forks, questions, approvals and watchers, and a `signature` that changes when " +
      'any of them does); for a delegated thread, its row.',
  },
  {
    method: 'GET',
    path: '/api/threads/:thread/transcript',
    summary: "The thread's messages in order.",
  },
  {
    method: 'GET',
    path: '/api/threads/:root/questions',
    summary: "The open questions agents of the root's tree asked a person.",
  },
  {
    method: 'POST',
    path: '/api/threads/:root/questions/:question/answer',
    summary: 'Answers an open question (`q1`, `q2`, …), as `baton answer` does; 409 when it is not open.',
    body: { what: 'the answer', fields: '`answer`: the text, not empty' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/approvals',
    summary: "The tool calls of the root's tree waiting for a person's approval.",
    query: { all: '`1`: decided, expired and cancelled approvals too' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/approvals/:approval',
    summary: 'One approval (`a1`, `a2`, …), whatever its state.',
  },
  {
    method: 'POST',
    path: '/api/threads/:root/approvals/:approval/approve',
    summary: 'Approves a pending tool call, as `baton approve` does; 409 when it is no longer pending.',
    body: { what: 'the decision', fields: '`by` (optional): who decided' },
  },
  {
    method: 'POST',
    path: '/api/threads/:root/approvals/:approval/reject',
    summary: 'Rejects a pending tool call, as `baton reject` does; 409 when it is no longer pending.',
    body: { what: 'the decision', fields: '`by` (optional): who decided; `reason` (optional): told to the agent' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/watchers',
    summary: "The root's watchers and their recent wake-ups.",
  },
  {
    method: 'GET',
    path: '/api/threads/:root/env',
    summary:
      "The root's shared environment data: the entries of its root scope, and `lastSeq`, the last change's number.",
    query: { asOf: 'the entries as they were after this change-log number' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/env/value',
    summary: 'One entry of the root scope, with its value.',
    query: { key: 'the key' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/env/events',
    summary: 'The change log of the shared data, in order.',
    query: { since: 'only changes after this number (default 0)', limit: 'at most this many (default 1000)' },
  },
  {
    method: 'GET',
    path: '/api/threads/:root/env/proposals',
    summary: 'The pending proposals fork workers made for the shared data.',
  },
  {
    method: 'GET',
    path: '/api/threads/:root/env/stream',
    summary:
      'Each committed change of the shared data as it happens: an `env` event with the change, whether it was in ' +
      "the root scope, and the key's entry after it. Resumes after `Last-Event-ID`.",
    query: { since: 'start after this change-log number (default 0)' },
    stream: true,
  },
  {
    method: 'GET',
    path: '/api/threads/:root/events',
    summary:
      "The root's run feed (docs/reference/run-events.md): every stored event with its id, streamed model output " +
      'without one. Resumes after `Last-Event-ID`.',
    query: { since: 'start after this feed number (default 0)' },
    stream: true,
  },
];

/**
 * The routes whose path matches `segments` (the path after `/api/`, split at `/` and decoded; a trailing empty
 * segment, from a trailing `/`, is ignored), whatever their method.
 */
export function explorerApiRoutesAt(segments: readonly string[]): ExplorerApiRoute[] {
  const given = segments.at(-1) === '' ? segments.slice(0, -1) : segments;
  return EXPLORER_API_ROUTES.filter((route) => {
    const pattern = route.path.split('/').slice(2);
    return (
      pattern.length === given.length && pattern.every((part, index) => part.startsWith(':') || part === given[index])
    );
  });
}
