/**
 * Watchers in Postgres (migration 017): a root's watchers, the changes after a watcher's cursor, its wake-ups (each
 * in a thread of its own), pauses and removal; the claims that coalesce their signals and what the sweep checked
 * (migration 022). Every change of a watcher's state and every wake-up is a run-feed event
 * (triggers on `env_watchers` and `env_watch_wakeups`), in the transaction that makes it.
 */
import type { Pool } from 'pg';
import type { RunFeedRow } from '../common/run-events';
import {
  keyMatches,
  wakeupThreadId,
  type WatchChange,
  type Watcher,
  type WatcherOrigin,
  type WatchSpec,
} from '../common/watchers';
import { BatonDbError, ThreadNotFoundError } from './errors';
import type { Queryable } from './threads';
import { inTransaction } from './transaction';

/** A watcher of that name exists in the root already (and is not removed). */
export class WatcherExistsError extends BatonDbError {}
/** No watcher of that name in the root. */
export class WatcherNotFoundError extends BatonDbError {}

const WATCHER_COLUMNS = `root_thread_id AS "rootThreadId", name, agent, keys, debounce_s AS "debounceS", message,
  origin, created_by AS "createdBy", status, reason, paused_until AS "pausedUntil", cursor_seq AS cursor, wakeups,
  last_woke_at AS "lastWokeAt", created_at AS "createdAt"`;

interface WatcherRow {
  rootThreadId: string;
  name: string;
  agent: string;
  keys: string[];
  debounceS: number | null;
  message: string | null;
  origin: WatcherOrigin;
  createdBy: string;
  status: Watcher['status'];
  reason: string | null;
  pausedUntil: Date | null;
  cursor: string;
  wakeups: number;
  lastWokeAt: Date | null;
  createdAt: Date;
}

function toWatcher(row: WatcherRow): Watcher {
  return {
    rootThreadId: row.rootThreadId,
    name: row.name,
    agent: row.agent,
    keys: row.keys,
    ...(row.debounceS === null ? {} : { debounceS: row.debounceS }),
    ...(row.message === null ? {} : { message: row.message }),
    origin: row.origin,
    createdBy: row.createdBy,
    status: row.status,
    ...(row.reason === null ? {} : { reason: row.reason }),
    ...(row.pausedUntil === null ? {} : { pausedUntil: row.pausedUntil.toISOString() }),
    cursor: Number(row.cursor),
    wakeups: row.wakeups,
    ...(row.lastWokeAt === null ? {} : { lastWokeAt: row.lastWokeAt.toISOString() }),
    createdAt: row.createdAt.toISOString(),
  };
}

export interface RegisterWatcherInput {
  rootThreadId: string;
  name: string;
  agent: string;
  spec: WatchSpec;
  origin: WatcherOrigin;
  /** Who asked: `frontmatter of <agent>`, `cli`, an agent's name (its tool). */
  createdBy: string;
  /** The task queue its root runs on (where the sweep finds it, and where its workflow starts). */
  taskQueue?: string;
}

/**
 * Registers a watcher in a root. Its cursor starts where the root's event log stands (read under the root's lock, so
 * a change committing later has a higher number): it wakes for changes from now on.
 *
 * A frontmatter watcher is registered at every turn of its agent: a second registration changes nothing, except that
 * a changed frontmatter (keys, debounce, message) replaces what was stored; one removed stays removed. A run-time
 * watcher refuses a name in use (a removed one is replaced).
 * @throws WatcherExistsError, ThreadNotFoundError (no such root)
 */
