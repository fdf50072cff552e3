-- Concurrent one-call writes of one process in one round trip. When several writers of an `EnvStore` (the activities
-- of a worker) write at once, the store sends the writes that queued while its previous call ran as one call of
-- `env_replace_many`: one transaction, one commit and one WAL flush for all of them, instead of one each. The machine
-- spends about half the time per write that way (8 writes a call against one statement each, measured on this
-- project's 2-core machine; README Performance), which is what a busy store runs out of.
--
-- Each write keeps what `env_replace` (migrations 009 and 016) gives it alone:
--   * the root's lock and the writing thread's epoch lock, both in shared mode, are taken for every write of the
--     batch before any statement reads, so each statement's snapshot comes after them and sees an epoch change that
--     committed before (the fence); they are held to the commit, as a single write holds them;
--   * stores and updates, in one statement: the first write of each entry of its writer's own scope (a store creates
--     the entry at version 1 or replaces it; an update replaces it, at the expected version when one is given), each
--     logged with its operation id, but for the entries created;
--   * those then go on from the versions of a key created again after a delete (in a statement of their own, whose
--     snapshot sees every writer of the key that committed before, as in `env_replace`), and are logged last;
--   * every other write (a version conflict, a stale epoch, a second write of an entry in the batch, an update of a
--     missing entry, anything else) is then run by `env_replace` itself, in the same transaction, one after another
--     in the batch's order, and answers as it would alone after the writes before it;
--   * an error (a repeated operation id, a deadlock) rolls the whole call back, and the store runs each write of the
--     batch alone again: each then gets the answer it would have had.
-- The writes of a batch overlapped in the store (no caller has two in one batch), so any order of them is one they
-- could have had alone; their events are logged in the order they took effect.
-- Returns one row per write: its position in the arrays (from 1) and what `env_replace` returns.
CREATE FUNCTION env_replace_many(
  p_thread text[], p_root text[], p_epoch integer[], p_key text[], p_operation_id text[], p_action text[],
  p_value jsonb[], p_value_size integer[], p_agent text[], p_description text[], p_type text[], p_tags jsonb[],
  p_expected integer[]
) RETURNS TABLE (item integer, outcome text, seq bigint, version integer)
  LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
  v_items integer[];
  v_seqs bigint[];
  v_versions integer[];
  v_new integer[];
  v_new_roots text[];
  v_new_scopes text[];
  v_new_keys text[];
  i integer;
