import type { Pool, PoolClient } from 'pg';
import { mergedKey, type Commit, type ParsedCommit } from '../common/commit';
import { envKeyProblem } from '../common/env-data';
import { hasUnstorableText, storableText } from '../common/text';
import type { ThreadScope } from '../common/types';
import {
  announce,
  EnvDataError,
  findInScopes,
  insertProposal,
  logEvent,
  upsertEntry,
  type Change,
  type EnvAnnouncement,
} from './env-data';
import { StaleEpochError, ThreadNotFoundError } from './errors';
import { logStaleRefusal } from './refusals';
import { inTransaction } from './transaction';

/** What merging one fork task's commit did; part of the `fork_join` tool result. */
export interface MergeResult {
  commitId: string;
  /** Keys created or replaced in the caller's store, `<prefix>/<task index>/<key>` (at most 50 listed). */
  created: string[];
  /** How many more keys were created than `created` lists. */
  createdMore?: number;
  links: number;
  /** Proposal ids now pending for the caller (or a human) to accept. */
  proposals: string[];
  errors: string[];
}

/** One successful isolated task to merge into its caller's store. */
export interface TaskCommit {
  forkNumber: number;
  taskIndex: number;
  prefix: string;
  /** The task's thread: its isolated store is the scope named by this id. */
  threadId: string;
  agent: string;
  /** The task's attribution label (`fork 1 task 2`). */
  forkTask: string;
  /** The commit found in the task's final answer, if any. */
  explicit: ParsedCommit;
}

const LISTED_KEYS = 50;

/**
 * Applies a successful isolated fork task's changes to its caller's store as one commit, in one transaction, once per
 * operation id, fenced by the caller's epoch: every entry of the task's store (and every `creates` of an explicit
 * commit) lands under `<prefix>/<task index>/`, attributed to the task; links are stored; updates it staged, and those
 * its commit proposes, become pending proposals and change nothing. A part that cannot be applied (text Postgres
 * cannot store among them: U+0000 or a lone surrogate in a description, type, tag or the commit's id) is reported in
 * `errors`; the rest still merges.
 * @throws StaleEpochError, ThreadNotFoundError
 */
export async function mergeTaskCommit(
  pool: Pool,
  caller: ThreadScope,
  operationId: string,
  task: TaskCommit,
  serialize: (value: unknown) => string,
): Promise<MergeResult> {
  const [merged] = await mergeTaskCommits(pool, caller, [{ operationId, task }], serialize);
  return merged as MergeResult;
}

/** One merge of {@link mergeTaskCommits}: its operation id and its task. */
export interface TaskMerge {
  operationId: string;
  task: TaskCommit;
}

/**
 * {@link mergeTaskCommit} for the successful tasks of one join, in their order, in one transaction: the root's lock
 * and the caller's fence are taken once and the merges commit together, where one transaction per task made a join of
 * N tasks wait for N commits. Each merge is still its own commit of the caller's store, under its own operation id: a
 * retry finds every merge done and returns their results, and a join that fails merges none.
 * @throws StaleEpochError (logged as a refused write under the first merge's operation id), ThreadNotFoundError
 */
