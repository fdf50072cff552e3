import type { Pool } from 'pg';
import type { ForkStatus, ForkStoreMode, ForkTaskStatus, ThreadScope } from '../common/types';
import {
  insertDelegations,
  lockDelegationNumbers,
  readContext,
  type DelegationReads,
  type NewDelegation,
} from './delegations';
import { BatonDbError } from './errors';
import { logStaleRefusal } from './refusals';
import { lockThreadAtEpoch, type Queryable } from './threads';
import { inTransaction } from './transaction';
import { fenceThread } from './fences';

/** A fork to open: how it runs and what each task receives. */
export interface NewFork {
  store: ForkStoreMode;
  /** The prefix the caller chose; `fork/<n>` when absent. */
  prefix?: string;
  failFast: boolean;
  deadlineSeconds: number;
  maxParallel: number;
  tasks: NewForkTask[];
}

export interface NewForkTask {
  delegation: Omit<NewDelegation, 'buildMessage'>;
  /** Builds the task's message (its preamble needs the fork's number and prefix, known only inside the transaction). */
  buildMessage: (reads: DelegationReads, fork: { forkNumber: number; prefix: string }) => string;
}

export interface ForkTaskRow {
  taskIndex: number;
  agent: string;
  threadId: string;
  workflowId: string;
  epoch: number;
  /** The delegation operation id the child reads its message from. */
  delegationOperationId: string;
  status: 'pending' | ForkTaskStatus;
  error: string | null;
  merge: unknown;
  /** When the task's thread started its turn (when it was created, before that). */
  startedAt: Date | null;
  /** When its thread finished, or the fork recorded its end. */
  finishedAt: Date | null;
  /** When the deadline or fail-fast gave up on it. */
  reclaimedAt: Date | null;
}

export interface ForkRow {
  rootThreadId: string;
  number: number;
  operationId: string;
  parentThreadId: string;
  caller: string;
  store: ForkStoreMode;
  prefix: string;
  failFast: boolean;
  deadlineSeconds: number;
  maxParallel: number;
  status: 'running' | ForkStatus;
  createdAt: Date;
  deadlineAt: Date;
  finishedAt: Date | null;
  tasks: ForkTaskRow[];
}

/** The delegation operation id of a fork's n-th task (1-based). */
export function forkTaskOperationId(forkOperationId: string, taskIndex: number): string {
  return `${forkOperationId}:task:${taskIndex}`;
}

/** How a fork task's writes are attributed: `fork 1 task 2`. */
export function forkTaskLabel(forkNumber: number, taskIndex: number): string {
  return `fork ${forkNumber} task ${taskIndex}`;
}

/**
 * Opens a fork from the caller's thread, once per operation id and only while the caller is at its epoch: numbers
 * it per root, and creates every task's thread and delegation (with the message it will receive) in one
 * transaction, so either all tasks exist or none does.
 * @throws StaleEpochError, ThreadNotFoundError
 */
