-- Watchers: agents that wake when the shared env data of a root changes (issue 26). A watcher is registered per root,
-- from an agent's frontmatter `watches` (when a turn of that agent begins in the root) or at run time (`baton watch
-- add`, the SDK, the `watch_env_data` tool). Each watcher is one durable workflow (`baton/<root>/watch.<name>`) that
-- reads the root's env events after its cursor and runs a turn of its agent for the changes to its keys, in a thread
-- of its own per wake-up (`<root>/watch.<name>.<n>`).
CREATE TABLE env_watchers (
  root_thread_id text NOT NULL,
  name           text NOT NULL,
  agent          text NOT NULL,
  -- Key patterns: `*` one path segment, `**` any number (common/watchers.ts).
  keys           text[] NOT NULL,
  debounce_s     double precision,
  message        text,
  origin         text NOT NULL CHECK (origin IN ('frontmatter', 'run_time')),
  created_by     text NOT NULL,
  status         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'removed', 'stopped')),
  -- Why it is paused, removed or stopped; until when a pause lasts.
  reason         text,
  paused_until   timestamptz,
  -- The env-event number the watcher has handled up to: it starts where the log stood when it was registered.
  cursor_seq     bigint NOT NULL,
  wakeups        integer NOT NULL DEFAULT 0,
  last_woke_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (root_thread_id, name)
);

-- One row per wake-up: the changes that caused it (each key with its old and new version, its writer and when), the
-- chain depth, the thread its turn ran in and how it ended. Opened once per operation id.
CREATE TABLE env_watch_wakeups (
  root_thread_id text NOT NULL,
  watcher        text NOT NULL,
  number         integer NOT NULL,
  operation_id   text NOT NULL,
  thread_id      text NOT NULL,
  workflow_id    text NOT NULL,
  depth          integer NOT NULL,
  changes        jsonb NOT NULL,
  message        text NOT NULL,
  status         text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'max_steps', 'failed')),
  error          text,
  started_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  PRIMARY KEY (root_thread_id, watcher, number),
  UNIQUE (root_thread_id, operation_id)
);

-- A thread a watcher's wake-up runs in carries the watcher's name and the wake-up's chain depth; every thread below it
-- (its delegations, its fork tasks) inherits both when it is created, so a write anywhere in the wake-up's tree is
-- attributed to the watcher (it never wakes for its own writes) and to the depth of the chain that caused it.
ALTER TABLE threads ADD COLUMN watcher text, ADD COLUMN watch_depth integer;

CREATE FUNCTION threads_inherit_watcher() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF NEW.watcher IS NULL AND NEW.parent_thread_id IS NOT NULL THEN
    SELECT watcher, watch_depth INTO NEW.watcher, NEW.watch_depth FROM threads WHERE thread_id = NEW.parent_thread_id;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER threads_inherit_watcher BEFORE INSERT ON threads
  FOR EACH ROW WHEN (NEW.parent_thread_id IS NOT NULL) EXECUTE FUNCTION threads_inherit_watcher();

-- The run feed shows each wake-up with the changes that caused it, and how it ended.
CREATE FUNCTION run_events_from_watch_wakeups() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NULL, 'watch_woke',
      jsonb_build_object('watcher', NEW.watcher, 'wakeup', NEW.number, 'depth', NEW.depth, 'changes', NEW.changes,
                         'workflowId', NEW.workflow_id));
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    PERFORM run_event(NEW.root_thread_id, NEW.thread_id, NULL, 'watch_finished',
      jsonb_build_object('watcher', NEW.watcher, 'wakeup', NEW.number, 'status', NEW.status,
                         'error', run_event_text(NEW.error, 1000)));
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER run_events_from_watch_wakeups AFTER INSERT OR UPDATE ON env_watch_wakeups
  FOR EACH ROW EXECUTE FUNCTION run_events_from_watch_wakeups();

-- And each watcher's life: added, paused (and why, until when), resumed, removed, stopped.
CREATE FUNCTION run_events_from_watchers() RETURNS trigger
  LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM run_event(NEW.root_thread_id, NEW.root_thread_id, NEW.agent, 'watch_added',
      jsonb_build_object('watcher', NEW.name, 'keys', to_jsonb(NEW.keys), 'origin', NEW.origin,
                         'createdBy', NEW.created_by));
  ELSIF NEW.status IS DISTINCT FROM OLD.status OR NEW.paused_until IS DISTINCT FROM OLD.paused_until
        OR (OLD.status = 'removed' AND NEW.created_at IS DISTINCT FROM OLD.created_at) THEN
    PERFORM run_event(NEW.root_thread_id, NEW.root_thread_id, NEW.agent,
      CASE NEW.status WHEN 'active' THEN CASE WHEN OLD.status = 'removed' THEN 'watch_added' ELSE 'watch_resumed' END
                      WHEN 'paused' THEN 'watch_paused' WHEN 'removed' THEN 'watch_removed' ELSE 'watch_stopped' END,
      jsonb_build_object('watcher', NEW.name, 'keys', to_jsonb(NEW.keys), 'reason', NEW.reason,
                         'until', NEW.paused_until, 'origin', NEW.origin, 'createdBy', NEW.created_by));
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER run_events_from_watchers AFTER INSERT OR UPDATE ON env_watchers
  FOR EACH ROW EXECUTE FUNCTION run_events_from_watchers();
