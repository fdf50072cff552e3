/**
 * Capacity for model calls under limits every worker of a task queue shares (migration 024). A scope is a provider
 * (`hosted`) or a provider and model (`hosted/big-1`); a call takes a lease in each scope that limits it before its
 * request, in one transaction under each scope's advisory lock (taken in one order, so two calls never wait on each
 * other), and gives the lease back after. The database's clock is the only one read, so workers whose clocks differ
 * still agree.
 */
import type { Pool } from 'pg';
import { inTransaction } from './transaction';
import type { Queryable } from './threads';

/** A scope's limits; any left out does not limit. */
export interface ModelLimit {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
  readonly concurrent?: number;
}

/** One scope a call is limited by, with its limits. */
export interface LimitedScope {
  readonly scope: string;
  readonly limit: ModelLimit;
}

/** What one try to take capacity found: leases taken, or how long to wait before trying again and why. */
export type CapacityTry =
  | { readonly taken: true }
  | { readonly taken: false; readonly waitMs: number; readonly scope: string; readonly reason: string };

/** How long a lease lasts unless renewed: a worker that dies holding one frees its place after this. */
export const LEASE_SECONDS = 60;
/** How long a call waiting for a place held by a live call sleeps before it looks again. */
const CONCURRENCY_POLL_MS = 200;

/**
 * Takes a lease (and logs a request) in every scope when each has room; else takes nothing and says how long to wait
 * for the scope that has none. `leaseId` is this call's, unique per try (a retried call takes a new one).
 */
export async function tryTakeCapacity(
  pool: Pool,
  leaseId: string,
  scopes: readonly LimitedScope[],
): Promise<CapacityTry> {
  const ordered = [...scopes].sort((a, b) => a.scope.localeCompare(b.scope));
  return inTransaction(pool, async (client) => {
    for (const { scope, limit } of ordered) {
      await client.query({
        name: 'baton-model-limit-lock',
        text: `SELECT pg_advisory_xact_lock(hashtext('baton-model-limit:' || $1))`,
        values: [scope],
      });
      const full = await roomIn(client, scope, limit);
      if (full !== undefined) return { taken: false, scope, ...full };
    }
    for (const { scope } of ordered) {
      await client.query({
        name: 'baton-model-limit-take',
        text: `WITH lease AS (
                 INSERT INTO model_limit_leases (lease_id, scope, expires_at)
                 VALUES ($1, $2, now() + make_interval(secs => $3)))
               INSERT INTO model_limit_requests (lease_id, scope) VALUES ($1, $2)`,
        values: [leaseId, scope, LEASE_SECONDS],
      });
    }
    return { taken: true };
  });
}

/** Why `scope` has no room now and for how long (ms), or `undefined` when it has room. Forgets what has expired. */
async function roomIn(
  client: Queryable,
  scope: string,
  limit: ModelLimit,
): Promise<{ waitMs: number; reason: string } | undefined> {
  const { rows } = await client.query<{
    blocked_ms: string | null;
    leases: string;
    requests: string;
    request_free_ms: string | null;
    tokens: string;
    token_free_ms: string | null;
  }>({
    name: 'baton-model-limit-room',
    text: `WITH forget_leases AS (DELETE FROM model_limit_leases WHERE scope = $1 AND expires_at <= now()),
                forget_requests AS (
                  DELETE FROM model_limit_requests WHERE scope = $1 AND sent_at <= now() - interval '1 minute'),
                recent AS (SELECT sent_at, tokens FROM model_limit_requests
                            WHERE scope = $1 AND sent_at > now() - interval '1 minute')
           SELECT (SELECT ceil(extract(epoch FROM until - now()) * 1000) FROM model_limit_blocks
                    WHERE scope = $1 AND until > now()) AS blocked_ms,
                  (SELECT count(*) FROM model_limit_leases WHERE scope = $1 AND expires_at > now()) AS leases,
                  (SELECT count(*) FROM recent) AS requests,
                  (SELECT ceil(extract(epoch FROM min(sent_at) + interval '1 minute' - now()) * 1000) FROM recent)
                    AS request_free_ms,
                  (SELECT coalesce(sum(tokens), 0) FROM recent) AS tokens,
                  (SELECT ceil(extract(epoch FROM min(sent_at) + interval '1 minute' - now()) * 1000) FROM recent
                    WHERE tokens > 0) AS token_free_ms`,
    values: [scope],
  });
  const row = rows[0];
  if (row === undefined) return undefined;
  if (row.blocked_ms !== null) {
    return { waitMs: Math.max(1, Number(row.blocked_ms)), reason: 'the provider asked to wait (Retry-After)' };
  }
  if (limit.concurrent !== undefined && Number(row.leases) >= limit.concurrent) {
    return { waitMs: CONCURRENCY_POLL_MS, reason: `${limit.concurrent} call(s) at once` };
  }
  if (limit.requestsPerMinute !== undefined && Number(row.requests) >= limit.requestsPerMinute) {
    return {
      waitMs: Math.max(1, Number(row.request_free_ms ?? 1)),
      reason: `${limit.requestsPerMinute} request(s) per minute`,
    };
  }
  if (limit.tokensPerMinute !== undefined && Number(row.tokens) >= limit.tokensPerMinute) {
    return {
      waitMs: Math.max(1, Number(row.token_free_ms ?? 1)),
      reason: `${limit.tokensPerMinute} token(s) per minute`,
    };
  }
  return undefined;
}

/** Keeps a running call's leases from expiring. */
export async function renewCapacity(pool: Pool, leaseId: string): Promise<void> {
  await pool.query({
    name: 'baton-model-limit-renew',
    text: `UPDATE model_limit_leases SET expires_at = now() + make_interval(secs => $2)
            WHERE lease_id = $1`,
    values: [leaseId, LEASE_SECONDS],
  });
}

/** Gives a call's leases back and counts the tokens its reply used (none when it failed). */
export async function returnCapacity(pool: Pool, leaseId: string, tokens: number): Promise<void> {
  await pool.query({
    name: 'baton-model-limit-return',
    text: `WITH freed AS (DELETE FROM model_limit_leases WHERE lease_id = $1)
           UPDATE model_limit_requests SET tokens = $2 WHERE lease_id = $1`,
    values: [leaseId, tokens],
  });
}

/** A provider's `Retry-After`: no worker sends a request in `scopes` for `ms`. */
export async function blockScopes(pool: Pool, scopes: readonly string[], ms: number): Promise<void> {
  await pool.query({
    name: 'baton-model-limit-block',
    text: `INSERT INTO model_limit_blocks (scope, until)
           SELECT scope, now() + make_interval(secs => $2 / 1000.0) FROM unnest($1::text[]) AS scope
           ON CONFLICT (scope) DO UPDATE SET until = GREATEST(model_limit_blocks.until, EXCLUDED.until)`,
    values: [scopes, ms],
  });
}
