/**
 * Experiments and replays of evaluations (migration 027, docs/guides/evals.md): what an experiment ran, each case's
 * outcome and scores, and for a counterfactual replay the recorded root thread that answers its calls, the first call
 * that did not match, and the calls run live.
 */
import type { Queryable } from './threads';

/** How a replay goes on at its first call that does not match the record. */
export type ReplayPolicy = 'stop' | 'live-read-only' | 'fail';

/** The first call of a replay that did not match the record. */
export interface Divergence {
  /** The model step (from 1) of the thread whose reply made the call. */
  step: number;
  agent: string;
  /** The call's place (from 1) among the thread's tool calls. */
  call: number;
  /** The call the record has at that place, if it has one. */
  recorded: { name: string; arguments: string } | null;
  /** The call the replay made. */
  made: { name: string; arguments: string };
}

/** A root thread a replay runs, and the recorded root thread that answers it. */
export interface Replay {
  rootThreadId: string;
  sourceRootThreadId: string;
  policy: ReplayPolicy;
  divergence: Divergence | null;
  liveCalls: number;
}

export interface NewExperiment {
  experimentId: string;
  kind: 'run' | 'replay';
  dataset: string;
  /** The agents the experiment ran, by name: each one's version (its content hash). */
  agents: Record<string, string>;
  /** The default model and the providers of the worker that ran it. */
  model: { model: string; providers: string[] };
}

/** One case of an experiment, as stored. */
export interface EvalCaseRow {
  caseId: string;
  position: number;
  threadId: string;
  agent: string;
  input: string;
  status: 'completed' | 'max_steps' | 'failed' | 'diverged';
  reply: string | null;
  output: unknown;
  error: string | null;
  usage: { totalTokens: number; promptTokens: number; completionTokens: number; costUsd?: number } | null;
  durationMs: number;
  /** Each scorer's score (0 to 1) and reason, by scorer name. */
  scores: Record<string, { score: number; reason?: string }>;
  divergence: Divergence | null;
  liveCalls: number;
  /** A replay's recorded run, scored by the same scorers (`null` outside replays). */
  recordedScores: Record<string, { score: number; reason?: string }> | null;
}

export interface ExperimentRow extends NewExperiment {
  startedAt: Date;
  finishedAt: Date | null;
  summary: unknown;
}

export async function insertExperiment(db: Queryable, experiment: NewExperiment): Promise<void> {
  await db.query(
    `INSERT INTO eval_experiments (experiment_id, kind, dataset, agents, model) VALUES ($1, $2, $3, $4, $5)`,
    [
      experiment.experimentId,
      experiment.kind,
      experiment.dataset,
      JSON.stringify(experiment.agents),
      JSON.stringify(experiment.model),
    ],
  );
}

/** Stores one case's outcome (again, when the case is run again under the same experiment). */
export async function recordCase(db: Queryable, experimentId: string, row: EvalCaseRow): Promise<void> {
  await db.query(
    `INSERT INTO eval_cases (experiment_id, case_id, position, thread_id, agent, input, status, reply, output, error,
                             usage, duration_ms, scores, divergence, live_calls, recorded_scores)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
     ON CONFLICT (experiment_id, case_id) DO UPDATE SET
       status = EXCLUDED.status, reply = EXCLUDED.reply, output = EXCLUDED.output, error = EXCLUDED.error,
       usage = EXCLUDED.usage, duration_ms = EXCLUDED.duration_ms, scores = EXCLUDED.scores,
       divergence = EXCLUDED.divergence, live_calls = EXCLUDED.live_calls, recorded_scores = EXCLUDED.recorded_scores`,
    [
      experimentId,
      row.caseId,
      row.position,
      row.threadId,
      row.agent,
      row.input,
      row.status,
      row.reply,
      row.output === undefined ? null : JSON.stringify(row.output),
      row.error,
      row.usage === null ? null : JSON.stringify(row.usage),
      row.durationMs,
      JSON.stringify(row.scores),
      row.divergence === null ? null : JSON.stringify(row.divergence),
      row.liveCalls,
      row.recordedScores === null ? null : JSON.stringify(row.recordedScores),
    ],
  );
}

export async function finishExperiment(db: Queryable, experimentId: string, summary: unknown): Promise<void> {
  await db.query(`UPDATE eval_experiments SET finished_at = now(), summary = $2 WHERE experiment_id = $1`, [
    experimentId,
    JSON.stringify(summary),
  ]);
}

const EXPERIMENT_COLUMNS = `experiment_id AS "experimentId", kind, dataset, agents, model, started_at AS "startedAt",
  finished_at AS "finishedAt", summary`;

