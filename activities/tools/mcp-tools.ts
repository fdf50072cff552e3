/**
 * An MCP server's tools as Baton tools: named `<server>__<tool>`, offered to the model with the input schema the
 * server gives, checked against that schema before a call, read-only ones retried and the rest run once per
 * operation id (`sideEffects`), and their results (text, structured content, images, errors) turned into what the
 * transcript stores.
 */
import type { CallToolResult, ContentBlock, Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import { MCP_TOOL_SEPARATOR } from '../../common/capabilities';
import { McpConfigError, type McpServerConfig } from './mcp-config';
import { ToolError, type ToolContext, type ToolDefinition } from './types';
import { DEFAULT_USER_TOOL_MAX_RESULT_BYTES, DEFAULT_USER_TOOL_RETRIES } from './user-tools';

/** The longest name the Chat Completions API takes for a function. */
const MAX_FUNCTION_NAME = 64;

/** One MCP tool as a worker offers it. */
export interface McpTool {
  /** The server's name for it. */
  readonly serverTool: string;
  readonly server: string;
  /** Whether Baton retries it (the server's `readOnlyHint`, or the server's `readOnly` setting). */
  readonly readOnly: boolean;
  readonly tool: ToolDefinition;
  /** The input schema as the server gives it: what the model receives. */
  readonly inputSchema: Record<string, unknown>;
}

/** Runs one call on the server's connection: what `McpServers.call` does. */
export type McpCall = (
  server: string,
  tool: string,
  args: Record<string, unknown>,
  options: {
    signal: AbortSignal;
    /** Without an answer or a progress notification for this long, the call is cancelled. */
    timeoutMs: number;
    /** However it reports progress, the call is cancelled after this long. */
    maxTimeoutMs: number;
    onProgress: (progress: McpProgress) => void;
  },
) => Promise<CallToolResult>;

export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** `<server>__<tool>` with every character the model API refuses in a function name mapped to `_`. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}${MCP_TOOL_SEPARATOR}${tool.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
}

/**
 * The tools a server listed, narrowed by its `allow` and `deny` lists, as Baton tools.
 * @throws McpConfigError naming the file, the server and the tool: a name over 64 characters or two tools mapping to
 * one name, an input schema that cannot be compiled, an `allow` entry the server does not list
 */
export function toMcpTools(server: McpServerConfig, listed: readonly Tool[], call: McpCall, source: string): McpTool[] {
  const fail = (reason: string) => new McpConfigError(source, `MCP server '${server.name}': ${reason}`);
  const names = new Set(listed.map((tool) => tool.name));
  const missing = (server.allow ?? []).filter((name) => !names.has(name));
  if (missing.length > 0) {
    throw fail(
      `'allow' names ${missing.map((name) => `'${name}'`).join(', ')}, which the server does not list (it lists ${[...names].join(', ') || 'no tools'})`,
    );
  }
  const offered = listed.filter(
    (tool) => (server.allow === undefined || server.allow.includes(tool.name)) && !server.deny.includes(tool.name),
  );
  const byName = new Map<string, string>();
  const validator = new AjvJsonSchemaValidator();
  return offered.map((listedTool) => {
    const name = mcpToolName(server.name, listedTool.name);
    if (name.length > MAX_FUNCTION_NAME) {
      throw fail(
        `tool '${listedTool.name}' would be called '${name}', ${name.length} characters; the model API takes at most ` +
          `${MAX_FUNCTION_NAME}: give the server a shorter name or add the tool to 'deny'`,
      );
    }
    const clash = byName.get(name);
    if (clash !== undefined) {
      throw fail(`tools '${clash}' and '${listedTool.name}' would both be called '${name}': add one to 'deny'`);
    }
    byName.set(name, listedTool.name);
    const inputSchema = listedTool.inputSchema as Record<string, unknown>;
    let validate: (input: unknown) => { valid: boolean; errorMessage?: string | undefined };
    try {
      validate = validator.getValidator(inputSchema);
    } catch (error) {
      throw fail(
        `tool '${listedTool.name}' has an input schema that cannot be used: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const readOnly = isReadOnly(server, listedTool);
    const parameters = z.looseObject({}).superRefine((args, ctx) => {
      const result = validate(args);
      if (!result.valid) ctx.addIssue({ code: 'custom', message: result.errorMessage ?? 'does not match the schema' });
    });
    const approval = server.approval;
    const tool: ToolDefinition = {
      name,
      description: (listedTool.description ?? listedTool.title ?? listedTool.name).trim() || listedTool.name,
      parameters,
      handledBy: 'activity',
      sideEffects: !readOnly,
      // The activity's bound; the server's `timeout_s` is the SDK's, reset by each progress notification.
      timeout_s: server.maxTimeoutS,
      retries: readOnly ? DEFAULT_USER_TOOL_RETRIES : 0,
      maxResultBytes: DEFAULT_USER_TOOL_MAX_RESULT_BYTES,
      needsApproval:
        approval === 'all' ||
        (approval === 'writes' && !readOnly) ||
        (Array.isArray(approval) && approval.includes(listedTool.name)),
      run: async (args: Record<string, unknown>, context: ToolContext) => {
        const result = await call(server.name, listedTool.name, args, {
          signal: context.signal,
          timeoutMs: server.timeoutS * 1000,
          maxTimeoutMs: server.maxTimeoutS * 1000,
          onProgress: (progress) => context.heartbeat({ tool: name, ...progress }),
        });
        const content = formatMcpResult(result);
        if (result.isError === true) throw new ToolError(content || `tool '${listedTool.name}' reported an error`);
        return content;
      },
    };
    return { serverTool: listedTool.name, server: server.name, readOnly, tool, inputSchema: withoutMeta(inputSchema) };
  });
}

function isReadOnly(server: McpServerConfig, tool: Tool): boolean {
  if (server.readOnly === 'none') return false;
  if (server.readOnly === 'hints') return tool.annotations?.readOnlyHint === true;
  return server.readOnly.includes(tool.name);
}

/** The schema without `$schema`, which some model APIs refuse inside a function's parameters. */
function withoutMeta(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _schema, ...rest } = schema;
  return rest;
}

/**
 * A call's result as the text the transcript stores: the structured content as JSON when there is some (the text
 * blocks then only repeat it), else each block in order. Binary content never enters the transcript or history: an
 * image, an audio clip or a binary resource becomes a short placeholder with its type and size.
 */
export function formatMcpResult(result: CallToolResult): string {
  if (result.structuredContent !== undefined && result.isError !== true) {
    return JSON.stringify(result.structuredContent);
  }
  return (result.content ?? []).map(formatBlock).join('\n');
}

function formatBlock(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`;
    case 'resource_link':
      return `[resource link: ${block.uri}${block.name ? ` (${block.name})` : ''}]`;
    case 'resource': {
      const { resource } = block;
      if ('text' in resource && typeof resource.text === 'string') return resource.text;
      const size =
        'blob' in resource && typeof resource.blob === 'string' ? `, ${base64Bytes(resource.blob)} bytes` : '';
      return `[resource: ${resource.uri}${resource.mimeType ? `, ${resource.mimeType}` : ''}${size}, not shown]`;
    }
    default:
      return `[${(block as { type: string }).type} content, not shown]`;
  }
}

/** The decoded size of base64 text, without decoding it. */
function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}
