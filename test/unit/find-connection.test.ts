/**
 * Where `connect()` with no options and every CLI command go (client/find-connection.ts): the environment first,
 * else the running `baton dev` of the state directory, with the decision key that goes with each.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { findConnection } from '../../client';
import { stackAccessToken } from '../../stack/access-token';
import { writeStackFile, type StackFile } from '../../stack/stack-file';

const KEY = 'k'.repeat(40);

/** A project directory with a `.baton` whose stack file names a live process (this one) unless told otherwise. */
function project(t: TestContext, stack?: Partial<StackFile>): { dir: string; stateDir: string; token?: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-find-connection-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const stateDir = path.join(dir, '.baton');
  if (stack === undefined) return { dir, stateDir };
  writeStackFile(stateDir, {
    temporalAddress: '127.0.0.1:7999',
    namespace: 'default',
    taskQueue: 'dev-queue',
    databaseUrl: 'postgres://baton:secret@127.0.0.1:5999/baton',
    scriptedModel: true,
    pid: process.pid,
    startedAt: new Date(0).toISOString(),
    ...stack,
  });
  return { dir, stateDir, token: stackAccessToken(stateDir).token };
}

test('find connection: with no TEMPORAL_ADDRESS, the running baton dev of .baton in the working directory', (t) => {
  const { dir, stateDir, token } = project(t, {});
  const found = findConnection({ env: {}, cwd: dir });
  assert.deepEqual(found, {
    address: '127.0.0.1:7999',
    namespace: 'default',
    taskQueue: 'dev-queue',
    databaseUrl: 'postgres://baton:secret@127.0.0.1:5999/baton',
    decisionKey: token,
    source: `the baton dev in ${stateDir} (pid ${process.pid}, Temporal at 127.0.0.1:7999)`,
  });
  // A state directory of the caller's own, relative to the working directory; a configured key wins over the token.
  const elsewhere = findConnection({
    env: { BATON_DECISION_KEY: KEY },
    cwd: path.dirname(dir),
    stateDir: path.join(path.basename(dir), '.baton'),
  });
  assert.equal(elsewhere.address, '127.0.0.1:7999');
  assert.equal(elsewhere.decisionKey, KEY);
});

test('find connection: TEMPORAL_ADDRESS wins, with its defaults, and signs with the stack token only for that stack', (t) => {
  const { dir, token } = project(t, {});
  const plain = findConnection({ env: { TEMPORAL_ADDRESS: 'temporal.internal:7233' }, cwd: dir });
  assert.deepEqual(plain, {
    address: 'temporal.internal:7233',
    namespace: 'default',
    taskQueue: 'baton',
    source: 'TEMPORAL_ADDRESS=temporal.internal:7233',
  });
  const full = findConnection({
    env: {
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_NAMESPACE: 'agents',
      BATON_TASK_QUEUE: 'team',
      DATABASE_URL: 'postgres://baton@db.internal/baton',
      BATON_DECISION_KEY: KEY,
    },
    cwd: dir,
  });
  assert.deepEqual(full, {
    address: 'temporal.internal:7233',
    namespace: 'agents',
    taskQueue: 'team',
    databaseUrl: 'postgres://baton@db.internal/baton',
    decisionKey: KEY,
    source: 'TEMPORAL_ADDRESS=temporal.internal:7233',
  });
  // The same server and namespace as the running baton dev: its worker checks decisions with the stack's token.
  const sameStack = findConnection({ env: { TEMPORAL_ADDRESS: '127.0.0.1:7999' }, cwd: dir });
  assert.equal(sameStack.decisionKey, token);
  assert.equal(sameStack.taskQueue, 'baton', 'the variables say where the commands go, not the stack file');
});

test('find connection: neither the environment nor a live baton dev says where Baton runs: one error naming both', (t) => {
  const { dir } = project(t);
  assert.throws(() => findConnection({ env: {}, cwd: dir }), {
    name: 'BatonClientError',
    message:
      'no Baton stack is running (no live .baton/stack.json): start one with `baton dev`, or set TEMPORAL_ADDRESS ' +
      '(or TEMPORAL_PROFILE, a profile of temporal.toml)',
  });
  // A stack file left by a process that has ended is no stack.
  const { dir: stale } = project(t, { pid: 2 ** 22 + 1 });
  assert.throws(() => findConnection({ env: {}, cwd: stale }), /^BatonClientError: no Baton stack is running/);
});

test('find connection: what needs the database says so, and a malformed variable is refused before anything', (t) => {
  const { dir } = project(t);
  assert.throws(() => findConnection({ env: { TEMPORAL_ADDRESS: 'localhost:7233' }, cwd: dir, needsDatabase: true }), {
    message: "this reads Baton's database: set DATABASE_URL as well as TEMPORAL_ADDRESS",
  });
  assert.throws(
    () => findConnection({ env: { TEMPORAL_ADDRESS: 'http://localhost:7233' }, cwd: dir }),
    /TEMPORAL_ADDRESS/,
  );
  assert.throws(() => findConnection({ env: { BATON_DECISION_KEY: 'short' }, cwd: dir }), /BATON_DECISION_KEY/);
});
