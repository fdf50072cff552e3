/**
 * The run feed in Postgres (migration 014): reading a root's events in order, the events no row of another table
 * makes (a model call starting or waiting), and the two announcements: stored events after their commit, streamed
 * output as it comes. Both are NOTIFYs sent outside any transaction that stores a step (see `run_events` in the
 * migration for why); a progress mark, a transaction of its own committed without a flush, carries its own.
 */
import type { Pool } from 'pg';
import {
  MAX_DELTA_PAYLOAD_BYTES,
  runDeltasChannel,
  runEventsChannel,
  type DeltaAnnouncement,
  type RunFeedRow,
} from '../common/run-events';
import { GatheredSends } from './gathered-sends';
import type { Queryable } from './threads';

/**
 * Rows of a root's feed after `since`, oldest first, at most `limit`. Read under the root's lock, so no row that
 * commits later can have a lower number than the last one returned.
 */
export async function readRunFeed(
  db: Queryable,
  rootThreadId: string,
  options: { since?: number; limit?: number } = {},
): Promise<RunFeedRow[]> {
  const { rows } = await db.query<RunFeedRow & { seq: string }>({
    name: 'baton-run-feed-after',
    text: `SELECT seq, thread_id AS "threadId", agent, kind, data, created_at AS "createdAt"
             FROM run_feed_after($1, $2, $3) ORDER BY seq`,
    values: [rootThreadId, options.since ?? 0, options.limit ?? 1000],
  });
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
}

/**
 * The highest feed number of a root so far (0 when it has none): where a reader that wants only what comes next starts.
 * Read under the root's lock, as `readRunFeed` is: an event still being written with a lower number has committed by
 * then, so reading after this number misses nothing that commits later.
 */
export async function lastRunFeedSeq(db: Queryable, rootThreadId: string): Promise<number> {
  const { rows } = await db.query<{ seq: string | null }>('SELECT run_feed_last($1) AS seq', [rootThreadId]);
  return Number(rows[0]?.seq ?? 0);
}

/**
 * How long the first announcement of a batch waits for others to join it: the steps of every turn a worker runs
 * announce their roots within milliseconds of each other, and one statement (one small transaction; notifying ones
 * take turns at commit) then tells them all. Readers wake this much later, which a live view does not show.
 */
const RUN_ANNOUNCEMENT_GATHER_MS = 5;
/** Most roots told in one statement. */
const MAX_ROOTS_PER_ANNOUNCEMENT = 200;

/** The announcer of each pool (a worker's), so every activity of the process shares its batches. */
const runAnnouncers = new WeakMap<object, GatheredSends<string>>();

/**
 * Tells the root's readers that events may have committed. Best effort and never awaited by a step: a lost
 * announcement is caught up by a reader's periodic re-read. Batched per pool: the first root queued waits
 * `RUN_ANNOUNCEMENT_GATHER_MS` for others, and a root announced several times while a batch gathers is told once.
 */
export function announceRunEvents(pool: Pick<Pool, 'query'>, rootThreadId: string): void {
  let announcer = runAnnouncers.get(pool);
  if (announcer === undefined) {
    announcer = new GatheredSends<string>({
      gatherMs: RUN_ANNOUNCEMENT_GATHER_MS,
      maxPerBatch: MAX_ROOTS_PER_ANNOUNCEMENT,
      keyOf: (root) => root,
      send: async (roots) => {
        await pool.query({
          name: 'baton-run-announce',
          text: 'SELECT pg_notify(channel, payload) FROM unnest($1::text[], $2::text[]) AS a(channel, payload)',
          values: [roots.map(runEventsChannel), roots.map((rootThreadId) => JSON.stringify({ rootThreadId }))],
        });
      },
    });
    runAnnouncers.set(pool, announcer);
  }
  announcer.add([rootThreadId]);
}

export interface ModelCallStarted {
  rootThreadId: string;
  threadId: string;
  agent: string;
  operationId: string;
  step: number;
  attempt: number;
  /** `<operationId>#<attempt>`, with a tag of its own after the attempt for a local step (`activities/model.ts`). */
  stream: string;
  streaming: boolean;
  provider: string;
  model: string;
}

