/**
 * The tools agents can call, declared once with zod (the model receives JSON Schema generated from the same
 * schemas). One file per tool family; this module composes them into a registry.
 */
import { z } from 'zod';
import { mcpServerOfCapability, mcpServersOfWorld, UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
import { createArcCandidateTool, createArcTool } from './arc';
import { delegationDescription, delegationParameters } from './delegation';
import { createEnvDataTools } from './env-data';
import { createFileTools } from './files';
import { forkJoinTool } from './fork-join';
import type { McpServers } from './mcp-servers';
import { createShellTool } from './shell';
import type { ShellSandbox } from './shell-sandbox';
import type { ToolDefinition } from './types';
import { ToolDefinitionError, type UserTool } from './user-tools';
import { askHumanTool, listCapabilitiesTool, thinkTool, waitTool } from './universal';

export interface ToolRegistryOptions {
  /** The directory `read_file` and `list_files` are confined to. */
  filesRoot: string;
  /**
   * Directories no tool shows the model, even inside `filesRoot` or a world's working directory: `read_file` and
   * `list_files` refuse them and leave them out of listings (`FileToolOptions.hidden`), and so do they for every
   * directory `shellSandbox` masks. `baton dev` and `baton worker` name their state directory, which holds the stack
   * file with the database password. Give the sandbox the same list (`ShellSandboxSetting.hidden`). @default none
   */
  hiddenDirectories?: readonly string[];
  /** The directory of ARC task files (`<task id>.json`) for `load_arc_task`. */
  arcDataDir: string;
  /**
   * The base environment of shell commands: PATH, HOME, LANG picked by the worker, never its whole environment.
   * @default DEFAULT_SHELL_ENV
   */
  shellEnv?: Readonly<Record<string, string>>;
  /**
   * How shell commands are isolated: what the worker found at start (`probeShellSandbox`).
   * @default bubblewrap on the PATH of `shellEnv`, probed at the first command
   */
  shellSandbox?: ShellSandbox;
  /** An agent's description, for `list_capabilities` (agents are capabilities too). */
  describeAgent: (name: string) => string | undefined;
  /** Users' own tools, checked by `prepareUserTools`; a name Baton's tools already use is refused. */
  userTools?: readonly UserTool[];
  /** The MCP servers the worker is connected to: their tools are looked up as they list them now. */
  mcp?: McpServers;
}

export interface ToolRegistry {
  get(name: string): ToolDefinition | undefined;
  /** Whether `name` is an agent (agents are called like tools, as delegations). */
  isAgent(name: string): boolean;
  /** Every tool name, universal ones, users' tools and the MCP servers' tools (as listed now) included. */
  readonly names: readonly string[];
  /** The MCP servers configured on this worker (what `mcp:<server>` may name). */
  readonly mcpServers: readonly string[];
  /**
   * What declared capabilities grant, spelled out: `mcp:<server>` becomes each tool the server lists now (that an
   * agent's `world` allows is the caller's check), every other capability stays as it is.
   */
  expand(declared: readonly string[]): string[];
  /** `expand`, less the tools of MCP servers a world's variables leave out (`BATON_MCP_SERVERS`). */
  offered(declared: readonly string[], worldVariables: Readonly<Record<string, string>>): string[];
  /** The MCP server a tool comes from, or `undefined` for any other tool. */
  mcpServerOf(name: string): string | undefined;
  /** Where a user tool was defined (its module file, or its MCP server), or `undefined` for Baton's own tools. */
  userToolSource(name: string): string | undefined;
  /** The universal capabilities, in the order agents are told about them. */
  readonly universal: readonly string[];
  /** The function definition the model receives for a tool or an agent. */
  toModelTool(name: string): ModelTool | undefined;
}

/** A tool as the Chat Completions API takes it. */
export interface ModelTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** What the file tools hide: the directories named for every tool, and those the shell's sandbox masks. */
function hiddenFromTools(options: ToolRegistryOptions): string[] {
  const masked = options.shellSandbox?.kind === 'bwrap' ? options.shellSandbox.hidden : [];
  return [...new Set([...(options.hiddenDirectories ?? []), ...masked])];
}

export function createToolRegistry(options: ToolRegistryOptions): ToolRegistry {
  const tools = new Map<string, ToolDefinition>();
  const describe = (name: string) => tools.get(name)?.description ?? options.describeAgent(name);
  const mcp = options.mcp;
  const mcpTool = (name: string) => (tools.has(name) ? undefined : mcp?.tools().get(name));
  const expand = (declared: readonly string[]): string[] =>
    declared.flatMap((capability) => {
      const server = mcpServerOfCapability(capability);
      if (server === undefined) return [capability];
      return [...(mcp?.tools().values() ?? [])].filter((tool) => tool.server === server).map((tool) => tool.tool.name);
    });
  const offered = (declared: readonly string[], worldVariables: Readonly<Record<string, string>>): string[] => {
    const servers = mcpServersOfWorld(worldVariables);
    if (servers === undefined) return expand(declared);
    return expand(declared).filter((name) => {
      const server = mcpTool(name)?.server;
      return server === undefined || servers.includes(server);
    });
  };
  const all: ToolDefinition[] = [
    thinkTool,
    listCapabilitiesTool((name) => describe(name) ?? mcpTool(name)?.tool.description, offered),
    askHumanTool,
    waitTool,
    ...createEnvDataTools(),
    ...createFileTools({ root: options.filesRoot, hidden: hiddenFromTools(options) }),
    // Below the tool activity's 15-minute start-to-close timeout, so a command times out before its activity does.
    createShellTool({
      maxTimeoutS: 840,
      ...(options.shellEnv === undefined ? {} : { env: options.shellEnv }),
      ...(options.shellSandbox === undefined ? {} : { sandbox: options.shellSandbox }),
    }),
    createArcTool({ dataDir: options.arcDataDir }),
    createArcCandidateTool({ dataDir: options.arcDataDir }),
    forkJoinTool,
  ];
  for (const tool of all) tools.set(tool.name, tool);
  const userToolSources = new Map<string, string>();
  for (const { tool, source } of options.userTools ?? []) {
    if (tools.has(tool.name)) {
      const other = userToolSources.get(tool.name);
      throw new ToolDefinitionError(
        source,
        other === undefined
          ? `tool '${tool.name}' has the name of one of Baton's own tools: rename it`
          : `tool '${tool.name}' is also defined in ${other}`,
      );
    }
    tools.set(tool.name, tool);
    userToolSources.set(tool.name, source);
    all.push(tool);
  }
  // JSON Schema is generated once per schema, not per model call.
  const jsonSchema = (schema: z.ZodType): Record<string, unknown> => {
    const { $schema: _schema, ...parameters } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
    return parameters;
  };
  const modelTools = new Map<string, ModelTool>(
    all.map((tool) => [
      tool.name,
      {
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: jsonSchema(tool.parameters) },
      },
    ]),
  );
  const delegationSchema = jsonSchema(delegationParameters);
  const isAgent = (name: string) =>
    !tools.has(name) && mcpTool(name) === undefined && options.describeAgent(name) !== undefined;
  const ownNames = [...tools.keys()];
  return {
    get: (name) => tools.get(name) ?? mcpTool(name)?.tool,
    isAgent,
    get names() {
      return mcp === undefined
        ? ownNames
        : [...ownNames, ...[...mcp.tools().keys()].filter((name) => !tools.has(name))];
    },
    mcpServers: mcp?.serverNames ?? [],
    expand,
    offered,
    mcpServerOf: (name) => mcpTool(name)?.server,
    userToolSource: (name) => {
      const fromMcp = mcpTool(name);
      return fromMcp === undefined
        ? userToolSources.get(name)
        : `MCP server '${fromMcp.server}' (${mcp?.source ?? ''})`;
    },
    universal: UNIVERSAL_CAPABILITIES,
    toModelTool: (name) => {
      const tool = modelTools.get(name);
      if (tool) return tool;
      const fromMcp = mcpTool(name);
      if (fromMcp !== undefined) {
        return {
          type: 'function',
          function: { name, description: fromMcp.tool.description, parameters: fromMcp.inputSchema },
        };
      }
      if (!isAgent(name)) return tool;
      const description = delegationDescription(options.describeAgent(name) ?? '');
      return { type: 'function', function: { name, description, parameters: delegationSchema } };
    },
  };
}
