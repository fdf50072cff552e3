import type { Pool, PoolClient } from 'pg';
import {
  DEFAULT_MAX_ENV_VALUE_BYTES,
  ENV_EVENTS_CHANNEL,
  envDescriptionProblem,
  envKeyProblem,
} from '../common/env-data';
import type { ThreadScope } from '../common/types';
import { hasUnstorableText } from '../common/text';
import { BatonDbError, StaleEpochError, ThreadNotFoundError } from './errors';
import type { Queryable } from './threads';
import { recordRefusedWrite } from './refusals';
import { EnvWriteBatches } from './env-write-batches';
import { GatheredSends } from './gathered-sends';
import { checkOut, transactionOn } from './transaction';

/** Stable names of env-data refusals (also the `ApplicationFailure` types when they cross Temporal). */
export const EnvDataErrorType = {
  TooLarge: 'EnvData.TooLarge',
  InvalidKey: 'EnvData.InvalidKey',
  InvalidDescription: 'EnvData.InvalidDescription',
  NotSerializable: 'EnvData.NotSerializable',
  NotFound: 'EnvData.NotFound',
  VersionConflict: 'EnvData.VersionConflict',
  NothingToUpdate: 'EnvData.NothingToUpdate',
} as const;
export type EnvDataErrorType = (typeof EnvDataErrorType)[keyof typeof EnvDataErrorType];

/** A write or read the store refused; nothing stored was changed. */
export class EnvDataError extends BatonDbError {
  constructor(
    readonly type: EnvDataErrorType,
    message: string,
    readonly currentVersion?: number,
    /**
     * For a version conflict of an update: the entry as the refusal found it, its version and value, so the writer
     * can retry from them without reading it again.
     */
    readonly conflict?: EnvConflict,
  ) {
    super(message);
  }
}

/** An update refused for a stale expected version, and the entry as the refusal found it. */
export interface EnvConflict {
  key: string;
  expectedVersion: number;
  current: { version: number; value: unknown };
}

export interface EnvEntry {
  key: string;
  /** The scope holding the entry: '' for the root's shared data, a thread id for an isolated fork task's store. */
  scope: string;
  shortDescription: string;
  value: unknown;
  type: string | null;
  tags: string[];
  storedBy: { agent: string; thread: string };
  /** The fork task that stored it (`fork 1 task 2`), or null. */
  storedByTask: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What `list` returns: everything but the value. */
export type EnvManifestEntry = Omit<EnvEntry, 'value'>;

export interface EnvEvent {
  seq: number;
  rootThreadId: string;
  /** The scope written ('' for the root's shared data). */
  scope: string;
  key: string;
  action: 'stored' | 'updated' | 'deleted' | 'rejected' | 'proposed' | 'linked';
  actor: { agent: string; thread: string };
  /** The fork task that wrote it (`fork 1 task 2`), or null. */
  actorTask: string | null;
  operationId: string;
  version: number | null;
  valueSize: number | null;
  value: unknown;
  shortDescription: string | null;
  reason: string | null;
  createdAt: Date;
}

/** A page of the manifest: its entries, how many more match after them, and the cursor that reads them. */
export interface EnvManifestPage {
  entries: EnvManifestEntry[];
  /** Entries matching the filters after this page. */
  more: number;
  /** Pass as `after` to read the next page; absent on the last one. */
  nextCursor?: string;
}

export interface EnvListFilters {
  /** Keys starting with this (a namespace such as `arc/`). */
  prefix?: string;
  type?: string;
  tag?: string;
  /** Entries last written by this agent. */
  storedBy?: string;
  /** Leave out entries last written by this agent. */
  excludeAgent?: string;
  /** Leave out entries last written by this thread (the caller: what the others found). */
  excludeThread?: string;
}

/**
 * Whose view of the data to read. Without one, the root's shared data; with a thread, what that thread sees: its
 * own isolated store first (a fork task's), then its callers' scopes, then the root's.
 */
export interface EnvView {
  threadId: string;
}

export interface EnvStoreInput {
  key: string;
  shortDescription: string;
  value: unknown;
  type?: string | undefined;
  tags?: readonly string[] | undefined;
}

export interface EnvUpdateInput {
  key: string;
  shortDescription?: string | undefined;
  value?: unknown;
  /** Refuse the update unless the entry is at this version (optimistic concurrency). */
  expectedVersion?: number | undefined;
}

/** The result of a write: what happened and the entry's version after it. */
export interface EnvWriteResult {
  /** `proposed`: an isolated fork task updated an entry it may read but not write; see `proposalId`. */
  action: 'stored' | 'updated' | 'deleted' | 'proposed';
  key: string;
  /** The entry's version after the write (for a proposal: the version it was based on). */
  version: number;
  proposalId?: string;
}

/** A change a fork worker proposed to an entry it could read but not write. */
export interface EnvProposal {
  proposalId: string;
  scope: string;
  key: string;
  value: unknown;
  patch: Record<string, unknown> | null;
  shortDescription: string | null;
  baseVersion: number | null;
  proposedBy: { agent: string; thread: string };
  forkTask: string | null;
  status: 'staged' | 'pending' | 'accepted' | 'rejected' | 'discarded';
  decidedBy: { agent: string; thread: string } | null;
  createdAt: Date;
}

export interface EnvStoreOptions {
  /** Largest value as JSON text. @default 100 KiB */
  maxValueBytes?: number;
}

const ENTRY_COLUMNS = `e.key, e.scope, e.short_description AS "shortDescription", e.type, e.tags,
  json_build_object('agent', e.stored_by_agent, 'thread', e.stored_by_thread) AS "storedBy",
  e.stored_by_task AS "storedByTask", e.version, e.created_at AS "createdAt", e.updated_at AS "updatedAt"`;

const EVENT_COLUMNS = `seq::float8 AS seq, root_thread_id AS "rootThreadId", scope, key, action,
  json_build_object('agent', actor_agent, 'thread', actor_thread) AS actor, actor_task AS "actorTask",
  operation_id AS "operationId", version,
  value_size AS "valueSize", value, short_description AS "shortDescription", reason, created_at AS "createdAt"`;

const PROPOSAL_COLUMNS = `proposal_id AS "proposalId", scope, key, value, patch, short_description AS "shortDescription",
  base_version AS "baseVersion", json_build_object('agent', proposed_by_agent, 'thread', proposed_by_thread) AS "proposedBy",
  fork_task AS "forkTask", status,
  CASE WHEN decided_by_agent IS NULL THEN NULL
       ELSE json_build_object('agent', decided_by_agent, 'thread', decided_by_thread) END AS "decidedBy",
  created_at AS "createdAt"`;

/**
 * The statements every store call runs, prepared once per connection (named): parsing and planning them each time
 * costs more than running them.
 */
/** An entry of the root's shared data. */
const GET_SHARED = {
  name: 'baton-env-get-shared',
  text: `SELECT ${ENTRY_COLUMNS}, e.value FROM env_data e WHERE e.root_thread_id = $1 AND e.scope = '' AND e.key = $2`,
};
/** An entry as a thread sees it ($3): the nearest of its scopes holding the key, each probed by its whole key. */
const GET_IN_VIEW = {
  name: 'baton-env-get-in-view',
  text: `SELECT ${ENTRY_COLUMNS}, e.value FROM ${viewScopes('$3::text')} s
           CROSS JOIN LATERAL ${entryInScope('$1', 's.scope', '$2')} e
          ORDER BY s.pos LIMIT 1`,
};

/**
 * The entry `key` of `scope` in `root` (SQL expressions), as a subquery: a probe of the entries' index by its whole
 * key. A join of the entries with a list of scopes may be planned the other way round (the entries first, by root and
 * key: every entry of the root read), and a connection keeps the generic plan of a prepared statement; this subquery
 * is never merged into its query (`OFFSET 0`), so the scope is always known when the entry is looked up. Migration
 * 020 does the same in the one-call writes; test/integration/env-write-plans.test.ts holds both to it.
 */
function entryInScope(root: string, scope: string, key: string): string {
  return `(SELECT * FROM env_data WHERE root_thread_id = ${root} AND scope = ${scope} AND key = ${key} OFFSET 0)`;
}

/**
 * The scopes a view reads, nearest first, as a SQL fragment over `$n` (a thread id, or NULL for the root's shared
 * data): joined to entries on scope, ordered by `pos`.
 */
function viewScopes(param: string): string {
  return `(SELECT u.scope, u.pos FROM threads t, unnest(t.env_scopes) WITH ORDINALITY AS u(scope, pos)
            WHERE t.thread_id = ${param}
           UNION ALL SELECT '', 1 WHERE ${param} IS NULL)`;
}

/**
 * Shared environment data of root threads, in Postgres. Every write is idempotent per operation id, fenced by the
 * writing thread's epoch, and logged (with its value) in `env_events` in the same transaction; once committed it is
 * announced on `baton_env_events`. Writers of one root do not take turns: each locks only the rows it writes (and
 * holds the root's lock in shared mode, for the log's readers; the common write fences its epoch with its thread's
 * epoch lock in shared mode, migration 009). A refused write changes nothing; refusals that reach the store are logged
 * as `rejected`, except version conflicts, which are only counted (`versionConflicts`).
 */
export class EnvStore {
  private readonly maxValueBytes: number;
  /**
   * Updates this store refused for a stale `expectedVersion` since it was made. A conflict is not logged (nothing
   * changed; see `replace`), so this count is where contention shows.
   */
  versionConflicts = 0;
  /** Change-feed announcements of committed writes, sent in batches after their commits (`announce`). */
  private readonly announcements: GatheredSends<EnvAnnouncement>;
  /** The one-call writes, sent in batches when writers overlap. */
  private readonly oneCallWrites: EnvWriteBatches;

