/**
 * The secret token of the explorer and `baton mcp serve --http` (explorer/access.ts): generated with 256 random bits
 * into a mode-600 file of the state directory and kept there, a configured one (a file, a variable) preferred and
 * checked, compared in constant time, read from a bearer header or a cookie; and the browser guard that refuses
 * requests from other sites' pages (explorer/http-guards.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  accessTokenProblem,
  bearerToken,
  generateAccessToken,
  requestCookie,
  requestHasToken,
  resolveAccessToken,
  stackAccessToken,
  tokenMatches,
} from '../../explorer/access';
import { crossSiteRequest } from '../../explorer/http-guards';

/** A request with these headers, as the guards read it. */
function req(headers: http.IncomingHttpHeaders): http.IncomingMessage {
  return { headers } as http.IncomingMessage;
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'baton-access-'));
}

test('explorer access: a generated token is 256 random bits as base64url, different each time', () => {
  const tokens = new Set(Array.from({ length: 50 }, generateAccessToken));
  assert.equal(tokens.size, 50);
  for (const token of tokens) {
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(token, 'base64url').length, 32);
    assert.equal(accessTokenProblem(token), undefined);
  }
});

test('explorer access: a token shorter than 32 characters, longer than 512 or with other characters is refused', () => {
  assert.match(accessTokenProblem('a'.repeat(31)) ?? '', /is 31 characters long; a token needs at least 32/);
  assert.equal(accessTokenProblem('a'.repeat(32)), undefined);
  assert.equal(accessTokenProblem(`${'A0._~+/=-'.repeat(4)}`), undefined);
  assert.match(accessTokenProblem('a'.repeat(513)) ?? '', /longer than 512/);
  for (const bad of [' ', ';', ',', '"', '\n', 'é', '%']) {
    assert.match(
      accessTokenProblem(`${'a'.repeat(32)}${bad}`) ?? '',
      /holds characters other than/,
      JSON.stringify(bad),
    );
  }
});

test("explorer access: the state directory's token is made once with mode 600 and kept", () => {
  const dir = path.join(tempDir(), '.baton');
  const first = stackAccessToken(dir);
  const file = path.join(dir, 'token');
  assert.equal(first.source, file);
  assert.equal(first.printable, true);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(fs.readFileSync(file, 'utf8'), `${first.token}\n`);
  assert.equal(stackAccessToken(dir).token, first.token, 'the same token the next time');
  fs.rmSync(file);
  assert.notEqual(stackAccessToken(dir).token, first.token, 'removing the file makes a new one');
  fs.writeFileSync(file, 'too short\n');
  assert.throws(() => stackAccessToken(dir), { name: 'AccessTokenError', message: /the token in .* is 9 characters/ });
});

test('explorer access: --token-file wins over the variable, which wins over the state directory; neither is printable', () => {
  const dir = tempDir();
  const file = path.join(dir, 'configured');
  fs.writeFileSync(file, `  ${'f'.repeat(40)}\n\n`);
  const variable = { name: 'BATON_EXPLORER_TOKEN', value: 'v'.repeat(40) };
  const stateDir = path.join(dir, '.baton');
  assert.deepEqual(resolveAccessToken({ tokenFile: file, variable, stateDir }), {
    token: 'f'.repeat(40),
    source: file,
    printable: false,
  });
  assert.deepEqual(resolveAccessToken({ variable, stateDir }), {
    token: 'v'.repeat(40),
    source: 'BATON_EXPLORER_TOKEN',
    printable: false,
  });
  assert.equal(fs.existsSync(stateDir), false, 'a configured token makes no file');
  const unset = { name: 'BATON_EXPLORER_TOKEN', value: undefined };
  assert.equal(resolveAccessToken({ variable: unset, stateDir }).printable, true);
  assert.equal(resolveAccessToken({ variable: { ...unset, value: '  ' }, stateDir }).printable, true, 'blank is unset');
  assert.throws(() => resolveAccessToken({ variable: { name: 'BATON_MCP_TOKEN', value: 'x' }, stateDir }), {
    message: /^BATON_MCP_TOKEN is 1 characters long/,
  });
  assert.throws(
    () => resolveAccessToken({ tokenFile: path.join(dir, 'missing'), variable: unset, stateDir }),
    /cannot read the token file/,
  );
});

test('explorer access: the token is read from a bearer header or the named cookie, and compared whole', () => {
  const token = generateAccessToken();
  assert.equal(bearerToken(req({ authorization: `Bearer ${token}` })), token);
  assert.equal(bearerToken(req({ authorization: `bearer  ${token} ` })), token);
  assert.equal(bearerToken(req({ authorization: `Basic ${token}` })), undefined);
  assert.equal(bearerToken(req({ authorization: token })), undefined);
  assert.equal(requestCookie(req({ cookie: `a=1; baton-explorer-8234=${token}; b=2` }), 'baton-explorer-8234'), token);
  assert.equal(requestCookie(req({ cookie: `baton-explorer-82345=${token}` }), 'baton-explorer-8234'), undefined);

  assert.equal(requestHasToken(req({ authorization: `Bearer ${token}` }), token), true);
  assert.equal(requestHasToken(req({ cookie: `c=${token}` }), token), false, 'no cookie is taken unless named');
  assert.equal(requestHasToken(req({ cookie: `c=${token}` }), token, 'c'), true);
  assert.equal(requestHasToken(req({ authorization: 'Bearer wrong', cookie: `c=${token}` }), token, 'c'), true);
  assert.equal(requestHasToken(req({}), token, 'c'), false);
  assert.equal(tokenMatches(token, token.slice(0, -1)), false, 'a prefix is not the token');
  assert.equal(tokenMatches(token, `${token}x`), false);
  assert.equal(tokenMatches(token, undefined), false);
  assert.equal(tokenMatches(token, token), true);
});

test("explorer guards: a request from another site's page is refused; the server's own pages and typed addresses are not", () => {
  const host = '127.0.0.1:8234';
  assert.equal(crossSiteRequest(req({ host })), undefined, 'a program sends neither header');
  assert.equal(crossSiteRequest(req({ host, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' })), undefined);
  assert.equal(crossSiteRequest(req({ host, 'sec-fetch-site': 'none' })), undefined);
  assert.equal(crossSiteRequest(req({ host, origin: 'http://evil.example' })), 'origin');
  assert.equal(crossSiteRequest(req({ host, origin: 'null' })), 'origin');
  assert.equal(crossSiteRequest(req({ host, origin: 'http://127.0.0.1:9999' })), 'origin', 'another port');
  assert.equal(crossSiteRequest(req({ host, 'sec-fetch-site': 'cross-site' })), 'fetch-site');
  assert.equal(crossSiteRequest(req({ host, 'sec-fetch-site': 'same-site' })), 'fetch-site');
});
