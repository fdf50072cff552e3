import { MCP_SERVERS_WORLD_VARIABLE } from './world-variables';

/** Capabilities every agent has without declaring them. */
export const UNIVERSAL_CAPABILITIES = [
  'think',
  'list_capabilities',
  'ask_human',
  'wait',
  'store_env_data',
  'get_env_data',
  'list_env_data',
  'update_env_data',
  'delete_env_data',
] as const;

export type UniversalCapability = (typeof UNIVERSAL_CAPABILITIES)[number];

export function isUniversalCapability(name: string): name is UniversalCapability {
  return (UNIVERSAL_CAPABILITIES as readonly string[]).includes(name);
}

/** `mcp:<server>` in an agent's capabilities grants every tool of that MCP server. */
export const MCP_SERVER_CAPABILITY_PREFIX = 'mcp:';
/** Between an MCP server's name and its tool's in the capability (and function) name: `<server>__<tool>`. */
export const MCP_TOOL_SEPARATOR = '__';

/** The server a capability `mcp:<server>` grants, or `undefined` for any other capability. */
export function mcpServerOfCapability(capability: string): string | undefined {
  return capability.startsWith(MCP_SERVER_CAPABILITY_PREFIX)
    ? capability.slice(MCP_SERVER_CAPABILITY_PREFIX.length)
    : undefined;
}

/** The server part of an MCP tool's name (`<server>__<tool>`), or `undefined` for a name without one. */
export function mcpServerOfTool(name: string): string | undefined {
  const at = name.indexOf(MCP_TOOL_SEPARATOR);
  return at > 0 ? name.slice(0, at) : undefined;
}

/**
 * Whether declared capabilities let an agent call `name`: named outright, or an MCP tool of a server granted whole
 * with `mcp:<server>`. Universal capabilities are not declared; callers check them apart.
 */
export function grantsCapability(declared: readonly string[], name: string): boolean {
  if (declared.includes(name)) return true;
  const server = mcpServerOfTool(name);
  return server !== undefined && declared.includes(`${MCP_SERVER_CAPABILITY_PREFIX}${server}`);
}

/**
 * The MCP servers a world's variables allow (`BATON_MCP_SERVERS`, comma-separated), or `undefined` when the world does
 * not narrow them.
 */
export function mcpServersOfWorld(variables: Readonly<Record<string, string>>): readonly string[] | undefined {
  const value = variables[MCP_SERVERS_WORLD_VARIABLE.name];
  if (value === undefined) return undefined;
  return value
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
}
