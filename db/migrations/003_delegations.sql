-- The delegation tree. A thread records the chain of agents from the root down to it and how its latest turn went;
-- each delegation call (one child turn workflow) is recorded once per operation id and numbered per root and agent,
-- which gives readable, derived workflow ids: baton/<root>/<agent>-<n>.
ALTER TABLE threads
  ADD COLUMN chain       jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN finished_at timestamptz,
  ADD COLUMN last_error  text;
CREATE INDEX threads_parent_idx ON threads (parent_thread_id, agent);

CREATE TABLE delegations (
  root_thread_id   text NOT NULL,
  operation_id     text PRIMARY KEY,
  parent_thread_id text NOT NULL REFERENCES threads (thread_id),
  caller           text NOT NULL,
  agent            text NOT NULL,
  number           integer NOT NULL,
  thread_id        text NOT NULL REFERENCES threads (thread_id),
  workflow_id      text NOT NULL,
  mode             text NOT NULL CHECK (mode IN ('new', 'reuse', 'clone')),
  -- The message the callee received (preamble included), so a retried call returns exactly what the first did.
  message          text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (root_thread_id, agent, number)
);
