/**
 * The MCP servers a worker connects to, from a JSON file in the shape other MCP clients already use:
 * `{ "mcpServers": { "<name>": { "command", "args", "env", "cwd" } | { "url", "headers" } } }`, with Baton's own
 * optional fields per server (which tools, how long a call may take, which tools are read-only, which need approval,
 * whether a local server runs in a sandbox).
 * `${VAR}` references are resolved from the environment the caller passes (the worker's), so secrets stay out of the
 * file; and out of every message: errors, log lines and `baton mcp list` show a server's command line or URL as the
 * file writes it, and what a server says is redacted of every value Baton gave it ({@link mcpRedactor}), since an
 * error of a call is the model's to read. Every refusal names the file and the server.
 */
import path from 'node:path';
import { z } from 'zod';
import { MCP_TOOL_SEPARATOR } from '../../common/capabilities';
import { describeIssues } from './zod-issues';

/** Seconds an MCP tool call may go without its answer or a progress notification, when its server sets none. */
export const DEFAULT_MCP_TIMEOUT_S = 60;
/**
 * Seconds an MCP tool call may take in all, progress or not, when its server sets no `max_timeout_s`: ten minutes,
 * short enough for a call to run with the next model call (`MAX_CARRIED_TOOL_SECONDS`), saving a dispatch.
 */
export const DEFAULT_MCP_MAX_TIMEOUT_S = 600;
/** The longest either may be: a day, as for users' tools. */
export const MAX_MCP_TIMEOUT_S = 24 * 3600;
/** A server's name: it starts each of its tools' names (`<server>__<tool>`), so it holds no `__`. */
export const MCP_SERVER_NAME_PATTERN = /^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$/;
/**
 * Values shorter than this are not redacted from what a server says. Redaction cannot hide them: a placeholder where
 * one, two or three characters stood gives them away by the text around it, and a secret that short is guessed in a
 * few thousand tries anyway; replacing every `1` or `on` of a message would only make it unreadable. Anything longer
 * is redacted, whatever it is (a path, a port): Baton cannot tell which values are secrets, and the model is untrusted.
 */
export const MIN_REDACTED_LENGTH = 4;

/** A configuration file that cannot be used: names the file, the server when there is one, and why. */
export class McpConfigError extends Error {
  constructor(
    readonly source: string,
    readonly reason: string,
  ) {
    super(`${source}: ${reason}`);
    this.name = new.target.name;
  }
}

/** Which of a server's tools Baton treats as read-only (retried) rather than as having side effects (run once). */
export type McpReadOnlyRule = 'hints' | 'none' | readonly string[];
/** Which of a server's tools need a person's approval before each call. */
export type McpApprovalRule = 'none' | 'writes' | 'all' | readonly string[];

/** A value Baton gives a server and never repeats: one substituted for `${VAR}`, or an `env` or header value. */
export interface McpSecret {
  readonly value: string;
  /** What stands in its place in a message: `${VAR}`, `[env NAME]` or `[header NAME]`. */
  readonly placeholder: string;
}

interface McpServerCommon {
  readonly name: string;
  /**
   * The command line or URL as the file writes it, `${VAR}` unresolved: all that errors, log lines and
   * `baton mcp list` show of where the server is (a resolved value may be a secret, and an error reaches the model).
   */
  readonly target: string;
  /** Every value this server is given that may be a secret: redacted from what it says (see {@link mcpRedactor}). */
  readonly secrets: readonly McpSecret[];
  /** Tools offered (by the server's own names); all when unset. */
  readonly allow?: readonly string[];
  /** Tools never offered (by the server's own names). */
  readonly deny: readonly string[];
  /** Seconds a call may go without its answer or a progress notification before it is cancelled. */
  readonly timeoutS: number;
  /** Seconds a call may take in all, however it reports progress. */
  readonly maxTimeoutS: number;
  /**
   * `hints` (the default): a tool is read-only when the server marks it `readOnlyHint`; `none`: every tool has side
   * effects, whatever the server says; a list: exactly those tools are read-only.
   */
  readonly readOnly: McpReadOnlyRule;
  /** `none` (the default), `writes` (every tool not read-only), `all`, or a list of tools. */
  readonly approval: McpApprovalRule;
}

