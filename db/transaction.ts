import type { Pool, PoolClient } from 'pg';

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // The pool listens for errors of idle clients only. A checked-out connection that the server ends between two
  // queries (a restart, a failover, an administrator) emits 'error' with nobody listening, which would crash the
  // process; here it fails this transaction (its next query rejects) and the connection is discarded, not reused.
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(lost);
    client.off('error', onError);
  }
}
