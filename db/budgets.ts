/**
 * Budgets of a root thread's tree, in tokens and US dollars (migration 025): the root's grant, the grants its
 * delegations and fork tasks reserve from their callers' (escrow down the tree), and what each has left. Charging is
 * not here: the stored reply's trigger charges it, once per operation id, in the reply's own transaction.
 */
import type { Pool, PoolClient } from 'pg';
import { inTransaction } from './transaction';
import type { Queryable } from './threads';

/** One unit of a budget (tokens, or US dollars). */
export interface BudgetAmount {
  /** Granted: the root's budget, or the share a delegation or fork task reserved from its caller's. */
  granted: number;
  /** Spent by the grant's subtree (its own replies and its children's). */
  spent: number;
  /** What may still be spent here: granted, less spent, less what open children hold unspent. */
  left: number;
}

/** A thread's budget as a model call or a reader sees it: each unit it limits. */
export interface Budget {
  /** Tokens (input and output, as the endpoint reported them). */
  tokens?: BudgetAmount;
  /** US dollars, at the workers' prices (`BATON_MODEL_PRICES`). */
  usd?: BudgetAmount;
}

/** What a root's budget is opened with, or an agent file asks a delegation to reserve: at least one unit. */
export interface BudgetLimit {
  tokens?: number | undefined;
  usd?: number | undefined;
}

type AmountRow = { granted: number | string; spent: number | string; left: number | string };

/** A budget read from `budget_json(...)` (`null`: the tree has none). */
export function budgetFrom(row: { tokens?: AmountRow; usd?: AmountRow } | null): Budget | undefined {
  if (row === null) return undefined;
  const amount = (unit: AmountRow) => ({
    granted: Number(unit.granted),
    spent: Number(unit.spent),
    left: Number(unit.left),
  });
  return {
    ...(row.tokens === undefined ? {} : { tokens: amount(row.tokens) }),
    ...(row.usd === undefined ? {} : { usd: amount(row.usd) }),
  };
}

/** Opens a root thread's budget, once: a root that has one keeps it (the first turn to begin opens it). */
export async function openRootBudget(db: Queryable, rootThreadId: string, limit: BudgetLimit): Promise<void> {
  await db.query(
    `INSERT INTO budget_grants (root_thread_id, grant_id, thread_id, granted_tokens, granted_usd)
     VALUES ($1, '', $1, $2, $3)
     ON CONFLICT (root_thread_id, grant_id) DO NOTHING`,
    [rootThreadId, limit.tokens ?? null, limit.usd ?? null],
  );
}

/** One delegation or fork task that reserves a share of its caller's budget. */
export interface GrantToReserve {
  /** The delegation's operation id (the grant is known by it). */
  operationId: string;
  /** The callee's thread, whose replies spend it. */
  threadId: string;
  /** What the callee agent's file asks for (`budget`), when it sets it. */
  asked: BudgetLimit | undefined;
}

/**
 * Reserves each delegation's share of its caller's budget, in the caller's transaction that opens them, when the
 * tree has a budget. In each unit the caller's budget limits, each takes what its callee's file asks, else half of
 * what the caller has left (a fork's tasks: an even share of it), and never more than is left. The caller's grant
 * is locked, so a charge in flight waits.
 */
export async function reserveGrants(
  client: PoolClient,
  rootThreadId: string,
  callerThreadId: string,
  grants: readonly GrantToReserve[],
  split: 'half' | 'even',
): Promise<void> {
  if (grants.length === 0) return;
  const { rows } = await client.query<{ grantId: string; path: string[]; budget: Parameters<typeof budgetFrom>[0] }>(
    `SELECT g.grant_id AS "grantId", g.path, budget_json(g) AS budget
       FROM budget_grants g
      WHERE g.root_thread_id = $1 AND g.grant_id = (budget_grant_of($1, $2)).grant_id
        FOR UPDATE`,
    [rootThreadId, callerThreadId],
  );
  const caller = rows[0];
  if (caller === undefined) return;
  const room = budgetFrom(caller.budget) ?? {};
  /** The shares of one unit (all null where the caller's budget does not limit it). */
  const sharesOf = (
    amount: BudgetAmount | undefined,
    asked: (limit: BudgetLimit) => number | undefined,
    whole: boolean,
  ) => {
    if (amount === undefined) return grants.map(() => null);
    let left = Math.max(amount.left, 0);
    const part = split === 'half' ? left / 2 : left / grants.length;
    // Whole tokens; dollars to the millionth, rounded down so the shares never add up to more than is left.
    const fallback = whole ? Math.floor(part) : Math.floor(part * 1e6) / 1e6;
    return grants.map((grant) => {
      const share = Math.min((grant.asked && asked(grant.asked)) ?? fallback, left);
      left -= share;
      return share;
    });
  };
  await client.query(
    `INSERT INTO budget_grants
       (root_thread_id, grant_id, thread_id, parent_grant_id, path, granted_tokens, granted_usd)
     SELECT $1, g.operation_id, g.thread_id, $2, $3::text[], g.tokens, g.usd
       FROM unnest($4::text[], $5::text[], $6::bigint[], $7::numeric[])
              WITH ORDINALITY AS g(operation_id, thread_id, tokens, usd, position)
      ORDER BY g.position
     ON CONFLICT (root_thread_id, grant_id) DO NOTHING`,
    [
      rootThreadId,
      caller.grantId,
      [...caller.path, caller.grantId],
      grants.map((grant) => grant.operationId),
      grants.map((grant) => grant.threadId),
      sharesOf(room.tokens, (limit) => limit.tokens, true),
      sharesOf(room.usd, (limit) => limit.usd, false),
    ],
  );
}

