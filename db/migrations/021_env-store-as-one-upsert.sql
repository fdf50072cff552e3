-- A store as one upsert.
--
-- `env_replace` stored a key in up to four statements: an update of the writer's entry joined to its thread; when the
-- scope held no such entry, an insert of it; then the version look-up of a key created again after a delete; then the
-- event. A store now goes straight to the insert, joined to the thread as before, with `ON CONFLICT DO UPDATE`
-- replacing an entry the scope holds (the statement a raw upsert is, with the fence in its `SELECT`), and the same
-- statement logs a replacement's event (a replaced entry is at version 2 at least). An entry it created (version 1)
-- gets its version and its event in one more statement, of its own as in migration 016: its snapshot sees every writer
-- of the key that committed before (the insert waited for a delete in flight), so a key created again after a delete
-- continues its versions.
--
-- Everything a caller sees is as before: the same locks taken first, the same fence (the thread at its epoch, in its
-- root, the root existing), the same outcomes. A writer that created the key in the meantime now has its entry
-- replaced here, where the caller's full transaction replaced it. Updates are as in migration 020; `env_replace_many`
-- already stored by an upsert (migration 018). `npm run bench -- env-data` before and after: README Performance.

CREATE OR REPLACE FUNCTION env_replace(
  p_thread text, p_root text, p_epoch integer, p_key text, p_operation_id text, p_action text, p_value jsonb,
  p_value_size integer, p_agent text, p_description text, p_type text, p_tags text[], p_expected integer
) RETURNS TABLE (outcome text, seq bigint, version integer, current_value jsonb)
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_version integer;
  v_value jsonb;
  v_scope text;
  v_task text;
  v_seq bigint;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(env_root_lock_key(p_root)),
          pg_advisory_xact_lock_shared(thread_epoch_lock_key(p_thread));
  IF p_action = 'stored' AND p_expected IS NULL AND p_description IS NOT NULL THEN
    -- A store: the entry of the writer's own scope created at version 1, or replaced, and a replacement's event.
    WITH entry AS (
      INSERT INTO env_data AS e (root_thread_id, scope, key, short_description, value, type, tags, stored_by_agent,
                                 stored_by_thread, stored_by_task, version)
      SELECT p_root, COALESCE(t.env_scopes[1], ''), p_key, p_description, p_value, p_type, p_tags, p_agent, p_thread,
             t.fork_task, 1
        FROM threads t
       WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
         AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root)
      ON CONFLICT (root_thread_id, scope, key) DO UPDATE
         SET short_description = EXCLUDED.short_description, value = EXCLUDED.value, type = EXCLUDED.type,
             tags = EXCLUDED.tags, stored_by_agent = EXCLUDED.stored_by_agent,
             stored_by_thread = EXCLUDED.stored_by_thread, stored_by_task = EXCLUDED.stored_by_task,
             version = e.version + 1, updated_at = now()
      RETURNING e.scope, e.stored_by_task, e.version),
    logged AS (
      INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                    operation_id, version, value_size, value, short_description)
      SELECT p_root, entry.scope, p_key, 'stored', p_agent, p_thread, entry.stored_by_task, p_operation_id,
             entry.version, p_value_size, p_value, p_description
        FROM entry
       WHERE entry.version > 1
      RETURNING ev.seq)
    SELECT entry.scope, entry.stored_by_task, entry.version, logged.seq INTO v_scope, v_task, v_version, v_seq
      FROM entry LEFT JOIN logged ON true;
    IF v_seq IS NOT NULL THEN
      RETURN QUERY SELECT 'written'::text, v_seq, v_version, NULL::jsonb;
      RETURN;
    END IF;
    IF v_scope IS NOT NULL THEN
      -- Created. In a statement of its own, whose snapshot sees every writer of the key that committed before (the
      -- insert waited for a delete in flight): a key created again after a delete continues its versions from the
      -- highest its events reached, and the event is logged at that version.
      RETURN QUERY
        WITH last AS (
          SELECT MAX(ev.version) AS version
            FROM env_events ev
           WHERE ev.root_thread_id = p_root AND ev.scope = v_scope AND ev.key = p_key
             AND ev.action IN ('stored', 'updated', 'deleted')),
        continued AS (
          UPDATE env_data e SET version = last.version + 1
            FROM last
           WHERE last.version IS NOT NULL
             AND e.root_thread_id = p_root AND e.scope = v_scope AND e.key = p_key
          RETURNING e.version)
        INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                      operation_id, version, value_size, value, short_description)
        VALUES (p_root, v_scope, p_key, 'stored', p_agent, p_thread, v_task, p_operation_id,
                COALESCE((SELECT continued.version FROM continued), 1), p_value_size, p_value, p_description)
        RETURNING 'written'::text, ev.seq, ev.version, NULL::jsonb;
      RETURN;
    END IF;
    -- Nothing was written: the thread is not at its epoch in that root, or the root is gone.
    RETURN QUERY SELECT 'general', NULL::bigint, NULL::integer, NULL::jsonb;
    RETURN;
  END IF;
  -- An update (or a store at an expected version): the writer's entry replaced, at that version when one is given.
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
         AND e.root_thread_id = p_root AND e.key = p_key
         AND e.scope = (SELECT COALESCE(s.env_scopes[1], '') FROM threads s WHERE s.thread_id = p_thread)
         AND (p_expected IS NULL OR e.version = p_expected)
      RETURNING e.scope, e.stored_by_task, e.version, e.short_description)
    INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                  operation_id, version, value_size, value, short_description)
    SELECT p_root, entry.scope, p_key, p_action, p_agent, p_thread, entry.stored_by_task, p_operation_id,
           entry.version, p_value_size, p_value, entry.short_description
      FROM entry
    RETURNING 'written'::text, ev.seq, ev.version, NULL::jsonb;
  IF FOUND THEN
    RETURN;
  END IF;
  -- Nothing was written. A conflict: the writer's entry is at another version than expected, and this operation
  -- did not write before (then its retry is answered by the caller's full transaction, as everything else is).
  IF p_expected IS NOT NULL THEN
    SELECT e.version, e.value INTO v_version, v_value
      FROM threads t JOIN env_data e ON e.root_thread_id = p_root AND e.key = p_key
                                    AND e.scope = (SELECT COALESCE(s.env_scopes[1], '') FROM threads s
                                                    WHERE s.thread_id = p_thread)
     WHERE t.thread_id = p_thread AND t.root_thread_id = p_root AND t.epoch = p_epoch
       AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root)
       AND NOT EXISTS (SELECT 1 FROM env_events ev WHERE ev.root_thread_id = p_root AND ev.operation_id = p_operation_id);
    IF v_version IS NOT NULL AND v_version <> p_expected THEN
      RETURN QUERY SELECT 'conflict', NULL::bigint, v_version, v_value;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY SELECT 'general', NULL::bigint, NULL::integer, NULL::jsonb;
END
$$;