  constructor(
    private readonly pool: Pool,
    options: EnvStoreOptions = {},
  ) {
    this.maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_ENV_VALUE_BYTES;
    this.oneCallWrites = new EnvWriteBatches(pool);
    this.announcements = new GatheredSends({
      gatherMs: ENV_ANNOUNCEMENT_GATHER_MS,
      maxPerBatch: MAX_ANNOUNCEMENTS_PER_BATCH,
      send: (batch) => announce(pool, batch),
    });
  }

  /**
   * Writes this store's calls of several answered (how often its writers overlapped), and writes it ran alone again
   * after their call failed as a whole.
   */
  get batchCounts(): { batched: number; rerunAlone: number } {
    return { ...this.oneCallWrites.counts };
  }

  /** Sends the announcements still gathering now; resolves once every write announced so far has been. */
  flushAnnouncements(): Promise<void> {
    return this.announcements.flush();
  }

  /**
   * Creates or replaces an entry (last write wins) in the writing thread's scope: the root's shared data, or an
   * isolated fork task's own store.
   * @throws EnvDataError for an invalid key, description or value; StaleEpochError; ThreadNotFoundError
   */
  async store(scope: ThreadScope, operationId: string, input: EnvStoreInput): Promise<EnvWriteResult> {
    checkKey(input.key);
    checkDescription(input.shortDescription);
    checkLabels(input.type, input.tags);
    const json = this.serialize(input.value);
    const replaced = await this.replace(scope, operationId, 'stored', input.key, json, {
      shortDescription: input.shortDescription,
      type: input.type ?? null,
      tags: input.tags ?? [],
    });
    if (replaced) return replaced;
    return this.write(scope, operationId, input.key, async (client, target) => {
      const version = await upsertEntry(client, {
        rootThreadId: scope.rootThreadId,
        scope: target.scope,
        key: input.key,
        shortDescription: input.shortDescription,
        json,
        type: input.type ?? null,
        tags: input.tags ?? [],
        storedBy: { agent: scope.agent, thread: scope.threadId, task: target.forkTask },
      });
      return { action: 'stored', version, json, shortDescription: input.shortDescription };
    });
  }

