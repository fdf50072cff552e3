/**
 * What waits on people across every root: pending approvals and open questions, with the age of the oldest of each,
 * read from their partial indexes (`approvals_pending_idx`, `questions_open_idx`). Postgres is the one place that
 * knows it for a whole deployment, so every worker reports the same figure (docs: aggregate it with max, not sum).
 */
import type { Pool } from 'pg';

/** How many wait, and how long the oldest has waited (0 when none). */
export interface Waiting {
  readonly count: number;
  readonly oldestSeconds: number;
}

/** Pending approvals and open questions of every root. */
export async function readWaiting(pool: Pool): Promise<{ approvals: Waiting; questions: Waiting }> {
  const { rows } = await pool.query<{ kind: 'approvals' | 'questions'; count: string; oldest_seconds: number | null }>(
    `SELECT 'approvals' AS kind, count(*) AS count,
            extract(epoch FROM now() - min(created_at))::float8 AS oldest_seconds
       FROM approvals WHERE status = 'pending'
     UNION ALL
     SELECT 'questions', count(*), extract(epoch FROM now() - min(created_at))::float8
       FROM questions WHERE status = 'open'`,
  );
  const of = (kind: 'approvals' | 'questions'): Waiting => {
    const row = rows.find((candidate) => candidate.kind === kind);
    return { count: Number(row?.count ?? 0), oldestSeconds: Math.max(0, row?.oldest_seconds ?? 0) };
  };
  return { approvals: of('approvals'), questions: of('questions') };
}
