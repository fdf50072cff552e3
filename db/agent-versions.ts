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

/**
 * Whether any worker on this database has defined an agent of that name (workers store every agent they load at
 * start and reload): what `baton schedule create` checks before creating anything.
 */
export async function isKnownAgent(db: Queryable, name: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM agent_versions WHERE name = $1 LIMIT 1', [name]);
  return rows.length > 0;
}

/** The names of every agent a worker on this database has defined, sorted. */
export async function knownAgentNames(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>('SELECT DISTINCT name FROM agent_versions ORDER BY name');
  return rows.map((row) => row.name);
}

/** An agent's definition as a worker last stored it. */
export interface StoredAgent {
  version: string;
  definition: AgentDefinition;
  /** When this version was first stored. */
  storedAt: Date;
}

/**
 * The newest stored version of every agent (or of `name` alone), by name. Versions are stored once, when a worker
 * first loads them: an agent edited and then put back as it was keeps the edited version as its newest.
 */
export async function latestAgentVersions(db: Queryable, name?: string): Promise<StoredAgent[]> {
  const { rows } = await db.query<StoredAgent>(
    `SELECT DISTINCT ON (name) version, definition, created_at AS "storedAt"
       FROM agent_versions WHERE $1::text IS NULL OR name = $1
      ORDER BY name, created_at DESC, version`,
    [name ?? null],
  );
  return rows;
}
