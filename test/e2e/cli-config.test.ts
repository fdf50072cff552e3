/**
 * The CLI and `baton dev` check `DATABASE_URL` and `TEMPORAL_ADDRESS` as `baton worker` does, and stop with one line
 * naming the variable before they connect to anything.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { baton, childEnv, describeRun, freshDir } from './cli-process';

test('the CLI refuses a TEMPORAL_ADDRESS without a port and a DATABASE_URL that is not Postgres', async () => {
  const noPort = await baton(['status', 'some-thread'], childEnv({ TEMPORAL_ADDRESS: 'temporal.example' }));
  assert.equal(noPort.code, 1, describeRun(noPort));
  assert.match(noPort.stderr, /^baton: invalid configuration:\n {2}- TEMPORAL_ADDRESS must be host:port/);

  const mysql = await baton(
    ['transcript', 'some-thread'],
    childEnv({ TEMPORAL_ADDRESS: '127.0.0.1:7233', DATABASE_URL: 'mysql://baton:secret@127.0.0.1/baton' }),
  );
  assert.equal(mysql.code, 1, describeRun(mysql));
  assert.match(mysql.stderr, /DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL, not mysql:/);
  assert.ok(!mysql.stderr.includes('secret'), 'the URL (and its password) is never printed');
});

test('baton dev refuses a DATABASE_URL that is not Postgres before it starts anything', async () => {
  const dir = freshDir('dev-config');
  const result = await baton(['--state-dir', dir, 'dev'], childEnv({ DATABASE_URL: 'http://127.0.0.1:5432/baton' }));
  assert.equal(result.code, 1, describeRun(result));
  assert.match(result.stderr, /DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL, not http:/);
});
