-- Approvals: a tool call that needs a person's approval before it runs (a tool's `needsApproval`, an agent's
-- `approval` list). Keyed by root thread like questions, so one list shows every pending approval of a delegation
-- tree, and the turn waiting for it is found by `workflow_id`. The call's arguments are copied from the stored reply,
-- so what a person approves is exactly what runs.
CREATE TABLE approvals (
  root_thread_id text NOT NULL,
  approval_id    text NOT NULL,
  number         integer NOT NULL,
  thread_id      text NOT NULL REFERENCES threads (thread_id),
  agent          text NOT NULL,
  workflow_id    text NOT NULL,
  operation_id   text NOT NULL,
  message_seq    integer NOT NULL,
  tool_call_id   text NOT NULL,
  tool           text NOT NULL,
  arguments      text NOT NULL,
  status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
  reason         text,
  decided_by     text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz,
  decided_at     timestamptz,
  PRIMARY KEY (root_thread_id, approval_id),
  UNIQUE (root_thread_id, number),
  UNIQUE (root_thread_id, operation_id)
);
CREATE INDEX approvals_pending_idx ON approvals (root_thread_id) WHERE status = 'pending';

-- A refused write of a reclaimed turn may be the opening of an approval.
ALTER TABLE refused_writes DROP CONSTRAINT refused_writes_kind_check;
ALTER TABLE refused_writes ADD CONSTRAINT refused_writes_kind_check
  CHECK (kind IN ('env', 'transcript', 'question', 'delegation', 'fork', 'tool', 'approval'));