  /**
   * Changes an existing entry, keeping the fields left out; with `expectedVersion`, refuses a stale update. An
   * isolated fork task updating an entry of its callers' scopes does not change it: the update is staged as a
   * proposal, offered to the caller when the task succeeds.
   * @throws EnvDataError `EnvData.NotFound`, `EnvData.VersionConflict` (with the current version), invalid input;
   * StaleEpochError
   */
  async update(scope: ThreadScope, operationId: string, input: EnvUpdateInput): Promise<EnvWriteResult> {
    checkKey(input.key);
    if (input.shortDescription === undefined && input.value === undefined) {
      throw new EnvDataError(EnvDataErrorType.NothingToUpdate, 'give a new short_description, a new value, or both');
    }
    if (input.shortDescription !== undefined) checkDescription(input.shortDescription);
    const json = input.value === undefined ? undefined : this.serialize(input.value);
    if (json !== undefined) {
      const updated = await this.replace(scope, operationId, 'updated', input.key, json, {
        shortDescription: input.shortDescription ?? null,
        expectedVersion: input.expectedVersion ?? null,
      });
      if (updated) return updated;
    }
    return this.write(scope, operationId, input.key, async (client, target) => {
      const { rows: current } = await client.query<EnvConflict['current']>(
        'SELECT version, value FROM env_data WHERE root_thread_id = $1 AND scope = $2 AND key = $3 FOR UPDATE',
        [scope.rootThreadId, target.scope, input.key],
      );
      const version = current[0]?.version;
      if (version === undefined) {
        const inherited = await findInReadScopes(client, scope.rootThreadId, target, input.key);
        if (inherited) {
          if (input.expectedVersion !== undefined && input.expectedVersion !== inherited.version) {
            // Read with its version in one statement: the caller's entry is not locked here, and may move on.
            const { rows: found } = await client.query<EnvConflict['current']>(
              'SELECT version, value FROM env_data WHERE root_thread_id = $1 AND scope = $2 AND key = $3',
              [scope.rootThreadId, inherited.scope, input.key],
            );
            const now = found[0]?.version ?? inherited.version;
            return refuse(
              EnvDataErrorType.VersionConflict,
              versionConflictMessage(input.key, now, input.expectedVersion),
              now,
              found[0] && { key: input.key, expectedVersion: input.expectedVersion, current: found[0] },
            );
          }
          return stageProposal(client, scope, operationId, target, inherited, input, json);
        }
        return refuse(EnvDataErrorType.NotFound, `no entry '${input.key}' to update (use store_env_data to create it)`);
      }
      if (input.expectedVersion !== undefined && input.expectedVersion !== version) {
        return refuse(
          EnvDataErrorType.VersionConflict,
          versionConflictMessage(input.key, version, input.expectedVersion),
          version,
          { key: input.key, expectedVersion: input.expectedVersion, current: { version, value: current[0]?.value } },
        );
      }
      const { rows } = await client.query<{ version: number; value: unknown; shortDescription: string }>(
        `UPDATE env_data SET short_description = COALESCE($4, short_description), value = COALESCE($5::jsonb, value),
                stored_by_agent = $6, stored_by_thread = $7, stored_by_task = $8, version = version + 1,
                updated_at = now()
          WHERE root_thread_id = $1 AND scope = $2 AND key = $3
          RETURNING version, value, short_description AS "shortDescription"`,
        [
          scope.rootThreadId,
          target.scope,
          input.key,
          input.shortDescription ?? null,
          json ?? null,
          scope.agent,
          scope.threadId,
          target.forkTask,
        ],
      );
      const row = rows[0];
      if (!row) throw new BatonDbError(`update of '${input.key}' returned no row`);
      // Compact JSON, as `store` measures it, so value_size means the same for every action.
      const written = json ?? JSON.stringify(row.value);
      return { action: 'updated', version: row.version, json: written, shortDescription: row.shortDescription };
    });
  }

  /**
   * Applies a pending proposal to its entry, in the accepting thread's scope, and marks it accepted by that thread;
   * the event log says who accepted what. A proposal with a patch merges it into the entry's current object value,
   * whatever version it was based on; one with a whole value is refused once the entry moved past the version it was
   * based on (it would undo those changes), and stays pending.
   * @throws EnvDataError `EnvData.NotFound` (no such pending proposal, or its entry is gone), invalid input;
   * StaleEpochError
   */
  async acceptProposal(
    scope: ThreadScope,
    operationId: string,
    input: { key: string; proposalId: string },
  ): Promise<EnvWriteResult> {
    checkKey(input.key);
    return this.write(scope, operationId, input.key, async (client, target) => {
      const { rows: proposals } = await client.query<EnvProposal>(
        `SELECT ${PROPOSAL_COLUMNS} FROM env_proposals WHERE root_thread_id = $1 AND proposal_id = $2 FOR UPDATE`,
        [scope.rootThreadId, input.proposalId],
      );
      const proposal = proposals[0];
      if (!proposal || proposal.status !== 'pending') {
        const state = proposal ? `is ${proposal.status}` : 'does not exist';
        return refuse(
          EnvDataErrorType.NotFound,
          `proposal '${input.proposalId}' ${state}; only pending ones can be accepted`,
        );
      }
      if (proposal.key !== input.key) {
        return refuse(
          EnvDataErrorType.NotFound,
          `proposal '${input.proposalId}' changes '${proposal.key}', not '${input.key}'`,
        );
      }
      const { rows: current } = await client.query<{ version: number; value: unknown; shortDescription: string }>(
        `SELECT version, value, short_description AS "shortDescription" FROM env_data
          WHERE root_thread_id = $1 AND scope = $2 AND key = $3 FOR UPDATE`,
        [scope.rootThreadId, target.scope, input.key],
      );
      const entry = current[0];
      if (!entry) {
        return refuse(EnvDataErrorType.NotFound, `no entry '${input.key}' to apply proposal '${input.proposalId}' to`);
      }
      // A whole value proposed on an older version would undo what changed since without a word: refused, and left
      // pending. A patch is applied onto the current value, so it keeps the fields others changed meanwhile.
      if (proposal.patch === null && proposal.baseVersion !== null && proposal.baseVersion < entry.version) {
        return refuse(
          EnvDataErrorType.VersionConflict,
          `proposal '${input.proposalId}' replaces the whole value of '${input.key}' as of version ` +
            `${proposal.baseVersion}, but it is at version ${entry.version} now: accepting it would undo the changes ` +
            'since. Read the entry and update it yourself instead.',
          entry.version,
        );
      }
      let value = proposal.value;
      if (proposal.patch) {
        if (typeof entry.value !== 'object' || entry.value === null || Array.isArray(entry.value)) {
          return refuse(
            EnvDataErrorType.NotSerializable,
            `proposal '${input.proposalId}' patches fields, but '${input.key}' does not hold a JSON object`,
          );
        }
        value = { ...(entry.value as Record<string, unknown>), ...proposal.patch };
      }
      const json = value === null || value === undefined ? JSON.stringify(entry.value) : this.serialize(value);
      const description = proposal.shortDescription ?? entry.shortDescription;
      const { rows } = await client.query<{ version: number }>(
        `UPDATE env_data SET short_description = $4, value = $5::jsonb, stored_by_agent = $6, stored_by_thread = $7,
                stored_by_task = $8, version = version + 1, updated_at = now()
          WHERE root_thread_id = $1 AND scope = $2 AND key = $3 RETURNING version`,
        [scope.rootThreadId, target.scope, input.key, description, json, scope.agent, scope.threadId, target.forkTask],
      );
      await client.query(
        `UPDATE env_proposals SET status = 'accepted', decided_by_agent = $3, decided_by_thread = $4, decided_at = now()
          WHERE root_thread_id = $1 AND proposal_id = $2`,
        [scope.rootThreadId, input.proposalId, scope.agent, scope.threadId],
      );
      const proposer = proposal.forkTask
        ? `${proposal.proposedBy.agent}, ${proposal.forkTask}`
        : proposal.proposedBy.agent;
      return {
        action: 'updated',
        version: rows[0]?.version ?? entry.version + 1,
        json,
        shortDescription: description,
        reason: `accepted proposal ${input.proposalId} (proposed by ${proposer})`,
      };
    });
  }

