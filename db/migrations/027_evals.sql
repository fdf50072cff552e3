-- Evaluations (docs/guides/evals.md): an experiment runs a dataset's cases (or replays recorded root threads) as root
-- threads of its own and stores, per case, how the turn ended and what each scorer gave it. A replay's root thread is
-- answered from the recorded one's tool results while its calls match them; its divergence, when it has one, is kept
-- here, where every worker of the experiment's task queue reads it.
CREATE TABLE eval_experiments (
  experiment_id  text PRIMARY KEY,
  kind           text NOT NULL CHECK (kind IN ('run', 'replay')),
  dataset        text NOT NULL,
  agents         jsonb NOT NULL,
  model          jsonb NOT NULL,
  started_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  summary        jsonb
);

CREATE TABLE eval_cases (
  experiment_id  text NOT NULL REFERENCES eval_experiments (experiment_id) ON DELETE CASCADE,
  case_id        text NOT NULL,
  position       integer NOT NULL,
  thread_id      text NOT NULL,
  agent          text NOT NULL,
  input          text NOT NULL,
  status         text NOT NULL CHECK (status IN ('completed', 'max_steps', 'failed', 'diverged')),
  reply          text,
  output         jsonb,
  error          text,
  usage          jsonb,
  duration_ms    integer NOT NULL,
  scores         jsonb NOT NULL DEFAULT '{}'::jsonb,
  divergence     jsonb,
  live_calls     integer NOT NULL DEFAULT 0,
  -- A replay's recorded run, scored by the same scorers.
  recorded_scores jsonb,
  PRIMARY KEY (experiment_id, case_id)
);

CREATE TABLE eval_replays (
  root_thread_id         text PRIMARY KEY,
  source_root_thread_id  text NOT NULL,
  policy                 text NOT NULL CHECK (policy IN ('stop', 'live-read-only', 'fail')),
  divergence             jsonb,
  -- The operation ids of the calls run live: a retried call is counted once.
  live_operations        text[] NOT NULL DEFAULT '{}'
);
