-- The run feed: every durable step of a root thread's tree as an event, in order, numbered. Each event is written by
-- a trigger on the row that makes its step durable (a transcript message, a thread's status, a delegation, a fork
-- and its tasks, a question, an approval, a refused write), in that row's transaction, so an event exists exactly
-- when its step does. Env-data events stay in env_events and are read with these (`run_feed_after`).
--
-- Numbers come from env_events' own sequence, under the same per-root lock as env writes (migration 008): a writer
-- takes the root's lock in SHARED mode before drawing its number and holds it through commit; a reader takes it
-- EXCLUSIVE for the moment of its read. Every number a reader can miss was drawn by a writer still running, which
-- holds the lock the reader waits for, so reading `seq > since` in order never skips an event that commits late, and
-- the two logs merge into one order. Listeners are told after commit (on the root's own channel, sent by the activity that
-- wrote), never inside the transaction: Postgres serialises the commits of transactions that NOTIFY.
CREATE TABLE run_events (
  seq            bigint PRIMARY KEY,
  root_thread_id text NOT NULL,
  thread_id      text NOT NULL,
  agent          text,
  kind           text NOT NULL,
  data           jsonb NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_events_root_seq_idx ON run_events (root_thread_id, seq);

-- Appends one event under the root's shared lock (the number is drawn after the lock is held).
CREATE FUNCTION run_event(p_root text, p_thread text, p_agent text, p_kind text, p_data jsonb) RETURNS bigint
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_seq bigint;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(env_root_lock_key(p_root));
  v_seq := nextval(pg_get_serial_sequence('env_events', 'seq'));
  INSERT INTO run_events (seq, root_thread_id, thread_id, agent, kind, data)
    VALUES (v_seq, p_root, p_thread, p_agent, p_kind, jsonb_strip_nulls(p_data));
  RETURN v_seq;
END
$$;

-- An event that is a progress mark, not data (a model call starting): its transaction commits without waiting for the
-- flush (set_config's local setting lasts to the end of the caller's transaction, the statement's own when it runs
-- alone), so a step does not pay a disk write for it. A Postgres crash may lose it, never a stored step.
CREATE FUNCTION run_event_unflushed(p_root text, p_thread text, p_agent text, p_kind text, p_data jsonb) RETURNS bigint
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN run_event(p_root, p_thread, p_agent, p_kind, p_data);
END
$$;

-- Text cut for display: the feed shows what happened; the stored rows keep everything.
CREATE FUNCTION run_event_text(p_text text, p_max integer) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN CASE WHEN length(p_text) > p_max THEN left(p_text, p_max) || '…' ELSE p_text END;

CREATE FUNCTION run_events_from_transcript() RETURNS trigger
  LANGUAGE plpgsql
AS $$
DECLARE
  v_name text;
BEGIN
  IF NEW.role = 'user' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'message',
      jsonb_build_object('content', run_event_text(NEW.content, 4000), 'messageSeq', NEW.seq));
  ELSIF NEW.role = 'assistant' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'assistant_message',
      jsonb_build_object(
        'content', run_event_text(NEW.content, 20000),
        'toolCalls', (SELECT jsonb_agg(jsonb_build_object('id', c->>'id', 'name', c->>'name',
                                                          'arguments', run_event_text(c->>'arguments', 1000)))
                        FROM jsonb_array_elements(COALESCE(NEW.tool_calls, '[]'::jsonb)) c),
        'usage', NEW.usage, 'provider', NEW.provider, 'model', NEW.model,
        'operationId', NEW.operation_id, 'messageSeq', NEW.seq));
  ELSE
    -- The tool's name is in the assistant message that asked for the call (the latest one naming its id).
    SELECT c->>'name' INTO v_name
      FROM transcript_messages m, jsonb_array_elements(m.tool_calls) c
     WHERE m.thread_id = NEW.thread_id AND m.role = 'assistant' AND m.seq < NEW.seq
       AND c->>'id' = NEW.tool_call_id
     ORDER BY m.seq DESC LIMIT 1;
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'tool_result',
      jsonb_build_object('toolCallId', NEW.tool_call_id, 'name', v_name,
                         'content', run_event_text(NEW.content, 1000),
                         'error', COALESCE(NEW.content, '') LIKE 'Error:%', 'messageSeq', NEW.seq));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_transcript AFTER INSERT ON transcript_messages
  FOR EACH ROW EXECUTE FUNCTION run_events_from_transcript();

