import pg from 'pg';

/** How to reach Postgres and how many connections one process may hold. */
export interface CreatePoolOptions {
  /** A `postgres://user:password@host:port/database` URL. */
  readonly connectionString: string;
  /**
   * Most connections this pool opens at once. Every worker process has its own pool, so the server's
   * `max_connections` must cover the sum over processes.
   * @default 10
   */
  readonly max?: number;
  /**
   * Shown in `pg_stat_activity.application_name`, which is how an operator tells Baton's sessions apart.
   * @default 'baton'
   */
  readonly applicationName?: string;
  /**
   * How long to wait for a free connection (or a new one) before the query fails. Without a bound, a stopped
   * server or an exhausted pool would hang an activity until its Temporal timeout instead of failing fast.
   * @default 10_000
   */
  readonly connectionTimeoutMillis?: number;
  /**
   * Called when an idle pooled connection fails (for instance the server restarted). The pool has already dropped
   * that connection and opens a new one on the next query, so this is for logging only.
   * @default writes one line to stderr
   */
  readonly onIdleClientError?: (error: Error) => void;
}

/** @see CreatePoolOptions */
export const POOL_DEFAULTS = Object.freeze({
  max: 10,
  applicationName: 'baton',
  connectionTimeoutMillis: 10_000,
});

function warnIdleClientError(error: Error): void {
  console.warn(`baton: an idle Postgres connection failed and was dropped from the pool: ${error.message}`);
}

/**
 * Creates the process's Postgres pool. The caller owns it and must `await pool.end()` when done.
 *
 * An idle connection that fails makes `pg.Pool` emit `'error'`; with no listener Node turns that into an uncaught
 * exception and the whole worker dies, so a listener is always attached.
 */
export function createPool(options: CreatePoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? POOL_DEFAULTS.max,
    application_name: options.applicationName ?? POOL_DEFAULTS.applicationName,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? POOL_DEFAULTS.connectionTimeoutMillis,
    // Detects half-open TCP connections (a server that vanished without a FIN) on long-idle workers.
    keepAlive: true,
  });
  pool.on('error', options.onIdleClientError ?? warnIdleClientError);
  return pool;
}
