/**
 * `listensOn` (stack/port-owner.ts): whose socket listens on a port, read from Linux's `/proc`, which a Temporal dev
 * server's start uses to tell its own server from another stack's on the same port (the race itself, with two real
 * servers, is in test/integration/temporal-server.test.ts).
 */
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { listeningInodes, listensOn } from '../../stack/port-owner';

test('port owner: this process holds the port it listens on; a process that is not there, and a free port, not', async (t) => {
  const server = createServer();
  await new Promise<void>((ready) => server.listen({ host: '127.0.0.1', port: 0 }, ready));
  const { port } = server.address() as AddressInfo;
  try {
    const own = await listensOn(process.pid, [port]);
    if (own === undefined) {
      t.skip('this system does not tell whose socket listens (no /proc)');
      return;
    }
    assert.equal(own, true);
    // Above the largest pid Linux hands out: no such process, so it holds nothing.
    assert.equal(await listensOn(NO_SUCH_PID, [port]), false);
    const free = createServer();
    await new Promise<void>((ready) => free.listen({ host: '127.0.0.1', port: 0 }, ready));
    const freePort = (free.address() as AddressInfo).port;
    await new Promise((closed) => free.close(closed));
    assert.equal(await listensOn(process.pid, [port, freePort]), false, 'every port must be held');
  } finally {
    await new Promise((closed) => server.close(closed));
  }
});

/** Linux's pid_max is at most 2^22. */
const NO_SUCH_PID = 2 ** 22 + 1;

test('port owner: listening sockets are read from /proc/net/tcp lines, IPv4 and IPv6, others left out', () => {
  const table = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 0100007F:1C41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0',
    '   1: 0100007F:1C41 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1',
    '   0: 00000000000000000000000001000000:2031 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5151 1 0 100 0 0 10 0',
  ].join('\n');
  assert.deepEqual(
    [...listeningInodes(table)],
    [
      [7233, ['4242']],
      [8241, ['5151']],
    ],
  );
});