export async function mergeTaskCommits(
  pool: Pool,
  caller: ThreadScope,
  merges: readonly TaskMerge[],
  serialize: (value: unknown) => string,
): Promise<MergeResult[]> {
  const first = merges[0];
  if (first === undefined) return [];
  const announcements: EnvAnnouncement[] = [];
  const merged = await logStaleRefusal(pool, caller, 'env', first.operationId, () =>
    inTransaction(pool, async (client) => {
      // A merge writes many keys and numbers proposals: it has the root's env data to itself (the root's lock in
      // exclusive mode; single writes hold it shared), which also keeps two attempts of one merge from both applying.
      // Then the caller's fence.
      await client.query('SELECT pg_advisory_xact_lock(env_root_lock_key($1))', [caller.rootThreadId]);
      const { rows: threads } = await client.query<{ epoch: number; scopes: string[]; forkTask: string | null }>(
        'SELECT epoch, env_scopes AS scopes, fork_task AS "forkTask" FROM threads WHERE thread_id = $1 FOR SHARE',
        [caller.threadId],
      );
      const thread = threads[0];
      if (!thread) throw new ThreadNotFoundError(caller.threadId);
      if (thread.epoch !== caller.epoch) throw new StaleEpochError(caller.threadId, caller.epoch, thread.epoch);
      const { rows: done } = await client.query<{ operationId: string; result: MergeResult }>(
        `SELECT operation_id AS "operationId", result FROM env_commits
          WHERE root_thread_id = $1 AND operation_id = ANY($2::text[])`,
        [caller.rootThreadId, merges.map((merge) => merge.operationId)],
      );
      const doneBefore = new Map(done.map((row) => [row.operationId, row.result]));
      const toMerge = merges.filter(({ operationId }) => !doneBefore.has(operationId));
      // What every task left, read at once: the root's lock keeps the tasks' stores and staged proposals as they are
      // until this transaction ends, and no merge writes to another task's scope.
      const taskScopes = toMerge.map(({ task }) => task.threadId);
      const { rows: stored } = await client.query<StoredEntry & { scope: string }>(
        `SELECT scope, key, short_description AS "shortDescription", value, type, tags FROM env_data
          WHERE root_thread_id = $1 AND scope = ANY($2::text[]) ORDER BY scope, key`,
        [caller.rootThreadId, taskScopes],
      );
      const { rows: staging } = await client.query<{ scope: string }>(
        `SELECT DISTINCT from_scope AS scope FROM env_proposals
          WHERE root_thread_id = $1 AND from_scope = ANY($2::text[]) AND status = 'staged'`,
        [caller.rootThreadId, taskScopes],
      );
      const stagingScopes = new Set(staging.map((row) => row.scope));
      const storeOf = new Map<string, StoredEntry[]>();
      for (const row of stored) {
        const store = storeOf.get(row.scope);
        if (store) store.push(row);
        else storeOf.set(row.scope, [row]);
      }
      const mergedNow = new Map<string, MergeResult>();
      for (const { operationId, task } of toMerge) {
        const merge = new CommitMerge(client, caller, operationId, task, thread.scopes, serialize, announcements);
        const store = storeOf.get(task.threadId) ?? [];
        mergedNow.set(operationId, await merge.apply(store, stagingScopes.has(task.threadId)));
      }
      if (toMerge.length > 0) {
        await client.query(
          `INSERT INTO env_commits (root_thread_id, operation_id, fork_number, task_index, commit_id, result)
           SELECT $1, c.operation_id, c.fork_number, c.task_index, c.commit_id, c.result::jsonb
             FROM unnest($2::text[], $3::integer[], $4::integer[], $5::text[], $6::text[])
                    WITH ORDINALITY AS c(operation_id, fork_number, task_index, commit_id, result, position)
            ORDER BY c.position`,
          [
            caller.rootThreadId,
            toMerge.map(({ operationId }) => operationId),
            toMerge.map(({ task }) => task.forkNumber),
            toMerge.map(({ task }) => task.taskIndex),
            toMerge.map(({ operationId }) => mergedNow.get(operationId)?.commitId ?? null),
            toMerge.map(({ operationId }) => JSON.stringify(mergedNow.get(operationId))),
          ],
        );
      }
      const results = merges.map(({ operationId }) => doneBefore.get(operationId) ?? mergedNow.get(operationId));
      return results as MergeResult[];
    }),
  );
  await announce(pool, announcements);
  return merged;
}

/** Marks what tasks that did not succeed staged as discarded: nothing they proposed is offered. */
export async function discardStagedProposals(
  pool: Pool,
  rootThreadId: string,
  taskThreadIds: readonly string[],
): Promise<void> {
  if (taskThreadIds.length === 0) return;
  await pool.query(
    `UPDATE env_proposals SET status = 'discarded'
      WHERE root_thread_id = $1 AND from_scope = ANY($2::text[]) AND status = 'staged'`,
    [rootThreadId, taskThreadIds],
  );
}

/** An entry of a task's own store, as a merge reads it. */
interface StoredEntry {
  key: string;
  shortDescription: string;
  value: unknown;
  type: string | null;
  tags: string[];
}

/** One merge in progress: the caller's transaction, where things land, and what was done so far. */
class CommitMerge {
  private readonly targetScope: string;
  private readonly created: string[] = [];
  private readonly errors: string[] = [];
  private readonly proposals: string[] = [];
  private links = 0;
  private readonly actor: { agent: string; thread: string };
  private readonly commitId: string;
  private readonly reason: string;