export async function registerWatcher(
  pool: Pool,
  input: RegisterWatcherInput,
): Promise<{ watcher: Watcher; created: boolean }> {
  const registered = await inTransaction(pool, async (client) => {
    const { rows: roots } = await client.query(
      'SELECT 1 FROM threads WHERE thread_id = $1 AND parent_thread_id IS NULL',
      [input.rootThreadId],
    );
    if (roots.length === 0) {
      throw new ThreadNotFoundError(input.rootThreadId, `root thread '${input.rootThreadId}' does not exist`);
    }
    const { rows: existing } = await client.query<WatcherRow>(
      `SELECT ${WATCHER_COLUMNS} FROM env_watchers WHERE root_thread_id = $1 AND name = $2 FOR UPDATE`,
      [input.rootThreadId, input.name],
    );
    const current = existing[0];
    const values = [
      input.rootThreadId,
      input.name,
      input.agent,
      input.spec.keys,
      input.spec.debounceS ?? null,
      input.spec.message ?? null,
      input.origin,
      input.createdBy,
    ];
    if (current === undefined) {
      const { rows } = await client.query<WatcherRow>(
        `INSERT INTO env_watchers (root_thread_id, name, agent, keys, debounce_s, message, origin, created_by, cursor_seq)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, run_feed_last($1)) RETURNING ${WATCHER_COLUMNS}`,
        values,
      );
      return { watcher: toWatcher(rows[0] as WatcherRow), created: true };
    }
    if (input.origin === 'frontmatter') {
      const same =
        current.origin !== 'frontmatter' ||
        current.status === 'removed' ||
        (JSON.stringify(current.keys) === JSON.stringify(input.spec.keys) &&
          current.debounceS === (input.spec.debounceS ?? null) &&
          current.message === (input.spec.message ?? null) &&
          current.agent === input.agent);
      if (same) return { watcher: toWatcher(current), created: false };
      const { rows } = await client.query<WatcherRow>(
        `UPDATE env_watchers SET agent = $3, keys = $4, debounce_s = $5, message = $6, updated_at = now()
          WHERE root_thread_id = $1 AND name = $2 RETURNING ${WATCHER_COLUMNS}`,
        values.slice(0, 6),
      );
      return { watcher: toWatcher(rows[0] as WatcherRow), created: false };
    }
    if (current.status !== 'removed') {
      throw new WatcherExistsError(
        `a watcher named '${input.name}' already watches thread '${input.rootThreadId}' (agent ${current.agent}, ` +
          `keys ${current.keys.join(', ')}); remove it first or pick another name`,
      );
    }
    const { rows } = await client.query<WatcherRow>(
      `UPDATE env_watchers SET agent = $3, keys = $4, debounce_s = $5, message = $6, origin = $7, created_by = $8,
              status = 'active', reason = NULL, paused_until = NULL, cursor_seq = run_feed_last($1),
              created_at = now(), updated_at = now()
        WHERE root_thread_id = $1 AND name = $2 RETURNING ${WATCHER_COLUMNS}`,
      values,
    );
    return { watcher: toWatcher(rows[0] as WatcherRow), created: true };
  });
  if (input.taskQueue !== undefined) {
    await pool.query(
      `UPDATE env_watchers SET task_queue = $3
        WHERE root_thread_id = $1 AND name = $2 AND task_queue IS DISTINCT FROM $3`,
      [input.rootThreadId, input.name, input.taskQueue],
    );
  }
  return registered;
}

/** The watchers of a root (removed ones too, with why), by name. */
export async function listWatchers(db: Queryable, rootThreadId: string): Promise<Watcher[]> {
  const { rows } = await db.query<WatcherRow>(
    `SELECT ${WATCHER_COLUMNS} FROM env_watchers WHERE root_thread_id = $1 ORDER BY name`,
    [rootThreadId],
  );
  return rows.map(toWatcher);
}

/** One watcher of a root, or `undefined`. */
export async function findWatcher(db: Queryable, rootThreadId: string, name: string): Promise<Watcher | undefined> {
  const { rows } = await db.query<WatcherRow>(
    `SELECT ${WATCHER_COLUMNS} FROM env_watchers WHERE root_thread_id = $1 AND name = $2`,
    [rootThreadId, name],
  );
  return rows[0] === undefined ? undefined : toWatcher(rows[0]);
}

/**
 * The watchers of a root that a change to `keys` wakes (any key: `undefined`): active and paused ones whose patterns
 * match (a paused one catches up later). Whoever committed the change signals each.
 */
export async function watchersToWake(
  db: Queryable,
  rootThreadId: string,
  keys?: readonly string[],
): Promise<Pick<Watcher, 'rootThreadId' | 'name' | 'agent' | 'keys'>[]> {
  const { rows } = await db.query<Pick<Watcher, 'name' | 'agent' | 'keys'>>({
    name: 'baton-wakeable-watchers',
    text: `SELECT name, agent, keys FROM env_watchers WHERE root_thread_id = $1 AND status IN ('active', 'paused')`,
    values: [rootThreadId],
  });
  return rows
    .filter((watcher) => keys === undefined || keys.some((key) => keyMatches(watcher.keys, key)))
    .map((watcher) => ({ rootThreadId, ...watcher }));
}

