/**
 * How `EnvWriteBatches` (db/env-write-batches.ts) groups the env store's one-call writes, against a pool that records
 * its calls and answers when told: a write alone goes at once, writes queued behind a call go together in the next (in
 * order, cut by count and by bytes), a call that fails as a whole is run write by write, and a call that stalls lets
 * the writes behind it go in a call of their own. What each call does in Postgres is tested in
 * test/integration/env-store.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pool } from 'pg';
import { EnvWriteBatches, type OneCallWrite } from '../../db/env-write-batches';

interface Call {
  /** The statement's name: `baton-env-replace` (one write) or `baton-env-replace-many`. */
  name: string;
  /** The keys it carried. */
  keys: string[];
  answer: (rows?: unknown[]) => void;
  fail: (error: Error) => void;
}

/** A pool whose calls wait until the test answers them. */
function recordingPool() {
  const calls: Call[] = [];
  const run = (config: { name: string; values: unknown[] }) =>
    new Promise<{ rows: unknown[] }>((resolve, reject) => {
      const keys = config.values[3];
      calls.push({
        name: config.name,
        keys: Array.isArray(keys) ? (keys as string[]) : [keys as string],
        answer: (rows) =>
          resolve({
            rows:
              rows ??
              (Array.isArray(keys)
                ? keys.map((_, i) => ({ item: i + 1, outcome: 'written', seq: 100 + i, version: 1 }))
                : [{ outcome: 'written', seq: 100, version: 1 }]),
          }),
        fail: reject,
      });
    });
  const client = { query: run, release: () => undefined, on: () => undefined, off: () => undefined };
  const pool = { query: run, connect: () => Promise.resolve(client) } as unknown as Pool;
  return { pool, calls };
}

function write(key: string, json = '1'): OneCallWrite {
  return {
    threadId: 't',
    rootThreadId: 'r',
    epoch: 0,
    key,
    operationId: `op-${key}`,
    action: 'stored',
    json,
    agent: 'a',
    shortDescription: 'd',
    type: null,
    tags: [],
    expectedVersion: null,
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('env write batches: a write alone goes at once; those queued behind its call go together in the next, in order', async () => {
  const { pool, calls } = recordingPool();
  const batches = new EnvWriteBatches(pool);
  const first = batches.submit(write('a'));
  await turn();
  assert.deepEqual(
    calls.map((call) => [call.name, call.keys]),
    [['baton-env-replace', ['a']]],
  );
  const queued = ['b', 'c', 'd'].map((key) => batches.submit(write(key)));
  await turn();
  assert.equal(calls.length, 1, 'nothing else is sent while a call is in flight');
  calls[0]?.answer();
  assert.deepEqual(await first, { outcome: 'written', seq: 100, version: 1 });
  await turn();
  await turn();
  assert.deepEqual(
    calls.map((call) => [call.name, call.keys]),
    [
      ['baton-env-replace', ['a']],
      ['baton-env-replace-many', ['b', 'c', 'd']],
    ],
  );
  calls[1]?.answer();
  assert.deepEqual(
    (await Promise.all(queued)).map((outcome) => outcome?.seq),
    [100, 101, 102],
  );
  assert.deepEqual(batches.counts, { batched: 3, rerunAlone: 0 });
});

test('env write batches: a call holds at most 64 writes and 4 MiB of values, unless its first write alone is larger', async () => {
  const { pool, calls } = recordingPool();
  const batches = new EnvWriteBatches(pool);
  const pending = [batches.submit(write('first'))];
  const mib = (n: number) => JSON.stringify('x'.repeat(n * 1024 * 1024 - 2));
  pending.push(batches.submit(write('big-1', mib(3))), batches.submit(write('big-2', mib(2))));
  pending.push(batches.submit(write('huge', mib(5))));
  for (let i = 0; i < 70; i++) pending.push(batches.submit(write(`small-${i}`)));
  // Each call is answered as it comes, until every write is.
  let done = false;
  const all = Promise.all(pending).then(() => (done = true));
  for (let answered = 0; !done; await turn()) {
    while (answered < calls.length) calls[answered++]?.answer();
  }
  await all;
  assert.deepEqual(
    calls.map((call) => call.keys.length),
    [1, 1, 1, 1, 64, 6],
  );
  assert.deepEqual(
    calls.slice(1, 4).map((call) => call.keys),
    [['big-1'], ['big-2'], ['huge']],
  );
});

test('env write batches: a call that fails as a whole is run write by write, each answered on its own', async () => {
  const { pool, calls } = recordingPool();
  const batches = new EnvWriteBatches(pool);
  const first = batches.submit(write('a'));
  const queued = ['b', 'c'].map((key) => batches.submit(write(key)));
  await turn();
  calls[0]?.answer();
  await first;
  while (calls.length < 2) await turn();
  calls[1]?.fail(
    Object.assign(new Error('duplicate key'), { constraint: 'env_events_root_thread_id_operation_id_key' }),
  );
  while (calls.length < 4) await turn();
  assert.deepEqual(
    calls.slice(2).map((call) => [call.name, call.keys]),
    [
      ['baton-env-replace', ['b']],
      ['baton-env-replace', ['c']],
    ],
  );
  // One of them is the repeated operation: its own call fails the same way, and the caller's full path answers.
  calls[2]?.fail(
    Object.assign(new Error('duplicate key'), { constraint: 'env_events_root_thread_id_operation_id_key' }),
  );
  calls[3]?.answer();
  assert.deepEqual(await Promise.all(queued), [undefined, { outcome: 'written', seq: 100, version: 1 }]);
  assert.deepEqual(batches.counts, { batched: 0, rerunAlone: 2 });
});

test('env write batches: writes queued behind a call that has not come back for 100 ms go in a call of their own', async () => {
  const { pool, calls } = recordingPool();
  const batches = new EnvWriteBatches(pool);
  const held = batches.submit(write('held'));
  const others = ['x', 'y'].map((key) => batches.submit(write(key)));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(calls.length, 1, 'within 100 ms the others wait for the call in flight');
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(
    calls.map((call) => call.keys),
    [['held'], ['x', 'y']],
  );
  calls[1]?.answer();
  assert.equal((await Promise.all(others)).length, 2);
  calls[0]?.answer();
  await held;
});
