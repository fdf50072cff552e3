-- The epoch fence of the common env write (`env_replace`) without a lock on the thread's row. Locking the row
-- (FOR SHARE) writes a WAL record and dirties the page the threads of a root share, while the entry's row lock is
-- held; it was the largest cost of a write after the commit itself. Now a writer holds an advisory lock of its thread
-- in SHARED mode (memory only) from before it reads the epoch until its commit, and every change of a thread's epoch
-- (and every delete of a thread) takes that lock EXCLUSIVE first, through the triggers below, so no statement can
-- move an epoch without it:
--   * a bump that comes first makes the writer wait until it commits; the writer's next statement then reads the
--     new epoch and refuses the write;
--   * a writer that comes first makes the bump wait until the write is committed (it was made under the old epoch).
-- Either way a write never lands under an epoch that has moved on. The full transaction of `EnvStore` (and every
-- other fenced write) still locks the thread's row; a bump locks that row before its trigger runs, and the writers
-- holding the advisory lock never wait for a thread's row, so the two kinds cannot deadlock.

-- The advisory lock key of a thread's epoch; writers take it shared, epoch changes exclusive.
CREATE FUNCTION thread_epoch_lock_key(thread text) RETURNS bigint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN hashtextextended('thread-epoch:' || thread, 0);

CREATE FUNCTION threads_epoch_change_waits_for_writers() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(thread_epoch_lock_key(OLD.thread_id));
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER threads_epoch_change_waits_for_writers BEFORE UPDATE ON threads
  FOR EACH ROW WHEN (NEW.epoch IS DISTINCT FROM OLD.epoch)
  EXECUTE FUNCTION threads_epoch_change_waits_for_writers();
CREATE TRIGGER threads_delete_waits_for_writers BEFORE DELETE ON threads
  FOR EACH ROW EXECUTE FUNCTION threads_epoch_change_waits_for_writers();

-- As in migration 008 (outcomes `written`, `conflict`, `general`), with the fence above, and in two statements: the
-- locks, then one statement that reads the thread at its epoch, updates the entry (at the expected version) and logs
-- the event. It runs after the locks were granted, so its snapshot sees every epoch change that committed before.
-- Only when it wrote nothing does the function look into why (a version conflict, or anything else: `general`).
CREATE OR REPLACE FUNCTION env_replace(
  p_thread text, p_root text, p_epoch integer, p_key text, p_operation_id text, p_action text, p_value jsonb,
  p_value_size integer, p_agent text, p_description text, p_type text, p_tags text[], p_expected integer
) RETURNS TABLE (outcome text, seq bigint, version integer)
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_version integer;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(env_root_lock_key(p_root)),
          pg_advisory_xact_lock_shared(thread_epoch_lock_key(p_thread));
  RETURN QUERY
    WITH entry AS (
      UPDATE env_data e
         SET short_description = COALESCE(p_description, e.short_description),
             type = CASE WHEN p_action = 'stored' THEN p_type ELSE e.type END,
             tags = CASE WHEN p_action = 'stored' THEN p_tags ELSE e.tags END,
             value = p_value, stored_by_agent = p_agent, stored_by_thread = p_thread, stored_by_task = t.fork_task,
             version = e.version + 1, updated_at = now()
        FROM threads t
       WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
         AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root)
         AND e.root_thread_id = p_root AND e.scope = COALESCE(t.env_scopes[1], '') AND e.key = p_key
         AND (p_expected IS NULL OR e.version = p_expected)
      RETURNING e.scope, e.stored_by_task, e.version, e.short_description)
    INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                  operation_id, version, value_size, value, short_description)
    SELECT p_root, entry.scope, p_key, p_action, p_agent, p_thread, entry.stored_by_task, p_operation_id,
           entry.version, p_value_size, p_value, entry.short_description
      FROM entry
    RETURNING 'written'::text, ev.seq, ev.version;
  IF FOUND THEN
    RETURN;
  END IF;
  -- Nothing was written. A conflict: the writer's entry is at another version than expected, and this operation
  -- did not write before (then its retry is answered by the caller's full transaction, as everything else is).
  IF p_expected IS NOT NULL THEN
    SELECT e.version INTO v_version
      FROM threads t JOIN env_data e ON e.root_thread_id = p_root AND e.scope = COALESCE(t.env_scopes[1], '')
                                    AND e.key = p_key
     WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
       AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root)
       AND NOT EXISTS (SELECT 1 FROM env_events ev WHERE ev.root_thread_id = p_root AND ev.operation_id = p_operation_id);
    IF v_version IS NOT NULL AND v_version <> p_expected THEN
      RETURN QUERY SELECT 'conflict', NULL::bigint, v_version;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY SELECT 'general', NULL::bigint, NULL::integer;
END
$$;
