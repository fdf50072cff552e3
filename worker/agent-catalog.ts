import fs from 'node:fs';
import { createToolRegistry, type ToolRegistry } from '../activities/tools';
import type { McpServers } from '../activities/tools/mcp-servers';
import type { ShellSandbox } from '../activities/tools/shell-sandbox';
import { ToolDefinitionError, type UserTool } from '../activities/tools/user-tools';
import {
  AgentConfigError,
  checkCapabilities,
  checkModels,
  checkOutputs,
  loadAgents,
  type AgentRegistry,
} from './agents';

export interface AgentCatalogOptions {
  /** The agents directory, loaded now and on `reload()`; or agents defined in code (tests), which never reload. */
  agents: string | AgentRegistry;
  /** The directory `read_file` and `list_files` are confined to. */
  filesRoot: string;
  /**
   * Directories no tool shows the model (`ToolRegistryOptions.hiddenDirectories`): `baton dev` and `baton worker`
   * name their state directory, and probe the shell's sandbox with the same list. @default none
   */
  hiddenDirectories?: readonly string[];
  /** The directory of ARC task files for `load_arc_task`. */
  arcDataDir: string;
  /** The base environment of shell commands (never the worker's whole environment). @default DEFAULT_SHELL_ENV */
  shellEnv?: Readonly<Record<string, string>>;
  /**
   * How shell commands are isolated: what `probeShellSandbox` found at start (`baton worker` and `baton dev` probe
   * their settings). @default bubblewrap on the PATH of `shellEnv`, probed at the first command
   */
  shellSandbox?: ShellSandbox;
  /** Users' own tools (`prepareUserTools`, `loadToolModules`), beside Baton's. */
  userTools?: readonly UserTool[];
  /** The providers an agent's `model` may name as `provider/model`: the worker's. @default none */
  providers?: readonly string[];
  /** The MCP servers the worker connected to (`connectMcpServers`), whose tools agents call like any other. */
  mcp?: McpServers;
}

/** The agents a worker runs and the tools they call, with reloading for `baton dev`. */
export interface AgentCatalog {
  /** The current agent definitions (turns resolve their agent's version from this when they start). */
  agents(): AgentRegistry;
  readonly tools: ToolRegistry;
  /**
   * Loads the directory again. A bad set leaves the current one in place.
   * @throws AgentConfigError naming the file, line and reason.
   */
  reload(): AgentRegistry;
  /**
   * Reloads whenever a file in the directory changes (debounced); reports each outcome. Returns a function that
   * stops watching.
   */
  watch(report: (outcome: { agents: AgentRegistry } | { error: unknown }) => void): () => void;
}

/**
 * An agent and a tool of the same name could not both be called: the model gets one function per name.
 * @throws ToolDefinitionError naming the user tool's module and the agent's file; AgentConfigError for a clash with
 * one of Baton's own tools
 */
function checkNamesApart(agents: AgentRegistry, tools: ToolRegistry): void {
  for (const agent of agents.values()) {
    if (!tools.names.includes(agent.name)) continue;
    const source = tools.userToolSource(agent.name);
    if (source !== undefined) {
      throw new ToolDefinitionError(source, `tool '${agent.name}' has the name of the agent in ${agent.source}`);
    }
    throw new AgentConfigError(agent.source, undefined, `agent '${agent.name}' has the name of one of Baton's tools`);
  }
}

/**
 * An MCP server's tool named like one of Baton's tools or a user tool would be hidden by it.
 * @throws ToolDefinitionError naming the server
 */
function checkMcpNamesApart(tools: ToolRegistry, mcp: McpServers | undefined): void {
  for (const [name, tool] of mcp?.tools() ?? []) {
    if (tools.get(name) === tool.tool) continue;
    const other = tools.userToolSource(name);
    throw new ToolDefinitionError(
      `MCP server '${tool.server}' (${mcp?.source ?? ''})`,
      `tool '${tool.serverTool}' is called '${name}', the name of ${other === undefined ? "one of Baton's tools" : `a tool in ${other}`}`,
    );
  }
}

/**
 * Loads the agents and builds the tool registry.
 * @throws AgentConfigError for a bad agent file (or a `model` naming no configured provider), so start-up stops
 * naming it; ToolDefinitionError for a user tool whose name Baton's tools or an agent already use.
 */
export function createAgentCatalog(options: AgentCatalogOptions): AgentCatalog {
  let current: AgentRegistry;
  const tools = createToolRegistry({
    filesRoot: options.filesRoot,
    ...(options.hiddenDirectories === undefined ? {} : { hiddenDirectories: options.hiddenDirectories }),
    arcDataDir: options.arcDataDir,
    ...(options.shellEnv === undefined ? {} : { shellEnv: options.shellEnv }),
    ...(options.shellSandbox === undefined ? {} : { shellSandbox: options.shellSandbox }),
    ...(options.userTools === undefined ? {} : { userTools: options.userTools }),
    ...(options.mcp === undefined ? {} : { mcp: options.mcp }),
    describeAgent: (name) => current.get(name)?.description,
  });
  const workflowTools = tools.names.filter((name) => tools.get(name)?.handledBy === 'workflow');
  const { agents } = options;
  const providers = options.providers ?? [];
  const { mcpServers } = tools;
  checkMcpNamesApart(tools, options.mcp);
  const load = (): AgentRegistry => {
    const loaded =
      typeof agents === 'string'
        ? loadAgents(agents, { toolNames: tools.names, workflowTools, providers, mcpServers })
        : agents;
    if (typeof agents !== 'string') {
      checkCapabilities(agents, tools.names, workflowTools, mcpServers);
      checkModels(agents, providers);
      checkOutputs(agents);
    }
    checkNamesApart(loaded, tools);
    return loaded;
  };
  current = load();
  return {
    agents: () => current,
    tools,
    reload() {
      current = load();
      return current;
    },
    watch(report) {
      if (typeof agents !== 'string') return () => undefined;
      let timer: NodeJS.Timeout | undefined;
      const watcher = fs.watch(agents, () => {
        clearTimeout(timer);
        // Editors write files in several steps; reload once they are done.
        timer = setTimeout(() => {
          try {
            current = load();
            report({ agents: current });
          } catch (error) {
            report({ error });
          }
        }, 200);
      });
      // Without a listener, a watcher error (the directory removed, say) would crash the process.
      watcher.on('error', (error) => report({ error }));
      return () => {
        clearTimeout(timer);
        watcher.close();
      };
    },
  };
}
