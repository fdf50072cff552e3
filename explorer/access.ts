/**
 * The secret token every request to the explorer and to `baton mcp serve --http` carries. Loopback is not a wall:
 * any process of the machine reaches it (a model's shell command among them), so the Host and Origin checks of
 * http-guards.ts, which stop browsers only, are not enough on their own. A program sends
 * `Authorization: Bearer <token>`; a browser opens `/?token=<token>` once and gets a cookie (HttpOnly,
 * SameSite=Strict) in exchange, then the address without the token. The token of a local stack is generated once and
 * kept in a file of mode 600 in its state directory (stack/access-token.ts), which the shell's sandbox and the file tools
 * never show an agent.
 */
import type http from 'node:http';
import {
  accessTokenProblem,
  AccessTokenError,
  readAccessTokenFile,
  stackAccessToken,
  tokenMatches,
  type AccessToken,
} from '../stack/access-token';

// The token's checks and its file live below the worker and the client, which check the decision key the same way.
export {
  ACCESS_TOKEN_FILE,
  ACCESS_TOKEN_FILE_MODE,
  AccessTokenError,
  MAX_ACCESS_TOKEN_CHARS,
  MIN_ACCESS_TOKEN_CHARS,
  accessTokenProblem,
  generateAccessToken,
  readAccessTokenFile,
  stackAccessToken,
  tokenMatches,
  type AccessToken,
} from '../stack/access-token';

/**
 * The token a server uses: `tokenFile` when given, else the variable's value when set, else the state directory's
 * own (`stackAccessToken`).
 * @throws AccessTokenError naming the file or variable whose token cannot be used.
 */
export function resolveAccessToken(options: {
  tokenFile?: string | undefined;
  /** A variable read at the edge (`BATON_EXPLORER_TOKEN`, `BATON_MCP_TOKEN`): its name, for messages, and value. */
  variable: { name: string; value: string | undefined };
  stateDir: string;
}): AccessToken {
  if (options.tokenFile !== undefined) {
    return { token: readAccessTokenFile(options.tokenFile), source: options.tokenFile, printable: false };
  }
  const configured = options.variable.value?.trim();
  if (configured) {
    const problem = accessTokenProblem(configured);
    if (problem) throw new AccessTokenError(`${options.variable.name} ${problem}`);
    return { token: configured, source: options.variable.name, printable: false };
  }
  return stackAccessToken(options.stateDir);
}

/** The token as a printed line may show it: itself when `printable`, else `<the token of SOURCE>`. */
export function shownToken(access: AccessToken): string {
  return access.printable ? access.token : `<the token of ${access.source}>`;
}

/** The token of an `Authorization: Bearer <token>` header, if the request has one. */
export function bearerToken(req: http.IncomingMessage): string | undefined {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
  return match?.[1];
}

/** The value of cookie `name` the request carries, if any. */
export function requestCookie(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq >= 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Whether the request carries `token` as a bearer token (or, given `cookieName`, as that cookie). */
export function requestHasToken(req: http.IncomingMessage, token: string, cookieName?: string): boolean {
  // Both are compared whatever the first gives, so the time taken does not say which one was sent.
  const bearer = tokenMatches(token, bearerToken(req));
  const cookie = cookieName !== undefined && tokenMatches(token, requestCookie(req, cookieName));
  return bearer || cookie;
}
