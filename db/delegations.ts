import type { Pool, PoolClient } from 'pg';
import type { DelegationThreadMode, ThreadScope } from '../common/types';
import { OUTPUT_REPAIR_SUFFIX } from '../common/ids';
import { listBudgets, reserveGrants, type Budget, type BudgetLimit } from './budgets';
import { BatonDbError } from './errors';
import { cancelWaitingRequests } from './fences';
import { lockThreadAtEpoch, markThreadStatement, type Queryable } from './threads';
import { logStaleRefusal } from './refusals';
import { inTransaction } from './transaction';
import { listProviderUsage, type ProviderUsage } from './transcripts';

export interface DelegationRow {
  operationId: string;
  number: number;
  threadId: string;
  workflowId: string;
  message: string;
  epoch: number;
}

export interface NewDelegation {
  callee: string;
  mode: DelegationThreadMode;
  /** Agents from the root down to the callee. */
  chain: string[];
  /** The caller's assistant message that made the call; a clone copies the messages before it. */
  callerMessageSeq: number;
  /** Builds the message the callee receives, from what the transaction read (called once, inside it). */
  buildMessage: (reads: DelegationReads) => string;
  /** What the callee's file asks a delegation to reserve from a budgeted caller (`budget`). */
  budget?: BudgetLimit | undefined;
}

/** What a delegation reads to build the callee's message. */
export interface DelegationReads {
  /** The latest human message of the root thread. */
  rootMessage: string;
  /** The caller's latest assistant message with text. */
  callerLatest: string | undefined;
}

/** Workflow id of the n-th delegation to `agent` in a tree: `baton/<root>/<agent>-<n>`. */
export function delegationWorkflowId(rootThreadId: string, agent: string, number: number): string {
  return `baton/${rootThreadId}/${agent}-${number}`;
}

/**
 * Opens a delegation from the caller's thread, once per operation id and only while the caller is at its epoch:
 * numbers it per root and agent, picks or creates the callee's thread (new, the last one under this caller, or a
 * clone of the caller's transcript) and records the message the callee will receive.
 * @throws StaleEpochError, ThreadNotFoundError
 */
export async function openDelegation(
  pool: Pool,
  scope: ThreadScope,
  operationId: string,
  delegation: NewDelegation,
): Promise<DelegationRow> {
  return logStaleRefusal(pool, scope, 'delegation', operationId, () =>
    inTransaction(pool, async (client) => {
      await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
      const done = await findDelegation(client, scope, operationId);
      if (done) return done;
      await lockDelegationNumbers(client, scope.rootThreadId);
      return insertDelegation(client, scope, operationId, delegation, await readContext(client, scope));
    }),
  );
}

/** Serialises numbering of delegations (and forks) within one root; held to the end of the transaction. */
export async function lockDelegationNumbers(client: PoolClient, rootThreadId: string): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`delegations:${rootThreadId}`]);
}

/** How a fork task's thread differs from a plain delegation's. */
export interface ForkThreadOptions {
  /** The task's attribution label, e.g. `fork 1 task 2`. */
  forkTask: string;
  /** Whether the task writes to a store of its own (its thread id, in front of the caller's scopes). */
  isolated: boolean;
}

/**
 * Numbers a delegation, creates (or, for `reuse`, picks) the callee's thread and records the message it receives.
 * The caller holds the thread lock at its epoch and {@link lockDelegationNumbers}.
 */
export async function insertDelegation(
  client: PoolClient,
  scope: ThreadScope,
  operationId: string,
  delegation: NewDelegation,
  reads: DelegationReads,
  fork?: ForkThreadOptions,
): Promise<DelegationRow> {
  const [row] = await insertDelegations(client, scope, [{ operationId, delegation, ...(fork ? { fork } : {}) }], reads);
  if (!row) throw new BatonDbError(`delegation '${operationId}' was not recorded`);
  return row;
}

/** One delegation of {@link insertDelegations}. */
export interface DelegationToInsert {
  operationId: string;
  delegation: NewDelegation;
  fork?: ForkThreadOptions;
}

/**
 * {@link insertDelegation} for several delegations of one caller at once (a fork's tasks), numbered in the order
 * given, in a fixed number of statements however many there are (a `reuse` or `clone` adds one each): a fork's
 * tasks are opened inside its caller's turn, before any of them starts.
 */