/**
 * Records a progress mark of a model call (`kind`, with `data`) and tells the root's readers, in one statement: its
 * transaction commits without waiting for the disk (`run_event_unflushed`: a mark is not data, and a step should not
 * pay a flush for it), and the NOTIFY in it goes out as it commits. A step's calls each mark their start, so a separate
 * announcement would double their statements; a mark's commit, with no flush and no step's rows in it, is short
 * enough to take its turn among notifying transactions (they commit one at a time).
 */
async function recordModelCallMark(
  pool: Pool,
  statement: string,
  call: Pick<ModelCallStarted, 'rootThreadId' | 'threadId' | 'agent'>,
  kind: 'model_call_started' | 'model_call_waiting',
  data: Record<string, unknown>,
): Promise<void> {
  await pool.query({
    name: statement,
    text: 'SELECT run_event_unflushed($1, $2, $3, $4, $5), pg_notify($6, $7)',
    values: [
      call.rootThreadId,
      call.threadId,
      call.agent,
      kind,
      JSON.stringify(data),
      runEventsChannel(call.rootThreadId),
      JSON.stringify({ rootThreadId: call.rootThreadId }),
    ],
  });
}

/** Records that a model call attempt started, with the stream its output is published under; tells its readers. */
export async function recordModelCallStarted(pool: Pool, call: ModelCallStarted): Promise<void> {
  await recordModelCallMark(pool, 'baton-model-call-started', call, 'model_call_started', {
    operationId: call.operationId,
    step: call.step,
    attempt: call.attempt,
    stream: call.stream,
    streaming: call.streaming,
    provider: call.provider,
    model: call.model,
  });
}

/**
 * Records that a model call waits for room under a limit every worker shares (once per scope and reason it waits
 * for), as its start is recorded; tells its readers.
 */
export async function recordModelCallWaiting(
  pool: Pool,
  call: Pick<ModelCallStarted, 'rootThreadId' | 'threadId' | 'agent' | 'operationId' | 'step'> & {
    scope: string;
    reason: string;
  },
): Promise<void> {
  await recordModelCallMark(pool, 'baton-model-call-waiting', call, 'model_call_waiting', {
    operationId: call.operationId,
    step: call.step,
    scope: call.scope,
    reason: call.reason,
  });
}

/**
 * Publishes batches of streamed output (each cut to fit by `splitDelta` first). Best effort: the stored reply is
 * what counts, and a reader that misses a batch sees the gap in `part`.
 */
export async function publishDeltas(pool: Pool, batches: readonly DeltaAnnouncement[]): Promise<void> {
  const payloads = batches.map((batch) => JSON.stringify(batch));
  if (payloads.length === 0) return;
  await pool
    .query({
      name: 'baton-run-deltas',
      text: `SELECT pg_notify(channel, payload)
               FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS a(channel, payload, n) ORDER BY n`,
      values: [batches.map((batch) => runDeltasChannel(batch.rootThreadId)), payloads],
    })
    .catch(() => undefined);
}

type UnnumberedDelta = Omit<DeltaAnnouncement, 'part'>;

/** A batch too large for one notification, as several (text cut between characters, arguments likewise). */
export function splitDelta(batch: UnnumberedDelta): UnnumberedDelta[] {
  if (Buffer.byteLength(JSON.stringify(batch), 'utf8') <= MAX_DELTA_PAYLOAD_BYTES) return [batch];
  const { text, toolCalls, ...rest } = batch;
  const pieces: UnnumberedDelta[] = [];
  const chars = [...(text ?? '')];
  const budget = Math.floor(MAX_DELTA_PAYLOAD_BYTES / 8);
  for (let i = 0; i < chars.length; i += budget) pieces.push({ ...rest, text: chars.slice(i, i + budget).join('') });
  for (const call of toolCalls ?? []) {
    const args = [...(call.arguments ?? '')];
    if (args.length === 0) pieces.push({ ...rest, toolCalls: [call] });
    for (let i = 0; i < args.length; i += budget) {
      pieces.push({
        ...rest,
        toolCalls: [{ ...(i === 0 ? call : { index: call.index }), arguments: args.slice(i, i + budget).join('') }],
      });
    }
  }
  return pieces;
}
