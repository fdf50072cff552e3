-- Budgets of a root thread's tree, in tokens and in US dollars (each optional). A root with a budget has a grant of
-- its own (grant_id ''); each delegation or fork task opened below a thread with a grant reserves one from its
-- caller's (grant_id: the delegation's operation id). A grant's room is what it was granted less what its subtree
-- spent less what its open children still hold; a child's unspent share returns to its caller when the child's turn
-- ends, fails or is reclaimed (it closes).
--
-- Charging is done here, by a trigger on the stored reply: a reply is stored once per operation id, so a model call
-- is charged once however often its step was retried or re-run, and in the same transaction as the reply. Its cost is
-- the one the worker priced it at, stored in its usage (`costUsd`).
CREATE TABLE budget_grants (
  root_thread_id  text NOT NULL,
  grant_id        text NOT NULL,
  thread_id       text NOT NULL REFERENCES threads (thread_id),
  parent_grant_id text,
  -- The grants above this one, the root's first: a charge here is a charge to each of them.
  path            text[] NOT NULL DEFAULT '{}',
  -- NULL: no limit in that unit (a root's grant sets at least one; its children have the units it has).
  granted_tokens  bigint CHECK (granted_tokens >= 0),
  granted_usd     numeric CHECK (granted_usd >= 0),
  spent_tokens    bigint NOT NULL DEFAULT 0,
  spent_usd       numeric NOT NULL DEFAULT 0,
  open            boolean NOT NULL DEFAULT true,
  created_at      timestamptz NOT NULL DEFAULT now(),
  closed_at       timestamptz,
  position        bigserial,
  PRIMARY KEY (root_thread_id, grant_id),
  CHECK (granted_tokens IS NOT NULL OR granted_usd IS NOT NULL)
);
CREATE INDEX budget_grants_thread_idx ON budget_grants (thread_id, position);
CREATE INDEX budget_grants_open_children_idx ON budget_grants (root_thread_id, parent_grant_id) WHERE open;

-- What a person added to a grant by approving a turn's request for more (`on_budget: ask`): once per approval. The
-- same is added to every grant above it, so the extension is new money and not a draw on its callers' shares.
CREATE TABLE budget_extensions (
  root_thread_id text NOT NULL,
  -- The approval's operation id.
  operation_id   text NOT NULL,
  grant_id       text NOT NULL,
  tokens         bigint,
  usd            numeric,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, operation_id),
  FOREIGN KEY (root_thread_id, grant_id) REFERENCES budget_grants (root_thread_id, grant_id)
);

-- The functions are PL/pgSQL, not SQL: a model call reads its budget at every step, and PL/pgSQL keeps its plans for
-- the session where a SQL function that cannot be inlined is planned again at each call (about 7 times slower here).

-- The grant a thread's spending goes to: the latest one opened for it, else its root's (a root thread, a watcher's
-- wake-up thread and anything else with no grant of its own spends from the root's). NULL fields: none.
CREATE FUNCTION budget_grant_of(p_root text, p_thread text) RETURNS budget_grants
  LANGUAGE plpgsql STABLE
AS $$
DECLARE
  g budget_grants;
BEGIN
  SELECT * INTO g FROM budget_grants b
   WHERE b.root_thread_id = p_root AND (b.thread_id = p_thread OR b.grant_id = '')
   ORDER BY (b.thread_id = p_thread AND b.grant_id <> '') DESC, b.position DESC
   LIMIT 1;
  RETURN g;
END
$$;

-- A grant as a reader sees it: per unit it limits, granted, spent by its subtree and left (granted, less spent, less
-- what its open children hold unspent).
CREATE FUNCTION budget_json(g budget_grants) RETURNS jsonb
  LANGUAGE plpgsql STABLE
AS $$
DECLARE
  v_held_tokens bigint;
  v_held_usd numeric;
BEGIN
  SELECT COALESCE(SUM(GREATEST(c.granted_tokens - c.spent_tokens, 0)), 0),
         COALESCE(SUM(GREATEST(c.granted_usd - c.spent_usd, 0)), 0)
    INTO v_held_tokens, v_held_usd
    FROM budget_grants c
   WHERE c.root_thread_id = g.root_thread_id AND c.parent_grant_id = g.grant_id AND c.open;
  RETURN jsonb_strip_nulls(jsonb_build_object(
           'tokens', CASE WHEN g.granted_tokens IS NULL THEN NULL ELSE
             jsonb_build_object('granted', g.granted_tokens, 'spent', g.spent_tokens,
                                'left', g.granted_tokens - g.spent_tokens - v_held_tokens) END,
           'usd', CASE WHEN g.granted_usd IS NULL THEN NULL ELSE
             jsonb_build_object('granted', g.granted_usd, 'spent', g.spent_usd,
                                'left', g.granted_usd - g.spent_usd - v_held_usd) END));
END
$$;

-- A thread's budget as a model call checks it (NULL: its tree has none).
CREATE FUNCTION budget_of(p_root text, p_thread text) RETURNS jsonb
  LANGUAGE plpgsql STABLE
AS $$
DECLARE
  g budget_grants := budget_grant_of(p_root, p_thread);
BEGIN
  IF g.grant_id IS NULL THEN RETURN NULL; END IF;
  RETURN budget_json(g);
END
$$;

CREATE FUNCTION budget_charge_reply() RETURNS trigger
  LANGUAGE plpgsql
AS $$
DECLARE
  v_tokens bigint := COALESCE((NEW.usage->>'totalTokens')::bigint, 0);
  v_usd numeric := COALESCE((NEW.usage->>'costUsd')::numeric, 0);
  v_grant budget_grants;
BEGIN
  IF v_tokens <= 0 AND v_usd <= 0 THEN RETURN NULL; END IF;
  v_grant := budget_grant_of(NEW.root_thread_id, NEW.thread_id);
  IF v_grant.grant_id IS NULL THEN RETURN NULL; END IF;
  UPDATE budget_grants SET spent_tokens = spent_tokens + v_tokens, spent_usd = spent_usd + v_usd
   WHERE root_thread_id = NEW.root_thread_id AND grant_id = ANY (v_grant.path || v_grant.grant_id);
  RETURN NULL;
END
$$;
CREATE TRIGGER budget_charge_reply AFTER INSERT ON transcript_messages
  FOR EACH ROW WHEN (NEW.role = 'assistant' AND NEW.usage IS NOT NULL) EXECUTE FUNCTION budget_charge_reply();

-- A delegation's or fork task's grant closes when its thread's turn ends, fails or is reclaimed (whether or not it had
-- begun): what it did not spend returns.
CREATE FUNCTION budget_close_grants() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE budget_grants SET open = false, closed_at = now()
   WHERE root_thread_id = NEW.root_thread_id AND thread_id = NEW.thread_id AND grant_id <> '' AND open;
  RETURN NULL;
END
$$;
CREATE TRIGGER budget_close_grants AFTER UPDATE OF status ON threads
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('completed', 'max_steps', 'failed', 'reclaimed'))
  EXECUTE FUNCTION budget_close_grants();
