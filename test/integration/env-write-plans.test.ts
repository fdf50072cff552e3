/**
 * The env store finds an entry by the whole key of the entries' index (root, scope, key) in whatever plan a session
 * keeps (migration 020). Postgres keeps a generic plan per session for a prepared statement and for each statement of
 * a PL/pgSQL function after a few calls; one made while the tables were new could read the entries by root and key
 * alone, the scope still unknown, and every write of that session then read the whole root's part of the index:
 * slower as the root grew (Postgres before 18 cannot skip the middle column). This test gives the store that situation
 * at once, in a fresh database: a connection on generic plans (`plan_cache_mode`) over tables never analysed, whose
 * every plan (`auto_explain`, nested statements too) comes back to the client as a notice.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { EnvDataError, EnvDataErrorType, EnvStore, findInScopes } from '../../db/env-data';
import { migrate } from '../../db/migrate';
import { createPool } from '../../db/pool';
import { createDatabase, dropDatabase } from '../../stack/local-postgres';
import { openChildThread, openRootThread } from '../../testing/thread-fixtures';
import { readTestEnv } from '../../testing/test-env';

const env = readTestEnv();
const databaseName = `baton_env_plans_${randomBytes(4).toString('hex')}`;
let pool: pg.Pool;
/** The plans the connection ran, nested ones included, in order. */
const plans: string[] = [];

/** Every plan as a notice, those of statements inside functions too, and the generic plan from the first call on. */
const EXPLAIN_EVERYTHING = [
  "LOAD 'auto_explain'",
  'SET auto_explain.log_min_duration = 0',
  'SET auto_explain.log_nested_statements = on',
  'SET auto_explain.log_level = notice',
  'SET client_min_messages = notice',
  'SET plan_cache_mode = force_generic_plan',
];

before(async () => {
  const url = await createDatabase(env.databaseUrl, databaseName);
  await migrate(url);
  // One connection, so every statement of the store runs on it.
  pool = createPool({ connectionString: url, max: 1 });
  pool.on('connect', (client) => {
    client.on('notice', (notice) => {
      if (notice.message?.includes('plan:')) plans.push(notice.message);
    });
    for (const setting of EXPLAIN_EVERYTHING) void client.query(setting);
  });
});

after(async () => {
  await pool?.end();
  await dropDatabase(env.databaseUrl, databaseName);
});

/** Every scan of `env_data` in `plan`: its line and the condition its index was probed with. */
function entryScans(plan: string): { scan: string; indexCondition: string | undefined }[] {
  const lines = plan.split('\n');
  return lines.flatMap((line, i) =>
    /\bScan\b.* on env_data\b/.test(line)
      ? [{ scan: line.trim(), indexCondition: lines[i + 1]?.match(/Index Cond: (.*)/)?.[1] }]
      : [],
  );
}

test('env store: every look-up of one entry probes its root, scope and key, on generic plans over new tables', async () => {
  const store = new EnvStore(pool);
  const root = await openRootThread(pool, 'planner');
  const writer = await openChildThread(pool, root, 'writer');
  const explainedFrom = plans.length;
  // A new key (`env_replace` creates it), the key replaced, and an update at a version it is no longer at.
  await store.store(writer, 'op-1', { key: 'count', shortDescription: 'A counter.', value: 1 });
  assert.equal(
    (await store.store(writer, 'op-2', { key: 'count', shortDescription: 'A counter.', value: 2 })).version,
    2,
  );
  const isConflict = (error: unknown) =>
    error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict;
  await assert.rejects(store.update(writer, 'op-3', { key: 'count', value: 3, expectedVersion: 1 }), isConflict);
  // Three updates at version 2 at once: the first goes alone and wins; the two queued behind it share a call
  // (`env_replace_many`), whose look-up answers both with the conflict.
  const updates = await Promise.allSettled(
    ['op-4', 'op-5', 'op-6'].map((op) => store.update(writer, op, { key: 'count', value: 3, expectedVersion: 2 })),
  );
  assert.deepEqual(
    updates.map((update) => (update.status === 'fulfilled' ? 'written' : isConflict(update.reason) && 'conflict')),
    ['written', 'conflict', 'conflict'],
  );
  assert.equal(store.batchCounts.batched, 2, 'the two updates queued went in one call');
  // Reads of the entry as the writer sees it (the nearest of its scopes), and in a list of scopes.
  assert.equal((await store.get(root.rootThreadId, 'count', { threadId: writer.threadId }))?.version, 3);
  assert.equal((await findInScopes(pool, root.rootThreadId, ['elsewhere', ''], 'count'))?.version, 3);

  const scans = plans.slice(explainedFrom).flatMap(entryScans);
  // The update and conflict look-up of `env_replace`, the call's update and look-up, and the two reads.
  assert.ok(scans.length >= 6, `expected the store's scans of env_data among the plans, found ${scans.length}`);
  for (const { scan, indexCondition } of scans) {
    assert.ok(indexCondition !== undefined, `a scan of env_data without an index condition: ${scan}`);
    assert.match(indexCondition, /root_thread_id = .*scope = .*key = /, `${scan} probes only ${indexCondition}`);
  }
});
