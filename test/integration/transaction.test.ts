/**
 * A transaction whose connection the server ends between two queries (a Postgres restart, a failover) fails that
 * transaction only: the process does not crash on an unhandled 'error' event, and the pool goes on with a new
 * connection. Found by the chaos rounds (test/chaos), where a Postgres restart took down a client program.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createPool } from '../../db/pool';
import { inTransaction } from '../../db/transaction';
import { readTestEnv } from '../../testing/test-env';

const pool = createPool({ connectionString: readTestEnv().databaseUrl, applicationName: 'baton-transaction-test' });
const admin = createPool({ connectionString: readTestEnv().databaseUrl, applicationName: 'baton-transaction-admin' });

after(async () => {
  await pool.end();
  await admin.end();
});

test('a connection ended between two queries of a transaction fails it without crashing the process', async () => {
  const crashes: unknown[] = [];
  const onUncaught = (error: unknown) => crashes.push(error);
  process.on('uncaughtException', onUncaught);
  try {
    await assert.rejects(
      inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        // Listened for before the terminate, so the connection's end cannot slip past unseen. Not `events.once`: it
        // would reject on the 'error' the client emits first, which is the transaction's to handle.
        const ended = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('the terminated connection never ended')), 10_000);
          client.once('end', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
        // The server's goodbye reaches the idle, checked-out client now, between queries; wait until it has.
        await ended;
        await client.query('SELECT 1');
      }),
      /terminat|Connection|not queryable/i,
    );
    assert.deepEqual(crashes, [], 'no uncaught error');
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
    assert.equal(rows[0]?.one, 1, 'the pool hands out a working connection afterwards');
  } finally {
    process.off('uncaughtException', onUncaught);
  }
});
