/**
 * A worker's connections to its MCP servers. A stdio server is a child process of the worker, started when the
 * worker starts (to list its tools) and started again at the next call after it died; an HTTP server is reached over
 * Streamable HTTP and connected again at the next call after one failed below the protocol (the server unreachable,
 * or restarted and its session gone). Each server's tool list is kept here, refreshed when the
 * server says it changed (`notifications/tools/list_changed`), every page of it, and a listing that would not end is
 * refused. Nothing here outlives the worker: `close()` stops every child process. No message says a value Baton
 * resolved or gave a server: each shows the server's command line or URL as its file writes it, and what a server
 * says (its last stderr line, an error's text) is redacted of its secrets (see `mcpRedactor`), since a call's error
 * is the model's to read.
 */
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { McpConfigError, mcpRedactor, type McpConfig, type McpServerConfig, type McpStdioServer } from './mcp-config';
import { toMcpTools, type McpCall, type McpTool } from './mcp-tools';
import { boundDirectoryProblem, sandboxArguments, type ShellSandbox } from './shell-sandbox';
import { ToolError } from './types';

/** How long connecting to a server and listing its tools may take. */
const CONNECT_TIMEOUT_MS = 30_000;
/** The last lines a stdio server wrote to stderr, kept to say why it failed. */
const STDERR_LINES_KEPT = 20;
/** A stderr line longer than this is not kept (only that there was one): a server cannot fill the worker's memory. */
const STDERR_LINE_MAX = 4096;
/** How much of a server's last stderr line an error repeats. */
const STDERR_LINE_SHOWN = 500;
/** How much of an error's first line (its text may be the server's) a message repeats. */
const ERROR_SHOWN = 1000;
/** The most pages a server's tool list may take: past it, a server that never ends its list. */
export const MAX_MCP_TOOL_PAGES = 100;
/** The most tools a server may list (a model API takes far fewer in one request). */
export const MAX_MCP_TOOLS = 1000;

export interface McpServerStatus {
  readonly name: string;
  readonly transport: 'stdio' | 'http';
  /**
   * The command line or URL as the file writes it, `${VAR}` unresolved (never a resolved value, the headers or the
   * environment, which may hold secrets).
   */
  readonly target: string;
  readonly state: 'connected' | 'disconnected' | 'failed';
  /** Why the last connection or listing failed. */
  readonly error?: string;
  readonly tools: readonly McpTool[];
}

/** What a worker holds of its MCP servers. */
export interface McpServers {
  readonly source: string;
  /** Every tool of every server, by Baton name (`<server>__<tool>`), as listed last. */
  tools(): ReadonlyMap<string, McpTool>;
  /** The configured servers' names, in the file's order. */
  readonly serverNames: readonly string[];
  status(): McpServerStatus[];
  /** Stops every server process and closes every connection. */
  close(): Promise<void>;
}

interface Connection {
  client: Client;
  transport: Transport;
  stderr: string[];
  /** Calls running on this connection. */
  inFlight: number;
  /** No longer used for new calls: closed once its last call ends. */
  retired: boolean;
}

interface ServerState {
  config: McpServerConfig;
  /** The text with every secret of this server replaced by its placeholder. */
  redact: (text: string) => string;
  connection?: Promise<Connection>;
  /** The connection `connection` resolved to, while it is open. */
  live?: Connection;
  tools: McpTool[];
  state: McpServerStatus['state'];
  error?: string;
}

export interface ConnectMcpServersOptions {
  /** Refuse to start when a server cannot be reached or lists bad tools (a worker); else report it (`baton mcp list`). */
  strict: boolean;
  /** Where a refreshed tool list or a server's death is reported. @default stderr */
  log?: (line: string) => void;
  /** The name and version Baton gives in the MCP handshake. */
  clientInfo?: { name: string; version: string };
  /**
   * How this worker sandboxes (its shell's, from `probeShellSandbox`): what a server with `sandbox` runs in. Such a
   * server is refused when it is not bubblewrap. @default none
   */
  sandbox?: ShellSandbox;
}

/**
 * Connects to every server of the configuration and lists its tools.
 * @throws McpConfigError (with `strict`) naming the file and the first server that could not start or be listed,
 * with the reason
 */