/**
 * How long a sent signal's claim holds: past it, a change after the watcher's last look claims (and sends) one again.
 * A watcher in a long turn or an hour's pause already knows; this only restarts one whose workflow was stopped from
 * outside Baton.
 */
const SENT_CLAIM_HOLDS = "interval '15 minutes'";

/** Whether a watcher row's claim is free to take: none, one never sent and older than `$grace` s, or an old one. */
const CLAIM_FREE = (grace: string) => `(signalled_at IS NULL
  OR (NOT signal_sent AND signalled_at < now() - make_interval(secs => ${grace}::double precision))
  OR signalled_at < now() - ${SENT_CLAIM_HOLDS})`;

/** A watcher whose signal a sender claimed: it sends it, then marks it sent with `claim`. */
export interface ClaimedSignal extends Pick<Watcher, 'rootThreadId' | 'name' | 'agent' | 'keys'> {
  /** The claim's number (`signal_claims`), so the sender marks its own claim sent and no later one. */
  claim: number;
}

/**
 * Claims the signal of each named watcher of a root that a change committed before this call may wake (migration
 * 022): those with no claim since their last look began (or a stale one). The caller sends those it gets; the others
 * need none, since the look their claimed signal causes begins after this change committed. Records the task queue
 * the sender's root runs on.
 */
export async function claimWatchSignals(
  db: Queryable,
  rootThreadId: string,
  names: readonly string[],
  taskQueue: string,
  graceSeconds: number,
): Promise<ClaimedSignal[]> {
  if (names.length === 0) return [];
  const { rows } = await db.query<{ name: string; agent: string; keys: string[]; claim: string }>({
    name: 'baton-claim-watch-signals',
    text: `UPDATE env_watchers SET signalled_at = now(), signal_sent = false, signal_claims = signal_claims + 1,
                  task_queue = $3
            WHERE root_thread_id = $1 AND name = ANY($2::text[]) AND status IN ('active', 'paused')
              AND ${CLAIM_FREE('$4')}
        RETURNING name, agent, keys, signal_claims AS claim`,
    values: [rootThreadId, names, taskQueue, graceSeconds],
  });
  return rows.map((row) => ({
    rootThreadId,
    name: row.name,
    agent: row.agent,
    keys: row.keys,
    claim: Number(row.claim),
  }));
}

/** Marks a claimed signal sent (Temporal accepted it), unless a look or a later claim replaced the claim since. */
export async function markWatchSignalSent(db: Queryable, signal: ClaimedSignal): Promise<void> {
  await db.query({
    name: 'baton-mark-watch-signal-sent',
    text: `UPDATE env_watchers SET signal_sent = true
            WHERE root_thread_id = $1 AND name = $2 AND signal_claims = $3 AND signalled_at IS NOT NULL`,
    values: [signal.rootThreadId, signal.name, signal.claim],
  });
}

/**
 * A watcher's look begins: its signal claim is cleared before it reads the log, so a change that commits after the
 * read finds no claim and signals it again. Returns the watcher, or `undefined`.
 */
export async function beginWatchLook(db: Queryable, rootThreadId: string, name: string): Promise<Watcher | undefined> {
  const { rows } = await db.query<WatcherRow>(
    `UPDATE env_watchers SET signalled_at = NULL, signal_sent = false
      WHERE root_thread_id = $1 AND name = $2 RETURNING ${WATCHER_COLUMNS}`,
    [rootThreadId, name],
  );
  return rows[0] === undefined ? undefined : toWatcher(rows[0]);
}

/** Records the last env event a look read: the workflow handles every change up to it without another signal. */
export async function recordWatchLook(db: Queryable, rootThreadId: string, name: string, seq: number): Promise<void> {
  await db.query(
    `UPDATE env_watchers SET looked_seq = $3 WHERE root_thread_id = $1 AND name = $2 AND looked_seq < $3`,
    [rootThreadId, name, seq],
  );
}

/** A watcher the sweep took: where to check its keys against the log from, and whether a claim of it went unsent. */
export interface SweptWatcher extends Pick<Watcher, 'rootThreadId' | 'name' | 'agent' | 'keys'> {
  /** The last env event known handled, looked at or checked: the sweep reads after it. */
  from: number;
  /** Its signal was claimed over `grace` seconds ago and never sent: send it again, whatever the log holds. */
  unsent: boolean;
}

