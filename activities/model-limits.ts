/**
 * Limits on model calls that hold across every worker of a task queue (`BATON_MODEL_LIMITS`): requests and tokens per
 * minute and calls at once, per provider or per provider and model, kept in Postgres (db/model-limits.ts) rather than
 * in one process, so two workers together never exceed them. A call waits for room before its request, heartbeating
 * and saying why (the Web UI shows it with the activity), and its request timeout starts only once it is sent; a
 * provider's `Retry-After` makes every worker wait.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import {
  blockScopes,
  renewCapacity,
  returnCapacity,
  tryTakeCapacity,
  type LimitedScope,
  type ModelLimit,
} from '../db/model-limits';

export type { ModelLimit };

/** Limits by scope: a provider's name (`default` for the default endpoint), or `<provider>/<model>`. */
export type ModelLimits = Readonly<Record<string, ModelLimit>>;

/** The scopes that limit a call to `model` at `provider`: the provider's and the model's, where set. */
export function limitedScopes(limits: ModelLimits, provider: string, model: string): LimitedScope[] {
  return [provider, `${provider}/${model}`].flatMap((scope) => {
    const limit = limits[scope];
    return limit === undefined ? [] : [{ scope, limit }];
  });
}

/** How a call waits: what it reports while waiting, and what ends the wait early. */
export interface CapacityWait {
  /** Called at each look that finds no room (a heartbeat, for an activity). */
  readonly waiting: (why: { scope: string; reason: string; waitMs: number }) => void;
  /** The activity's cancellation. */
  readonly signal: AbortSignal;
}

/** How often a running call renews its leases (well within their `LEASE_SECONDS`). */
const RENEW_MS = 20_000;
/** Longest sleep between two looks: a wait stays responsive to a cancellation and a place freed early. */
const MAX_SLEEP_MS = 1_000;

/**
 * Runs `work` (one model request) once every scope has room, holding a place in each until it ends; `tokensOf`
 * counts what its reply used against the tokens per minute. With no scope limited it only runs `work`.
 */
export async function withCapacity<T>(
  pool: Pool,
  scopes: readonly LimitedScope[],
  wait: CapacityWait,
  work: () => Promise<T>,
  tokensOf: (result: T) => number,
): Promise<T> {
  if (scopes.length === 0) return work();
  const leaseId = randomBytes(12).toString('hex');
  for (;;) {
    const tried = await tryTakeCapacity(pool, leaseId, scopes);
    if (tried.taken) break;
    wait.waiting(tried);
    await sleep(Math.min(tried.waitMs, MAX_SLEEP_MS), wait.signal);
  }
  const renewal = setInterval(() => void renewCapacity(pool, leaseId).catch(() => undefined), RENEW_MS);
  let tokens = 0;
  try {
    const result = await work();
    tokens = tokensOf(result);
    return result;
  } finally {
    clearInterval(renewal);
    // A place not given back (the database went away) expires with its lease.
    await returnCapacity(pool, leaseId, tokens).catch(() => undefined);
  }
}

/** A provider asked every caller to wait `ms` (`Retry-After`): no worker sends to these scopes until then. */
export async function holdScopes(pool: Pool, scopes: readonly LimitedScope[], ms: number): Promise<void> {
  if (scopes.length === 0 || ms <= 0) return;
  await blockScopes(
    pool,
    scopes.map(({ scope }) => scope),
    ms,
  );
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error('cancelled'));
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error('cancelled'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
