-- Env writes no longer take turns per root. Writers hold the root's lock in SHARED mode through commit (they run and
-- flush together); readers of the event log take it EXCLUSIVE for the moment of their read, which waits for the
-- writers in flight. A sequence number is drawn under the shared lock, so every number a reader can miss was drawn by
-- a writer that is still running; such a writer holds the lock the reader waits for. Reading `seq > since` in order
-- therefore never skips an event that commits late: seq order is commit order as far as any reader can tell.

-- The highest version a key ever had, read from one index probe (a key created again after a delete continues its
-- versions). Refusals carry the version they saw, so only changes count.
DROP INDEX env_events_key_idx;
CREATE INDEX env_events_key_version_idx ON env_events (root_thread_id, scope, key, version)
  WHERE action IN ('stored', 'updated', 'deleted');

-- The advisory lock key of a root's env data; writers take it shared, log readers exclusive.
CREATE FUNCTION env_root_lock_key(root text) RETURNS bigint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN hashtextextended('env:' || root, 0);

-- Events of a root after `since`, in order, as they can be read without skipping one that commits later: the lock
-- waits for the writers in flight and keeps new ones from drawing a number until the read is done. Volatile, so the
-- query after the lock sees what those writers committed (READ COMMITTED takes a snapshot per statement).
CREATE FUNCTION env_events_after(root text, since bigint, max_rows integer) RETURNS SETOF env_events
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(env_root_lock_key(root));
  RETURN QUERY SELECT * FROM env_events WHERE root_thread_id = root AND seq > since ORDER BY seq LIMIT max_rows;
END
$$;

-- The common write in one round trip: replace the value of an existing entry of the writer's own scope (`store` of
-- a key it holds; `update` with a value, and with an expected version for compare-and-set), log the event, and say
-- whether that was it. Each statement of the function reads what committed before it (as above).
--   written:  done; `seq` and `version` are the event's.
--   conflict: the entry is at `version`, not `expected`; nothing was written, and nothing that needs a flush was
--             taken (the thread's row is locked only after the entry's update succeeded).
--   general:  anything else (a stale or unknown thread, a missing entry, an operation id seen before, a changed
--             description only): the caller runs its full transaction, which knows what to say and log.
-- The fence: the thread's row is locked in share mode and its epoch checked after the entry is updated; an epoch bump
-- committed in between fails the check, and the statement is rolled back with SQLSTATE BTN01 (then: general). The
-- operation id's unique constraint fails the event insert of an operation seen before (then: general).
CREATE FUNCTION env_replace(
  p_thread text, p_root text, p_epoch integer, p_key text, p_operation_id text, p_action text, p_value jsonb,
  p_value_size integer, p_agent text, p_description text, p_type text, p_tags text[], p_expected integer
) RETURNS TABLE (outcome text, seq bigint, version integer)
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_scope text;
  v_task text;
  v_version integer;
  v_description text;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(env_root_lock_key(p_root));
  SELECT COALESCE(t.env_scopes[1], ''), t.fork_task INTO v_scope, v_task
    FROM threads t
   WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
     AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root);
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'general', NULL::bigint, NULL::integer;
    RETURN;
  END IF;
  UPDATE env_data e
     SET short_description = COALESCE(p_description, e.short_description),
         type = CASE WHEN p_action = 'stored' THEN p_type ELSE e.type END,
         tags = CASE WHEN p_action = 'stored' THEN p_tags ELSE e.tags END,
         value = p_value, stored_by_agent = p_agent, stored_by_thread = p_thread, stored_by_task = v_task,
         version = e.version + 1, updated_at = now()
   WHERE e.root_thread_id = p_root AND e.scope = v_scope AND e.key = p_key
     AND (p_expected IS NULL OR e.version = p_expected)
  RETURNING e.version, e.short_description INTO v_version, v_description;
  IF NOT FOUND THEN
    IF p_expected IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM env_events ev WHERE ev.root_thread_id = p_root AND ev.operation_id = p_operation_id)
    THEN
      SELECT e.version INTO v_version FROM env_data e
       WHERE e.root_thread_id = p_root AND e.scope = v_scope AND e.key = p_key;
      IF v_version IS NOT NULL AND v_version <> p_expected THEN
        RETURN QUERY SELECT 'conflict', NULL::bigint, v_version;
        RETURN;
      END IF;
    END IF;
    RETURN QUERY SELECT 'general', NULL::bigint, NULL::integer;
    RETURN;
  END IF;
  PERFORM 1 FROM threads t WHERE t.thread_id = p_thread AND t.epoch = p_epoch FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'thread % left epoch % during the write', p_thread, p_epoch USING ERRCODE = 'BTN01';
  END IF;
  RETURN QUERY
    INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                  operation_id, version, value_size, value, short_description)
    VALUES (p_root, v_scope, p_key, p_action, p_agent, p_thread, v_task, p_operation_id, v_version, p_value_size,
            p_value, v_description)
    RETURNING 'written'::text, ev.seq, ev.version;
END
$$;