  constructor(
    private readonly client: PoolClient,
    private readonly caller: ThreadScope,
    private readonly operationId: string,
    private readonly task: TaskCommit,
    private readonly callerScopes: readonly string[],
    private readonly serialize: (value: unknown) => string,
    /** What the merge logged, announced once it committed. */
    private readonly announcements: EnvAnnouncement[],
  ) {
    this.targetScope = callerScopes[0] ?? '';
    this.actor = { agent: task.agent, thread: task.threadId };
    const explicitId = task.explicit.kind === 'commit' ? task.explicit.commit.commit_id : undefined;
    const fallbackId = `fork-${task.forkNumber}-task-${task.taskIndex}`;
    const idProblem = unstorable('commit_id', explicitId);
    if (idProblem) this.errors.push(`${idProblem}: the commit is named ${fallbackId}`);
    this.commitId = idProblem || explicitId === undefined ? fallbackId : explicitId;
    this.reason = `merged from ${task.forkTask} (commit ${this.commitId})`;
  }

  /**
   * @param store the entries of the task's own store, by key
   * @param staging whether the task staged proposals
   */
  async apply(store: readonly StoredEntry[], staging: boolean): Promise<MergeResult> {
    const localKeys = await this.mergeStore(store);
    const commit: Commit | undefined = this.task.explicit.kind === 'commit' ? this.task.explicit.commit : undefined;
    if (this.task.explicit.kind === 'error') this.errors.push(this.task.explicit.error);
    if (commit) {
      for (const create of commit.creates) {
        localKeys.add(create.id);
        const problem =
          unstorable('description', create.description) ??
          unstorable('type', create.type) ??
          (create.tags ?? []).map((tag) => unstorable('a tag', tag)).find(Boolean);
        if (problem) {
          this.errors.push(`create '${create.id}': ${problem}`);
          continue;
        }
        await this.createEntry(create.id, {
          shortDescription: create.description,
          value: create.content,
          type: create.type ?? null,
          tags: create.tags ?? [],
        });
      }
      for (const [index, link] of commit.links.entries()) {
        await this.link(index, link, localKeys);
      }
      for (const [index, proposal] of commit.proposes_updates.entries()) {
        await this.propose(index, proposal);
      }
    }
    if (staging) await this.offerStagedProposals();
    return {
      commitId: this.commitId,
      created: this.created.slice(0, LISTED_KEYS),
      ...(this.created.length > LISTED_KEYS ? { createdMore: this.created.length - LISTED_KEYS } : {}),
      links: this.links,
      proposals: this.proposals,
      // They are stored (jsonb) with the result; a parser's message may quote a piece of the answer.
      errors: this.errors.map(storableText),
    };
  }

  /** Every entry of the task's own store, under the prefix. Returns their local keys (links may name them). */
  private async mergeStore(store: readonly StoredEntry[]): Promise<Set<string>> {
    for (const row of store) await this.createEntry(row.key, row);
    return new Set(store.map((row) => row.key));
  }

  private async createEntry(
    localKey: string,
    entry: { shortDescription: string; value: unknown; type: string | null; tags: string[] },
  ): Promise<void> {
    const key = mergedKey(this.task.prefix, this.task.taskIndex, localKey);
    const problem = envKeyProblem(key);
    if (problem) return void this.errors.push(`create '${localKey}': ${problem}`);
    let json: string;
    try {
      json = this.serialize(entry.value);
    } catch (error) {
      return void this.errors.push(
        `create '${localKey}': ${error instanceof EnvDataError ? error.message : String(error)}`,
      );
    }
    const version = await upsertEntry(this.client, {
      rootThreadId: this.caller.rootThreadId,
      scope: this.targetScope,
      key,
      shortDescription: entry.shortDescription,
      json,
      type: entry.type,
      tags: entry.tags,
      storedBy: { ...this.actor, task: this.task.forkTask },
    });
    const change: Change = {
      action: 'stored',
      version,
      json,
      shortDescription: entry.shortDescription,
      reason: this.reason,
    };
    await this.log(
      this.client,
      this.caller,
      `${this.operationId}:create:${localKey}`,
      key,
      this.target(),
      change,
      this.actor,
    );
    if (!this.created.includes(key)) this.created.push(key);
  }

