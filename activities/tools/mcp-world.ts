/**
 * A world may narrow which MCP servers its agents see (`BATON_MCP_SERVERS`): the model is offered only their tools
 * (`ToolRegistry.offered`), and a call of another server's tool is refused before anything runs (here).
 */
import { mcpServersOfWorld } from '../../common/capabilities';
import { MCP_SERVERS_WORLD_VARIABLE } from '../../common/world-variables';
import type { ToolRegistry } from '.';

/** Why a world does not let its agents call this MCP tool, or `undefined` when it does (or it is no MCP tool). */
export function mcpWorldRefusal(
  tools: ToolRegistry,
  name: string,
  variables: Readonly<Record<string, string>>,
): string | undefined {
  const server = tools.mcpServerOf(name);
  const allowed = mcpServersOfWorld(variables);
  if (server === undefined || allowed === undefined || allowed.includes(server)) return undefined;
  return (
    `'${name}' is a tool of the MCP server '${server}', which this world does not offer ` +
    `(its ${MCP_SERVERS_WORLD_VARIABLE.name}: ${allowed.join(', ') || 'none'}).`
  );
}