/**
 * Takes up to `limit` watchers of a task queue for one sweep (each for `graceSeconds`, so workers sweeping at once
 * take different ones; rows locked by another transaction are skipped): active or paused ones with a claimed signal
 * left unsent over `graceSeconds`, or with no claim (or an old one) and env events after what they handled, looked at
 * or were checked for that are over `graceSeconds` old.
 */
export async function takeWatchersToSweep(
  db: Queryable,
  taskQueue: string,
  graceSeconds: number,
  limit: number,
): Promise<SweptWatcher[]> {
  const { rows } = await db.query<{
    rootThreadId: string;
    name: string;
    agent: string;
    keys: string[];
    from: string;
    unsent: boolean;
  }>({
    name: 'baton-take-watchers-to-sweep',
    text: `WITH picked AS (
             SELECT c.root_thread_id, c.name FROM env_watchers c
              WHERE c.task_queue = $1 AND c.status IN ('active', 'paused')
                AND (c.swept_at IS NULL OR c.swept_at < now() - make_interval(secs => $2::double precision))
                AND ((c.signalled_at IS NOT NULL AND NOT c.signal_sent
                      AND c.signalled_at < now() - make_interval(secs => $2::double precision))
                     OR ((c.signalled_at IS NULL OR c.signalled_at < now() - ${SENT_CLAIM_HOLDS})
                         AND EXISTS (SELECT 1 FROM env_events e
                                      WHERE e.root_thread_id = c.root_thread_id
                                        AND e.seq > GREATEST(c.cursor_seq, c.looked_seq, c.swept_seq)
                                        AND e.created_at < now() - make_interval(secs => $2::double precision))))
              ORDER BY c.swept_at NULLS FIRST
              LIMIT $3
                FOR UPDATE SKIP LOCKED)
           UPDATE env_watchers w SET swept_at = now() FROM picked
            WHERE w.root_thread_id = picked.root_thread_id AND w.name = picked.name
        RETURNING w.root_thread_id AS "rootThreadId", w.name, w.agent, w.keys,
                  GREATEST(w.cursor_seq, w.looked_seq, w.swept_seq) AS "from",
                  (w.signalled_at IS NOT NULL AND NOT w.signal_sent
                   AND w.signalled_at < now() - make_interval(secs => $2::double precision)) AS unsent`,
    values: [taskQueue, graceSeconds, limit],
  });
  return rows.map((row) => ({ ...row, from: Number(row.from) }));
}

/** One env event as the sweep checks it against a watcher's keys. */
export interface SweepEvent {
  seq: number;
  key: string;
  /** `stored`, `updated`, `deleted` (changes), or a refusal or proposal (not changes). */
  action: string;
  scope: string;
  agent: string;
  /** The watcher whose wake-up made it, if any. */
  writerWatcher: string | null;
  /** Over the sweep's grace old: a change this old that no signal announced may have lost its signal. */
  settled: boolean;
}

/**
 * A root's env events after `after`, oldest first, at most `limit`, read under the root's lock as every reader of the
 * log reads them (so none that commits later has a lower number than the last one read).
 */
export async function sweepEventsAfter(
  db: Queryable,
  rootThreadId: string,
  after: number,
  limit: number,
  graceSeconds: number,
): Promise<SweepEvent[]> {
  const { rows } = await db.query<Omit<SweepEvent, 'seq'> & { seq: string }>(
    `SELECT e.seq, e.key, e.action, e.scope, e.actor_agent AS agent, t.watcher AS "writerWatcher",
            e.created_at < now() - make_interval(secs => $4::double precision) AS settled
       FROM env_events_after($1, $2, $3) e LEFT JOIN threads t ON t.thread_id = e.actor_thread
      ORDER BY e.seq`,
    [rootThreadId, after, limit, graceSeconds],
  );
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
}

/** Records how far the sweep checked a watcher's keys against the log. */
export async function recordWatchSweep(db: Queryable, rootThreadId: string, name: string, seq: number): Promise<void> {
  await db.query(`UPDATE env_watchers SET swept_seq = $3 WHERE root_thread_id = $1 AND name = $2 AND swept_seq < $3`, [
    rootThreadId,
    name,
    seq,
  ]);
}

/**
 * Ends a watcher: `removed` (by a person or an agent) or `stopped` (its root ended). Its workflow ends at its next look.
 * Removing one that is already removed changes nothing.
 * @throws WatcherNotFoundError
 */
