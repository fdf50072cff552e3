/**
 * The agents' definitions as MCP resources: `baton://agents/<name>`, each the agent file as a worker last stored
 * it (frontmatter with every option's effective value, then the system prompt), as markdown.
 */
import { stringify } from 'yaml';
import type { StoredAgent } from '../client';
import { publicDefinition } from '../client/agents';

const AGENT_URI_PREFIX = 'baton://agents/';
/** The URI template clients may fill in (RFC 6570). */
export const AGENT_URI_TEMPLATE = `${AGENT_URI_PREFIX}{name}`;

export function agentResourceUri(name: string): string {
  return `${AGENT_URI_PREFIX}${encodeURIComponent(name)}`;
}

/** The agent name a resource URI names, or `undefined` for a URI that names none. */
export function agentNameOfUri(uri: string): string | undefined {
  if (!uri.startsWith(AGENT_URI_PREFIX)) return undefined;
  const name = uri.slice(AGENT_URI_PREFIX.length);
  try {
    return name === '' || name.includes('/') ? undefined : decodeURIComponent(name);
  } catch {
    return undefined;
  }
}

/** An agent file as markdown: its frontmatter (every option, defaults included) and its body. */
export function agentMarkdown(stored: StoredAgent): string {
  const { body, ...frontmatter } = publicDefinition(stored.definition);
  return `---\n${stringify(frontmatter).trimEnd()}\n---\n\n${body.trim()}\n`;
}
