/**
 * `baton env <thread>` pages a large manifest (issue 13, defect 8): one page by default, a line on stderr saying how
 * many more entries match and the command that reads them, and `--after`/`--limit` to walk the rest.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createPool } from '../../db/pool';
import { uniqueThreadId } from '../../testing/test-env';
import { baton, describeRun, env, parseJsonArray, stackEnv } from './cli-process';

const pool = createPool({ connectionString: env.databaseUrl });
after(() => pool.end());

test('baton env: a large manifest is printed a page at a time with the cursor of the next page', async () => {
  const threadId = uniqueThreadId('paged');
  await pool.query(`INSERT INTO threads (thread_id, root_thread_id, agent) VALUES ($1, $1, 'keeper')`, [threadId]);
  await pool.query(
    `INSERT INTO env_data (root_thread_id, key, short_description, value, stored_by_agent, stored_by_thread, version)
     SELECT $1, 'k' || lpad(n::text, 4, '0'), 'Entry number ' || n || '.', to_jsonb(n), 'keeper', $1, 1
       FROM generate_series(1, 250) n`,
    [threadId],
  );

  const first = await baton(['env', threadId, '--json'], stackEnv());
  assert.equal(first.code, 0, describeRun(first));
  const firstKeys = parseJsonArray(first).map((entry) => (entry as { key: string }).key);
  assert.equal(firstKeys.length, 100);
  assert.match(first.stderr, new RegExp(`150 more entries: baton env ${threadId} --after k0100`));

  const rest = await baton(['env', threadId, '--json', '--after', 'k0100', '--limit', '200'], stackEnv());
  assert.equal(rest.code, 0, describeRun(rest));
  const restKeys = parseJsonArray(rest).map((entry) => (entry as { key: string }).key);
  assert.equal(restKeys.length, 150);
  assert.doesNotMatch(rest.stderr, /more entries/);
  assert.deepEqual(
    [...firstKeys, ...restKeys],
    Array.from({ length: 250 }, (_, i) => `k${String(i + 1).padStart(4, '0')}`),
  );

  const bad = await baton(['env', threadId, '--limit', '0'], stackEnv());
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /--limit.*whole number/);
});