export async function endWatcher(
  db: Queryable,
  rootThreadId: string,
  name: string,
  status: 'removed' | 'stopped',
  reason: string,
): Promise<Watcher> {
  const { rows } = await db.query<WatcherRow>(
    `UPDATE env_watchers SET status = CASE WHEN status = 'removed' THEN status ELSE $3 END,
            reason = CASE WHEN status = 'removed' THEN reason ELSE $4 END, paused_until = NULL, updated_at = now()
      WHERE root_thread_id = $1 AND name = $2 RETURNING ${WATCHER_COLUMNS}`,
    [rootThreadId, name, status, reason],
  );
  if (rows[0] === undefined) {
    throw new WatcherNotFoundError(`no watcher named '${name}' in thread '${rootThreadId}'`);
  }
  return toWatcher(rows[0]);
}

/** Stops every active or paused watcher of a root (its thread ended), saying why; returns their names. */
export async function stopRootWatchers(db: Queryable, rootThreadId: string, reason: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `UPDATE env_watchers SET status = 'stopped', reason = $2, paused_until = NULL, updated_at = now()
      WHERE root_thread_id = $1 AND status IN ('active', 'paused') RETURNING name`,
    [rootThreadId, reason],
  );
  return rows.map((row) => row.name);
}

/** Pauses an active watcher until `until` (rate limit), saying why; `until` undefined resumes a paused one. */
export async function setWatcherPause(
  db: Queryable,
  rootThreadId: string,
  name: string,
  pause: { reason: string; until: string } | undefined,
): Promise<void> {
  await db.query(
    pause === undefined
      ? `UPDATE env_watchers SET status = 'active', reason = NULL, paused_until = NULL, updated_at = now()
          WHERE root_thread_id = $1 AND name = $2 AND status = 'paused'`
      : `UPDATE env_watchers SET status = 'paused', reason = $3, paused_until = $4, updated_at = now()
          WHERE root_thread_id = $1 AND name = $2 AND status = 'active'`,
    pause === undefined ? [rootThreadId, name] : [rootThreadId, name, pause.reason, pause.until],
  );
}

/** One change after a watcher's cursor, with what the watcher needs to decide about it. */
export interface LoggedChange extends WatchChange {
  /** The shared data (`''`) or a fork task's isolated store. */
  scope: string;
  /** The watcher whose wake-up made it (its thread or one below it), if any. */
  writerWatcher: string | null;
  /** The chain depth of that wake-up (0: no watcher's). */
  writerDepth: number;
}

/**
 * The root's env-data changes after `cursor`, oldest first, at most `limit` events read (read under the root's lock,
 * as every reader of the log, so none that commits later has a lower number), and the last number read: what the
 * cursor moves to once these are handled. Refusals and proposals are not changes and are left out.
 */
export async function changesAfter(
  db: Queryable,
  rootThreadId: string,
  cursor: number,
  limit: number,
): Promise<{ changes: LoggedChange[]; lastSeq: number; full: boolean }> {
  const { rows } = await db.query<{
    seq: string;
    key: string;
    action: string;
    scope: string;
    version: number | null;
    agent: string;
    thread: string;
    at: Date;
    previous: string | null;
    watcher: string | null;
    depth: number | null;
  }>(
    `SELECT e.seq, e.key, e.action, e.scope, e.version, e.actor_agent AS agent, e.actor_thread AS thread,
            e.created_at AS at, t.watcher, t.watch_depth AS depth,
            CASE WHEN e.action = 'stored' AND e.version > 1 THEN
              (SELECT p.action FROM env_events p
                WHERE p.root_thread_id = e.root_thread_id AND p.scope = e.scope AND p.key = e.key AND p.seq < e.seq
                  AND p.action IN ('stored', 'updated', 'deleted')
                ORDER BY p.seq DESC LIMIT 1)
            END AS previous
       FROM env_events_after($1, $2, $3) e LEFT JOIN threads t ON t.thread_id = e.actor_thread
      ORDER BY e.seq`,
    [rootThreadId, cursor, limit],
  );
  const last = rows.at(-1);
  const changes: LoggedChange[] = [];
  for (const row of rows) {
    if (row.action !== 'stored' && row.action !== 'updated' && row.action !== 'deleted') continue;
    const version = row.version ?? 0;
    // A store of a key that existed replaced it (its version went on); one after a delete, or the first, created it.
    const created = row.action === 'stored' && (version <= 1 || row.previous === null || row.previous === 'deleted');
    changes.push({
      seq: Number(row.seq),
      key: row.key,
      action: row.action,
      oldVersion: row.action === 'deleted' ? version : created ? null : version - 1,
      newVersion: row.action === 'deleted' ? null : version,
      writer: { agent: row.agent, thread: row.thread },
      at: row.at.toISOString(),
      scope: row.scope,
      writerWatcher: row.watcher,
      writerDepth: row.depth ?? 0,
    });
  }
  return { changes, lastSeq: last === undefined ? cursor : Number(last.seq), full: rows.length >= limit };
}

