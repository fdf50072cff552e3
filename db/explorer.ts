/**
 * Read-only queries of the thread explorer (`explorer/`) beyond what the client SDK offers: the list of root threads,
 * what the delegation tree leaves out (the message each child received, its workflow id), the
 * root-scope env data with scopes and fork attribution, proposals, the env state as of an event, and which threads are
 * watchers' wake-ups. Nothing here writes. Each query is keyed by one root thread, except the root list.
 */
import { OUTPUT_REPAIR_SUFFIX } from '../common/ids';
import type { Queryable } from './threads';

/** One root thread as the explorer's front page lists it. */
export interface RootThreadSummary {
  threadId: string;
  agent: string;
  status: string;
  world: string;
  createdAt: Date;
  updatedAt: Date;
  /** Human messages the root thread received: its turns. */
  turns: number;
  /** Tokens of every model call in the whole tree. */
  totalTokens: number;
  /** Threads in the tree, the root included. */
  threads: number;
  openQuestions: number;
  /** Tool calls of the tree waiting for a person's approval. */
  pendingApprovals: number;
  /** The first human message, for recognising the conversation. */
  firstMessage: string | null;
}

/** Root threads newest first; `search` matches the thread id, the agent or the first human message (no wildcards). */
export async function listRootThreads(
  db: Queryable,
  options: { search?: string; limit?: number } = {},
): Promise<RootThreadSummary[]> {
  const pattern = options.search ? `%${options.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
  const { rows } = await db.query<
    Omit<RootThreadSummary, 'turns' | 'totalTokens' | 'threads' | 'openQuestions' | 'pendingApprovals'> & {
      turns: string;
      totalTokens: string;
      threads: string;
      openQuestions: string;
      pendingApprovals: string;
    }
  >(
    `SELECT t.thread_id AS "threadId", t.agent, t.status, t.world, t.created_at AS "createdAt",
            t.updated_at AS "updatedAt", first.content AS "firstMessage",
            (SELECT COUNT(*) FROM transcript_messages m WHERE m.thread_id = t.thread_id AND m.role = 'user'
                AND m.operation_id NOT LIKE '%${OUTPUT_REPAIR_SUFFIX}') AS turns,
            (SELECT COALESCE(SUM((m.usage->>'totalTokens')::bigint), 0) FROM transcript_messages m
              WHERE m.root_thread_id = t.thread_id) AS "totalTokens",
            (SELECT COUNT(*) FROM threads c WHERE c.root_thread_id = t.thread_id) AS threads,
            (SELECT COUNT(*) FROM questions q WHERE q.root_thread_id = t.thread_id AND q.status = 'open')
              AS "openQuestions",
            (SELECT COUNT(*) FROM approvals a WHERE a.root_thread_id = t.thread_id AND a.status = 'pending')
              AS "pendingApprovals"
       FROM threads t
       LEFT JOIN LATERAL (SELECT content FROM transcript_messages m
                           WHERE m.thread_id = t.thread_id AND m.role = 'user' ORDER BY seq LIMIT 1) first ON true
      WHERE t.thread_id = t.root_thread_id
        AND ($1::text IS NULL OR t.thread_id ILIKE $1 OR t.agent ILIKE $1 OR first.content ILIKE $1)
      ORDER BY t.created_at DESC, t.thread_id
      LIMIT $2`,
    [pattern, options.limit ?? 200],
  );
  return rows.map((row) => ({
    ...row,
    turns: Number(row.turns),
    totalTokens: Number(row.totalTokens),
    threads: Number(row.threads),
    openQuestions: Number(row.openQuestions),
    pendingApprovals: Number(row.pendingApprovals),
  }));
}

/** What the explorer shows of a thread beyond `TreeRow`. */
export interface ThreadDetails {
  threadId: string;
  rootThreadId: string;
  world: string;
  epoch: number;
  startedAt: Date | null;
  /** The fork task this thread runs (`fork 1 task 2`), or `null`. */
  forkTask: string | null;
  /** Env-data scopes it reads, nearest first ('' is the root scope). */
  envScopes: string[];
  /** The watcher whose wake-up this thread is or runs under (threads below a wake-up inherit it), or `null`. */
  watcher: string | null;
  /** Set when this thread is a wake-up's own thread: its number, chain depth and turn's workflow. */
  wakeup: ThreadWakeup | null;
}

/** The wake-up a thread was opened for (`<root>/watch.<name>.<n>`). */
export interface ThreadWakeup {
  watcher: string;
  number: number;
  depth: number;
  workflowId: string;
}

const WAKEUP_OF_THREAD = `CASE WHEN w.number IS NULL THEN NULL ELSE json_build_object('watcher', w.watcher,
  'number', w.number, 'depth', w.depth, 'workflowId', w.workflow_id) END`;

export async function listThreadDetails(db: Queryable, rootThreadId: string): Promise<ThreadDetails[]> {
  const { rows } = await db.query<ThreadDetails>(
    `SELECT t.thread_id AS "threadId", t.root_thread_id AS "rootThreadId", t.world, t.epoch,
            t.started_at AS "startedAt", t.fork_task AS "forkTask", t.env_scopes AS "envScopes", t.watcher,
            ${WAKEUP_OF_THREAD} AS wakeup
       FROM threads t
       LEFT JOIN env_watch_wakeups w ON w.root_thread_id = t.root_thread_id AND w.thread_id = t.thread_id
      WHERE t.root_thread_id = $1`,
    [rootThreadId],
  );
  return rows;
}

/** The wake-up a thread was opened for, or `undefined` (not a wake-up's own thread). */
export async function findThreadWakeup(db: Queryable, threadId: string): Promise<ThreadWakeup | undefined> {
  const { rows } = await db.query<{ wakeup: ThreadWakeup }>(
    `SELECT ${WAKEUP_OF_THREAD} AS wakeup
       FROM threads t JOIN env_watch_wakeups w ON w.root_thread_id = t.root_thread_id AND w.thread_id = t.thread_id
      WHERE t.thread_id = $1`,
    [threadId],
  );
  return rows[0]?.wakeup;
}

/** One delegation call: which workflow ran it and the message (preamble included) the callee received. */
export interface DelegationRecord {
  threadId: string;
  parentThreadId: string;
  caller: string;
  agent: string;
  number: number;
  workflowId: string;
  mode: string;
  message: string;
  createdAt: Date;
}

/** The delegations of a tree, oldest first. */
export async function listDelegations(db: Queryable, rootThreadId: string): Promise<DelegationRecord[]> {
  const { rows } = await db.query<DelegationRecord>(
    `SELECT thread_id AS "threadId", parent_thread_id AS "parentThreadId", caller, agent, number,
            workflow_id AS "workflowId", mode, message, created_at AS "createdAt"
       FROM delegations WHERE root_thread_id = $1 ORDER BY created_at, number`,
    [rootThreadId],
  );
  return rows;
}

/** A root-scope env-data entry (without its value unless asked for), with fork attribution. */
export interface ScopedEnvEntry {
  key: string;
  shortDescription: string;
  type: string | null;
  tags: string[];
  storedBy: { agent: string; thread: string; task: string | null };
  version: number;
  updatedAt: Date;
  value?: unknown;
}

const SCOPED_ENTRY_COLUMNS = `key, short_description AS "shortDescription", type, tags,
  json_build_object('agent', stored_by_agent, 'thread', stored_by_thread, 'task', stored_by_task) AS "storedBy",
  version, updated_at AS "updatedAt"`;

/** The root scope's manifest (`scope = ''`): what every agent of the tree sees, by key. */
export async function listRootScopeEntries(db: Queryable, rootThreadId: string): Promise<ScopedEnvEntry[]> {
  const { rows } = await db.query<ScopedEnvEntry>(
    `SELECT ${SCOPED_ENTRY_COLUMNS} FROM env_data WHERE root_thread_id = $1 AND scope = '' ORDER BY key`,
    [rootThreadId],
  );
  return rows;
}

/** One root-scope entry with its value, or `undefined`. */
export async function getRootScopeEntry(
  db: Queryable,
  rootThreadId: string,
  key: string,
): Promise<ScopedEnvEntry | undefined> {
  const { rows } = await db.query<ScopedEnvEntry>(
    `SELECT ${SCOPED_ENTRY_COLUMNS}, value FROM env_data WHERE root_thread_id = $1 AND scope = '' AND key = $2`,
    [rootThreadId, key],
  );
  return rows[0];
}

/** One env-data event with its scope and the fork task that wrote it. */
export interface EnvLogEvent {
  seq: number;
  scope: string;
  key: string;
  action: string;
  actor: { agent: string; thread: string; task: string | null };
  version: number | null;
  valueSize: number | null;
  shortDescription: string | null;
  reason: string | null;
  createdAt: Date;
}

/** The env-data log of a tree (every scope), oldest first, without values; paging on by `seq` skips nothing. */
export async function listEnvLog(
  db: Queryable,
  rootThreadId: string,
  options: { since?: number; limit?: number } = {},
): Promise<EnvLogEvent[]> {
  const { rows } = await db.query<EnvLogEvent>(
    `SELECT seq::float8 AS seq, scope, key, action,
            json_build_object('agent', actor_agent, 'thread', actor_thread, 'task', actor_task) AS actor, version,
            value_size AS "valueSize", short_description AS "shortDescription", reason, created_at AS "createdAt"
       FROM env_events_after($1, $2, $3) ORDER BY seq`,
    [rootThreadId, options.since ?? 0, options.limit ?? 1000],
  );
  return rows;
}

/**
 * The root scope as it was right after event `seq`: each key's last stored or updated value at or before it, unless a
 * delete came later. Rebuilt from the log alone, which keeps every value it wrote.
 */
export async function rootScopeAsOf(db: Queryable, rootThreadId: string, seq: number): Promise<ScopedEnvEntry[]> {
  const { rows } = await db.query<ScopedEnvEntry & { action: string }>(
    `SELECT * FROM (
       SELECT DISTINCT ON (key) key, action, short_description AS "shortDescription", NULL::text AS type,
              '{}'::text[] AS tags,
              json_build_object('agent', actor_agent, 'thread', actor_thread, 'task', actor_task) AS "storedBy",
              version, created_at AS "updatedAt", value
         FROM env_events
        WHERE root_thread_id = $1 AND scope = '' AND seq <= $2 AND action IN ('stored', 'updated', 'deleted')
        ORDER BY key, seq DESC) latest
      WHERE action <> 'deleted' ORDER BY key`,
    [rootThreadId, seq],
  );
  return rows.map(({ action: _, ...entry }) => entry);
}

/** A change a fork worker proposed to a key it could read but not write. */
export interface EnvProposal {
  proposalId: string;
  number: number;
  scope: string;
  key: string;
  value: unknown;
  patch: unknown;
  shortDescription: string | null;
  baseVersion: number | null;
  proposedBy: { agent: string; thread: string; task: string | null };
  createdAt: Date;
}

/** Pending proposals of a tree, in order. */
export async function listPendingProposals(db: Queryable, rootThreadId: string): Promise<EnvProposal[]> {
  const { rows } = await db.query<EnvProposal>(
    `SELECT proposal_id AS "proposalId", number, scope, key, value, patch, short_description AS "shortDescription",
            base_version AS "baseVersion",
            json_build_object('agent', proposed_by_agent, 'thread', proposed_by_thread, 'task', fork_task)
              AS "proposedBy",
            created_at AS "createdAt"
       FROM env_proposals WHERE root_thread_id = $1 AND status = 'pending' ORDER BY number`,
    [rootThreadId],
  );
  return rows;
}
