import { createHash } from 'node:crypto';
import type { Pool } from 'pg';

/** The id of a list of tool names: derived from the names, so equal lists share one row and one id. */
export function mcpToolListId(names: readonly string[]): string {
  return createHash('sha256').update(names.join('\n')).digest('hex').slice(0, 32);
}

/** Stores a list of MCP tool names (once per distinct list) and returns its id. */
export async function saveMcpToolList(pool: Pool, names: readonly string[]): Promise<string> {
  const listId = mcpToolListId(names);
  await pool.query('INSERT INTO mcp_tool_lists (list_id, names) VALUES ($1, $2) ON CONFLICT (list_id) DO NOTHING', [
    listId,
    names,
  ]);
  return listId;
}

/** The names of a stored list, or `undefined` for an id nothing was stored under. */
export async function loadMcpToolList(pool: Pool, listId: string): Promise<string[] | undefined> {
  const { rows } = await pool.query<{ names: string[] }>('SELECT names FROM mcp_tool_lists WHERE list_id = $1', [
    listId,
  ]);
  return rows[0]?.names;
}
