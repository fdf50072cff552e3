import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { State } from '@temporalio/worker';
import { startHealthServer } from '../../worker/health';

test('worker health: /healthz answers 200 while the worker runs, 503 otherwise, 404 elsewhere', async () => {
  let state: State = 'INITIALIZED';
  const health = await startHealthServer('127.0.0.1:0', () => ({ state, identity: 'w 1@h', taskQueue: 'baton' }));
  try {
    assert.match(health.address, /^127\.0\.0\.1:\d+$/);
    const url = `http://${health.address}/healthz`;
    assert.equal((await fetch(url)).status, 503);
    state = 'RUNNING';
    const running = await fetch(url);
    assert.equal(running.status, 200);
    assert.deepEqual(await running.json(), { status: 'RUNNING', identity: 'w 1@h', taskQueue: 'baton' });
    state = 'DRAINING';
    assert.equal((await fetch(url)).status, 503);
    assert.equal((await fetch(`http://${health.address}/metrics`)).status, 404);
  } finally {
    await health.close();
  }
});