/**
 * Moves a watcher's cursor past changes it did not wake for. Changes left because of the depth limit are said in the
 * run feed (`watch_skipped`), with the keys and the depth.
 */
export async function settleWatchChanges(
  pool: Pool,
  input: {
    rootThreadId: string;
    watcher: string;
    cursor: number;
    skipped?: { keys: string[]; depth: number; maxDepth: number };
  },
): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query(
      `UPDATE env_watchers SET cursor_seq = GREATEST(cursor_seq, $3), updated_at = now()
        WHERE root_thread_id = $1 AND name = $2`,
      [input.rootThreadId, input.watcher, input.cursor],
    );
    if (input.skipped !== undefined) {
      await client.query(
        `SELECT run_event($1, $1, NULL, 'watch_skipped',
           jsonb_build_object('watcher', $2::text, 'keys', $3::jsonb, 'depth', $4::integer, 'maxDepth', $5::integer,
                              'reason', 'depth_limit'))`,
        [
          input.rootThreadId,
          input.watcher,
          JSON.stringify(input.skipped.keys),
          input.skipped.depth,
          input.skipped.maxDepth,
        ],
      );
    }
  });
}

export interface OpenWakeupInput {
  rootThreadId: string;
  watcher: string;
  operationId: string;
  depth: number;
  changes: WatchChange[];
  /** The cursor once this wake-up's changes are handled. */
  cursor: number;
  /** Builds the turn's message from the wake-up's number. */
  message: (wakeup: number) => string;
}

export interface OpenedWakeup {
  wakeup: number;
  threadId: string;
  workflowId: string;
  agent: string;
  world: string;
  epoch: number;
  message: string;
}

/**
 * Opens a wake-up, once per operation id: numbers it, creates its thread under the root (marked with the watcher and
 * the depth, which every thread below it inherits), records the changes it is about (a `watch_woke` event) and moves
 * the watcher's cursor past them, in one transaction. A watcher removed or stopped since its look opens none.
 * @throws WatcherNotFoundError, ThreadNotFoundError
 */
