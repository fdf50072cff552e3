-- A question whose turn can no longer take an answer (the turn was reclaimed, timed out or failed) is closed as
-- `cancelled`, with the reason, in the same transaction that fences or fails its thread: it is no longer listed as
-- open, and answering it is refused with that reason instead of reaching a turn that is gone.
ALTER TABLE questions ADD COLUMN reason text;
ALTER TABLE questions DROP CONSTRAINT questions_status_check;
ALTER TABLE questions ADD CONSTRAINT questions_status_check
  CHECK (status IN ('open', 'answered', 'expired', 'cancelled'));

-- Questions and approvals left open by turns that were reclaimed or failed before this migration: nothing waits for
-- them any more. A thread's status is its latest turn's, and a new turn marks it `running` before it asks anything.
UPDATE questions q SET status = 'cancelled', closed_at = now(),
       reason = CASE WHEN t.status = 'reclaimed' THEN 'its turn was reclaimed' ELSE 'its turn failed' END
  FROM threads t
 WHERE t.thread_id = q.thread_id AND q.status = 'open' AND t.status IN ('reclaimed', 'failed');
UPDATE approvals a SET status = 'cancelled', decided_at = now(),
       reason = CASE WHEN t.status = 'reclaimed' THEN 'its turn was reclaimed' ELSE 'its turn failed' END
  FROM threads t
 WHERE t.thread_id = a.thread_id AND a.status = 'pending' AND t.status IN ('reclaimed', 'failed');
