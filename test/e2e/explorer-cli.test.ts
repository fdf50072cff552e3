/**
 * `baton explorer` as a user runs it against `TEMPORAL_ADDRESS`/`DATABASE_URL`: it prints its URL, serves the pages,
 * stops on Ctrl-C, and warns when `--host` takes it beyond loopback (it has no authentication).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SIGINT_GRACE_MS, exited, stackEnv, startBaton, waitFor } from './cli-process';

const UP_TIMEOUT_MS = 60_000;

async function startExplorerCommand(args: string[]) {
  const command = startBaton(['explorer', '--port', '0', '--json', ...args], stackEnv());
  let url = '';
  await waitFor(
    'baton explorer to print its URL',
    () => {
      const line = command.output.stdout().split('\n')[0] ?? '';
      if (!line.endsWith('}')) return false;
      url = (JSON.parse(line) as { url: string }).url;
      return true;
    },
    { timeoutMs: UP_TIMEOUT_MS, child: command.child, describe: command.output.stderr },
  );
  return { command, url };
}

describe('baton explorer', () => {
  test('explorer: listens on loopback, serves the thread list and stops on SIGINT', async () => {
    const { command, url } = await startExplorerCommand([]);
    try {
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const response = await fetch(`${url}/`);
      assert.equal(response.status, 200);
      assert.match(await response.text(), /<h1>Threads<\/h1>/);
      const missing = await fetch(`${url}/threads/no-such-thread`);
      assert.equal(missing.status, 404);
      assert.doesNotMatch(command.output.stderr(), /no authentication/);
    } finally {
      command.child.kill('SIGINT');
    }
    const exit = await exited(command.child, SIGINT_GRACE_MS);
    assert.deepEqual(exit, { code: 0, signal: null }, command.output.stderr());
  });

  test('explorer: --host beyond loopback warns that there is no authentication', async () => {
    const { command, url } = await startExplorerCommand(['--host', '0.0.0.0']);
    try {
      assert.match(url, /^http:\/\/0\.0\.0\.0:\d+$/);
      assert.match(command.output.stderr(), /warning: the explorer listens on 0\.0\.0\.0; it has no authentication/);
      const port = new URL(url).port;
      assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 200);
    } finally {
      command.child.kill('SIGINT');
      await exited(command.child, SIGINT_GRACE_MS);
    }
  });
});
