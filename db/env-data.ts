import type { Pool, PoolClient } from 'pg';
import {
  DEFAULT_MAX_ENV_VALUE_BYTES,
  ENV_EVENTS_CHANNEL,
  envDescriptionProblem,
  envKeyProblem,
} from '../common/env-data';
import type { ThreadScope } from '../common/types';
import { BatonDbError, StaleEpochError, ThreadNotFoundError } from './errors';
import type { Queryable } from './threads';
import { inTransaction } from './transaction';

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
  ) {
    super(message);
  }
}

export interface EnvEntry {
  key: string;
  shortDescription: string;
  value: unknown;
  type: string | null;
  tags: string[];
  storedBy: { agent: string; thread: string };
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What `list` returns: everything but the value. */
export type EnvManifestEntry = Omit<EnvEntry, 'value'>;

export interface EnvEvent {
  seq: number;
  rootThreadId: string;
  key: string;
  action: 'stored' | 'updated' | 'deleted' | 'rejected';
  actor: { agent: string; thread: string };
  operationId: string;
  version: number | null;
  valueSize: number | null;
  value: unknown;
  shortDescription: string | null;
  reason: string | null;
  createdAt: Date;
}

export interface EnvListFilters {
  /** Keys starting with this (a namespace such as `arc/`). */
  prefix?: string;
  type?: string;
  tag?: string;
  /** Entries last written by this agent. */
  storedBy?: string;
  /** Leave out entries last written by this agent (the caller). */
  excludeAgent?: string;
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
  action: 'stored' | 'updated' | 'deleted';
  key: string;
  version: number;
}

export interface EnvStoreOptions {
  /** Largest value as JSON text. @default 100 KiB */
  maxValueBytes?: number;
}

const ENTRY_COLUMNS = `key, short_description AS "shortDescription", type, tags,
  json_build_object('agent', stored_by_agent, 'thread', stored_by_thread) AS "storedBy", version,
  created_at AS "createdAt", updated_at AS "updatedAt"`;

const EVENT_COLUMNS = `seq::float8 AS seq, root_thread_id AS "rootThreadId", key, action,
  json_build_object('agent', actor_agent, 'thread', actor_thread) AS actor, operation_id AS "operationId", version,
  value_size AS "valueSize", value, short_description AS "shortDescription", reason, created_at AS "createdAt"`;

/**
 * Shared environment data of root threads, in Postgres. Every write is idempotent per operation id, fenced by the
 * writing thread's epoch, and logged (with its value) in `env_events` in the same transaction, which also announces
 * it on `baton_env_events`. A refused write changes nothing; refusals that reach the store are logged as `rejected`.
 */
export class EnvStore {
  private readonly maxValueBytes: number;

  constructor(
    private readonly pool: Pool,
    options: EnvStoreOptions = {},
  ) {
    this.maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_ENV_VALUE_BYTES;
  }

  /**
   * Creates or replaces an entry (last write wins).
   * @throws EnvDataError for an invalid key, description or value; StaleEpochError; ThreadNotFoundError
   */
  async store(scope: ThreadScope, operationId: string, input: EnvStoreInput): Promise<EnvWriteResult> {
    checkKey(input.key);
    checkDescription(input.shortDescription);
    checkLabels(input.type, input.tags);
    const json = this.serialize(input.value);
    return this.write(scope, operationId, input.key, async (client) => {
      const { rows } = await client.query<{ version: number }>(
        `INSERT INTO env_data (root_thread_id, key, short_description, value, type, tags, stored_by_agent,
                               stored_by_thread, version)
         -- A key created again after a delete continues its version numbers, so a stale expected_version still fails.
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 (SELECT COALESCE(MAX(version), 0) + 1 FROM env_events
                   WHERE root_thread_id = $1 AND key = $2 AND action <> 'rejected'))
         ON CONFLICT (root_thread_id, key) DO UPDATE SET
           short_description = EXCLUDED.short_description, value = EXCLUDED.value, type = EXCLUDED.type,
           tags = EXCLUDED.tags, stored_by_agent = EXCLUDED.stored_by_agent,
           stored_by_thread = EXCLUDED.stored_by_thread, version = env_data.version + 1, updated_at = now()
         RETURNING version`,
        [
          scope.rootThreadId,
          input.key,
          input.shortDescription,
          json,
          input.type ?? null,
          input.tags ?? [],
          scope.agent,
          scope.threadId,
        ],
      );
      const version = rows[0]?.version ?? 1;
      return { action: 'stored', version, json, shortDescription: input.shortDescription };
    });
  }

