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
