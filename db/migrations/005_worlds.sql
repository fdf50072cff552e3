-- Worlds: a named set of agents and their variables, kept as one editable `.env`-style text (NULL: no variables).
-- The variables are read at every model call and tool run, so an edit shows at the next one.
CREATE TABLE worlds (
  name       text PRIMARY KEY,
  variables  text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- The world a conversation runs in (every thread of a tree shares its root's).
ALTER TABLE threads ADD COLUMN world text NOT NULL DEFAULT 'default';
