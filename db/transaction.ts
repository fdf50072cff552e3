import type { Pool, PoolClient } from 'pg';

/**
 * A connection from the pool that survives its server going away while it is checked out. The pool listens for
 * errors of idle clients only: a checked-out connection that the server ends between two queries (a restart, a
 * failover, an administrator) would emit 'error' with nobody listening and crash the process. Here the error is
 * kept, the next query on the connection rejects, and `release()` discards the connection instead of reusing it.
 */
export async function checkOut(pool: Pool): Promise<PoolClient> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  // The pool gives every checkout a fresh `release`; this one wraps it for this checkout only.
  const release = client.release.bind(client);
  client.release = (error?: Error | boolean) => {
    client.off('error', onError);
    release(error ?? lost);
  };
  return client;
}

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await checkOut(pool);
  try {
    return await transactionOn(client, work);
  } finally {
    client.release();
  }
}

/** `inTransaction` on a connection the caller holds (and goes on using after the commit). */
export async function transactionOn<T>(client: PoolClient, work: (client: PoolClient) => Promise<T>): Promise<T> {
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