  /**
   * Deletes an entry of the writing thread's scope; its last value stays in the event log.
   * @throws EnvDataError `EnvData.NotFound`; StaleEpochError
   */
  async delete(scope: ThreadScope, operationId: string, key: string, reason?: string): Promise<EnvWriteResult> {
    checkKey(key);
    if (reason !== undefined && hasUnstorableText(reason)) {
      throw new EnvDataError(
        EnvDataErrorType.InvalidDescription,
        'the reason holds a NUL character or a lone surrogate',
      );
    }
    return this.write(scope, operationId, key, async (client, target) => {
      const { rows } = await client.query<{ version: number; value: unknown; shortDescription: string }>(
        `DELETE FROM env_data WHERE root_thread_id = $1 AND scope = $2 AND key = $3
          RETURNING version, value, short_description AS "shortDescription"`,
        [scope.rootThreadId, target.scope, key],
      );
      const row = rows[0];
      if (!row) {
        if (await findInReadScopes(client, scope.rootThreadId, target, key)) {
          return refuse(
            EnvDataErrorType.NotFound,
            `'${key}' belongs to the shared data, and your store is isolated: you can delete only entries you stored`,
          );
        }
        return refuse(EnvDataErrorType.NotFound, `no entry '${key}' to delete`);
      }
      return {
        action: 'deleted',
        version: row.version,
        json: JSON.stringify(row.value),
        shortDescription: row.shortDescription,
        ...(reason === undefined ? {} : { reason }),
      };
    });
  }

  /** One entry with its value as `view` sees it (the root's shared data by default), or `undefined`. */
  async get(rootThreadId: string, key: string, view?: EnvView): Promise<EnvEntry | undefined> {
    const { rows } = await this.pool.query<EnvEntry>(
      view === undefined
        ? { ...GET_SHARED, values: [rootThreadId, key] }
        : { ...GET_IN_VIEW, values: [rootThreadId, key, view.threadId] },
    );
    return rows[0];
  }

  /** The manifest as `view` sees it (the root's shared data by default): every entry without its value, by key. */
  async list(rootThreadId: string, filters: EnvListFilters = {}, view?: EnvView): Promise<EnvManifestEntry[]> {
    return (await this.listPage(rootThreadId, filters, view)).entries;
  }

  /**
   * One page of the manifest, by key: up to `page.limit` entries after the key `page.after`, and how many more match
   * after them. A manifest can hold thousands of entries; whoever shows it to a model pages it.
   */
  async listPage(
    rootThreadId: string,
    filters: EnvListFilters = {},
    view?: EnvView,
    page: { limit?: number; after?: string } = {},
  ): Promise<EnvManifestPage> {
    const { rows } = await this.pool.query<EnvManifestEntry & { matching: string }>(
      `SELECT *, COUNT(*) OVER () AS matching FROM (
         SELECT DISTINCT ON (e.key) ${ENTRY_COLUMNS}
           FROM env_data e JOIN ${viewScopes('$8::text')} s ON e.scope = s.scope
          WHERE e.root_thread_id = $1
          ORDER BY e.key, s.pos) visible
        WHERE ($2::text IS NULL OR starts_with(key, $2))
          AND ($3::text IS NULL OR type = $3)
          AND ($4::text IS NULL OR $4 = ANY (tags))
          AND ($5::text IS NULL OR "storedBy"->>'agent' = $5)
          AND ($6::text IS NULL OR "storedBy"->>'agent' <> $6)
          AND ($7::text IS NULL OR "storedBy"->>'thread' <> $7)
          AND ($9::text IS NULL OR key > $9)
        ORDER BY key
        LIMIT $10`,
      [
        rootThreadId,
        filters.prefix ?? null,
        filters.type ?? null,
        filters.tag ?? null,
        filters.storedBy ?? null,
        filters.excludeAgent ?? null,
        filters.excludeThread ?? null,
        view?.threadId ?? null,
        page.after ?? null,
        page.limit ?? null,
      ],
    );
    const entries = rows.map(({ matching: _matching, ...entry }) => entry);
    const matching = Number(rows[0]?.matching ?? 0);
    const last = entries.at(-1);
    return {
      entries,
      more: matching - entries.length,
      ...(matching > entries.length && last ? { nextCursor: last.key } : {}),
    };
  }

  /**
   * Proposals of a root: by default the pending ones `view` can see (those against its read scopes; the root's
   * shared data without a view).
   */
  async proposals(
    rootThreadId: string,
    options: { status?: EnvProposal['status'] | 'all'; view?: EnvView } = {},
  ): Promise<EnvProposal[]> {
    const status = options.status ?? 'pending';
    const { rows } = await this.pool.query<EnvProposal>(
      `SELECT ${PROPOSAL_COLUMNS} FROM env_proposals p
        WHERE p.root_thread_id = $1 AND ($2 = 'all' OR p.status = $2)
          AND ($2 = 'all' OR p.scope IN (SELECT scope FROM ${viewScopes('$3::text')} v))
        ORDER BY p.number`,
      [rootThreadId, status, options.view?.threadId ?? null],
    );
    return rows;
  }