export async function openFork(pool: Pool, scope: ThreadScope, operationId: string, fork: NewFork): Promise<ForkRow> {
  return logStaleRefusal(pool, scope, 'fork', operationId, () =>
    inTransaction(pool, async (client) => {
      await lockThreadAtEpoch(client, scope.threadId, scope.epoch);
      const existing = await findFork(client, scope.rootThreadId, { operationId });
      if (existing) return existing;
      await lockDelegationNumbers(client, scope.rootThreadId);
      const { rows: counted } = await client.query<{ n: number }>(
        'SELECT COALESCE(MAX(number), 0) + 1 AS n FROM forks WHERE root_thread_id = $1',
        [scope.rootThreadId],
      );
      const forkNumber = counted[0]?.n ?? 1;
      const prefix = fork.prefix ?? `fork/${forkNumber}`;
      await client.query(
        `INSERT INTO forks (root_thread_id, number, operation_id, parent_thread_id, caller, store_mode, prefix, fail_fast,
                            deadline_seconds, max_parallel, deadline_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::integer, $10, now() + $9::integer * interval '1 second')`,
        [
          scope.rootThreadId,
          forkNumber,
          operationId,
          scope.threadId,
          scope.agent,
          fork.store,
          prefix,
          fork.failFast,
          fork.deadlineSeconds,
          fork.maxParallel,
        ],
      );
      const reads = await readContext(client, scope);
      const delegations = await insertDelegations(
        client,
        scope,
        fork.tasks.map((task, position) => ({
          operationId: forkTaskOperationId(operationId, position + 1),
          delegation: {
            ...task.delegation,
            buildMessage: (taskReads) => task.buildMessage(taskReads, { forkNumber, prefix }),
          },
          fork: { forkTask: forkTaskLabel(forkNumber, position + 1), isolated: fork.store === 'isolated' },
        })),
        reads,
      );
      await client.query(
        `INSERT INTO fork_tasks (root_thread_id, fork_number, task_index, agent, thread_id, workflow_id)
         SELECT $1, $2, t.task_index, t.agent, t.thread_id, t.workflow_id
           FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS t(agent, thread_id, workflow_id, task_index)
          ORDER BY t.task_index`,
        [
          scope.rootThreadId,
          forkNumber,
          fork.tasks.map((task) => task.delegation.callee),
          delegations.map((delegation) => delegation.threadId),
          delegations.map((delegation) => delegation.workflowId),
        ],
      );
      const opened = await findFork(client, scope.rootThreadId, { number: forkNumber });
      if (!opened) throw new BatonDbError(`fork ${forkNumber} of '${scope.rootThreadId}' vanished while opening`);
      return opened;
    }),
  );
}

/** A fork of a root by its number or by the operation id that opened it, with its tasks in order. */
export async function findFork(
  db: Queryable,
  rootThreadId: string,
  by: { number: number } | { operationId: string },
): Promise<ForkRow | undefined> {
  const { rows } = await db.query<Omit<ForkRow, 'tasks'>>(
    `SELECT root_thread_id AS "rootThreadId", number, operation_id AS "operationId",
            parent_thread_id AS "parentThreadId", caller, store_mode AS store, prefix, fail_fast AS "failFast",
            deadline_seconds AS "deadlineSeconds", max_parallel AS "maxParallel", status, created_at AS "createdAt",
            deadline_at AS "deadlineAt", finished_at AS "finishedAt"
       FROM forks WHERE root_thread_id = $1 AND ${'number' in by ? 'number = $2' : 'operation_id = $2'}`,
    [rootThreadId, 'number' in by ? by.number : by.operationId],
  );
  const fork = rows[0];
  if (!fork) return undefined;
  const { rows: tasks } = await db.query<ForkTaskRow>(
    `SELECT ft.task_index AS "taskIndex", ft.agent, ft.thread_id AS "threadId", ft.workflow_id AS "workflowId",
            t.epoch, $3 || ':task:' || ft.task_index AS "delegationOperationId", ft.status, ft.error, ft.merge,
            COALESCE(t.started_at, t.created_at) AS "startedAt", COALESCE(t.finished_at, ft.finished_at) AS "finishedAt",
            ft.reclaimed_at AS "reclaimedAt"
       FROM fork_tasks ft
       JOIN threads t ON t.thread_id = ft.thread_id
      WHERE ft.root_thread_id = $1 AND ft.fork_number = $2
      ORDER BY ft.task_index`,
    [rootThreadId, fork.number, fork.operationId],
  );
  return { ...fork, tasks };
}

/** Every fork of a root, oldest first (for `baton tree` and the explorer). */
export async function listForks(db: Queryable, rootThreadId: string): Promise<ForkRow[]> {
  const { rows } = await db.query<{ number: number }>(
    'SELECT number FROM forks WHERE root_thread_id = $1 ORDER BY number',
    [rootThreadId],
  );
  const forks: ForkRow[] = [];
  for (const { number } of rows) {
    const fork = await findFork(db, rootThreadId, { number });
    if (fork) forks.push(fork);
  }
  return forks;
}

