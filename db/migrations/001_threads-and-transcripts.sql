-- Threads: one agent's conversation. `epoch` fences writes: reclaiming a turn bumps it, and a write issued
-- under an older epoch is refused. Every table is keyed by root_thread_id first so it can be partitioned by it.
CREATE TABLE threads (
  thread_id        text PRIMARY KEY,
  root_thread_id   text NOT NULL,
  parent_thread_id text REFERENCES threads (thread_id),
  agent            text NOT NULL,
  caller           text,
  epoch            integer NOT NULL DEFAULT 0,
  status           text NOT NULL DEFAULT 'active',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX threads_root_idx ON threads (root_thread_id);

-- Transcript messages in OpenAI chat shape. `operation_id` is the workflow-computed id of the write that stored
-- the message: a retried activity finds its first result instead of writing twice.
CREATE TABLE transcript_messages (
  root_thread_id text NOT NULL,
  thread_id      text NOT NULL REFERENCES threads (thread_id),
  seq            integer NOT NULL,
  role           text NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
  agent          text NOT NULL,
  content        text,
  tool_calls     jsonb,
  tool_call_id   text,
  usage          jsonb,
  operation_id   text NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, seq)
);
CREATE INDEX transcript_messages_root_idx ON transcript_messages (root_thread_id);
