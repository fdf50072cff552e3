-- A thread's record opened and marked running, and its turn's message recorded, in one round trip: what
-- open_thread_running (migration 028) and then append_transcript_message (migration 015) do one after the other, for
-- the turn that opens its thread. The message goes under the epoch the record has: the update's row lock holds until
-- the call's transaction ends, so no reclaim comes between the two. Returns that epoch with the append's outcome and
-- message; no epoch and 'no_thread' when no row could be marked (one deleted meanwhile), and then nothing is recorded.
CREATE FUNCTION open_thread_with_message(
  p_thread text, p_root text, p_parent text, p_agent text, p_caller text, p_world text,
  p_operation_id text, p_role text, p_message_agent text, p_content text, p_tool_call_id text)
RETURNS TABLE (opened_epoch integer, outcome text, current_epoch integer, message transcript_messages)
LANGUAGE plpgsql AS $$
DECLARE
  v_epoch integer;
BEGIN
  v_epoch := open_thread_running(p_thread, p_root, p_parent, p_agent, p_caller, p_world);
  IF v_epoch IS NULL THEN
    RETURN QUERY SELECT NULL::integer, 'no_thread'::text, NULL::integer, NULL::transcript_messages;
    RETURN;
  END IF;
  RETURN QUERY SELECT v_epoch, r.outcome, r.current_epoch, r.message
    FROM append_transcript_message(p_root, p_thread, v_epoch, p_operation_id, p_role, p_message_agent, p_content,
                                   NULL, p_tool_call_id, NULL, NULL, NULL) r;
END
$$;