export async function connectMcpServers(config: McpConfig, options: ConnectMcpServersOptions): Promise<McpServers> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const clientInfo = options.clientInfo ?? { name: 'baton', version: '0' };
  const states = new Map<string, ServerState>(
    config.servers.map((server) => [
      server.name,
      { config: server, redact: mcpRedactor(server.secrets), tools: [], state: 'disconnected' },
    ]),
  );
  let closed = false;
  /** Retired connections with calls still running on them, closed with the rest by `close()`. */
  const retiredOpen = new Set<Connection>();
  let index = new Map<string, McpTool>();
  const reindex = () => {
    index = new Map([...states.values()].flatMap((state) => state.tools.map((tool) => [tool.tool.name, tool])));
  };

  const call: McpCall = async (server, tool, args, callOptions) => {
    const state = states.get(server);
    if (state === undefined) throw new Error(`no MCP server '${server}' is configured on this worker`);
    const connection = await connected(state);
    connection.inFlight += 1;
    try {
      return (await connection.client.callTool({ name: tool, arguments: args }, CallToolResultSchema, {
        signal: callOptions.signal,
        timeout: callOptions.timeoutMs,
        maxTotalTimeout: callOptions.maxTimeoutMs,
        resetTimeoutOnProgress: true,
        onprogress: (progress) => callOptions.onProgress(progress),
      })) as CallToolResult;
    } catch (error) {
      if (callOptions.signal.aborted) throw error;
      // Silence past the server's `timeout_s` (or a call past its `max_timeout_s`) is the model's to hear, not a retry.
      if (error instanceof McpError && error.code === (ErrorCode.RequestTimeout as number)) {
        throw new ToolError(
          `MCP server '${server}' (${state.config.target}) sent neither the answer of '${tool}' nor progress ` +
            `within ${state.config.timeoutS} seconds, or the call ran past ${state.config.maxTimeoutS} seconds in all; ` +
            'it was cancelled.',
        );
      }
      // An HTTP call that failed below the protocol (no answer, or an HTTP error such as a session the server no
      // longer knows after a restart) leaves a connection no later call can use: the next call connects again.
      // A stdio connection is made again when its process exits (`onclose`).
      if (state.config.transport === 'http' && !(error instanceof McpError)) retire(state, connection);
      // Without its cause: the SDK's error may hold what the message redacts, and the worker logs a failed attempt whole.
      throw new Error(
        `MCP server '${server}' (${state.config.target}): ${describeError(error, connection, state.redact)}`,
      );
    } finally {
      connection.inFlight -= 1;
      if (connection.retired && connection.inFlight === 0) {
        retiredOpen.delete(connection);
        void connection.client.close().catch(() => undefined);
      }
    }
  };

  /** Stops handing out this connection; it is closed once the calls still running on it end. */
  function retire(state: ServerState, connection: Connection): void {
    if (connection.retired) return;
    connection.retired = true;
    retiredOpen.add(connection);
    if (state.live !== connection) return;
    state.live = undefined;
    state.connection = undefined;
    state.state = 'disconnected';
    if (!closed) log(`baton: MCP server '${state.config.name}' failed a call; the next call connects again`);
  }

  /** The server's live connection, made again when it closed (a stdio server that died, an HTTP session lost). */
  function connected(state: ServerState): Promise<Connection> {
    if (closed) return Promise.reject(new Error('the worker is shutting down'));
    state.connection ??= connect(state).catch((error: unknown) => {
      state.connection = undefined;
      state.state = 'failed';
      state.error =
        error instanceof McpConfigError ? error.reason : error instanceof Error ? error.message : String(error);
      throw error;
    });
    return state.connection;
  }

  async function connect(state: ServerState): Promise<Connection> {
    const { config: server } = state;
    const stderr: string[] = [];
    const transport = createTransport(server, stderr, options.sandbox, config.source);
    // One listing at a time, every page of it; a change said during one is listed again once it ends.
    let listing = false;
    let changedAgain = false;
    const relist = async () => {
      if (listing) {
        changedAgain = true;
        return;
      }
      listing = true;
      try {
        do {
          changedAgain = false;
          let listed: Tool[];
          try {
            listed = await listAllTools(client);
          } catch (error) {
            log(
              `baton: MCP server '${server.name}' changed its tools, and listing them failed: ` +
                describeError(error, { stderr }, state.redact),
            );
            continue;
          }
          // A list of a connection since replaced is not the server's list any more.
          if (closed || (state.live !== undefined && state.live.client !== client)) return;
          try {
            state.tools = toMcpTools(server, listed, call, config.source);
            reindex();
            log(
              `baton: MCP server '${server.name}' changed its tools: ${state.tools.map((t) => t.serverTool).join(', ')}`,
            );
          } catch (refusal) {
            log(`baton: MCP server '${server.name}' changed its tools, keeping the earlier list: ${String(refusal)}`);
          }
        } while (changedAgain && !closed);
      } finally {
        listing = false;
      }
    };
    const client = new Client(clientInfo, {
      capabilities: {},
      listChanged: {
        // The SDK's own refresh reads the first page only: Baton lists every page itself.
        tools: { autoRefresh: false, onChanged: () => void relist() },
      },
    });
    client.onclose = () => {
      // The next call connects again; a call in flight fails with the connection.
      if (state.live?.client !== client) return;
      state.live = undefined;
      state.connection = undefined;
      state.state = 'disconnected';
      if (!closed) log(`baton: MCP server '${server.name}' closed its connection; the next call starts it again`);
    };
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
      const listed = await listAllTools(client);
      state.tools = toMcpTools(server, listed, call, config.source);
      reindex();
    } catch (error) {
      await client.close().catch(() => undefined);
      if (error instanceof McpConfigError) throw error;
      throw new McpConfigError(
        config.source,
        `MCP server '${server.name}' (${server.target}) could not be started: ${describeError(error, { stderr }, state.redact)}`,
      );
    }
    const connection: Connection = { client, transport, stderr, inFlight: 0, retired: false };
    state.live = connection;
    state.state = 'connected';
    state.error = undefined;
    return connection;
  }

  // At start every server is connected and listed at once; a worker refuses to start when one fails.
  const outcomes = await Promise.allSettled([...states.values()].map((state) => connected(state)));
  const failure = outcomes.find((outcome) => outcome.status === 'rejected');
  if (options.strict && failure !== undefined) {
    closed = true;
    await Promise.all([...states.values()].map((state) => closeState(state)));
    throw failure.reason;
  }

  async function closeState(state: ServerState): Promise<void> {
    const connection = await state.connection?.catch(() => undefined);
    state.connection = undefined;
    await connection?.client.close().catch(() => undefined);
  }

  return {
    source: config.source,
    tools: () => index,
    serverNames: config.servers.map((server) => server.name),
    status: () =>
      [...states.values()].map((state) => ({
        name: state.config.name,
        transport: state.config.transport,
        target: state.config.target,
        state: state.state,
        ...(state.error === undefined ? {} : { error: state.error }),
        tools: state.tools,
      })),
    async close() {
      closed = true;
      await Promise.all([
        ...[...states.values()].map((state) => closeState(state)),
        ...[...retiredOpen].map((connection) => connection.client.close().catch(() => undefined)),
      ]);
    },
  };
}