  /** Whether the scope holds any entry (cheap: the system context and preamble mention env data only then). */
  async hasEntries(db: Queryable, rootThreadId: string): Promise<boolean> {
    const { rows } = await db.query<{ exists: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM env_data WHERE root_thread_id = $1) AS exists',
      [rootThreadId],
    );
    return rows[0]?.exists ?? false;
  }

  /**
   * Events of a root after sequence number `since`, oldest first. Read through `env_events_after` (migration 008),
   * which waits for the root's writers in flight, so paging on from the last `seq` never skips an event.
   */
  async events(rootThreadId: string, options: { since?: number; limit?: number } = {}): Promise<EnvEvent[]> {
    const { rows } = await this.pool.query<EnvEvent>(
      `SELECT ${EVENT_COLUMNS} FROM env_events_after($1, $2, $3) ORDER BY seq`,
      [rootThreadId, options.since ?? 0, options.limit ?? 1000],
    );
    return rows;
  }

  /** Checks a value as `store` would (JSON-serialisable, within the size limit) and returns its JSON text. */
  serialize(value: unknown): string {
    const json = toJson(value);
    const bytes = Buffer.byteLength(json, 'utf8');
    if (bytes > this.maxValueBytes) {
      throw new EnvDataError(
        EnvDataErrorType.TooLarge,
        `the value is ${bytes} bytes of JSON; the limit is ${this.maxValueBytes} bytes (store a smaller part, or split it over several keys)`,
      );
    }
    return json;
  }

  /**
   * The common store or update in one round trip (`env_replace`, migrations 008, 009 and 016): replaces the value of
   * an existing entry of the writer's own scope, or stores a key that scope does not hold yet (its versions going on
   * after a delete), logs the event, and announces it once committed. Writes of this store that overlap share one
   * call (`env_replace_many`, migration 018; `EnvWriteBatches`), each answered as it would be alone. Autocommitted, so
   * it holds its locks only through its call's commit: the root's lock and the thread's epoch lock in shared mode
   * (writers of a root run and flush together; an epoch change waits for them, migration 009), and the entry's row.
   * A version conflict comes back from the same round trip and is thrown; nothing is written for it: a conflict
   * changes nothing, and logging every refused attempt of a contended key would make each one commit (a WAL flush) and
   * grow the log. `versionConflicts` counts them.
   * Returns `undefined` for everything else (see the function), and the full transaction (`write`) runs instead.
   * @throws EnvDataError `EnvData.VersionConflict`
   */
  private async replace(
    scope: ThreadScope,
    operationId: string,
    action: 'stored' | 'updated',
    key: string,
    json: string,
    fields: {
      shortDescription: string | null;
      type?: string | null;
      tags?: readonly string[];
      expectedVersion?: number | null;
    },
  ): Promise<EnvWriteResult | undefined> {
    const row = await this.oneCallWrites.submit({
      threadId: scope.threadId,
      rootThreadId: scope.rootThreadId,
      epoch: scope.epoch,
      key,
      operationId,
      action,
      json,
      agent: scope.agent,
      shortDescription: fields.shortDescription,
      type: fields.type ?? null,
      tags: fields.tags ?? [],
      expectedVersion: fields.expectedVersion ?? null,
    });
    if (row?.outcome === 'conflict' && row.version !== null && fields.expectedVersion != null) {
      this.versionConflicts += 1;
      throw new EnvDataError(
        EnvDataErrorType.VersionConflict,
        versionConflictMessage(key, row.version, fields.expectedVersion),
        row.version,
        {
          key,
          expectedVersion: fields.expectedVersion,
          current: { version: row.version, value: row.currentValue },
        },
      );
    }
    if (row?.outcome !== 'written' || row.seq === null || row.version === null) return undefined;
    this.announcements.add([{ rootThreadId: scope.rootThreadId, seq: row.seq, key, action }]);
    return { action, key, version: row.version };
  }

  /**
   * Runs one fenced, idempotent write: the first outcome of an operation is returned again on retry; a stale epoch
   * is logged as `rejected` (committed) before it is thrown; every change is logged, and announced once committed.
   */
  private async write(
    scope: ThreadScope,
    operationId: string,
    key: string,
    change: (client: PoolClient, target: WriteTarget) => Promise<Change | Refusal>,
  ): Promise<EnvWriteResult> {
    const client = await checkOut(this.pool);
    try {
      for (let attempt = 1; ; attempt += 1) {
        const announcements: EnvAnnouncement[] = [];
        let outcome: EnvWriteResult | Refusal | StaleEpochError;
        try {
          outcome = await transactionOn(client, () =>
            this.writeOnce(client, scope, operationId, key, change, announcements),
          );
        } catch (error) {
          // Another attempt of this operation committed while this one ran: this one was rolled back, and the next
          // finds that attempt's outcome. Bounded, in case something else keeps the id taken.
          if (error instanceof OperationTaken && attempt < 3) continue;
          throw error;
        }
        this.announcements.add(announcements);
        if (outcome instanceof StaleEpochError) throw outcome;
        if ('refused' in outcome) {
          if (outcome.type === EnvDataErrorType.VersionConflict) this.versionConflicts += 1;
          throw new EnvDataError(
            outcome.type as EnvDataErrorType,
            outcome.message,
            outcome.currentVersion,
            outcome.conflict,
          );
        }
        return outcome;
      }
    } finally {
      client.release();
    }
  }