/**
 * Gives up on unfinished fork tasks: fences each task's thread and every thread below it (what it delegated to, even
 * a delegation opening at this very moment: see `fenceThread`), so any write they still attempt is refused, cancels
 * their pending approvals and open questions, and records the task's end. Once per task: a retried call bumps nothing
 * twice.
 * @returns the number of threads whose epoch moved
 */
export async function reclaimForkTasks(
  pool: Pool,
  rootThreadId: string,
  forkNumber: number,
  tasks: readonly { taskIndex: number; status: 'timeout' | 'cancelled'; error: string }[],
): Promise<number> {
  return inTransaction(pool, async (client) => {
    let reclaimed = 0;
    for (const task of tasks) {
      const { rows } = await client.query<{ threadId: string }>(
        `UPDATE fork_tasks SET status = $4, error = $5, reclaimed_at = now(), finished_at = now()
          WHERE root_thread_id = $1 AND fork_number = $2 AND task_index = $3 AND reclaimed_at IS NULL
            AND status = 'pending'
          RETURNING thread_id AS "threadId"`,
        [rootThreadId, forkNumber, task.taskIndex, task.status, task.error],
      );
      const threadId = rows[0]?.threadId;
      if (threadId === undefined) continue;
      const fenced = await fenceThread(client, rootThreadId, threadId, { status: 'reclaimed', error: task.error });
      reclaimed += fenced.length;
    }
    return reclaimed;
  });
}

/** Records how each task ended (tasks already reclaimed keep their status) and the fork's aggregate. */
export async function recordForkOutcome(
  db: Queryable,
  rootThreadId: string,
  forkNumber: number,
  outcomes: readonly {
    taskIndex: number;
    status: ForkTaskStatus;
    error?: string;
    merge?: unknown;
    /** The workflow the task ran in, when not the one its row names (it answered in its fork's). */
    ranInWorkflowId?: string;
  }[],
  status: ForkStatus,
): Promise<void> {
  // One statement for every task (its `fork_task_ended` event fires as its row changes), then the fork's end.
  await db.query(
    `UPDATE fork_tasks f SET status = CASE WHEN f.status = 'pending' THEN o.status ELSE f.status END,
            error = COALESCE(f.error, o.error), merge = COALESCE(o.merge::jsonb, f.merge),
            finished_at = COALESCE(f.finished_at, now()), workflow_id = COALESCE(o.ran_in, f.workflow_id)
       FROM unnest($3::integer[], $4::text[], $5::text[], $6::text[], $7::text[])
              AS o(task_index, status, error, merge, ran_in)
      WHERE f.root_thread_id = $1 AND f.fork_number = $2 AND f.task_index = o.task_index`,
    [
      rootThreadId,
      forkNumber,
      outcomes.map((outcome) => outcome.taskIndex),
      outcomes.map((outcome) => outcome.status),
      outcomes.map((outcome) => outcome.error ?? null),
      outcomes.map((outcome) => (outcome.merge === undefined ? null : JSON.stringify(outcome.merge))),
      outcomes.map((outcome) => outcome.ranInWorkflowId ?? null),
    ],
  );
  await db.query(
    `UPDATE forks SET status = $3, finished_at = COALESCE(finished_at, now())
      WHERE root_thread_id = $1 AND number = $2`,
    [rootThreadId, forkNumber, status],
  );
}

/** The final answers of the latest turns of `threadIds` (those that have one), by thread id, in one query. */
export async function latestReplies(db: Queryable, threadIds: readonly string[]): Promise<Map<string, string>> {
  if (threadIds.length === 0) return new Map();
  const { rows } = await db.query<{ threadId: string; content: string }>(
    `SELECT DISTINCT ON (thread_id) thread_id AS "threadId", content FROM transcript_messages
      WHERE thread_id = ANY($1::text[]) AND role = 'assistant' AND content IS NOT NULL AND tool_calls IS NULL
      ORDER BY thread_id, seq DESC`,
    [threadIds],
  );
  return new Map(rows.map((row) => [row.threadId, row.content]));
}