/**
 * The transport to a server; for a stdio one, its stderr kept in `stderr` by whole lines (a line split across chunks
 * is one line, so a secret in it is redacted whole), the last {@link STDERR_LINES_KEPT}, each at most
 * {@link STDERR_LINE_MAX} characters.
 */
function createTransport(
  server: McpServerConfig,
  stderr: string[],
  sandbox: ShellSandbox | undefined,
  source: string,
): Transport {
  if (server.transport === 'http') {
    return new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { ...server.headers } } });
  }
  // The worker's few harmless variables (the SDK adds the same few of its own process) and this server's own.
  const env = { ...server.inheritedEnv, ...server.env };
  const transport = new StdioClientTransport({
    ...(server.sandbox === undefined
      ? { command: server.command, args: [...server.args] }
      : sandboxedCommand(server, sandbox, env.HOME, source)),
    env,
    cwd: server.cwd,
    stderr: 'pipe',
  });
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let overlong = false;
  const keep = (line: string) => {
    if (overlong || line.length > STDERR_LINE_MAX) {
      stderr.push(`[a line of more than ${STDERR_LINE_MAX} characters, not kept]`);
    } else if (line.trim() !== '') stderr.push(line);
    overlong = false;
    if (stderr.length > STDERR_LINES_KEPT) stderr.splice(0, stderr.length - STDERR_LINES_KEPT);
  };
  transport.stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + decoder.write(chunk)).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) keep(line);
    if (partial.length > STDERR_LINE_MAX) {
      overlong = true;
      partial = '';
    }
  });
  transport.stderr?.on('end', () => {
    const rest = partial + decoder.end();
    partial = '';
    if (rest !== '' || overlong) keep(rest);
  });
  return transport;
}

