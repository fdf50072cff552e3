/**
 * The agents Baton's workers have defined, as clients see them: every worker stores each agent it loads in
 * `agent_versions`, so a client can tell a known agent from a typo before a turn runs, and read its definition.
 */
import { agentFrontmatterSchema, type AgentDefinition } from '../common/agent-definition';
import { AGENT_NAME_PATTERN } from '../common/ids';
import { isKnownAgent, knownAgentNames, latestAgentVersions, type StoredAgent } from '../db/agent-versions';
import type { Queryable } from '../db/threads';
import { BatonClientError } from './errors';

export type { StoredAgent };

/**
 * `agent` when a worker on this database has defined it.
 * @throws BatonClientError for a name agents cannot have, or one no worker has defined (listing the known ones).
 */
export async function checkKnownAgent(db: Queryable, agent: string): Promise<string> {
  if (!AGENT_NAME_PATTERN.test(agent)) {
    throw new BatonClientError(`agent name '${agent}' must be lowercase letters, digits, '_' or '-' (at most 64)`);
  }
  if (await isKnownAgent(db, agent)) return agent;
  const known = await knownAgentNames(db);
  throw new BatonClientError(
    `unknown agent '${agent}': no worker on this database has defined it (known: ${known.length > 0 ? known.join(', ') : 'none yet; start a worker'})`,
  );
}

/** Every agent's newest stored definition, by name. */
export function listStoredAgents(db: Queryable): Promise<StoredAgent[]> {
  return latestAgentVersions(db);
}

/** One agent's newest stored definition. @throws BatonClientError as {@link checkKnownAgent} does. */
export async function findStoredAgent(db: Queryable, agent: string): Promise<StoredAgent> {
  await checkKnownAgent(db, agent);
  const [stored] = await latestAgentVersions(db, agent);
  if (!stored) throw new BatonClientError(`unknown agent '${agent}'`);
  return stored;
}

/**
 * The definition without where a worker read it from (a path on that worker's machine), its fields in the order an
 * agent file lists them (Postgres keeps a stored definition's keys in an order of its own), the body last.
 */
export function publicDefinition(definition: AgentDefinition): Omit<AgentDefinition, 'source'> {
  const { source: _source, body, ...frontmatter } = definition;
  const ordered: Record<string, unknown> = {};
  for (const field of Object.keys(agentFrontmatterSchema.shape)) {
    if (field in frontmatter) ordered[field] = frontmatter[field as keyof typeof frontmatter];
  }
  return { ...(ordered as Omit<AgentDefinition, 'source' | 'body'>), body };
}
