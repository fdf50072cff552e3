-- Operation ids are scoped by root thread everywhere, as in env_events: a write is identified by
-- (root_thread_id, operation_id), never by the operation id alone, so one root can never find (or block) another
-- root's write by reusing its id. Every table stays keyed by root_thread_id first so it partitions by it.
ALTER TABLE transcript_messages DROP CONSTRAINT transcript_messages_operation_id_key;
ALTER TABLE transcript_messages ADD CONSTRAINT transcript_messages_root_operation_key
  UNIQUE (root_thread_id, operation_id);

ALTER TABLE questions DROP CONSTRAINT questions_operation_id_key;
ALTER TABLE questions ADD CONSTRAINT questions_root_operation_key UNIQUE (root_thread_id, operation_id);

ALTER TABLE delegations DROP CONSTRAINT delegations_pkey;
ALTER TABLE delegations ADD PRIMARY KEY (root_thread_id, operation_id);

-- Runs of tools with side effects (the shell), claimed before the tool starts and completed with its output before
-- the transcript write. A retried activity finds the run here instead of running the tool again: with its output
-- when the later write was what failed, or as interrupted when the worker died while the tool ran.
CREATE TABLE tool_runs (
  root_thread_id text NOT NULL,
  operation_id   text NOT NULL,
  thread_id      text NOT NULL REFERENCES threads (thread_id),
  tool           text NOT NULL,
  -- The thread's epoch when the run was claimed (the fence was checked then, before anything ran).
  epoch          integer NOT NULL,
  status         text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
  content        text,
  ok             boolean,
  started_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  PRIMARY KEY (root_thread_id, operation_id)
);
