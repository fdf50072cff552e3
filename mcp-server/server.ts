/**
 * Baton as an MCP server, on the official SDK's low-level `Server`: the tools of tools.ts and the agents'
 * definitions as resources. The low-level server (not `McpServer`) lets every refusal be a tool error in Baton's
 * own words: `McpServer` checks arguments itself and answers with its own multi-line text.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { BatonClientError, type BatonClient } from '../client';
import { describeError } from '../client/errors';
import { describeIssues } from '../activities/tools/zod-issues';
import { AGENT_URI_TEMPLATE, agentMarkdown, agentNameOfUri, agentResourceUri } from './resources';
import {
  DEFAULT_ACCEPT_WAIT_SECONDS,
  DEFAULT_STATUS_WAIT_SECONDS,
  MAX_WAIT_SECONDS,
  TOOLS,
  type McpServerWaits,
  type McpTool,
} from './tools';
import { BATON_VERSION } from '../worker/version';

export interface BatonMcpServerOptions {
  /** The client every call uses: connected when first asked for, so the server starts before Baton does. */
  client: () => Promise<BatonClient>;
  /**
   * Seconds `start_thread` and `send_message` wait for the thread to accept the message (only a worker's workflow task
   * accepts one) before the call fails saying no worker took it; the message may still run once one does. From 1 to
   * MAX_WAIT_SECONDS. @default DEFAULT_ACCEPT_WAIT_SECONDS (20)
   */
  acceptWaitSeconds?: number;
  /**
   * Seconds `get_thread` waits for the thread's worker to answer what it is doing before the call fails saying none
   * did. From 1 to MAX_WAIT_SECONDS. @default DEFAULT_STATUS_WAIT_SECONDS (10)
   */
  statusWaitSeconds?: number;
}

/** What the server tells a client about using it, at `initialize`. */
const INSTRUCTIONS = `Baton runs teams of LLM agents as durable workflows. list_agents shows who can answer; start_thread starts a conversation with one and send_message continues it.
A turn may take minutes: start_thread and send_message return at once with the thread id and a message id, or with wait: true the reply if it comes within the wait (at most ${MAX_WAIT_SECONDS} s); otherwise call get_thread with the message_id (and wait_seconds) until its status is no longer 'running'.
While a turn runs, an agent may ask a person a question (list_questions, answer_question) or wait for a person to approve a tool call (list_approvals, decide_approval); get_thread lists both.
get_transcript pages through a thread's messages; list_env_data and get_env_data read the data its agents shared. Each agent's definition is the resource baton://agents/<name>.`;

/**
 * The longest a call may talk to Temporal without a bound of its own (a query to a thread no worker serves would
 * otherwise hang); the waits for a reply and for a message's acceptance have their own, shorter bounds.
 */
const CALL_DEADLINE_MS = (MAX_WAIT_SECONDS + 5) * 1000;

function listing(tool: McpTool): Tool {
  const { $schema: _schema, ...inputSchema } = z.toJSONSchema(tool.parameters, { io: 'input' }) as Record<
    string,
    unknown
  >;
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: inputSchema as Tool['inputSchema'],
    annotations: { title: tool.title, ...tool.annotations },
  };
}

function toolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** The server's waits for a worker, checked. @throws RangeError for a wait outside 1 to MAX_WAIT_SECONDS seconds */
function serverWaits(options: BatonMcpServerOptions): McpServerWaits {
  const waits = {
    acceptWaitSeconds: options.acceptWaitSeconds ?? DEFAULT_ACCEPT_WAIT_SECONDS,
    statusWaitSeconds: options.statusWaitSeconds ?? DEFAULT_STATUS_WAIT_SECONDS,
  };
  for (const [name, seconds] of Object.entries(waits)) {
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_WAIT_SECONDS) {
      throw new RangeError(`${name} must be a whole number of seconds from 1 to ${MAX_WAIT_SECONDS}, not ${seconds}`);
    }
  }
  return Object.freeze(waits);
}

/**
 * A new MCP server over Baton; connect it to one transport (each HTTP request gets its own).
 * @throws RangeError for a wait out of bounds
 */
export function createBatonMcpServer(options: BatonMcpServerOptions): Server {
  const waits = serverWaits(options);
  const server = new Server(
    { name: 'baton', title: 'Baton', version: BATON_VERSION },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS },
  );
  const tools = new Map(TOOLS.map((tool) => [tool.name, tool]));
  const listed = TOOLS.map(listing);

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const tool = tools.get(name);
    if (!tool) return toolError(`unknown tool '${name}'; the tools are ${[...tools.keys()].join(', ')}`);
    const parsed = tool.parameters.safeParse(args ?? {});
    if (!parsed.success) return toolError(`invalid arguments for '${name}': ${describeIssues(parsed.error.issues)}`);
    try {
      const client = await options.client();
      const result = await client.temporal.connection.withDeadline(Date.now() + CALL_DEADLINE_MS, () =>
        tool.run(parsed.data, { client, waits, signal: extra.signal, clientName: server.getClientVersion()?.name }),
      );
      // Through JSON, as the client will see it: dates as ISO text, nothing undefined.
      const structured = JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
      return { content: [{ type: 'text', text: JSON.stringify(structured, null, 2) }], structuredContent: structured };
    } catch (error) {
      return toolError(describeError(error));
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => {
    const agents = await resourceCall(async () => (await options.client()).agents());
    return {
      resources: agents.map(({ definition }) => ({
        uri: agentResourceUri(definition.name),
        name: definition.name,
        title: `Agent ${definition.name}`,
        description: definition.description,
        mimeType: 'text/markdown',
      })),
    };
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: AGENT_URI_TEMPLATE,
        name: 'agent',
        title: "An agent's definition",
        description: 'The agent file as a worker last stored it: frontmatter, then the system prompt.',
        mimeType: 'text/markdown',
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const name = agentNameOfUri(uri);
    if (name === undefined) {
      throw new McpError(ErrorCode.InvalidParams, `no resource at '${uri}': Baton's are ${AGENT_URI_TEMPLATE}`);
    }
    const stored = await resourceCall(async () => (await options.client()).agent(name));
    return { contents: [{ uri, mimeType: 'text/markdown', text: agentMarkdown(stored) }] };
  });

  return server;
}

/** Runs a resource request; what fails is a JSON-RPC error in Baton's words (resources have no `isError`). */
async function resourceCall<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    const code = error instanceof BatonClientError ? ErrorCode.InvalidParams : ErrorCode.InternalError;
    throw new McpError(code, describeError(error));
  }
}