  private async writeOnce(
    client: PoolClient,
    scope: ThreadScope,
    operationId: string,
    key: string,
    change: (client: PoolClient, target: WriteTarget) => Promise<Change | Refusal>,
    announcements: EnvAnnouncement[],
  ): Promise<EnvWriteResult | Refusal | StaleEpochError> {
    // Writers of one root hold its lock shared through commit, so a reader of the log never skips an event that
    // commits late (migration 008). Two attempts of one operation do not take turns here: the operation id's
    // unique constraint makes the later one wait for the first and roll back (`OperationTaken`).
    // The fence comes next: a reclaimed turn is refused even for an operation it had already written.
    // The scope is checked here, by the database, not trusted: the thread must belong to the root it writes into,
    // and that root must exist.
    // Every statement of this path is named (prepared): parsed and planned once per connection, not at every write.
    const { rows: threads } = await client.query<{
      epoch: number;
      scopes: string[];
      forkTask: string | null;
      rootThreadId: string;
      rootExists: boolean;
    }>({
      name: 'baton-env-write-thread',
      text: `SELECT t.epoch, t.env_scopes AS scopes, t.fork_task AS "forkTask", t.root_thread_id AS "rootThreadId",
              EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = t.root_thread_id) AS "rootExists"
         FROM (SELECT pg_advisory_xact_lock_shared(env_root_lock_key($2))) root_lock, threads t
        WHERE t.thread_id = $1 FOR SHARE OF t`,
      values: [scope.threadId, scope.rootThreadId],
    });
    const thread = threads[0];
    if (!thread) throw new ThreadNotFoundError(scope.threadId);
    if (thread.rootThreadId !== scope.rootThreadId) {
      throw new ThreadNotFoundError(
        scope.threadId,
        `thread '${scope.threadId}' is not in root '${scope.rootThreadId}' (it belongs to '${thread.rootThreadId}'); nothing was written`,
      );
    }
    if (!thread.rootExists) {
      throw new ThreadNotFoundError(
        scope.rootThreadId,
        `root thread '${scope.rootThreadId}' does not exist; nothing was written`,
      );
    }
    const target: WriteTarget = {
      scope: thread.scopes[0] ?? '',
      readScopes: thread.scopes,
      forkTask: thread.forkTask,
    };
    if (thread.epoch !== scope.epoch) {
      const stale = new StaleEpochError(scope.threadId, scope.epoch, thread.epoch);
      // Logged under an operation id of its own, so the write's id stays free: a refusal of a reclaimed turn
      // never stands in for the outcome of that operation.
      const logged = await logEvent(
        client,
        scope,
        `${operationId}@stale:${scope.epoch}`,
        key,
        target,
        refuse('Thread.StaleEpoch', stale.message),
      );
      if (logged) announcements.push(logged);
      await recordRefusedWrite(client, scope, 'env', operationId, stale);
      return stale;
    }
    const prior = await client.query<{
      action: EnvEvent['action'];
      key: string;
      version: number | null;
      reason: string | null;
      refusalType: EnvDataErrorType | null;
      proposalId: string | null;
    }>({
      name: 'baton-env-prior-event',
      text: `SELECT action, key, version, reason, refusal_type AS "refusalType",
              (SELECT proposal_id FROM env_proposals p
                WHERE p.root_thread_id = ev.root_thread_id AND p.operation_id = ev.operation_id) AS "proposalId"
         FROM env_events ev WHERE root_thread_id = $1 AND operation_id = $2`,
      values: [scope.rootThreadId, operationId],
    });
    const first = prior.rows[0];
    if (first && first.key !== key) {
      throw new BatonDbError(
        `operation '${operationId}' already wrote '${first.key}' in this scope; it cannot also write '${key}'`,
      );
    }
    if (first?.action === 'rejected') {
      return refuse(
        first.refusalType ?? EnvDataErrorType.NotFound,
        first.reason ?? 'refused',
        first.version ?? undefined,
      );
    }
    if (first) {
      const action = first.action === 'linked' ? 'stored' : first.action;
      return {
        action,
        key,
        version: first.version ?? 0,
        ...(first.proposalId === null ? {} : { proposalId: first.proposalId }),
      };
    }
    const result = await change(client, target);
    // A version conflict changes nothing and is not logged (see `replace`); other refusals are outcomes
    // a retry of the operation gets again.
    if ('refused' in result && result.type === EnvDataErrorType.VersionConflict) return result;
    const logged = await logEvent(client, scope, operationId, key, target, result);
    if (!logged) throw new OperationTaken(operationId);
    announcements.push(logged);
    if ('refused' in result) return result;
    return {
      // Only merges record links; a store, update or delete never does.
      action: result.action === 'linked' ? 'stored' : result.action,
      key,
      version: result.version,
      ...(result.proposalId === undefined ? {} : { proposalId: result.proposalId }),
    };
  }
}

/** Another attempt of the same operation logged its event first; this attempt is rolled back and runs again. */
class OperationTaken extends BatonDbError {
  constructor(operationId: string) {
    super(`operation '${operationId}' was written by a concurrent attempt`);
  }
}

/** What an event announces on `baton_env_events`: listeners read the event itself from the log by `seq`. */
export interface EnvAnnouncement {
  rootThreadId: string;
  seq: number;
  key: string;
  action: EnvEvent['action'];
}

/**
 * Announces committed events on the change feed, after their transaction. Not inside it: Postgres serialises the
 * commits of every transaction that NOTIFYs (a cluster-wide lock held through the commit's flush), which would make
 * writers take turns again. The announcing transaction writes nothing else, so Postgres does not wait for its
 * commit record to reach disk. A notification lost to a crash between the two is a wake-up, not data: a watch reads the log from the last event it
 * delivered, at the next announcement or its periodic re-read. Best effort: the write is committed either way.
 */
export async function announce(db: Queryable, announcements: readonly EnvAnnouncement[]): Promise<void> {
  if (announcements.length === 0) return;
  await db
    .query({
      name: 'baton-env-announce',
      text: 'SELECT pg_notify($1, payload) FROM unnest($2::text[]) WITH ORDINALITY AS a(payload, n) ORDER BY n',
      values: [ENV_EVENTS_CHANNEL, announcements.map((announcement) => JSON.stringify(announcement))],
    })
    .catch(() => undefined);
}

/** Most announcements sent in one statement. */
const MAX_ANNOUNCEMENTS_PER_BATCH = 100;
/**
 * How long the first announcement of a batch waits for others to join it. Writers of a busy store commit every few
 * hundred microseconds, and one statement then announces them all; a listener hears of a change this much later.
 * Each announcing statement is a small transaction of its own: sent every 5 ms they still cost a store with one
 * writer about a tenth of its puts, every 20 ms no measurable share (bench/README.md, env-data). A process that stops
 * within the delay may not announce its last writes: its listeners find them at their periodic re-read.
 */
const ENV_ANNOUNCEMENT_GATHER_MS = 20;

/**
 * Why an update at `expectedVersion` was refused. With `valueJson` (the entry's value at `version`, as JSON) it says
 * how to retry from that value; without, to read the entry again.
 */