  /**
   * Changes an existing entry, keeping the fields left out; with `expectedVersion`, refuses a stale update.
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
    return this.write(scope, operationId, input.key, async (client) => {
      const { rows: current } = await client.query<{ version: number }>(
        'SELECT version FROM env_data WHERE root_thread_id = $1 AND key = $2 FOR UPDATE',
        [scope.rootThreadId, input.key],
      );
      const version = current[0]?.version;
      if (version === undefined) {
        return refuse(EnvDataErrorType.NotFound, `no entry '${input.key}' to update (use store_env_data to create it)`);
      }
      if (input.expectedVersion !== undefined && input.expectedVersion !== version) {
        return refuse(
          EnvDataErrorType.VersionConflict,
          `'${input.key}' is at version ${version}, not ${input.expectedVersion}: read it again and retry`,
          version,
        );
      }
      const { rows } = await client.query<{ version: number; value: unknown; shortDescription: string }>(
        `UPDATE env_data SET short_description = COALESCE($3, short_description), value = COALESCE($4::jsonb, value),
                stored_by_agent = $5, stored_by_thread = $6, version = version + 1, updated_at = now()
          WHERE root_thread_id = $1 AND key = $2
          RETURNING version, value, short_description AS "shortDescription"`,
        [scope.rootThreadId, input.key, input.shortDescription ?? null, json ?? null, scope.agent, scope.threadId],
      );
      const row = rows[0];
      if (!row) throw new BatonDbError(`update of '${input.key}' returned no row`);
      // Compact JSON, as `store` measures it, so value_size means the same for every action.
      const written = json ?? JSON.stringify(row.value);
      return { action: 'updated', version: row.version, json: written, shortDescription: row.shortDescription };
    });
  }

  /**
   * Deletes an entry; its last value stays in the event log.
   * @throws EnvDataError `EnvData.NotFound`; StaleEpochError
   */
  async delete(scope: ThreadScope, operationId: string, key: string): Promise<EnvWriteResult> {
    checkKey(key);
    return this.write(scope, operationId, key, async (client) => {
      const { rows } = await client.query<{ version: number; value: unknown; shortDescription: string }>(
        `DELETE FROM env_data WHERE root_thread_id = $1 AND key = $2
          RETURNING version, value, short_description AS "shortDescription"`,
        [scope.rootThreadId, key],
      );
      const row = rows[0];
      if (!row) return refuse(EnvDataErrorType.NotFound, `no entry '${key}' to delete`);
      return {
        action: 'deleted',
        version: row.version,
        json: JSON.stringify(row.value),
        shortDescription: row.shortDescription,
      };
    });
  }

  /** One entry with its value, or `undefined`. */
  async get(rootThreadId: string, key: string): Promise<EnvEntry | undefined> {
    const { rows } = await this.pool.query<EnvEntry>(
      `SELECT ${ENTRY_COLUMNS}, value FROM env_data WHERE root_thread_id = $1 AND key = $2`,
      [rootThreadId, key],
    );
    return rows[0];
  }