/** The worker's variables every stdio server gets beside its own `env`: what a program needs to run, no secret. */
export const MCP_INHERITED_VARIABLES = ['HOME', 'LANG', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'] as const;

/** How a sandboxed stdio server is isolated (its `sandbox` setting). */
export interface McpSandboxSetting {
  /** Whether it shares the worker's network (loopback included); without it, it has only a loopback of its own. */
  readonly network: boolean;
}

/**
 * A server Baton starts as a child process of the worker and talks to over stdin and stdout. Unless `sandbox` is
 * set it runs as the worker's user with nothing between them: it can read whatever the worker can, the worker's
 * own environment through `/proc` included.
 */
export interface McpStdioServer extends McpServerCommon {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  /** Variables given to this server only: never to another server or a shell. */
  readonly env: Readonly<Record<string, string>>;
  /** The worker's {@link MCP_INHERITED_VARIABLES} that are set, which the server gets beside its `env`. */
  readonly inheritedEnv: Readonly<Record<string, string>>;
  /** The server's working directory: the configuration file's directory unless set. */
  readonly cwd: string;
  /**
   * Run in a bubblewrap sandbox as shell commands are, with `cwd` its only writable directory (and the system
   * directories read-only), a private HOME and `/tmp`, and no view of the worker's processes. Unset: unsandboxed.
   */
  readonly sandbox?: McpSandboxSetting;
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServer extends McpServerCommon {
  readonly transport: 'http';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

export type McpServerConfig = McpStdioServer | McpHttpServer;

/** The configuration a worker runs with, and the file it came from. */
export interface McpConfig {
  readonly source: string;
  readonly servers: readonly McpServerConfig[];
}

const text = z.string().min(1);
const toolNames = z.array(text);
const baton = {
  allow: toolNames
    .optional()
    .describe(
      "Only these tools (the server's names); one the server does not list is an error at start. Default: all.",
    ),
  deny: toolNames.optional().describe('Never these tools. Default: none.'),
  timeout_s: z
    .int()
    .min(1)
    .max(MAX_MCP_TIMEOUT_S)
    .optional()
    .describe(
      `Seconds a call may go without its answer or a progress notification; then it is cancelled and the model reads why. Default: ${DEFAULT_MCP_TIMEOUT_S}.`,
    ),
  max_timeout_s: z
    .int()
    .min(1)
    .max(MAX_MCP_TIMEOUT_S)
    .optional()
    .describe(`Seconds a call may take in all, progress or not. Default: ${DEFAULT_MCP_MAX_TIMEOUT_S}.`),
  readOnly: z
    .union([z.enum(['hints', 'none']), toolNames])
    .optional()
    .describe("`hints` (the server's readOnlyHint), `none`, or a list of the read-only tools. Default: hints."),
  approval: z
    .union([z.enum(['none', 'writes', 'all']), toolNames])
    .optional()
    .describe(
      '`none`, `writes` (every tool not read-only), `all`, or a list of tools that wait for a person. Default: none.',
    ),
};
const stdioSchema = z
  .strictObject({
    type: z.literal('stdio').optional(),
    command: text.describe("The program to start; `${VAR}` is read from the worker's environment."),
    args: z.array(z.string()).optional().describe('Its arguments.'),
    env: z
      .record(z.string(), z.string())
      .optional()
      .describe('Variables given to this server only, beside the few it inherits (PATH, HOME, …).'),
    cwd: text.optional().describe("Its working directory, relative to the file's. Default: the file's directory."),
    sandbox: z
      .union([z.boolean(), z.strictObject({ network: z.boolean().optional() })])
      .optional()
      .describe('Run it in the bubblewrap sandbox; `{ "network": false }` leaves it only a loopback of its own.'),
    ...baton,
  })
  .describe('A local server: a child process of each worker, spoken to over stdin and stdout.');
const httpSchema = z
  .strictObject({
    type: z.enum(['http', 'streamable-http', 'streamableHttp']).optional(),
    url: text.describe('Its Streamable HTTP address (SSE is not supported).'),
    headers: z.record(z.string(), z.string()).optional().describe('Headers sent with every request.'),
    ...baton,
  })
  .describe('A server over Streamable HTTP.');

/**
 * The file's shape as a schema, for editors and the generated reference (docs/reference/mcp-config.schema.json):
 * {@link parseMcpConfig} checks the same, each refusal worded for its field, and also refuses a server whose
 * `timeout_s` exceeds its `max_timeout_s` and a `${VAR}` that is not set.
 */
export const mcpConfigFileSchema = z
  .strictObject({
    mcpServers: z
      .record(z.string().regex(MCP_SERVER_NAME_PATTERN), z.union([stdioSchema, httpSchema]))
      .describe(
        `Each server by name: letters, digits, '-' and single '_' (its tools are called <server>${MCP_TOOL_SEPARATOR}<tool>).`,
      ),
  })
  .describe('The MCP servers a worker connects to: BATON_MCP_CONFIG, or `baton dev --mcp <file>`.');

/**
 * Parses and checks a configuration file's text.
 * @param source the file, named in every error; relative `cwd`s are resolved against its directory
 * @param env where `${VAR}` references are looked up (the worker's environment)
 * @throws McpConfigError naming the file, the server and the reason
 */
export function parseMcpConfig(
  textOfFile: string,
  source: string,
  env: Readonly<Record<string, string | undefined>>,
): McpConfig {
  let json: unknown;
  try {
    json = JSON.parse(textOfFile);
  } catch (error) {
    throw new McpConfigError(source, `not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new McpConfigError(source, 'must be a JSON object { "mcpServers": { "<name>": { … } } }');
  }
  const unknownTop = Object.keys(json).filter((key) => key !== 'mcpServers');
  if (unknownTop.length > 0) {
    throw new McpConfigError(
      source,
      `unknown field ${unknownTop.map((key) => `'${key}'`).join(', ')} (only 'mcpServers')`,
    );
  }
  const servers = (json as { mcpServers?: unknown }).mcpServers;
  if (typeof servers !== 'object' || servers === null || Array.isArray(servers)) {
    throw new McpConfigError(source, "'mcpServers' must be an object naming each server");
  }
  return {
    source,
    servers: Object.entries(servers).map(([name, entry]) => parseServer(name, entry, source, env)),
  };
}

function parseServer(
  name: string,
  entry: unknown,
  source: string,
  env: Readonly<Record<string, string | undefined>>,
): McpServerConfig {
  const fail = (reason: string) => new McpConfigError(source, `MCP server '${name}': ${reason}`);
  if (!MCP_SERVER_NAME_PATTERN.test(name)) {
    throw fail(
      `the name must be letters, digits, '-' and single '_' (it starts its tools' names, <server>${MCP_TOOL_SEPARATOR}<tool>)`,
    );
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw fail('must be an object with "command" (a local server) or "url" (a server over HTTP)');
  }
  const record = entry as Record<string, unknown>;
  if (record.type === 'sse') throw fail("the SSE transport is not supported: use Streamable HTTP ('url')");
  if ('command' in record === 'url' in record) {
    throw fail('give either "command" (a local server) or "url" (a server over HTTP), not both and not neither');
  }
  const parsed = ('command' in record ? stdioSchema : httpSchema).safeParse(record);
  if (!parsed.success) throw fail(describeIssues(parsed.error.issues, 'field'));
  const substituted: McpSecret[] = [];
  const resolve = (value: string, field: string) =>
    resolveVariables(
      value,
      env,
      (variable) => fail(`${field} names \${${variable}}, which is not set in the worker's environment`),
      (variable, found) => substituted.push({ value: found, placeholder: `\${${variable}}` }),
    );
  const resolveAll = (values: Record<string, string> | undefined, field: string) =>
    Object.fromEntries(Object.entries(values ?? {}).map(([key, value]) => [key, resolve(value, `${field}.${key}`)]));
  const data = parsed.data;
  if (data.timeout_s !== undefined && data.max_timeout_s !== undefined && data.timeout_s > data.max_timeout_s) {
    throw fail("'timeout_s' (without progress) must not exceed 'max_timeout_s' (in all)");
  }
  const common = {
    name,
    target: 'command' in data ? [data.command, ...(data.args ?? [])].join(' ') : data.url,
    ...(data.allow === undefined ? {} : { allow: data.allow }),
    deny: data.deny ?? [],
    timeoutS: data.timeout_s ?? Math.min(DEFAULT_MCP_TIMEOUT_S, data.max_timeout_s ?? DEFAULT_MCP_TIMEOUT_S),
    maxTimeoutS: data.max_timeout_s ?? Math.max(DEFAULT_MCP_MAX_TIMEOUT_S, data.timeout_s ?? 0),
    readOnly: data.readOnly ?? 'hints',
    approval: data.approval ?? 'none',
  };
  // The variables first: a value both substituted and given whole is shown as its variable.
  const secrets = (given: Record<string, string>, kind: 'env' | 'header') => [
    ...substituted,
    ...Object.entries(given).map(([key, value]) => ({ value, placeholder: `[${kind} ${key}]` })),
  ];
  if ('command' in data) {
    const cwd = data.cwd === undefined ? undefined : resolve(data.cwd, 'cwd');
    const command = resolve(data.command, 'command');
    const args = (data.args ?? []).map((arg, index) => resolve(arg, `args[${index}]`));
    const serverEnv = resolveAll(data.env, 'env');
    const inheritedEnv = Object.fromEntries(
      MCP_INHERITED_VARIABLES.flatMap((variable) => {
        const value = env[variable];
        return value === undefined ? [] : [[variable, value]];
      }),
    );
    const sandbox = data.sandbox === undefined || data.sandbox === false ? undefined : data.sandbox;
    return {
      ...common,
      secrets: secrets(serverEnv, 'env'),
      transport: 'stdio',
      command,
      args,
      env: serverEnv,
      inheritedEnv,
      cwd: path.resolve(path.dirname(source), cwd ?? '.'),
      ...(sandbox === undefined ? {} : { sandbox: { network: sandbox === true || (sandbox.network ?? true) } }),
    };
  }
  const url = resolve(data.url, 'url');
  let parsedUrl: URL;
  try {
    parsedUrl = new URL(url);
  } catch {
    throw fail(`'url' is not a URL: ${data.url}`);
  }
  if (parsedUrl.protocol !== 'http:' && parsedUrl.protocol !== 'https:') throw fail("'url' must be http or https");
  const headers = resolveAll(data.headers, 'headers');
  return { ...common, secrets: secrets(headers, 'header'), transport: 'http', url, headers };
}

/**
 * A function that replaces, in a text, every value of `secrets` (as it is, percent-encoded or JSON-escaped) with its
 * placeholder: longest first, in one pass (a placeholder is never redacted again), values shorter than
 * {@link MIN_REDACTED_LENGTH} left as they are.
 */
export function mcpRedactor(secrets: readonly McpSecret[]): (text: string) => string {
  const placeholders = new Map<string, string>();
  for (const { value, placeholder } of secrets) {
    for (const form of [value, ...encodings(value)]) {
      if (form.length >= MIN_REDACTED_LENGTH && !placeholders.has(form)) placeholders.set(form, placeholder);
    }
  }
  if (placeholders.size === 0) return (text) => text;
  const forms = [...placeholders.keys()].sort((a, b) => b.length - a.length);
  const pattern = new RegExp(forms.map((form) => form.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  return (text) => text.replace(pattern, (found) => placeholders.get(found) ?? found);
}

/** How a value may appear changed in a message: in a URL, or inside a JSON string. */
function encodings(value: string): string[] {
  const forms = [JSON.stringify(value).slice(1, -1)];
  try {
    forms.push(encodeURIComponent(value), encodeURI(value));
  } catch {
    // A lone surrogate has no percent-encoding, so it cannot appear as one either.
  }
  return forms.filter((form) => form !== value);
}

/** `${VAR}` replaced by the variable's value; a variable that is not set is an error (never an empty string). */
function resolveVariables(
  value: string,
  env: Readonly<Record<string, string | undefined>>,
  missing: (variable: string) => Error,
  resolved: (variable: string, value: string) => void,
): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, variable: string) => {
    const found = env[variable];
    if (found === undefined) throw missing(variable);
    resolved(variable, found);
    return found;
  });
}