-- A turn starts when its thread becomes `running` and ends when it leaves it (completed, max_steps, failed,
-- reclaimed).
CREATE FUNCTION run_events_from_thread() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF NEW.status = 'running' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'turn_started',
      jsonb_build_object('parentThread', NEW.parent_thread_id, 'caller', NEW.caller, 'forkTask', NEW.fork_task));
  ELSIF OLD.status = 'running' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'turn_ended',
      jsonb_build_object('status', NEW.status, 'error', run_event_text(NEW.last_error, 1000),
                         'parentThread', NEW.parent_thread_id, 'caller', NEW.caller, 'forkTask', NEW.fork_task));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_thread AFTER UPDATE OF status ON threads
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION run_events_from_thread();

-- A fork task is opened as a delegation too; its own events (fork_task_started/ended) say it, so it is not repeated.
CREATE FUNCTION run_events_from_delegation() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = NEW.thread_id AND t.fork_task IS NOT NULL) THEN
    RETURN NULL;
  END IF;
  PERFORM run_event(NEW.root_thread_id, NEW.parent_thread_id, NEW.caller, 'delegation_started',
    jsonb_build_object('thread', NEW.thread_id, 'agent', NEW.agent, 'number', NEW.number, 'mode', NEW.mode,
                       'workflowId', NEW.workflow_id, 'message', run_event_text(NEW.message, 1000)));
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_delegation AFTER INSERT ON delegations
  FOR EACH ROW EXECUTE FUNCTION run_events_from_delegation();

CREATE FUNCTION run_events_from_fork() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.parent_thread_id, NEW.caller, 'fork_started',
      jsonb_build_object('fork', NEW.number, 'store', NEW.store_mode, 'prefix', NEW.prefix,
                         'maxParallel', NEW.max_parallel, 'deadlineAt', NEW.deadline_at));
  ELSE
    PERFORM run_event(NEW.root_thread_id, NEW.parent_thread_id, NEW.caller, 'fork_ended',
      jsonb_build_object('fork', NEW.number, 'status', NEW.status));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_fork_started AFTER INSERT ON forks
  FOR EACH ROW EXECUTE FUNCTION run_events_from_fork();
CREATE TRIGGER run_events_fork_ended AFTER UPDATE OF status ON forks
  FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status <> 'running') EXECUTE FUNCTION run_events_from_fork();

CREATE FUNCTION run_events_from_fork_task() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'fork_task_started',
      jsonb_build_object('fork', NEW.fork_number, 'task', NEW.task_index, 'workflowId', NEW.workflow_id));
  ELSE
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'fork_task_ended',
      jsonb_build_object('fork', NEW.fork_number, 'task', NEW.task_index, 'status', NEW.status,
                         'error', run_event_text(NEW.error, 1000), 'reclaimed', NEW.reclaimed_at IS NOT NULL));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_fork_task_started AFTER INSERT ON fork_tasks
  FOR EACH ROW EXECUTE FUNCTION run_events_from_fork_task();
CREATE TRIGGER run_events_fork_task_ended AFTER UPDATE OF status ON fork_tasks
  FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending') EXECUTE FUNCTION run_events_from_fork_task();