export async function insertDelegations(
  client: PoolClient,
  scope: ThreadScope,
  items: readonly DelegationToInsert[],
  reads: DelegationReads,
): Promise<DelegationRow[]> {
  if (items.length === 0) return [];
  const callees = [...new Set(items.map((item) => item.delegation.callee))];
  const { rows: counted } = await client.query<{ agent: string; n: number }>(
    `SELECT agent, COALESCE(MAX(number), 0) AS n FROM delegations
      WHERE root_thread_id = $1 AND agent = ANY($2::text[]) GROUP BY agent`,
    [scope.rootThreadId, callees],
  );
  const lastNumber = new Map(counted.map((row) => [row.agent, row.n]));
  const planned: { item: DelegationToInsert; number: number; threadId: string; workflowId: string }[] = [];
  for (const item of items) {
    const { callee, mode } = item.delegation;
    const number = (lastNumber.get(callee) ?? 0) + 1;
    lastNumber.set(callee, number);
    let threadId = `${scope.rootThreadId}/${callee}-${number}`;
    if (mode === 'reuse') {
      // The caller's last plain delegation thread to this agent: a fork task's thread is not one (it writes to its
      // own store, under its task's label). A thread whose last turn was reclaimed or failed is not continued either:
      // its epoch was moved on and its transcript may stop in the middle of a step, so the call starts a new thread.
      const { rows } = await client.query<{ threadId: string; status: string }>(
        `SELECT d.thread_id AS "threadId", t.status FROM delegations d JOIN threads t ON t.thread_id = d.thread_id
          WHERE d.root_thread_id = $1 AND d.parent_thread_id = $2 AND d.agent = $3 AND t.fork_task IS NULL
          ORDER BY d.created_at DESC, d.number DESC LIMIT 1`,
        [scope.rootThreadId, scope.threadId, callee],
      );
      const last = rows[0];
      if (last && last.status !== 'reclaimed' && last.status !== 'failed') threadId = last.threadId;
    }
    planned.push({ item, number, threadId, workflowId: delegationWorkflowId(scope.rootThreadId, callee, number) });
  }
  // The callees' threads run in their caller's world and read the caller's env-data scopes; an isolated fork task
  // writes to a scope of its own in front of them. A reused thread exists already and is left as it is.
  await client.query(
    `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, chain, world, env_scopes, fork_task)
     SELECT t.thread_id, $2, $3, t.agent, $4, t.chain::jsonb, p.world,
            CASE WHEN t.isolated THEN ARRAY[t.thread_id] || p.env_scopes ELSE p.env_scopes END, t.fork_task
       FROM unnest($1::text[], $5::text[], $6::text[], $7::boolean[], $8::text[])
              WITH ORDINALITY AS t(thread_id, agent, chain, isolated, fork_task, position)
      CROSS JOIN (SELECT world, env_scopes FROM threads WHERE thread_id = $3) p
      ORDER BY t.position
     ON CONFLICT (thread_id) DO NOTHING`,
    [
      planned.map((p) => p.threadId),
      scope.rootThreadId,
      scope.threadId,
      scope.agent,
      planned.map((p) => p.item.delegation.callee),
      planned.map((p) => JSON.stringify(p.item.delegation.chain)),
      planned.map((p) => p.item.fork?.isolated ?? false),
      planned.map((p) => p.item.fork?.forkTask ?? null),
    ],
  );
  for (const { item, threadId } of planned) {
    if (item.delegation.mode === 'clone') {
      await copyTranscript(
        client,
        scope,
        threadId,
        item.delegation.callee,
        item.delegation.callerMessageSeq,
        item.operationId,
      );
    }
  }
  const messages = planned.map(({ item }) => item.delegation.buildMessage(reads));
  const { rows: epochs } = await client.query<{ threadId: string; epoch: number }>(
    'SELECT thread_id AS "threadId", epoch FROM threads WHERE thread_id = ANY($1::text[])',
    [planned.map((p) => p.threadId)],
  );
  const epochOf = new Map(epochs.map((row) => [row.threadId, row.epoch]));
  await client.query(
    `INSERT INTO delegations (root_thread_id, operation_id, parent_thread_id, caller, agent, number, thread_id,
                              workflow_id, mode, message)
     SELECT $1, d.operation_id, $2, $3, d.agent, d.number, d.thread_id, d.workflow_id, d.mode, d.message
       FROM unnest($4::text[], $5::text[], $6::integer[], $7::text[], $8::text[], $9::text[], $10::text[])
              WITH ORDINALITY AS d(operation_id, agent, number, thread_id, workflow_id, mode, message, position)
      ORDER BY d.position`,
    [
      scope.rootThreadId,
      scope.threadId,
      scope.agent,
      planned.map((p) => p.item.operationId),
      planned.map((p) => p.item.delegation.callee),
      planned.map((p) => p.number),
      planned.map((p) => p.threadId),
      planned.map((p) => p.workflowId),
      planned.map((p) => p.item.delegation.mode),
      messages,
    ],
  );
  // Under a budgeted tree each callee reserves its share of the caller's budget with its delegation.
  await reserveGrants(
    client,
    scope.rootThreadId,
    scope.threadId,
    planned.map(({ item, threadId }) => ({
      operationId: item.operationId,
      threadId,
      asked: item.delegation.budget,
    })),
    items.some((item) => item.fork !== undefined) ? 'even' : 'half',
  );
  return planned.map(({ item, number, threadId, workflowId }, index) => ({
    operationId: item.operationId,
    number,
    threadId,
    workflowId,
    message: messages[index] ?? '',
    epoch: epochOf.get(threadId) ?? 0,
  }));
}