  /** The manifest: every entry without its value, by key. */
  async list(rootThreadId: string, filters: EnvListFilters = {}): Promise<EnvManifestEntry[]> {
    const { rows } = await this.pool.query<EnvManifestEntry>(
      `SELECT ${ENTRY_COLUMNS} FROM env_data
        WHERE root_thread_id = $1
          AND ($2::text IS NULL OR starts_with(key, $2))
          AND ($3::text IS NULL OR type = $3)
          AND ($4::text IS NULL OR $4 = ANY (tags))
          AND ($5::text IS NULL OR stored_by_agent = $5)
          AND ($6::text IS NULL OR stored_by_agent <> $6)
        ORDER BY key`,
      [
        rootThreadId,
        filters.prefix ?? null,
        filters.type ?? null,
        filters.tag ?? null,
        filters.storedBy ?? null,
        filters.excludeAgent ?? null,
      ],
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

  /** Events of a scope after sequence number `since`, oldest first. */
  async events(rootThreadId: string, options: { since?: number; limit?: number } = {}): Promise<EnvEvent[]> {
    const { rows } = await this.pool.query<EnvEvent>(
      `SELECT ${EVENT_COLUMNS} FROM env_events WHERE root_thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [rootThreadId, options.since ?? 0, options.limit ?? 1000],
    );
    return rows;
  }

  private serialize(value: unknown): string {
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
   * Runs one fenced, idempotent write: the first outcome of an operation is returned again on retry; a stale epoch
   * is logged as `rejected` (committed) before it is thrown; every change is logged and announced.
   */
  private async write(
    scope: ThreadScope,
    operationId: string,
    key: string,
    change: (client: PoolClient) => Promise<Change | Refusal>,
  ): Promise<EnvWriteResult> {
    const outcome = await inTransaction(
      this.pool,
      async (client): Promise<EnvWriteResult | Refusal | StaleEpochError> => {
        // Writes to one root take turns. Event sequence numbers are then in commit order (a reader paging by
        // `seq` never skips an event that commits late), and concurrent attempts of one operation (a retried
        // activity overlapping the first) find the first one's event instead of writing again.
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`env:${scope.rootThreadId}`]);
        // The fence comes next: a reclaimed turn is refused even for an operation it had already written.
        const { rows: threads } = await client.query<{ epoch: number }>(
          'SELECT epoch FROM threads WHERE thread_id = $1 FOR SHARE',
          [scope.threadId],
        );
        const thread = threads[0];
        if (!thread) throw new ThreadNotFoundError(scope.threadId);
        if (thread.epoch !== scope.epoch) {
          const stale = new StaleEpochError(scope.threadId, scope.epoch, thread.epoch);
          await logEvent(client, scope, operationId, key, refuse('Thread.StaleEpoch', stale.message));
          return stale;
        }
        const prior = await client.query<{
          action: EnvEvent['action'];
          key: string;
          version: number | null;
          reason: string | null;
          refusalType: EnvDataErrorType | null;
        }>(
          `SELECT action, key, version, reason, refusal_type AS "refusalType" FROM env_events
            WHERE root_thread_id = $1 AND operation_id = $2`,
          [scope.rootThreadId, operationId],
        );
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
        if (first) return { action: first.action, key, version: first.version ?? 0 };
        const result = await change(client);
        if ('refused' in result) {
          await logEvent(client, scope, operationId, key, result);
          return result;
        }
        await logEvent(client, scope, operationId, key, result);
        return { action: result.action, key, version: result.version };
      },
    );
    if (outcome instanceof StaleEpochError) throw outcome;
    if ('refused' in outcome) {
      if (outcome.type === 'Thread.StaleEpoch') throw new StaleEpochError(scope.threadId, scope.epoch, -1);
      throw new EnvDataError(outcome.type, outcome.message, outcome.currentVersion);
    }
    return outcome;
  }
}

interface Change {
  action: EnvWriteResult['action'];
  version: number;
  json: string;
  shortDescription: string;
}

interface Refusal {
  refused: true;
  type: EnvDataErrorType | 'Thread.StaleEpoch';
  message: string;
  currentVersion?: number;
}

function refuse(type: Refusal['type'], message: string, currentVersion?: number): Refusal {
  return { refused: true, type, message, ...(currentVersion === undefined ? {} : { currentVersion }) };
}

async function logEvent(
  client: PoolClient,
  scope: ThreadScope,
  operationId: string,
  key: string,
  event: Change | Refusal,
): Promise<void> {
  const change = 'refused' in event ? undefined : event;
  const action = change ? change.action : 'rejected';
  const { rows } = await client.query<{ seq: string }>(
    `INSERT INTO env_events (root_thread_id, key, action, actor_agent, actor_thread, operation_id, version, value_size,
                             value, short_description, reason, refusal_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (root_thread_id, operation_id) DO NOTHING
     RETURNING seq`,
    [
      scope.rootThreadId,
      key,
      action,
      scope.agent,
      scope.threadId,
      operationId,
      change ? change.version : 'refused' in event ? (event.currentVersion ?? null) : null,
      change ? Buffer.byteLength(change.json, 'utf8') : null,
      change?.json ?? null,
      change?.shortDescription ?? null,
      'refused' in event ? event.message : null,
      'refused' in event ? event.type : null,
    ],
  );
  const seq = rows[0]?.seq;
  if (seq !== undefined) {
    // Delivered at commit; listeners read the event itself from the table by sequence number.
    await client.query('SELECT pg_notify($1, $2)', [
      ENV_EVENTS_CHANNEL,
      JSON.stringify({ rootThreadId: scope.rootThreadId, seq: Number(seq), key, action }),
    ]);
  }
}

/** Text Postgres refuses in `jsonb` and `text`: NUL, and UTF-16 surrogates without their pair. */
export function unstorableText(text: string): boolean {
  // Matching NUL is the point of this pattern.
  // eslint-disable-next-line no-control-regex
  return /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
}

function checkKey(key: string): void {
  const problem = envKeyProblem(key);
  if (problem) throw new EnvDataError(EnvDataErrorType.InvalidKey, problem);
}

/** `type` and `tags` are plain text columns: refuse what Postgres cannot store there before it throws. */
function checkLabels(type: string | undefined, tags: readonly string[] | undefined): void {
  for (const [where, text] of [['type', type], ...(tags ?? []).map((tag) => ['a tag', tag])] as const) {
    if (text !== undefined && unstorableText(text)) {
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
    (unstorableText(description) ? 'short_description holds a NUL character or a lone surrogate' : undefined);
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
      } else if (typeof item === 'string' && unstorableText(item)) {
        problems.push(`${where} holds a NUL character or a lone surrogate, which Postgres cannot store`);
      }
      if (unstorableText(key)) problems.push(`a property name holds a NUL character or a lone surrogate`);
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
