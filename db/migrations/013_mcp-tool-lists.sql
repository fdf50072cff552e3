-- The MCP tools a turn's first model call offered, kept for the turn's later calls. Stored once per distinct list,
-- under an id derived from its names (so every worker that computes the list computes the same id, and an id never
-- names another list): workflow history carries the id only, never the names.
CREATE TABLE mcp_tool_lists (
  list_id    text PRIMARY KEY,
  names      text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
