-- Agent definitions by content hash. A turn resolves its agent once and keeps that version for all its model calls,
-- so a reloaded agent file changes new turns only, even across worker restarts.
CREATE TABLE agent_versions (
  version    text PRIMARY KEY,
  name       text NOT NULL,
  definition jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Questions agents ask humans (ask_human). Numbered per root thread (q1, q2, …) so people can type the id.
-- `workflow_id` is the turn waiting for the answer; the answer is delivered to it as an Update.
CREATE TABLE questions (
  root_thread_id text NOT NULL,
  question_id    text NOT NULL,
  number         integer NOT NULL,
  thread_id      text NOT NULL REFERENCES threads (thread_id),
  agent          text NOT NULL,
  workflow_id    text NOT NULL,
  tool_call_id   text NOT NULL,
  question       text NOT NULL,
  status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'answered', 'expired')),
  answer         text,
  operation_id   text NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz,
  closed_at      timestamptz,
  PRIMARY KEY (root_thread_id, question_id),
  UNIQUE (root_thread_id, number)
);
CREATE INDEX questions_open_idx ON questions (root_thread_id) WHERE status = 'open';