CREATE FUNCTION run_events_from_question() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'question_asked',
      jsonb_build_object('questionId', NEW.question_id, 'question', run_event_text(NEW.question, 4000),
                         'expiresAt', NEW.expires_at));
  ELSE
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'question_closed',
      jsonb_build_object('questionId', NEW.question_id, 'status', NEW.status,
                         'answer', run_event_text(NEW.answer, 4000), 'reason', NEW.reason));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_question_asked AFTER INSERT ON questions
  FOR EACH ROW EXECUTE FUNCTION run_events_from_question();
CREATE TRIGGER run_events_question_closed AFTER UPDATE OF status ON questions
  FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status <> 'open') EXECUTE FUNCTION run_events_from_question();

CREATE FUNCTION run_events_from_approval() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'approval_requested',
      jsonb_build_object('approvalId', NEW.approval_id, 'tool', NEW.tool, 'toolCallId', NEW.tool_call_id,
                         'arguments', run_event_text(NEW.arguments, 1000), 'expiresAt', NEW.expires_at));
  ELSE
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'approval_decided',
      jsonb_build_object('approvalId', NEW.approval_id, 'tool', NEW.tool, 'status', NEW.status,
                         'decidedBy', NEW.decided_by, 'reason', run_event_text(NEW.reason, 1000)));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_approval_requested AFTER INSERT ON approvals
  FOR EACH ROW EXECUTE FUNCTION run_events_from_approval();
CREATE TRIGGER run_events_approval_decided AFTER UPDATE OF status ON approvals
  FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending') EXECUTE FUNCTION run_events_from_approval();

CREATE FUNCTION run_events_from_refusal() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NEW.agent, 'write_refused',
    jsonb_build_object('write', NEW.kind, 'operationId', NEW.operation_id, 'writeEpoch', NEW.write_epoch,
                       'currentEpoch', NEW.current_epoch, 'detail', run_event_text(NEW.detail, 1000)));
  RETURN NULL;
END
$$;
CREATE TRIGGER run_events_refusal AFTER INSERT ON refused_writes
  FOR EACH ROW EXECUTE FUNCTION run_events_from_refusal();

-- The feed of a root after `since`, in order: its run events and its env-data events, read under the root's lock
-- (see above). Env events keep their own columns in `data`; their value is left out (read it with `baton env`).
CREATE FUNCTION run_feed_after(root text, since bigint, max_rows integer)
  RETURNS TABLE (seq bigint, thread_id text, agent text, kind text, data jsonb, created_at timestamptz)
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(env_root_lock_key(root));
  RETURN QUERY
    SELECT f.seq, f.thread_id, f.agent, f.kind, f.data, f.created_at FROM (
      (SELECT r.seq, r.thread_id, r.agent, r.kind, r.data, r.created_at
         FROM run_events r WHERE r.root_thread_id = root AND r.seq > since ORDER BY r.seq LIMIT max_rows)
      UNION ALL
      (SELECT e.seq, e.actor_thread, e.actor_agent,
              CASE WHEN e.action = 'rejected' THEN 'env_refused' ELSE 'env_written' END,
              jsonb_strip_nulls(jsonb_build_object(
                'key', e.key, 'scope', e.scope, 'action', e.action, 'version', e.version,
                'valueSize', e.value_size, 'reason', run_event_text(e.reason, 1000), 'refusalType', e.refusal_type,
                'operationId', e.operation_id)),
              e.created_at
         FROM env_events e WHERE e.root_thread_id = root AND e.seq > since ORDER BY e.seq LIMIT max_rows)
    ) f ORDER BY f.seq LIMIT max_rows;
END
$$;

-- The highest number of a root's feed so far (0 with none): where a reader that wants only what comes next starts.
-- Taken under the root's lock like a read (a second statement, so its snapshot follows the wait), so no writer still
-- holds a lower number that would commit after it.
CREATE FUNCTION run_feed_last(root text) RETURNS bigint
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(env_root_lock_key(root));
  RETURN COALESCE(GREATEST((SELECT max(r.seq) FROM run_events r WHERE r.root_thread_id = root),
                           (SELECT max(e.seq) FROM env_events e WHERE e.root_thread_id = root)), 0);
END
$$;
