-- A store of a new key in one round trip. Until now `env_replace` wrote only an entry that existed: a store of a key
-- the writer's scope did not hold came back `general`, and the caller ran its full transaction (BEGIN, the fenced
-- thread read, the prior-event look-up, the upsert, the version look-up, the event, COMMIT: eight round trips), so
-- an agent filling a growing root paid that for every key. Now the function inserts the entry itself, under the same
-- locks and the same fence as a replacement:
--   * the insert reads the writer's thread at its epoch (and its root), as the update does, and targets the thread's
--     own scope; it does nothing on a conflict (a key another writer created in the meantime: the caller's full
--     transaction replaces it, as before);
--   * a key created again after a delete continues its versions: the highest version the key's events reached is read
--     in a statement of its own after the insert, so its snapshot sees every writer of the key that committed before
--     (the insert waited for a delete in flight), as `upsertEntry` does in the full transaction;
--   * the event is inserted last; an operation id seen before fails its unique constraint and the whole call is rolled
--     back, and the caller's full transaction answers with the first outcome, as for a replacement.
-- Everything else is as in migration 009.
CREATE OR REPLACE FUNCTION env_replace(
  p_thread text, p_root text, p_epoch integer, p_key text, p_operation_id text, p_action text, p_value jsonb,
  p_value_size integer, p_agent text, p_description text, p_type text, p_tags text[], p_expected integer
) RETURNS TABLE (outcome text, seq bigint, version integer)
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_version integer;
  v_scope text;
  v_task text;
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
  -- A store of a key the writer's scope does not hold: the entry is created here.
  IF p_action = 'stored' AND p_expected IS NULL AND p_description IS NOT NULL THEN
    INSERT INTO env_data AS e (root_thread_id, scope, key, short_description, value, type, tags, stored_by_agent,
                               stored_by_thread, stored_by_task, version)
    SELECT p_root, COALESCE(t.env_scopes[1], ''), p_key, p_description, p_value, p_type, p_tags, p_agent, p_thread,
           t.fork_task, 1
      FROM threads t
     WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
       AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root)
    ON CONFLICT (root_thread_id, scope, key) DO NOTHING
    RETURNING e.scope, e.stored_by_task INTO v_scope, v_task;
    IF FOUND THEN
      SELECT MAX(ev.version) + 1 INTO v_version
        FROM env_events ev
       WHERE ev.root_thread_id = p_root AND ev.scope = v_scope AND ev.key = p_key
         AND ev.action IN ('stored', 'updated', 'deleted');
      IF v_version IS NOT NULL THEN
        UPDATE env_data e SET version = v_version
         WHERE e.root_thread_id = p_root AND e.scope = v_scope AND e.key = p_key;
      END IF;
      RETURN QUERY
        INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                      operation_id, version, value_size, value, short_description)
        VALUES (p_root, v_scope, p_key, 'stored', p_agent, p_thread, v_task, p_operation_id, COALESCE(v_version, 1),
                p_value_size, p_value, p_description)
        RETURNING 'written'::text, ev.seq, ev.version;
      RETURN;
    END IF;
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