export function versionConflictMessage(
  key: string,
  version: number,
  expectedVersion: number,
  valueJson?: string,
): string {
  if (valueJson === undefined) {
    return `'${key}' is at version ${version}, not ${expectedVersion}: read it again and retry`;
  }
  return (
    `'${key}' is at version ${version}, not ${expectedVersion}. Its value at version ${version}: ${valueJson}. ` +
    `To change it from there, update again with expected_version ${version}.`
  );
}

/** Where a thread's writes land: its own scope, the scopes it reads (nearest first), its fork task. */
export interface WriteTarget {
  scope: string;
  readScopes: readonly string[];
  forkTask: string | null;
}

/** The entry `key` in one of the scopes a thread reads beyond its own (an isolated task's callers'), or undefined. */
async function findInReadScopes(
  client: PoolClient,
  rootThreadId: string,
  target: WriteTarget,
  key: string,
): Promise<{ scope: string; version: number } | undefined> {
  return findInScopes(client, rootThreadId, target.readScopes.slice(1), key);
}

/** The entry `key` in the first of `scopes` (nearest first) that holds it, with its scope and version. */
export async function findInScopes(
  db: Queryable,
  rootThreadId: string,
  scopes: readonly string[],
  key: string,
): Promise<{ scope: string; version: number } | undefined> {
  if (scopes.length === 0) return undefined;
  const { rows } = await db.query<{ scope: string; version: number }>(
    `SELECT e.scope, e.version FROM unnest($3::text[]) WITH ORDINALITY AS s(scope, pos)
       CROSS JOIN LATERAL ${entryInScope('$1', 's.scope', '$2')} e
      ORDER BY s.pos LIMIT 1`,
    [rootThreadId, key, scopes],
  );
  return rows[0];
}

/** An entry to create or replace in one scope. */
export interface EntryWrite {
  rootThreadId: string;
  scope: string;
  key: string;
  shortDescription: string;
  /** The value as JSON text, already checked. */
  json: string;
  type: string | null;
  tags: readonly string[];
  storedBy: { agent: string; thread: string; task: string | null };
}

/**
 * Sets a just-created entry ($1 root, $2 scope, $3 key) to the version after the highest its key ever had, if it had
 * one: a single probe of `env_events_key_version_idx`, however long the log.
 */
export const CONTINUE_VERSIONS = `UPDATE env_data e SET version = last.version + 1
   FROM (SELECT MAX(version) AS version FROM env_events
          WHERE root_thread_id = $1 AND scope = $2 AND key = $3 AND action IN ('stored', 'updated', 'deleted')) last
  WHERE e.root_thread_id = $1 AND e.scope = $2 AND e.key = $3 AND last.version IS NOT NULL
  RETURNING e.version`;

/**
 * Creates or replaces an entry (a store, or a merged finding) and returns its new version. A key created again after
 * a delete continues its version numbers, so a stale expected_version still fails. The caller logs the event.
 */
export async function upsertEntry(client: PoolClient, entry: EntryWrite): Promise<number> {
  const { rows } = await client.query<{ version: number }>({
    name: 'baton-env-upsert',
    text: `INSERT INTO env_data (root_thread_id, scope, key, short_description, value, type, tags, stored_by_agent,
                           stored_by_thread, stored_by_task, version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1)
     ON CONFLICT (root_thread_id, scope, key) DO UPDATE SET
       short_description = EXCLUDED.short_description, value = EXCLUDED.value, type = EXCLUDED.type,
       tags = EXCLUDED.tags, stored_by_agent = EXCLUDED.stored_by_agent, stored_by_thread = EXCLUDED.stored_by_thread,
       stored_by_task = EXCLUDED.stored_by_task, version = env_data.version + 1, updated_at = now()
     RETURNING version`,
    values: [
      entry.rootThreadId,
      entry.scope,
      entry.key,
      entry.shortDescription,
      entry.json,
      entry.type,
      entry.tags,
      entry.storedBy.agent,
      entry.storedBy.thread,
      entry.storedBy.task,
    ],
  });
  const version = rows[0]?.version ?? 1;
  // A replaced entry is at 2 or more; at 1 it was created here. If the key existed before (and was deleted), its
  // versions go on from the highest it reached. Read now, in a statement of its own, while this transaction holds
  // the new row: every transaction that wrote the key before has committed (the insert waited for a delete in
  // flight, and that delete for the writers before it), so its event is visible; computed in the insert itself,
  // from the insert's older snapshot, it could miss one and repeat a version.
  if (version !== 1) return version;
  const { rows: continued } = await client.query<{ version: number }>({
    name: 'baton-env-continue-versions',
    text: CONTINUE_VERSIONS,
    values: [entry.rootThreadId, entry.scope, entry.key],
  });
  return continued[0]?.version ?? version;
}

/** Stages an isolated task's update of an inherited entry as a proposal, offered to its caller if the task succeeds. */
async function stageProposal(
  client: PoolClient,
  scope: ThreadScope,
  operationId: string,
  target: WriteTarget,
  inherited: { scope: string; version: number },
  input: EnvUpdateInput,
  json: string | undefined,
): Promise<Change> {
  const proposalId = await insertProposal(client, {
    rootThreadId: scope.rootThreadId,
    scope: inherited.scope,
    fromScope: target.scope,
    key: input.key,
    valueJson: json ?? null,
    patchJson: null,
    shortDescription: input.shortDescription ?? null,
    baseVersion: inherited.version,
    proposedBy: { agent: scope.agent, thread: scope.threadId },
    forkTask: target.forkTask,
    operationId,
    status: 'staged',
  });
  return {
    action: 'proposed',
    version: inherited.version,
    json: json ?? 'null',
    shortDescription: input.shortDescription ?? '',
    proposalId,
  };
}

/** A proposal to record; numbered per root (`p1`, `p2`, …), one numbering at a time. */
export interface NewProposal {
  rootThreadId: string;
  scope: string;
  fromScope: string | null;
  key: string;
  valueJson: string | null;
  patchJson: string | null;
  shortDescription: string | null;
  baseVersion: number | null;
  proposedBy: { agent: string; thread: string };
  forkTask: string | null;
  operationId: string;
  status: 'staged' | 'pending';
}