/**
 * The delegation the caller's operation opened, if it already ran. Operation ids are unique per root (another root's
 * delegation is never found), and one belongs to one calling thread.
 * @throws BatonDbError when the operation id already opened a delegation from another thread of the root
 */
export async function findDelegation(
  db: Queryable,
  scope: Pick<ThreadScope, 'rootThreadId' | 'threadId'>,
  operationId: string,
): Promise<DelegationRow | undefined> {
  const { rows } = await db.query<DelegationRow & { parentThreadId: string }>(
    `SELECT d.operation_id AS "operationId", d.number, d.thread_id AS "threadId", d.workflow_id AS "workflowId",
            d.message, t.epoch, d.parent_thread_id AS "parentThreadId"
       FROM delegations d JOIN threads t ON t.thread_id = d.thread_id
      WHERE d.root_thread_id = $1 AND d.operation_id = $2`,
    [scope.rootThreadId, operationId],
  );
  const found = rows[0];
  if (!found) return undefined;
  if (found.parentThreadId !== scope.threadId) {
    throw new BatonDbError(`operation '${operationId}' already delegated from thread '${found.parentThreadId}'`);
  }
  const { parentThreadId: _parent, ...row } = found;
  return row;
}

/** The message a delegation recorded for its callee (preamble included), or `undefined`. */
export async function findDelegationMessage(
  db: Queryable,
  rootThreadId: string,
  operationId: string,
): Promise<string | undefined> {
  const { rows } = await db.query<{ message: string }>(
    'SELECT message FROM delegations WHERE root_thread_id = $1 AND operation_id = $2',
    [rootThreadId, operationId],
  );
  return rows[0]?.message;
}

export async function readContext(client: PoolClient, scope: ThreadScope): Promise<DelegationReads> {
  const { rows: root } = await client.query<{ content: string }>(
    // A message asking a typed agent to fix its answer is not the person's.
    `SELECT content FROM transcript_messages
      WHERE thread_id = $1 AND role = 'user' AND operation_id NOT LIKE '%${OUTPUT_REPAIR_SUFFIX}'
      ORDER BY seq DESC LIMIT 1`,
    [scope.rootThreadId],
  );
  const { rows: latest } = await client.query<{ content: string }>(
    `SELECT content FROM transcript_messages
      WHERE thread_id = $1 AND role = 'assistant' AND COALESCE(content, '') <> '' ORDER BY seq DESC LIMIT 1`,
    [scope.threadId],
  );
  return { rootMessage: root[0]?.content ?? '', callerLatest: latest[0]?.content };
}

