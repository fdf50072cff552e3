/**
 * The secrets of a stack: the token every request to the explorer and to `baton mcp serve --http` carries, and the
 * key that signs approvals' decisions (`BATON_DECISION_KEY`; a local stack uses its token for both). A local stack's is
 * generated once and kept in a file of mode 600 in its state directory, which the shell's sandbox and the file tools
 * never show an agent. Here, below the worker, the client and the servers, so each checks a secret the same way.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The token file's name in a stack's state directory (`.baton/token`). */
export const ACCESS_TOKEN_FILE = 'token';
/** Owner only: the token lets whoever holds it decide approvals. */
export const ACCESS_TOKEN_FILE_MODE = 0o600;
/** The shortest token accepted: 32 characters hold at least 128 bits of a random hex or base64 token. */
export const MIN_ACCESS_TOKEN_CHARS = 32;
export const MAX_ACCESS_TOKEN_CHARS = 512;
/** Characters that pass unchanged through a header, a cookie and (percent-encoded) a URL. */
const TOKEN_PATTERN = /^[A-Za-z0-9._~+/=-]+$/;

/** A token that cannot be used, or a token file that cannot be read or written. */
export class AccessTokenError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A fresh token: 32 random bytes (256 bits), base64url. */
export function generateAccessToken(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/** Why `token` cannot be used as an access token, or `undefined` when it can. */
export function accessTokenProblem(token: string): string | undefined {
  if (token.length < MIN_ACCESS_TOKEN_CHARS) {
    return `is ${token.length} characters long; a token needs at least ${MIN_ACCESS_TOKEN_CHARS} (\`openssl rand -hex 32\` makes one)`;
  }
  if (token.length > MAX_ACCESS_TOKEN_CHARS) return `is longer than ${MAX_ACCESS_TOKEN_CHARS} characters`;
  if (!TOKEN_PATTERN.test(token)) return 'holds characters other than letters, digits and . _ ~ + / = -';
  return undefined;
}

/** Where a server's token came from, which says whether it may be printed. */
export interface AccessToken {
  readonly token: string;
  /** The variable or the file it was read from (`.baton/token` for a stack's own). */
  readonly source: string;
  /**
   * The stack's own token (generated into, or read from, its state directory): printed in the address, as Jupyter
   * does. A token the operator configured is theirs to know and is never printed in full.
   */
  readonly printable: boolean;
}

/** The token in `file` (surrounding whitespace, a final newline included, is not part of it). */
export function readAccessTokenFile(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new AccessTokenError(`cannot read the token file ${file}: ${(error as Error).message}`, { cause: error });
  }
  const token = text.trim();
  const problem = accessTokenProblem(token);
  if (problem) throw new AccessTokenError(`the token in ${file} ${problem}`);
  return token;
}

/**
 * The state directory's token, generated on first use: written with mode 600 and exclusively (`wx`), so two commands
 * starting at once end up with the same token. It stays until the file is removed, so a restarted `baton dev` keeps
 * the cookie of an open page and the header of a configured MCP client valid.
 * @throws AccessTokenError when the file cannot be created or holds no usable token.
 */
export function stackAccessToken(stateDir: string): AccessToken {
  const file = path.join(stateDir, ACCESS_TOKEN_FILE);
  if (!fs.existsSync(file)) {
    try {
      fs.mkdirSync(stateDir, { recursive: true });
      fs.writeFileSync(file, `${generateAccessToken()}\n`, { mode: ACCESS_TOKEN_FILE_MODE, flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new AccessTokenError(
          `cannot create the token file ${file}: ${(error as Error).message} (or configure a token: see --token-file)`,
          { cause: error },
        );
      }
    }
  }
  return { token: readAccessTokenFile(file), source: file, printable: true };
}

/** Whether `given` is `expected`, compared in constant time (over digests, so lengths do not show either). */
export function tokenMatches(expected: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const digest = (text: string) => crypto.createHash('sha256').update(text, 'utf8').digest();
  return crypto.timingSafeEqual(digest(expected), digest(given));
}
