-- Fork/join: one `fork_join` tool call fans work out to child turns and joins them. Workers either write into the
-- caller's env-data scope (shared mode) or each into a scope of its own (isolated mode) whose findings merge back as
-- a commit under a prefix. Every table stays keyed by root_thread_id first so it partitions by it.

-- The env-data scopes a thread reads, nearest first; it writes to the first. '' is the root scope. A delegation
-- inherits its caller's; an isolated fork task gets its own thread id in front of its caller's.
ALTER TABLE threads
  ADD COLUMN env_scopes text[] NOT NULL DEFAULT '{""}',
  -- The fork task this thread runs, e.g. 'fork 1 task 2' (attribution of its writes), or NULL.
  ADD COLUMN fork_task  text,
  ADD COLUMN started_at timestamptz;

ALTER TABLE env_data ADD COLUMN scope text NOT NULL DEFAULT '';
ALTER TABLE env_data ADD COLUMN stored_by_task text;
ALTER TABLE env_data DROP CONSTRAINT env_data_pkey;
ALTER TABLE env_data ADD PRIMARY KEY (root_thread_id, scope, key);

ALTER TABLE env_events ADD COLUMN scope text NOT NULL DEFAULT '';
ALTER TABLE env_events ADD COLUMN actor_task text;
ALTER TABLE env_events DROP CONSTRAINT IF EXISTS env_events_action_check;
ALTER TABLE env_events ADD CONSTRAINT env_events_action_check
  CHECK (action IN ('stored', 'updated', 'deleted', 'rejected', 'proposed', 'linked'));

-- The version of a key is read from its own events, not from a scan of the scope's log.
CREATE INDEX env_events_key_idx ON env_events (root_thread_id, scope, key);

CREATE TABLE forks (
  root_thread_id   text NOT NULL,
  number           integer NOT NULL,
  operation_id     text NOT NULL,
  parent_thread_id text NOT NULL REFERENCES threads (thread_id),
  caller           text NOT NULL,
  store_mode       text NOT NULL CHECK (store_mode IN ('isolated', 'shared')),
  prefix           text NOT NULL,
  fail_fast        boolean NOT NULL,
  deadline_seconds integer NOT NULL,
  max_parallel     integer NOT NULL,
  status           text NOT NULL DEFAULT 'running'
                   CHECK (status IN ('running', 'success', 'partial', 'failed', 'timeout')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  deadline_at      timestamptz NOT NULL,
  finished_at      timestamptz,
  PRIMARY KEY (root_thread_id, number),
  UNIQUE (root_thread_id, operation_id)
);

CREATE TABLE fork_tasks (
  root_thread_id text NOT NULL,
  fork_number    integer NOT NULL,
  task_index     integer NOT NULL,
  agent          text NOT NULL,
  thread_id      text NOT NULL REFERENCES threads (thread_id),
  workflow_id    text NOT NULL,
  status         text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'success', 'failed', 'timeout', 'cancelled')),
  error          text,
  -- When the deadline or fail-fast gave up on the task and bumped its threads' epochs.
  reclaimed_at   timestamptz,
  -- What its commit merged: {commitId, created, links, proposals, errors}.
  merge          jsonb,
  finished_at    timestamptz,
  PRIMARY KEY (root_thread_id, fork_number, task_index),
  FOREIGN KEY (root_thread_id, fork_number) REFERENCES forks (root_thread_id, number)
);
CREATE INDEX fork_tasks_thread_idx ON fork_tasks (thread_id);

-- Relationships between keys that commits hand back (supports | contradicts | refines).
CREATE TABLE env_links (
  root_thread_id text NOT NULL,
  scope          text NOT NULL DEFAULT '',
  src_key        text NOT NULL,
  dst_key        text NOT NULL,
  type           text NOT NULL CHECK (type IN ('supports', 'contradicts', 'refines')),
  created_by_agent  text NOT NULL,
  created_by_thread text NOT NULL,
  fork_task      text,
  operation_id   text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, operation_id)
);
CREATE INDEX env_links_scope_idx ON env_links (root_thread_id, scope);

-- Changes a worker proposed to keys it could read but not write (its caller's). Never applied on their own: an agent
-- (update_env_data citing the proposal) or a human (baton env … accept) applies one, and the event log says who.
CREATE TABLE env_proposals (
  root_thread_id     text NOT NULL,
  proposal_id        text NOT NULL,
  number             integer NOT NULL,
  -- The scope whose entry it would change, and the isolated scope of the worker that proposed it.
  scope              text NOT NULL DEFAULT '',
  from_scope         text,
  key                text NOT NULL,
  -- Either a whole new value, or a patch merged into the current object value at acceptance.
  value              jsonb,
  patch              jsonb,
  short_description  text,
  base_version       integer,
  proposed_by_agent  text NOT NULL,
  proposed_by_thread text NOT NULL,
  fork_task          text,
  operation_id       text NOT NULL,
  -- staged: made by a worker still running (invisible); pending: merged at the join, waiting for a decision;
  -- discarded: its worker did not succeed, so nothing it proposed is offered.
  status             text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('staged', 'pending', 'accepted', 'rejected', 'discarded')),
  decided_by_agent   text,
  decided_by_thread  text,
  decided_at         timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, proposal_id),
  UNIQUE (root_thread_id, number),
  UNIQUE (root_thread_id, operation_id)
);

-- One row per applied commit, so a retried merge returns what the first one did.
CREATE TABLE env_commits (
  root_thread_id text NOT NULL,
  operation_id   text NOT NULL,
  fork_number    integer,
  task_index     integer,
  commit_id      text NOT NULL,
  result         jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, operation_id)
);

-- Every write refused because its thread's epoch had moved on (a reclaimed turn), whatever it tried to write:
-- env data, a transcript message, a question, a delegation. `baton events` reads it.
CREATE TABLE refused_writes (
  seq            bigserial PRIMARY KEY,
  root_thread_id text NOT NULL,
  thread_id      text NOT NULL,
  agent          text NOT NULL,
  kind           text NOT NULL CHECK (kind IN ('env', 'transcript', 'question', 'delegation', 'fork', 'tool')),
  operation_id   text NOT NULL,
  write_epoch    integer NOT NULL,
  current_epoch  integer NOT NULL,
  detail         text,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refused_writes_root_idx ON refused_writes (root_thread_id, seq);