/** Seeds a clone with the caller's messages before the one that made the call (that one awaits its results). */
async function copyTranscript(
  client: PoolClient,
  scope: ThreadScope,
  threadId: string,
  callee: string,
  beforeSeq: number,
  operationId: string,
): Promise<void> {
  await client.query(
    `INSERT INTO transcript_messages
       (root_thread_id, thread_id, seq, role, agent, content, tool_calls, tool_call_id, usage, provider, model,
        operation_id)
     SELECT root_thread_id, $2, seq, role, $3, content, tool_calls, tool_call_id, NULL, provider, model,
            $4 || ':clone:' || seq
       FROM transcript_messages WHERE thread_id = $1 AND seq < $5 ORDER BY seq`,
    [scope.threadId, threadId, callee, operationId, beforeSeq],
  );
}

/**
 * Records how a thread's latest turn is going. A reclaimed thread keeps saying so when its cancelled turn reports
 * its own end afterwards; only a new turn in it (`running`) moves it on. A turn that failed waits for nobody any more:
 * its open questions and pending approvals are cancelled with the reason, in the same transaction.
 */
export async function markThread(
  pool: Pool,
  threadId: string,
  status: 'running' | 'completed' | 'max_steps' | 'failed',
  error?: string,
): Promise<void> {
  const mark = (db: Queryable) =>
    db.query<{ rootThreadId: string }>(
      `${markThreadStatement('$1', '$2', '$3')} RETURNING root_thread_id AS "rootThreadId"`,
      [threadId, status, error ?? null],
    );
  if (status !== 'failed') return void (await mark(pool));
  await inTransaction(pool, async (client) => {
    const { rows } = await mark(client);
    const rootThreadId = rows[0]?.rootThreadId;
    if (rootThreadId === undefined) return; // reclaimed: its reclaim cancelled them
    await cancelWaitingRequests(
      client,
      rootThreadId,
      [threadId],
      error === undefined ? 'its turn failed' : `its turn failed: ${error}`,
    );
  });
}

/** One node of a delegation tree, with its token usage. */
export interface TreeRow {
  threadId: string;
  parentThreadId: string | null;
  agent: string;
  caller: string | null;
  status: string;
  lastError: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  modelCalls: number;
  totalTokens: number;
  /** The thread's model calls by the provider that answered them (see `listProviderUsage`). */
  providers: ProviderUsage[];
  /** The watcher whose wake-up runs in this thread or above it (`null`: none). */
  watcher?: string | null;
  /**
   * Under a budgeted tree, the thread's budget (the root's, or the latest share it reserved from its caller's): absent
   * for a thread that spends from its root's and for every thread of a tree without a budget.
   */
  budget?: Budget;
}

/** Every thread of a tree with its usage, oldest first. */
export async function listTree(db: Queryable, rootThreadId: string): Promise<TreeRow[]> {
  const { rows } = await db.query<Omit<TreeRow, 'providers'> & { modelCalls: string; totalTokens: string }>(
    `SELECT t.thread_id AS "threadId", t.parent_thread_id AS "parentThreadId", t.agent, t.caller, t.status,
            t.last_error AS "lastError", t.created_at AS "createdAt", t.finished_at AS "finishedAt", t.watcher,
            COUNT(m.seq) FILTER (WHERE m.role = 'assistant' AND m.operation_id NOT LIKE '%:clone:%') AS "modelCalls",
            COALESCE(SUM((m.usage->>'totalTokens')::bigint), 0) AS "totalTokens"
       FROM threads t LEFT JOIN transcript_messages m ON m.thread_id = t.thread_id
      WHERE t.root_thread_id = $1
      GROUP BY t.thread_id ORDER BY t.created_at, t.thread_id`,
    [rootThreadId],
  );
  const usage = await listProviderUsage(db, rootThreadId);
  const budgets = await listBudgets(db, rootThreadId);
  return rows.map((row) => ({
    ...row,
    ...(budgets.has(row.threadId) ? { budget: budgets.get(row.threadId) } : {}),
    modelCalls: Number(row.modelCalls),
    totalTokens: Number(row.totalTokens),
    providers: usage.filter((entry) => entry.threadId === row.threadId).map(({ threadId: _, ...entry }) => entry),
  }));
}