/** A thread's budget now (`undefined`: its tree has none). */
export async function budgetOf(db: Queryable, rootThreadId: string, threadId: string): Promise<Budget | undefined> {
  const { rows } = await db.query<{ budget: Parameters<typeof budgetFrom>[0] }>('SELECT budget_of($1, $2) AS budget', [
    rootThreadId,
    threadId,
  ]);
  return budgetFrom(rows[0]?.budget ?? null);
}

/** The budget of each thread of a tree that has a grant of its own (the root's, and each delegation's latest). */
export async function listBudgets(db: Queryable, rootThreadId: string): Promise<Map<string, Budget>> {
  const { rows } = await db.query<{ threadId: string; budget: NonNullable<Parameters<typeof budgetFrom>[0]> }>(
    `SELECT DISTINCT ON (g.thread_id) g.thread_id AS "threadId", budget_json(g) AS budget
       FROM budget_grants g WHERE g.root_thread_id = $1
      ORDER BY g.thread_id, (g.grant_id <> '') DESC, g.position DESC`,
    [rootThreadId],
  );
  return new Map(rows.map((row) => [row.threadId, budgetFrom(row.budget) ?? {}]));
}

/**
 * Adds what a person approved to the budget of `threadId` and every budget above it, once per approval (its operation
 * id), and only when the approval is approved in Postgres: whatever asks, the decision is the person's.
 * @returns the thread's budget after it, or `undefined` when the approval is not approved (nothing was added)
 */
export async function extendBudget(
  pool: Pool,
  input: { rootThreadId: string; threadId: string; approvalOperationId: string; extension: BudgetLimit },
): Promise<Budget | undefined> {
  return inTransaction(pool, async (client) => {
    const { rows: approvals } = await client.query<{ status: string }>(
      'SELECT status FROM approvals WHERE root_thread_id = $1 AND operation_id = $2',
      [input.rootThreadId, input.approvalOperationId],
    );
    if (approvals[0]?.status !== 'approved') return undefined;
    const { rows: added } = await client.query<{ grantId: string; path: string[] }>(
      `INSERT INTO budget_extensions (root_thread_id, operation_id, grant_id, tokens, usd)
       SELECT $1, $2, g.grant_id, $3, $4 FROM budget_grant_of($1, $5) g WHERE g.grant_id IS NOT NULL
       ON CONFLICT (root_thread_id, operation_id) DO NOTHING
       RETURNING grant_id AS "grantId", (SELECT path FROM budget_grants b
                                          WHERE b.root_thread_id = $1 AND b.grant_id = budget_extensions.grant_id) AS path`,
      [
        input.rootThreadId,
        input.approvalOperationId,
        input.extension.tokens ?? null,
        input.extension.usd ?? null,
        input.threadId,
      ],
    );
    const grant = added[0];
    if (grant !== undefined) {
      await client.query(
        `UPDATE budget_grants SET granted_tokens = granted_tokens + COALESCE($3, 0), granted_usd = granted_usd + COALESCE($4, 0)
          WHERE root_thread_id = $1 AND grant_id = ANY ($2::text[])`,
        [
          input.rootThreadId,
          [...grant.path, grant.grantId],
          input.extension.tokens ?? null,
          input.extension.usd ?? null,
        ],
      );
    }
    return budgetOf(client, input.rootThreadId, input.threadId);
  });
}
