-- A transcript message appended in one round trip: the thread's row locked at the writer's epoch, the message an
-- earlier attempt of the operation stored handed back if there is one, else the message inserted at the thread's next
-- sequence number, in one function call instead of BEGIN, three statements and COMMIT. Each statement of a plpgsql
-- function takes a fresh snapshot (READ COMMITTED), so the sequence number read after the lock sees every append to
-- the thread that committed before it, as the transaction's statements did. The outcome says which happened:
-- 'inserted', 'existing' (its thread may be another one: the caller refuses that), 'stale' with the thread's current
-- epoch, or 'no_thread'.
CREATE FUNCTION append_transcript_message(
  p_root text, p_thread text, p_epoch integer, p_operation_id text, p_role text, p_agent text, p_content text,
  p_tool_calls jsonb, p_tool_call_id text, p_usage jsonb, p_provider text, p_model text)
RETURNS TABLE (outcome text, current_epoch integer, message transcript_messages)
LANGUAGE plpgsql AS $$
DECLARE
  v_epoch integer;
  v_message transcript_messages;
BEGIN
  SELECT t.epoch INTO v_epoch FROM threads t WHERE t.thread_id = p_thread FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'no_thread'::text, NULL::integer, NULL::transcript_messages;
    RETURN;
  END IF;
  -- The epoch first: a reclaimed turn is refused even for an operation it had already written.
  IF v_epoch <> p_epoch THEN
    RETURN QUERY SELECT 'stale'::text, v_epoch, NULL::transcript_messages;
    RETURN;
  END IF;
  SELECT m.* INTO v_message FROM transcript_messages m
   WHERE m.root_thread_id = p_root AND m.operation_id = p_operation_id;
  IF FOUND THEN
    RETURN QUERY SELECT 'existing'::text, v_epoch, v_message;
    RETURN;
  END IF;
  INSERT INTO transcript_messages AS m (root_thread_id, thread_id, seq, role, agent, content, tool_calls, tool_call_id,
                                        usage, provider, model, operation_id)
  SELECT p_root, p_thread, COALESCE(MAX(x.seq), 0) + 1, p_role, p_agent, p_content, p_tool_calls, p_tool_call_id,
         p_usage, p_provider, p_model, p_operation_id
    FROM transcript_messages x WHERE x.thread_id = p_thread
  RETURNING m.* INTO v_message;
  RETURN QUERY SELECT 'inserted'::text, v_epoch, v_message;
END
$$;