/** One experiment and its cases in order, or `undefined`. */
export async function findExperiment(
  db: Queryable,
  experimentId: string,
): Promise<{ experiment: ExperimentRow; cases: EvalCaseRow[] } | undefined> {
  const { rows } = await db.query<ExperimentRow>(
    `SELECT ${EXPERIMENT_COLUMNS} FROM eval_experiments WHERE experiment_id = $1`,
    [experimentId],
  );
  const experiment = rows[0];
  if (experiment === undefined) return undefined;
  const { rows: cases } = await db.query<EvalCaseRow>(
    `SELECT case_id AS "caseId", position, thread_id AS "threadId", agent, input, status, reply, output, error, usage,
            duration_ms AS "durationMs", scores, divergence, live_calls AS "liveCalls",
            recorded_scores AS "recordedScores"
       FROM eval_cases WHERE experiment_id = $1 ORDER BY position`,
    [experimentId],
  );
  return { experiment, cases: cases.map((row) => ({ ...row, output: row.output ?? undefined })) };
}

/** The newest experiments first. */
export async function listExperiments(db: Queryable, limit = 50): Promise<ExperimentRow[]> {
  const { rows } = await db.query<ExperimentRow>(
    `SELECT ${EXPERIMENT_COLUMNS} FROM eval_experiments ORDER BY started_at DESC, experiment_id LIMIT $1`,
    [limit],
  );
  return rows;
}

/** Marks `rootThreadId` as a replay of `sourceRootThreadId`, before its thread starts. */
export async function openReplay(
  db: Queryable,
  replay: { rootThreadId: string; sourceRootThreadId: string; policy: ReplayPolicy },
): Promise<void> {
  await db.query(
    `INSERT INTO eval_replays (root_thread_id, source_root_thread_id, policy) VALUES ($1, $2, $3)
     ON CONFLICT (root_thread_id) DO NOTHING`,
    [replay.rootThreadId, replay.sourceRootThreadId, replay.policy],
  );
}

/** The replay a root thread runs, or `undefined` for a thread that is no replay. */
export async function findReplay(db: Queryable, rootThreadId: string): Promise<Replay | undefined> {
  const { rows } = await db.query<Replay>(
    `SELECT root_thread_id AS "rootThreadId", source_root_thread_id AS "sourceRootThreadId", policy, divergence,
            cardinality(live_operations) AS "liveCalls"
       FROM eval_replays WHERE root_thread_id = $1`,
    [rootThreadId],
  );
  return rows[0];
}

/** Keeps a replay's first divergence (a later one, or the same one found again by a retry, changes nothing). */
export async function recordDivergence(db: Queryable, rootThreadId: string, divergence: Divergence): Promise<void> {
  await db.query(`UPDATE eval_replays SET divergence = $2 WHERE root_thread_id = $1 AND divergence IS NULL`, [
    rootThreadId,
    JSON.stringify(divergence),
  ]);
}

/** Counts a call a replay ran live (a read-only tool past the divergence, under `live-read-only`), once. */
export async function countLiveCall(db: Queryable, rootThreadId: string, operationId: string): Promise<void> {
  await db.query(
    `UPDATE eval_replays SET live_operations = array_append(live_operations, $2)
      WHERE root_thread_id = $1 AND NOT ($2 = ANY (live_operations))`,
    [rootThreadId, operationId],
  );
}

/** A recorded root thread's first message, its agent and its last answer. */
export async function recordedRun(
  db: Queryable,
  threadId: string,
): Promise<{ input: string; agent: string; reply: string | null }> {
  const { rows } = await db.query<{ agent: string; input: string | null; reply: string | null }>(
    `SELECT t.agent,
            (SELECT content FROM transcript_messages WHERE thread_id = t.thread_id AND role = 'user'
              ORDER BY seq LIMIT 1) AS input,
            (SELECT content FROM transcript_messages WHERE thread_id = t.thread_id AND role = 'assistant'
                AND tool_calls IS NULL ORDER BY seq DESC LIMIT 1) AS reply
       FROM threads t WHERE t.thread_id = $1 AND t.parent_thread_id IS NULL`,
    [threadId],
  );
  const row = rows[0];
  if (row === undefined || row.input === null) {
    throw new Error(`there is no recorded root thread '${threadId}' with a message to replay`);
  }
  return { input: row.input, agent: row.agent, reply: row.reply };
}

/** The calls of a root's whole tree, in the order they were stored. */
export async function treeCalls(db: Queryable, rootThreadId: string): Promise<{ name: string; arguments: string }[]> {
  const { rows } = await db.query<{ calls: { name: string; arguments: string }[] }>(
    `SELECT tool_calls AS calls FROM transcript_messages
      WHERE root_thread_id = $1 AND role = 'assistant' AND tool_calls IS NOT NULL ORDER BY created_at, seq`,
    [rootThreadId],
  );
  return rows.flatMap((row) => row.calls.map((call) => ({ name: call.name, arguments: call.arguments })));
}