export async function openWakeup(pool: Pool, input: OpenWakeupInput): Promise<OpenedWakeup | { ended: string }> {
  return inTransaction(pool, async (client) => {
    const { rows: watchers } = await client.query<{
      agent: string;
      wakeups: number;
      world: string | null;
      status: string;
      reason: string | null;
    }>(
      `SELECT w.agent, w.wakeups, t.world, w.status, w.reason
         FROM env_watchers w LEFT JOIN threads t ON t.thread_id = w.root_thread_id
        WHERE w.root_thread_id = $1 AND w.name = $2 FOR UPDATE OF w`,
      [input.rootThreadId, input.watcher],
    );
    const watcher = watchers[0];
    if (watcher === undefined) {
      throw new WatcherNotFoundError(`no watcher named '${input.watcher}' in thread '${input.rootThreadId}'`);
    }
    if (watcher.world === null) throw new ThreadNotFoundError(input.rootThreadId);
    const { rows: done } = await client.query<{
      number: number;
      threadId: string;
      workflowId: string;
      message: string;
    }>(
      `SELECT number, thread_id AS "threadId", workflow_id AS "workflowId", message FROM env_watch_wakeups
        WHERE root_thread_id = $1 AND operation_id = $2`,
      [input.rootThreadId, input.operationId],
    );
    const earlier = done[0];
    if (earlier !== undefined) {
      const { rows } = await client.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [
        earlier.threadId,
      ]);
      return {
        wakeup: earlier.number,
        threadId: earlier.threadId,
        workflowId: earlier.workflowId,
        agent: watcher.agent,
        world: watcher.world,
        epoch: rows[0]?.epoch ?? 0,
        message: earlier.message,
      };
    }
    // Removed (or its root ended) since it looked: it wakes no more.
    if (watcher.status === 'removed' || watcher.status === 'stopped')
      return { ended: watcher.reason ?? watcher.status };
    const wakeup = watcher.wakeups + 1;
    const threadId = wakeupThreadId(input.rootThreadId, input.watcher, wakeup);
    const workflowId = `baton/${threadId}`;
    const message = input.message(wakeup);
    await client.query(
      `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, chain, world, env_scopes,
                            watcher, watch_depth)
       SELECT $1, $2, $2, $3, NULL, $4, world, env_scopes, $5, $6 FROM threads WHERE thread_id = $2`,
      [threadId, input.rootThreadId, watcher.agent, JSON.stringify([watcher.agent]), input.watcher, input.depth],
    );
    await client.query(
      `INSERT INTO env_watch_wakeups (root_thread_id, watcher, number, operation_id, thread_id, workflow_id, depth,
                                      changes, message)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        input.rootThreadId,
        input.watcher,
        wakeup,
        input.operationId,
        threadId,
        workflowId,
        input.depth,
        JSON.stringify(input.changes),
        message,
      ],
    );
    await client.query(
      `UPDATE env_watchers SET wakeups = $3, cursor_seq = GREATEST(cursor_seq, $4), last_woke_at = now(),
              updated_at = now()
        WHERE root_thread_id = $1 AND name = $2`,
      [input.rootThreadId, input.watcher, wakeup, input.cursor],
    );
    return { wakeup, threadId, workflowId, agent: watcher.agent, world: watcher.world, epoch: 0, message };
  });
}

/** Records how a wake-up's turn ended (a `watch_finished` event). Idempotent. */
export async function finishWakeup(
  db: Queryable,
  input: { rootThreadId: string; watcher: string; wakeup: number; status: string; error?: string },
): Promise<void> {
  await db.query(
    `UPDATE env_watch_wakeups SET status = $4, error = $5, finished_at = now()
      WHERE root_thread_id = $1 AND watcher = $2 AND number = $3 AND status = 'running'`,
    [input.rootThreadId, input.watcher, input.wakeup, input.status, input.error ?? null],
  );
}

/** One wake-up of a watcher, as recorded. */
export interface WakeupRow {
  watcher: string;
  wakeup: number;
  threadId: string;
  depth: number;
  changes: WatchChange[];
  status: string;
  error?: string;
  startedAt: string;
  finishedAt?: string;
}

/** A root's wake-ups, newest first (at most `limit`), optionally of one watcher. */
export async function listWakeups(
  db: Queryable,
  rootThreadId: string,
  options: { watcher?: string; limit?: number } = {},
): Promise<WakeupRow[]> {
  const { rows } = await db.query<
    Omit<WakeupRow, 'error' | 'startedAt' | 'finishedAt'> & {
      error: string | null;
      startedAt: Date;
      finishedAt: Date | null;
    }
  >(
    `SELECT watcher, number AS wakeup, thread_id AS "threadId", depth, changes, status, error,
            started_at AS "startedAt", finished_at AS "finishedAt"
       FROM env_watch_wakeups WHERE root_thread_id = $1 AND ($2::text IS NULL OR watcher = $2)
      ORDER BY started_at DESC, number DESC LIMIT $3`,
    [rootThreadId, options.watcher ?? null, options.limit ?? 100],
  );
  return rows.map((row) => ({
    watcher: row.watcher,
    wakeup: row.wakeup,
    threadId: row.threadId,
    depth: row.depth,
    changes: row.changes,
    status: row.status,
    ...(row.error === null ? {} : { error: row.error }),
    startedAt: row.startedAt.toISOString(),
    ...(row.finishedAt === null ? {} : { finishedAt: row.finishedAt.toISOString() }),
  }));
}

/** The run-feed rows of a root's watchers (added, paused, woke, finished, skipped, …), oldest first, at most `limit`. */
export async function listWatchFeed(db: Queryable, rootThreadId: string, limit = 1000): Promise<RunFeedRow[]> {
  const { rows } = await db.query<RunFeedRow & { seq: string }>(
    `SELECT seq, thread_id AS "threadId", agent, kind, data, created_at AS "createdAt"
       FROM run_events WHERE root_thread_id = $1 AND kind LIKE 'watch\\_%' ORDER BY seq LIMIT $2`,
    [rootThreadId, limit],
  );
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
}
