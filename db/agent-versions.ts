import type { AgentDefinition } from '../common/agent-definition';
import type { Queryable } from './threads';

/** Stores a definition under its version (idempotent: a version's content never changes). */
export async function saveAgentVersion(db: Queryable, version: string, definition: AgentDefinition): Promise<void> {
  await db.query(
    `INSERT INTO agent_versions (version, name, definition) VALUES ($1, $2, $3) ON CONFLICT (version) DO NOTHING`,
    [version, definition.name, JSON.stringify(definition)],
  );
}

export async function findAgentVersion(db: Queryable, version: string): Promise<AgentDefinition | undefined> {
  const { rows } = await db.query<{ definition: AgentDefinition }>(
    'SELECT definition FROM agent_versions WHERE version = $1',
    [version],
  );
  return rows[0]?.definition;
}
