/**
 * Capacity for model calls under limits every worker of a task queue shares (migration 024). A scope is a provider
 * (`hosted`) or a provider and model (`hosted/big-1`); a call takes a lease in each scope that limits it before its
 * request, in one statement under each scope's advisory lock (taken in one order, so two calls never wait on each
 * other), and gives the lease back after. The database's clock is the only one read, so workers whose clocks differ
 * still agree.
 */
import type { Pool } from 'pg';

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
 * for the scope that has none. `leaseId` is this call's, unique per try (a retried call takes a new one). One
 * statement (`model_limit_try_take`, migration 026): each scope's advisory lock, in one order, then its look, then
 * the leases; expired leases and requests older than a minute are forgotten on the way.
 */
export async function tryTakeCapacity(
  pool: Pool,
  leaseId: string,
  scopes: readonly LimitedScope[],
): Promise<CapacityTry> {
  const ordered = [...scopes].sort((a, b) => a.scope.localeCompare(b.scope));
  const { rows } = await pool.query<{ tried: { taken: boolean; scope?: string; reason?: string; wait_ms?: number } }>({
    name: 'baton-model-limit-try-take',
    text: 'SELECT model_limit_try_take($1, $2::jsonb, $3, $4) AS tried',
    values: [
      leaseId,
      JSON.stringify(
        ordered.map(({ scope, limit }) => ({
          scope,
          ...(limit.concurrent === undefined ? {} : { concurrent: limit.concurrent }),
          ...(limit.requestsPerMinute === undefined ? {} : { requests_per_minute: limit.requestsPerMinute }),
          ...(limit.tokensPerMinute === undefined ? {} : { tokens_per_minute: limit.tokensPerMinute }),
        })),
      ),
      LEASE_SECONDS,
      CONCURRENCY_POLL_MS,
    ],
  });
  const tried = rows[0]?.tried;
  if (tried === undefined || tried.taken) return { taken: true };
  return { taken: false, scope: tried.scope ?? '', reason: tried.reason ?? '', waitMs: Number(tried.wait_ms ?? 1) };
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
