-- Concurrent one-call writes of one process in one round trip. When several writers of an `EnvStore` (the activities
-- of a worker) write at once, the store sends the writes that queued while its previous call ran as one call of
-- `env_replace_many`: one transaction, one commit and one WAL flush for all of them, instead of one each. Postgres
-- spends about half the CPU per write that way (bench/env-data.bench.ts), which is what a busy store runs out of.
--
-- Each write keeps what `env_replace` (migrations 009 and 016) gives it alone:
--   * the root's lock and the writing thread's epoch lock, both in shared mode, are taken for every write of the
--     batch before any statement reads, so each statement's snapshot comes after them and sees an epoch change that
--     committed before (the fence); they are held to the commit, as a single write holds them;
--   * replacements, in one statement: the first write of each entry of its writer's own scope, at the expected
--     version when one is given, replaced and logged with the write's operation id;
--   * new keys, in three: the first store of each key its writer's scope does not hold creates the entry (unless
--     another writer created it meanwhile), then its versions go on after a delete (a statement of its own, whose
--     snapshot sees every writer of the key that committed before, as in `env_replace`), then its event is logged;
--   * every other write (a version conflict, a stale epoch, a second write of an entry in the batch, a key created
--     meanwhile, anything else) is then run by `env_replace` itself, in the same transaction, one after another in
--     the batch's order, and answers as it would alone after the writes before it;
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
  entry AS (
    UPDATE env_data e
       SET short_description = COALESCE(x.description, e.short_description),
           type = CASE WHEN x.action = 'stored' THEN x.type ELSE e.type END,
           tags = CASE WHEN x.action = 'stored' THEN ARRAY(SELECT jsonb_array_elements_text(x.tags)) ELSE e.tags END,
           value = x.value, stored_by_agent = x.agent, stored_by_thread = x.thread, stored_by_task = x.fork_task,
           version = e.version + 1, updated_at = now()
      FROM target x
     WHERE e.root_thread_id = x.root AND e.scope = x.scope AND e.key = x.key
       AND (x.expected IS NULL OR e.version = x.expected)
    RETURNING x.n, x.root, x.key, x.action, x.agent, x.thread, x.op, x.size, x.value, e.scope, e.stored_by_task,
              e.version, e.short_description),
  logged AS (
    INSERT INTO env_events AS ev (root_thread_id, scope, key, action, actor_agent, actor_thread, actor_task,
                                  operation_id, version, value_size, value, short_description)
    SELECT root, scope, key, action, agent, thread, stored_by_task, op, version, size, value, short_description
      FROM entry
    RETURNING ev.root_thread_id, ev.operation_id, ev.seq, ev.version)
  SELECT array_agg(entry.n::integer), array_agg(logged.seq), array_agg(logged.version)
    INTO v_items, v_seqs, v_versions
    FROM logged JOIN entry ON entry.root = logged.root_thread_id AND entry.op = logged.operation_id;
  RETURN QUERY SELECT u.item, 'written'::text, u.seq, u.version
                 FROM unnest(v_items, v_seqs, v_versions) AS u(item, seq, version);
  -- Stores of keys their writer's scope does not hold, created together: the entries first (a key another writer
  -- created meanwhile is left to `env_replace` below) ...
  WITH item AS (
    SELECT *
      FROM unnest(p_thread, p_root, p_epoch, p_key, p_action, p_value, p_agent, p_description, p_type, p_tags,
                  p_expected)
           WITH ORDINALITY AS i(thread, root, epoch, key, action, value, agent, description, type, tags, expected, n)
     WHERE NOT (n::integer = ANY (COALESCE(v_items, '{}'))) AND action = 'stored' AND expected IS NULL
       AND description IS NOT NULL),
  target AS MATERIALIZED (
    SELECT DISTINCT ON (i.root, scope, i.key) i.*, COALESCE(t.env_scopes[1], '') AS scope, t.fork_task
      FROM item i JOIN threads t ON t.thread_id = i.thread AND t.root_thread_id = i.root AND t.epoch = i.epoch
     WHERE EXISTS (SELECT 1 FROM threads r WHERE r.thread_id = i.root)
     ORDER BY i.root, scope, i.key, i.n),
  created AS (
    INSERT INTO env_data AS e (root_thread_id, scope, key, short_description, value, type, tags, stored_by_agent,
                               stored_by_thread, stored_by_task, version)
    SELECT root, scope, key, description, value, type, ARRAY(SELECT jsonb_array_elements_text(tags)), agent, thread,
           fork_task, 1
      FROM target
    ON CONFLICT (root_thread_id, scope, key) DO NOTHING
    RETURNING e.root_thread_id, e.scope, e.key)
  SELECT array_agg(x.n::integer), array_agg(x.root), array_agg(x.scope), array_agg(x.key)
    INTO v_new, v_new_roots, v_new_scopes, v_new_keys
    FROM created c JOIN target x ON x.root = c.root_thread_id AND x.scope = c.scope AND x.key = c.key;
  IF v_new IS NOT NULL THEN
    -- ... then, in a statement of its own (its snapshot sees every writer of the key that committed before), the
    -- versions of a key created again after a delete go on from its last one, as in `env_replace` ...
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