/** Records a proposal and returns its id. */
export async function insertProposal(client: PoolClient, proposal: NewProposal): Promise<string> {
  // Writers of a root no longer take turns, so proposals do, for their numbers (proposals are rare).
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
    `env-proposals:${proposal.rootThreadId}`,
  ]);
  const { rows } = await client.query<{ proposalId: string }>(
    `INSERT INTO env_proposals (root_thread_id, proposal_id, number, scope, from_scope, key, value, patch,
                                short_description, base_version, proposed_by_agent, proposed_by_thread, fork_task,
                                operation_id, status)
     SELECT $1, 'p' || n, n, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11, $12, $13
       FROM (SELECT COALESCE(MAX(number), 0) + 1 AS n FROM env_proposals WHERE root_thread_id = $1) next
     RETURNING proposal_id AS "proposalId"`,
    [
      proposal.rootThreadId,
      proposal.scope,
      proposal.fromScope,
      proposal.key,
      proposal.valueJson,
      proposal.patchJson,
      proposal.shortDescription,
      proposal.baseVersion,
      proposal.proposedBy.agent,
      proposal.proposedBy.thread,
      proposal.forkTask,
      proposal.operationId,
      proposal.status,
    ],
  );
  const id = rows[0]?.proposalId;
  if (id === undefined) throw new BatonDbError('recording a proposal returned no row');
  return id;
}

/** A change one write made, as its event records it. */
export interface Change {
  action: EnvWriteResult['action'] | 'linked';
  version: number;
  json: string;
  shortDescription: string;
  /** Why, when the change itself does not say (a merge, an accepted proposal, a delete's reason). */
  reason?: string;
  proposalId?: string;
}

export interface Refusal {
  refused: true;
  type: EnvDataErrorType | 'Thread.StaleEpoch';
  message: string;
  currentVersion?: number;
  /** A version conflict, with the entry as found (not logged: conflicts are not; see `replace`). */
  conflict?: EnvConflict;
}

export function refuse(
  type: Refusal['type'],
  message: string,
  currentVersion?: number,
  conflict?: EnvConflict,
): Refusal {
  return {
    refused: true,
    type,
    message,
    ...(currentVersion === undefined ? {} : { currentVersion }),
    ...(conflict === undefined ? {} : { conflict }),
  };
}

/**
 * Appends one event (a change or a refusal) to the log, once per operation id, and returns what to announce on the
 * change feed after commit (`undefined`: the operation id was logged before, and nothing was appended). The caller
 * holds the root's lock (migration 008). `actor` is who the event is attributed to (for a merge: the worker whose
 * finding it is).
 */
export async function logEvent(
  client: PoolClient,
  scope: ThreadScope,
  operationId: string,
  key: string,
  target: Pick<WriteTarget, 'scope' | 'forkTask'>,
  event: Change | Refusal,
  actor: { agent: string; thread: string } = { agent: scope.agent, thread: scope.threadId },
): Promise<EnvAnnouncement | undefined> {
  const change = 'refused' in event ? undefined : event;
  const action = change ? change.action : 'rejected';
  const { rows } = await client.query<{ seq: string }>({
    name: 'baton-env-log-event',
    text: `INSERT INTO env_events (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task, operation_id,
                             version, value_size, value, short_description, reason, refusal_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (root_thread_id, operation_id) DO NOTHING
     RETURNING seq`,
    values: [
      scope.rootThreadId,
      target.scope,
      key,
      action,
      actor.agent,
      actor.thread,
      target.forkTask,
      operationId,
      change ? change.version : 'refused' in event ? (event.currentVersion ?? null) : null,
      change ? Buffer.byteLength(change.json, 'utf8') : null,
      change?.json ?? null,
      change?.shortDescription ?? null,
      'refused' in event ? event.message : (change?.reason ?? null),
      'refused' in event ? event.type : null,
    ],
  });
  const seq = rows[0]?.seq;
  // The announcement is small (NOTIFY payloads are limited, and every listener of the channel receives every one);
  // the caller sends it once the transaction committed (`announce`).
  return seq === undefined ? undefined : { rootThreadId: scope.rootThreadId, seq: Number(seq), key, action };
}

function checkKey(key: string): void {
  const problem = envKeyProblem(key);
  if (problem) throw new EnvDataError(EnvDataErrorType.InvalidKey, problem);
}

/** `type` and `tags` are plain text columns: refuse what Postgres cannot store there before it throws. */
function checkLabels(type: string | undefined, tags: readonly string[] | undefined): void {
  for (const [where, text] of [['type', type], ...(tags ?? []).map((tag) => ['a tag', tag])] as const) {
    if (text !== undefined && hasUnstorableText(text)) {
      throw new EnvDataError(
        EnvDataErrorType.NotSerializable,
        `${where} holds a NUL character or a lone surrogate, which Postgres cannot store`,
      );
    }
  }
}

function checkDescription(description: string): void {
  const problem =
    envDescriptionProblem(description) ??
    (hasUnstorableText(description) ? 'short_description holds a NUL character or a lone surrogate' : undefined);
  if (problem) throw new EnvDataError(EnvDataErrorType.InvalidDescription, problem);
}

/**
 * JSON text of a value, refusing what JSON cannot hold faithfully (undefined, functions, symbols, BigInt,
 * non-finite numbers, cycles) instead of silently dropping or nulling it.
 */
export function toJson(value: unknown): string {
  const problems: string[] = [];
  let json: string | undefined;
  try {
    json = JSON.stringify(value, function (this: unknown, key, item: unknown) {
      const where = key === '' ? 'the value' : `'${key}'`;
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') {
        problems.push(`${where} is ${typeof item}`);
      } else if (typeof item === 'number' && !Number.isFinite(item)) {
        problems.push(`${where} is ${item}`);
      } else if (item instanceof Map || item instanceof Set) {
        problems.push(`${where} is a ${item.constructor.name}, which JSON would turn into {}`);
      } else if (typeof item === 'string' && hasUnstorableText(item)) {
        problems.push(`${where} holds a NUL character or a lone surrogate, which Postgres cannot store`);
      }
      if (hasUnstorableText(key)) problems.push(`a property name holds a NUL character or a lone surrogate`);
      return item;
    });
  } catch (error) {
    problems.push(error instanceof Error ? error.message : String(error));
  }
  if (problems.length > 0 || json === undefined) {
    throw new EnvDataError(
      EnvDataErrorType.NotSerializable,
      `the value is not JSON-serialisable: ${problems.join('; ') || 'nothing to store'}`,
    );
  }
  return json;
}
