-- An entry's look-up by its whole key, whatever plan a session keeps.
--
-- `env_replace` found the writer's entry by joining its thread: `e.scope = COALESCE(t.env_scopes[1], '')`. Which side
-- of that join comes first is the planner's choice, and PL/pgSQL keeps a generic plan for the session after a few
-- calls. A session whose plan was made while the tables were small (a new database, a root's first writes) could keep
-- one that reads the entries first, by root and key alone: the scope, the middle column of the entries' index, is
-- then unknown, and the probe reads every index entry of the root (Postgres before 18 cannot skip a column). Every
-- write of that session grew slower as its root grew: on Postgres 15, a put into a root of 16,000 keys took 1.3 ms
-- instead of 0.45 ms, until the connection closed. The writer's scope is now a value of its own (an InitPlan read
-- from the thread by its primary key), so the entry is always found by root, scope and key, in whichever order the
-- plan joins: in the update, and in the conflict look-ups of `env_replace` and `env_replace_many`. The thread is
-- still joined as before for the epoch fence. Everything else is as in migration 019.

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
        RETURNING 'written'::text, ev.seq, ev.version, NULL::jsonb;
      RETURN;
    END IF;
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

CREATE OR REPLACE FUNCTION env_replace_many(
  p_thread text[], p_root text[], p_epoch integer[], p_key text[], p_operation_id text[], p_action text[],
  p_value jsonb[], p_value_size integer[], p_agent text[], p_description text[], p_type text[], p_tags jsonb[],
  p_expected integer[]
) RETURNS TABLE (item integer, outcome text, seq bigint, version integer, current_value jsonb)
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
  v_conflicts integer[] := '{}';
  v_version integer;
  v_value jsonb;
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
  RETURN QUERY SELECT u.item, 'written'::text, u.seq, u.version, NULL::jsonb
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
      SELECT c.n, 'written'::text, l.seq, l.version, NULL::jsonb
        FROM logged l JOIN unnest(v_new) AS c(n) ON p_operation_id[c.n] = l.operation_id;
  END IF;
  -- The version conflicts among the writes left, first: an update at an expected version its entry is not at, by a
  -- thread at its epoch, whose operation did not write before. Each is one look-up of the entry by its key (the
  -- statement `env_replace` ends with for a conflict), answered with the entry's version and value as it would be
  -- alone; nothing is written for it. Answering them before the other writes left run below is one order the
  -- overlapping writes could have had alone.
  FOR i IN 1 .. cardinality(p_key) LOOP
    CONTINUE WHEN p_expected[i] IS NULL OR i = ANY (COALESCE(v_items, '{}')) OR i = ANY (COALESCE(v_new, '{}'));
    SELECT e.version, e.value INTO v_version, v_value
      FROM threads t JOIN env_data e ON e.root_thread_id = p_root[i] AND e.key = p_key[i]
                                    AND e.scope = (SELECT COALESCE(s.env_scopes[1], '') FROM threads s
                                                    WHERE s.thread_id = p_thread[i])
     WHERE t.thread_id = p_thread[i] AND t.root_thread_id = p_root[i] AND t.epoch = p_epoch[i]
       AND EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = p_root[i])
       AND NOT EXISTS (SELECT 1 FROM env_events ev WHERE ev.root_thread_id = p_root[i] AND ev.operation_id = p_operation_id[i]);
    IF v_version IS NOT NULL AND v_version <> p_expected[i] THEN
      v_conflicts := v_conflicts || i;
      RETURN QUERY SELECT i, 'conflict'::text, NULL::bigint, v_version, v_value;
    END IF;
  END LOOP;
  -- Every other write, one after another, in the batch's order.
  FOR i IN 1 .. cardinality(p_key) LOOP
    CONTINUE WHEN i = ANY (COALESCE(v_items, '{}')) OR i = ANY (COALESCE(v_new, '{}'))
               OR i = ANY (v_conflicts);
    RETURN QUERY
      SELECT i, r.outcome, r.seq, r.version, r.current_value
        FROM env_replace(p_thread[i], p_root[i], p_epoch[i], p_key[i], p_operation_id[i], p_action[i], p_value[i],
                         p_value_size[i], p_agent[i], p_description[i], p_type[i],
                         ARRAY(SELECT jsonb_array_elements_text(p_tags[i])), p_expected[i]) r;
  END LOOP;
END
$$;
