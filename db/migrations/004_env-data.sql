-- Shared environment data: entries scoped to a root thread (a whole delegation tree), each with a description for
-- discovery, a version for optimistic concurrency, and who stored it.
CREATE TABLE env_data (
  root_thread_id    text NOT NULL,
  key               text NOT NULL,
  short_description text NOT NULL,
  value             jsonb NOT NULL,
  type              text,
  tags              text[] NOT NULL DEFAULT '{}',
  stored_by_agent   text NOT NULL,
  stored_by_thread  text NOT NULL,
  version           integer NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, key)
);

-- Append-only log of every change and refusal, written in the same transaction as the change. Each event keeps the
-- value it wrote (a deleted entry's last value included), so nothing is lost and everything is attributable.
-- `operation_id` makes a retried write find its first outcome instead of writing twice. For a refusal, `version` is
-- the entry's version at the time (a version conflict reports it again on retry).
CREATE TABLE env_events (
  seq               bigserial PRIMARY KEY,
  root_thread_id    text NOT NULL,
  key               text NOT NULL,
  action            text NOT NULL CHECK (action IN ('stored', 'updated', 'deleted', 'rejected')),
  actor_agent       text NOT NULL,
  actor_thread      text NOT NULL,
  operation_id      text NOT NULL,
  version           integer,
  value_size        integer,
  value             jsonb,
  short_description text,
  reason            text,
  -- For a refusal: its stable type (EnvData.NotFound, Thread.StaleEpoch, …), so a retried write refuses the same way.
  refusal_type      text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  -- Scoped by root (not global), so the log can be partitioned by root_thread_id.
  UNIQUE (root_thread_id, operation_id)
);
CREATE INDEX env_events_root_seq_idx ON env_events (root_thread_id, seq);
