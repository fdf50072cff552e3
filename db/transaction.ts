import type { Pool, PoolClient } from 'pg';

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
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