  private async link(index: number, link: Commit['links'][number], localKeys: ReadonlySet<string>): Promise<void> {
    const resolve = (key: string) => (localKeys.has(key) ? mergedKey(this.task.prefix, this.task.taskIndex, key) : key);
    const src = resolve(link.src);
    const dst = resolve(link.dst);
    const operationId = `${this.operationId}:link:${index}`;
    await this.client.query(
      `INSERT INTO env_links (root_thread_id, scope, src_key, dst_key, type, created_by_agent, created_by_thread,
                              fork_task, operation_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        this.caller.rootThreadId,
        this.targetScope,
        src,
        dst,
        link.type,
        this.actor.agent,
        this.actor.thread,
        this.task.forkTask,
        operationId,
      ],
    );
    const json = JSON.stringify({ type: link.type, dst });
    await this.log(
      this.client,
      this.caller,
      operationId,
      src,
      this.target(),
      { action: 'linked', version: 0, json, shortDescription: `${src} ${link.type} ${dst}`, reason: this.reason },
      this.actor,
    );
    this.links++;
  }

  private async propose(index: number, proposal: Commit['proposes_updates'][number]): Promise<void> {
    const where = `proposal for '${proposal.target_id}'`;
    if (proposal.patch === undefined && proposal.value === undefined && proposal.description_update === undefined) {
      return void this.errors.push(`${where}: give a patch, a value or a description_update`);
    }
    const problem = unstorable('description_update', proposal.description_update);
    if (problem) return void this.errors.push(`${where}: ${problem}`);
    const target = await findInScopes(this.client, this.caller.rootThreadId, this.callerScopes, proposal.target_id);
    if (!target) return void this.errors.push(`${where}: there is no entry '${proposal.target_id}' to change`);
    let valueJson: string | null = null;
    let patchJson: string | null = null;
    try {
      if (proposal.value !== undefined) valueJson = this.serialize(proposal.value);
      if (proposal.patch !== undefined) patchJson = this.serialize(proposal.patch);
    } catch (error) {
      return void this.errors.push(`${where}: ${error instanceof EnvDataError ? error.message : String(error)}`);
    }
    const operationId = `${this.operationId}:proposal:${index}`;
    const proposalId = await insertProposal(this.client, {
      rootThreadId: this.caller.rootThreadId,
      scope: target.scope,
      fromScope: this.task.threadId,
      key: proposal.target_id,
      valueJson,
      patchJson,
      shortDescription: proposal.description_update ?? null,
      baseVersion: target.version,
      proposedBy: this.actor,
      forkTask: this.task.forkTask,
      operationId,
      status: 'pending',
    });
    await this.logProposal(
      operationId,
      proposalId,
      proposal.target_id,
      target.version,
      valueJson ?? patchJson ?? 'null',
    );
  }

  /** Updates the task staged against inherited entries: offered now, as pending proposals. */
  private async offerStagedProposals(): Promise<void> {
    const { rows } = await this.client.query<{
      proposalId: string;
      key: string;
      baseVersion: number | null;
      change: string;
    }>(
      `UPDATE env_proposals SET status = 'pending', fork_task = COALESCE(fork_task, $3)
        WHERE root_thread_id = $1 AND from_scope = $2 AND status = 'staged'
        RETURNING proposal_id AS "proposalId", key, base_version AS "baseVersion",
                  COALESCE(value, patch, 'null'::jsonb)::text AS change`,
      [this.caller.rootThreadId, this.task.threadId, this.task.forkTask],
    );
    for (const row of rows.sort((a, b) => a.proposalId.localeCompare(b.proposalId, 'en', { numeric: true }))) {
      await this.logProposal(
        `${this.operationId}:offer:${row.proposalId}`,
        row.proposalId,
        row.key,
        row.baseVersion,
        row.change,
      );
    }
  }

  private async logProposal(
    operationId: string,
    proposalId: string,
    key: string,
    baseVersion: number | null,
    json: string,
  ): Promise<void> {
    await this.log(
      this.client,
      this.caller,
      operationId,
      key,
      this.target(),
      {
        action: 'proposed',
        version: baseVersion ?? 0,
        json,
        shortDescription: `proposal ${proposalId}`,
        reason: `${this.reason}: proposal ${proposalId}, not applied until accepted`,
      },
      this.actor,
    );
    this.proposals.push(proposalId);
  }

  private async log(...args: Parameters<typeof logEvent>): Promise<void> {
    const logged = await logEvent(...args);
    if (logged) this.announcements.push(logged);
  }

  private target() {
    return { scope: this.targetScope, forkTask: this.task.forkTask };
  }
}

/** Why a commit's `text` cannot be stored as it is (U+0000, a lone surrogate), naming it `where`; else undefined. */
function unstorable(where: string, text: string | undefined): string | undefined {
  return text !== undefined && hasUnstorableText(text)
    ? `${where} holds a NUL character or a lone surrogate, which Postgres cannot store`
    : undefined;
}
