-- Waking watchers without a signal per write, and without losing one (migration 017 made the watchers).
--
-- A writer used to send a Signal-with-Start to every matching watcher after each committed write, and a write whose
-- signal failed failed with it. Temporal refuses signals to a run past its limit (10,000 by default), and a tool with
-- side effects is never run again, so a write could fail for good, or commit without its watcher ever hearing of it.
-- Now a signal is best effort after the commit, coalesced through a claim on the watcher's row, and a sweep in every
-- worker finds the changes no signal told their watcher about (activities/watchers.ts, worker/watch-sweep.ts):
--
--   * `signalled_at`: a signal was claimed since the watcher last began a look (NULL: none). A writer claims one only
--     where none is claimed (or a claim is stale, below), and sends it; the others need send none, since the look
--     that signal causes begins after their commit and reads their change. A look clears the claim before it reads
--     the log, so a change committed after that read finds no claim and signals again.
--   * `signal_sent`: Temporal accepted the claimed signal. A claim left unsent (its sender died, or Temporal refused
--     it) is sent again by the sweep once it is older than the sweep's interval; a sent one older than 15 minutes
--     (a watcher in a long turn or an hour's pause: its workflow already knows) is sent again only when a change came
--     after it, so a watcher whose workflow was stopped from outside starts again.
--   * `signal_claims`: counts claims, so a sender marks its own claim sent and no later one.
--   * `looked_seq`: the last env event the watcher's last look read. The workflow handles every change up to there
--     without another signal (it wakes for them, or looks again after its turn, its pause or its cooldown).
--   * `swept_seq`, `swept_at`: how far the sweep checked this watcher's keys against the log, and when it last took
--     the watcher (several workers sweep at once; each takes a watcher for one interval).
--   * `task_queue`: where the watcher's root runs, so a worker sweeps only the watchers of its own task queue (and
--     starts a stopped watcher's workflow there). Set by whoever adds the watcher or claims its signal.
ALTER TABLE env_watchers
  ADD COLUMN signalled_at  timestamptz,
  ADD COLUMN signal_sent   boolean NOT NULL DEFAULT false,
  ADD COLUMN signal_claims bigint NOT NULL DEFAULT 0,
  ADD COLUMN looked_seq    bigint NOT NULL DEFAULT 0,
  ADD COLUMN swept_seq     bigint NOT NULL DEFAULT 0,
  ADD COLUMN swept_at      timestamptz,
  ADD COLUMN task_queue    text;

-- The sweep reads the watchers that may wake, of one task queue.
CREATE INDEX env_watchers_sweep_idx ON env_watchers (task_queue) WHERE status IN ('active', 'paused');
