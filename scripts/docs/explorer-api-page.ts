/**
 * docs/reference/explorer-api.md: the explorer's JSON endpoints, from the route list its server refuses every other
 * address under `/api/` by (explorer/api-routes.ts).
 */
import { EXPLORER_API_ROUTES } from '../../explorer/api-routes';
import { GENERATED_NOTICE } from './notice';

export function explorerApiPage(): string {
  const lines = [
    GENERATED_NOTICE,
    '',
    '# Explorer API',
    '',
    'The explorer (`baton explorer`, and the one `baton dev` and `baton demo` serve) answers the same data as its',
    'pages in JSON under `/api/`. Every request carries its token, `Authorization: Bearer <token>` (or the cookie a',
    "browser gets by opening a page with `?token=<token>`); a request another site's page made is refused. An error is",
    '`{"error": "…"}` with its status: 400 for a bad id or parameter, 401 without the token, 404 for an address or',
    'thread that does not exist, 405 for a method the address does not take, 409 for a question or approval that is no',
    'longer open.',
    '',
    '`:thread` is any thread id and `:root` a root thread id (a delegated thread there is a 400), URL-encoded as one',
    "segment (`root%2Fhelper-1`). A stream is Server-Sent Events: each event's `data` is one JSON object, stored",
    'events carry their `id`, and a reconnecting `EventSource` resumes after the last one with `Last-Event-ID`.',
    '',
  ];
  for (const route of EXPLORER_API_ROUTES) {
    lines.push(`## ${route.method} ${route.path}`, '', route.summary);
    if (route.stream) lines.push('', 'A Server-Sent Events stream.');
    const query = Object.entries(route.query ?? {});
    if (query.length > 0) {
      lines.push('', 'Query parameters:', '', ...query.map(([name, meaning]) => `- \`${name}\`: ${meaning}`));
    }
    if (route.body) {
      lines.push('', `The body, a form or a JSON object, carries ${route.body.what}: ${route.body.fields}.`);
    }
    lines.push('');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}
