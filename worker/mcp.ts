/**
 * MCP servers for a worker: the configuration file (`baton dev --mcp FILE`, `BATON_MCP_CONFIG`) read with the
 * worker's environment for its `${VAR}` references, and every server started and listed before the worker polls.
 */
import fs from 'node:fs';
import path from 'node:path';
import { McpConfigError, parseMcpConfig, type McpConfig } from '../activities/tools/mcp-config';
import { connectMcpServers, type McpServers, type McpServerStatus } from '../activities/tools/mcp-servers';
import { probeShellSandbox, type ShellSandbox } from '../activities/tools/shell-sandbox';
import { readToolsConfig } from './config';
import { BATON_VERSION } from './version';

/**
 * Reads and checks a configuration file.
 * @throws McpConfigError naming the file (and the server) and the reason
 */
export function readMcpConfig(file: string, env: Readonly<Record<string, string | undefined>>): McpConfig {
  const source = path.resolve(file);
  let text: string;
  try {
    text = fs.readFileSync(source, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new McpConfigError(
      source,
      code === 'ENOENT' ? 'MCP configuration file not found' : `cannot be read (${code ?? String(error)})`,
    );
  }
  return parseMcpConfig(text, source, env);
}

/** How {@link startMcpServers} starts the servers of a file. */
export interface StartMcpServersOptions {
  /** Refuse when a server cannot start (a worker); else report its state (`baton mcp list`). @default true */
  strict?: boolean;
  /** Where a refreshed tool list or a server's death is reported. @default stderr */
  log?: (line: string) => void;
  /**
   * The worker's sandbox (its shell's), which servers with `sandbox` run in. @default probed from `env`
   * (`BATON_SHELL_SANDBOX`, `BATON_BWRAP`) when a server asks for one
   */
  sandbox?: ShellSandbox;
  /** Directories a sandbox probed here masks (Baton's state directory). @default none */
  hiddenDirectories?: readonly string[];
}

/**
 * Reads the file and connects to every server it names, listing their tools.
 * @throws McpConfigError naming the file, the server and the reason
 */
export async function startMcpServers(
  file: string,
  env: Readonly<Record<string, string | undefined>>,
  options: StartMcpServersOptions = {},
): Promise<McpServers> {
  const config = readMcpConfig(file, env);
  const sandboxed = config.servers.some((server) => server.transport === 'stdio' && server.sandbox !== undefined);
  const sandbox =
    options.sandbox ??
    (sandboxed
      ? await probeShellSandbox(
          { ...readToolsConfig({ ...env }, process.cwd()).sandbox, hidden: options.hiddenDirectories ?? [] },
          env,
        )
      : undefined);
  return connectMcpServers(config, {
    strict: options.strict ?? true,
    clientInfo: { name: 'baton', version: BATON_VERSION },
    ...(options.log === undefined ? {} : { log: options.log }),
    ...(sandbox === undefined ? {} : { sandbox }),
  });
}

/** `; MCP servers a (3 tools), b (1 tool)` for a worker's ready line, or nothing without MCP servers. */
export function describeMcpServers(mcp: McpServers | undefined): string {
  if (mcp === undefined) return '';
  const counts = mcp
    .status()
    .map((server) => `${server.name} (${server.tools.length} tool${server.tools.length === 1 ? '' : 's'})`);
  return `; MCP servers ${counts.join(', ')}`;
}

/** A server's state and tools as `baton mcp list --json` prints them (no headers or environment: they hold secrets). */
export function mcpServerJson(server: McpServerStatus) {
  return {
    name: server.name,
    transport: server.transport,
    target: server.target,
    state: server.state,
    ...(server.error === undefined ? {} : { error: server.error }),
    tools: server.tools.map((tool) => ({
      name: tool.tool.name,
      serverTool: tool.serverTool,
      readOnly: tool.readOnly,
      needsApproval: tool.tool.needsApproval === true,
      timeout_s: tool.tool.timeout_s,
      description: tool.tool.description,
    })),
  };
}

/** `baton mcp list`: each server on a line with its state, then its tools as agents call them. */
export function formatMcpServers(source: string, servers: readonly McpServerStatus[]): string {
  const lines = [`MCP servers of ${source}:`];
  for (const server of servers) {
    const state = server.state === 'failed' ? `failed: ${server.error ?? 'unknown error'}` : server.state;
    lines.push(`${server.name}  ${server.transport}  ${server.target}  ${state}`);
    for (const { tool, readOnly } of server.tools) {
      const traits = [readOnly ? 'read-only, retried' : 'side effects, runs once'];
      if (tool.needsApproval === true) traits.push('needs approval');
      const description = tool.description.split('\n')[0] ?? '';
      lines.push(`  ${tool.name}  (${traits.join('; ')})  ${description}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
