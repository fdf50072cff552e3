/**
 * `baton explorer` as a user runs it against `TEMPORAL_ADDRESS`/`DATABASE_URL`: it prints its URL with its token
 * (the state directory's own, made on first use), serves only requests that carry the token, stops on Ctrl-C, keeps
 * a configured token (`BATON_EXPLORER_TOKEN`, `--token-file`) out of what it prints, and warns when `--host` takes it
 * beyond loopback.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  SIGINT_GRACE_MS,
  baton,
  describeRun,
  exited,
  freshDir,
  stackEnv,
  startBaton,
  waitFor,
  type BackgroundCommand,
} from './cli-process';

const UP_TIMEOUT_MS = 60_000;

interface Printed {
  url: string;
  token: string;
  openUrl: string;
}

/** Waits for the first line `command` prints. */
async function firstLine(command: BackgroundCommand): Promise<string> {
  let line = '';
  await waitFor(
    'baton explorer to print its URL',
    () => {
      const [first, rest] = command.output.stdout().split('\n', 2);
      line = first ?? '';
      return rest !== undefined;
    },
    { timeoutMs: UP_TIMEOUT_MS, child: command.child, describe: command.output.stderr },
  );
  return line;
}

async function startExplorerCommand(args: string[], extraEnv: Record<string, string> = {}) {
  const stateDir = freshDir('explorer-cli-state');
  const command = startBaton(
    ['--state-dir', stateDir, 'explorer', '--port', '0', '--json', ...args],
    stackEnv(extraEnv),
  );
  const printed = JSON.parse(await firstLine(command)) as Printed;
  return { command, stateDir, ...printed };
}

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe('baton explorer', () => {
  test('explorer: listens on loopback, prints its token, serves the thread list with it (not without) and stops on SIGINT', async () => {
    const { command, stateDir, url, token, openUrl } = await startExplorerCommand([]);
    try {
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(openUrl, `${url}/?token=${token}`);
      const file = path.join(stateDir, 'token');
      assert.equal(fs.readFileSync(file, 'utf8').trim(), token, "the state directory's token");
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      const response = await fetch(`${url}/`, bearer(token));
      assert.equal(response.status, 200);
      assert.match(await response.text(), /<h1>Threads<\/h1>/);
      assert.equal((await fetch(`${url}/threads/no-such-thread`, bearer(token))).status, 404);
      assert.equal((await fetch(`${url}/`)).status, 401, 'without the token');
      assert.equal((await fetch(`${url}/api/threads`)).status, 401);
      const opened = await fetch(openUrl, { redirect: 'manual' });
      assert.equal(opened.status, 302);
      assert.equal(opened.headers.get('location'), '/');
      assert.doesNotMatch(command.output.stderr(), /warning/);
    } finally {
      command.child.kill('SIGINT');
    }
    const exit = await exited(command.child, SIGINT_GRACE_MS);
    assert.deepEqual(exit, { code: 0, signal: null }, command.output.stderr());
  });

  test('explorer: the same state directory keeps its token; a configured one is used and not printed', async () => {
    const stateDir = freshDir('explorer-cli-kept');
    const tokens: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const command = startBaton(['--state-dir', stateDir, 'explorer', '--port', '0'], stackEnv());
      try {
        const line = await firstLine(command);
        const match =
          /^Thread explorer: (http:\/\/127\.0\.0\.1:\d+)\/\?token=([A-Za-z0-9_-]{43}) {2}\(Ctrl-C to stop\)$/.exec(
            line,
          );
        assert.ok(match, line);
        tokens.push(match[2] ?? '');
      } finally {
        command.child.kill('SIGINT');
        await exited(command.child, SIGINT_GRACE_MS);
      }
    }
    assert.equal(tokens[0], tokens[1], 'a restart keeps the token (and the cookie of an open page)');

    const configured = `configured-${'c'.repeat(32)}`;
    const fromVariable = startBaton(
      ['--state-dir', freshDir('explorer-cli-configured'), 'explorer', '--port', '0'],
      stackEnv({ BATON_EXPLORER_TOKEN: configured }),
    );
    try {
      const line = await firstLine(fromVariable);
      assert.match(line, /^Thread explorer: http:\/\/127\.0\.0\.1:\d+\/\?token=<the token of BATON_EXPLORER_TOKEN> /);
      const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1] ?? '';
      assert.equal((await fetch(`${url}/`, bearer(configured))).status, 200);
      assert.equal((await fetch(`${url}/`, bearer(tokens[0] ?? ''))).status, 401, "not the state directory's");
    } finally {
      fromVariable.child.kill('SIGINT');
      await exited(fromVariable.child, SIGINT_GRACE_MS);
    }

    const file = path.join(freshDir('explorer-cli-file'), 'token');
    fs.writeFileSync(file, 'short\n');
    const refused = await baton(['explorer', '--port', '0', '--token-file', file], stackEnv());
    assert.equal(refused.code, 1, describeRun(refused));
    assert.ok(refused.stderr.includes(`the token in ${file} is 5 characters long`), describeRun(refused));
  });

  test('explorer: --host beyond loopback warns that its token crosses the network in clear', async () => {
    const { command, url, token } = await startExplorerCommand(['--host', '0.0.0.0']);
    try {
      assert.match(url, /^http:\/\/0\.0\.0\.0:\d+$/);
      assert.match(
        command.output.stderr(),
        /warning: the explorer listens on 0\.0\.0\.0 over plain HTTP; its token \(and the cookie a browser gets for it\) cross the network in clear/,
      );
      const port = new URL(url).port;
      assert.equal((await fetch(`http://127.0.0.1:${port}/`, bearer(token))).status, 200);
      assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 401);
    } finally {
      command.child.kill('SIGINT');
      await exited(command.child, SIGINT_GRACE_MS);
    }
  });
});
