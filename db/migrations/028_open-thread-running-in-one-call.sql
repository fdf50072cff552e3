-- A thread's record opened and marked running in one round trip, for the turn that opens it (a root thread's first
-- turn, whose beginning opens the record): what ensureThread's insert and markThread's 'running' update do one after
-- the other, in one function call. The insert leaves a record that exists alone; the update then marks it running
-- (started now, no error, not finished), so `run_events_thread` records the turn's start as it does for every other
-- turn. Each statement of a plpgsql function takes a fresh snapshot, so the update sees the row the insert made or
-- found. Returns the thread's epoch, or NULL when no row could be marked (one deleted meanwhile).
CREATE FUNCTION open_thread_running(
  p_thread text, p_root text, p_parent text, p_agent text, p_caller text, p_world text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_epoch integer;
BEGIN
  INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, world)
  VALUES (p_thread, p_root, p_parent, p_agent, p_caller, p_world)
  ON CONFLICT (thread_id) DO NOTHING;
  UPDATE threads t
     SET status = 'running', last_error = NULL, updated_at = now(), started_at = now(), finished_at = NULL
   WHERE t.thread_id = p_thread
  RETURNING t.epoch INTO v_epoch;
  RETURN v_epoch;
END
$$;