/**
 * bwrap running the server's command: the sandbox of a shell command, with the server's `cwd` as its working
 * directory (the only one writable) and its own network unless the server's `sandbox` shares the worker's.
 * @throws McpConfigError naming the server when the worker cannot sandbox, or `cwd` cannot be a sandbox's directory
 */
function sandboxedCommand(
  server: McpStdioServer,
  sandbox: ShellSandbox | undefined,
  home: string | undefined,
  source: string,
): { command: string; args: string[] } {
  const fail = (reason: string) =>
    new McpConfigError(source, `MCP server '${server.name}' asks for a sandbox: ${reason}`);
  if (sandbox === undefined || sandbox.kind === 'none') {
    throw fail('this worker runs without one (BATON_SHELL_SANDBOX=none), so the server is not started');
  }
  if (sandbox.kind === 'unavailable') throw fail(`this worker cannot make one: ${sandbox.reason}`);
  let cwd: string;
  try {
    cwd = fs.realpathSync(server.cwd);
  } catch (error) {
    throw fail(`its cwd ${server.cwd} cannot be used (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const problem = boundDirectoryProblem(sandbox, cwd, home);
  if (problem !== undefined) throw fail(`its cwd ${server.cwd} ${problem}`);
  const run = { bound: cwd, cwd, network: server.sandbox?.network ?? false, ...(home === undefined ? {} : { home }) };
  return { command: sandbox.bwrap, args: [...sandboxArguments(sandbox, run), '--', server.command, ...server.args] };
}

/**
 * Every page of a server's tools, within {@link CONNECT_TIMEOUT_MS} in all.
 * @throws Error when the list runs past {@link MAX_MCP_TOOL_PAGES} pages or {@link MAX_MCP_TOOLS} tools, or gives a
 * cursor it gave before: a server whose list never ends must not hold the worker
 */
async function listAllTools(client: Client): Promise<Tool[]> {
  const deadline = Date.now() + CONNECT_TIMEOUT_MS;
  const tools: Tool[] = [];
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let page = 1; ; page += 1) {
    const timeout = deadline - Date.now();
    if (timeout <= 0) {
      throw new Error(`its tool list took more than ${CONNECT_TIMEOUT_MS / 1000} seconds (${page - 1} pages)`);
    }
    const listed = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
    tools.push(...listed.tools);
    if (tools.length > MAX_MCP_TOOLS) throw new Error(`its tool list ran past ${MAX_MCP_TOOLS} tools`);
    cursor = listed.nextCursor;
    if (cursor === undefined) return tools;
    if (cursors.has(cursor)) {
      throw new Error(
        `its tool list gave the cursor ${JSON.stringify(cutText(cursor, 100))} twice (page ${page + 1} would ` +
          'repeat an earlier one)',
      );
    }
    if (page === MAX_MCP_TOOL_PAGES) throw new Error(`its tool list ran past ${MAX_MCP_TOOL_PAGES} pages`);
    cursors.add(cursor);
  }
}

/**
 * An error in one line, with the system's error code found down its causes, and what a stdio server last said; all
 * of it redacted, since the SDK's errors and the server's words may hold a value the server was given.
 */
function describeError(
  error: unknown,
  connection: { stderr: readonly string[] },
  redact: (text: string) => string,
): string {
  const base = error instanceof Error ? error.message : String(error);
  let code: string | undefined;
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 5; depth += 1) {
    const found = (cause as { code?: unknown }).code;
    if (typeof found === 'string' && /^E[A-Z]+$/.test(found)) code = found;
    cause = cause.cause;
  }
  const detail = code !== undefined && !base.includes(code) ? ` (${code})` : '';
  const last = connection.stderr.at(-1);
  const said = last === undefined ? '' : `; its last output: ${cutText(redact(last), STDERR_LINE_SHOWN)}`;
  return `${cutText(redact(base).split('\n')[0] ?? '', ERROR_SHOWN)}${detail}${said}`;
}

/** At most `max` characters, cut with an ellipsis. */
function cutText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
