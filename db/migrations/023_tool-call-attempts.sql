-- Attempts of a tool call with retry rules (a user tool without side effects, a read-only MCP tool), counted per call
-- under its operation id. A call may run in an activity of its own, with the next model call, or in a batch of steps
-- that runs many calls and is retried as a whole (a model error three steps later), on any worker: the activity's own
-- attempt number counts none of that, and a local activity counts afresh on the next worker. Each start of the tool
-- adds one here, in the statement that reads the count back, so "attempt" means this call's attempt whatever ran it.
-- Tools with side effects are claimed in `tool_runs` instead and run at most once.
CREATE TABLE tool_attempts (
  root_thread_id  text NOT NULL,
  operation_id    text NOT NULL,
  thread_id       text NOT NULL REFERENCES threads (thread_id),
  tool            text NOT NULL,
  attempts        integer NOT NULL DEFAULT 1,
  first_started_at timestamptz NOT NULL DEFAULT now(),
  last_started_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, operation_id)
);