BEGIN
  -- In a fixed order, as every writer takes them.
  PERFORM pg_advisory_xact_lock_shared(env_root_lock_key(r)) FROM (SELECT DISTINCT r FROM unnest(p_root) r ORDER BY r) x;
  PERFORM pg_advisory_xact_lock_shared(thread_epoch_lock_key(t))
     FROM (SELECT DISTINCT t FROM unnest(p_thread) t ORDER BY t) x;
  WITH item AS (
    SELECT *
      FROM unnest(p_thread, p_root, p_epoch, p_key, p_operation_id, p_action, p_value, p_value_size, p_agent,
                  p_description, p_type, p_tags, p_expected)
           WITH ORDINALITY AS i(thread, root, epoch, key, op, action, value, size, agent, description, type, tags,
                                expected, n)),
  -- The first write of each entry in the batch (its root, scope and key): a later write of the same entry runs after it,
  -- below. Materialized, so each write's scope is known before its entry is looked up: the look-up then uses the whole
  -- key of the entries' index (root, scope, key), not only its root, of which a growing root has many entries.
  target AS MATERIALIZED (
    SELECT DISTINCT ON (i.root, scope, i.key) i.*, COALESCE(t.env_scopes[1], '') AS scope, t.fork_task
      FROM item i JOIN threads t ON t.thread_id = i.thread AND t.root_thread_id = i.root AND t.epoch = i.epoch
     WHERE EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = i.root)
     ORDER BY i.root, scope, i.key, i.n),
  -- Stores: the entry created at version 1, or replaced.
  stored AS (
    INSERT INTO env_data AS e (root_thread_id, scope, key, short_description, value, type, tags, stored_by_agent,
                               stored_by_thread, stored_by_task, version)
    SELECT root, scope, key, description, value, type, ARRAY(SELECT jsonb_array_elements_text(tags)), agent, thread,
           fork_task, 1
      FROM target
     WHERE action = 'stored' AND expected IS NULL AND description IS NOT NULL
    ON CONFLICT (root_thread_id, scope, key) DO UPDATE
       SET short_description = EXCLUDED.short_description, value = EXCLUDED.value, type = EXCLUDED.type,
           tags = EXCLUDED.tags, stored_by_agent = EXCLUDED.stored_by_agent,
           stored_by_thread = EXCLUDED.stored_by_thread, stored_by_task = EXCLUDED.stored_by_task,
           version = e.version + 1, updated_at = now()
    RETURNING e.root_thread_id AS root, e.scope, e.key, e.version, e.stored_by_task AS task,
              e.short_description AS description),
  -- Updates: an entry of the writer's scope replaced, at the expected version when one is given.
  updated AS (
    UPDATE env_data e
       SET short_description = COALESCE(x.description, e.short_description), value = x.value,
           stored_by_agent = x.agent, stored_by_thread = x.thread, stored_by_task = x.fork_task,
           version = e.version + 1, updated_at = now()
      FROM target x
     WHERE x.action = 'updated' AND e.root_thread_id = x.root AND e.scope = x.scope AND e.key = x.key
       AND (x.expected IS NULL OR e.version = x.expected)
    RETURNING e.root_thread_id AS root, e.scope, e.key, e.version, e.stored_by_task AS task,
              e.short_description AS description),
  written AS (
    SELECT x.n, x.root, x.key, x.action, x.agent, x.thread, x.op, x.size, x.value, w.scope, w.version, w.task,
           w.description
      FROM (SELECT * FROM stored UNION ALL SELECT * FROM updated) w
      JOIN target x ON x.root = w.root AND x.scope = w.scope AND x.key = w.key),
  -- The events of every write but the entries just created (a replaced entry is at version 2 at least): those wait
  -- for their versions below.
  logged AS (
    INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                  operation_id, version, value_size, value, short_description)
    SELECT root, scope, key, action, agent, thread, task, op, version, size, value, description
      FROM written
     WHERE NOT (action = 'stored' AND version = 1)
    RETURNING ev.root_thread_id, ev.operation_id, ev.seq, ev.version)
  SELECT array_agg(w.n::integer) FILTER (WHERE l.seq IS NOT NULL), array_agg(l.seq) FILTER (WHERE l.seq IS NOT NULL),
         array_agg(l.version) FILTER (WHERE l.seq IS NOT NULL),
         array_agg(w.n::integer) FILTER (WHERE l.seq IS NULL), array_agg(w.root) FILTER (WHERE l.seq IS NULL),
         array_agg(w.scope) FILTER (WHERE l.seq IS NULL), array_agg(w.key) FILTER (WHERE l.seq IS NULL)
    INTO v_items, v_seqs, v_versions, v_new, v_new_roots, v_new_scopes, v_new_keys
    FROM written w LEFT JOIN logged l ON l.root_thread_id = w.root AND l.operation_id = w.op;
  RETURN QUERY SELECT u.item, 'written'::text, u.seq, u.version
                 FROM unnest(v_items, v_seqs, v_versions) AS u(item, seq, version);
  IF v_new IS NOT NULL THEN
    -- The entries created: in a statement of their own (its snapshot sees every writer of the key that committed
    -- before), the versions of a key created again after a delete go on from its last one, as in `env_replace` ...
    UPDATE env_data e SET version = last.version + 1
      FROM (SELECT c.root, c.scope, c.key, MAX(ev.version) AS version
              FROM unnest(v_new_roots, v_new_scopes, v_new_keys) AS c(root, scope, key)
              JOIN env_events ev ON ev.root_thread_id = c.root AND ev.scope = c.scope AND ev.key = c.key
                                AND ev.action IN ('stored', 'updated', 'deleted')
             GROUP BY c.root, c.scope, c.key) last
     WHERE e.root_thread_id = last.root AND e.scope = last.scope AND e.key = last.key;
    -- ... and their events, last.
    RETURN QUERY
      WITH logged AS (
        INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                      operation_id, version, value_size, value, short_description)
        SELECT e.root_thread_id, e.scope, e.key, 'stored', p_agent[c.n], p_thread[c.n], e.stored_by_task,
               p_operation_id[c.n], e.version, p_value_size[c.n], e.value, e.short_description
          FROM unnest(v_new, v_new_roots, v_new_scopes, v_new_keys) AS c(n, root, scope, key)
          JOIN env_data e ON e.root_thread_id = c.root AND e.scope = c.scope AND e.key = c.key
        RETURNING ev.operation_id, ev.seq, ev.version)
      SELECT c.n, 'written'::text, l.seq, l.version
        FROM logged l JOIN unnest(v_new) AS c(n) ON p_operation_id[c.n] = l.operation_id;
  END IF;
  -- Every other write, one after another, in the batch's order.
  FOR i IN 1 .. cardinality(p_key) LOOP
    CONTINUE WHEN i = ANY (COALESCE(v_items, '{}')) OR i = ANY (COALESCE(v_new, '{}'));
    RETURN QUERY
      SELECT i, r.outcome, r.seq, r.version
        FROM env_replace(p_thread[i], p_root[i], p_epoch[i], p_key[i], p_operation_id[i], p_action[i], p_value[i],
                         p_value_size[i], p_agent[i], p_description[i], p_type[i],
                         ARRAY(SELECT jsonb_array_elements_text(p_tags[i])), p_expected[i]) r;
  END LOOP;
END
$$;
