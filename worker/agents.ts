import fs from 'node:fs';
import path from 'node:path';
import matter from 'gray-matter';
import YAML from 'yaml';
import {
  agentFrontmatterSchema,
  approvalTool,
  modelChain,
  type AgentDefinition,
  type AgentRegistry,
} from '../common/agent-definition';
import { grantsCapability, isUniversalCapability, mcpServerOfCapability } from '../common/capabilities';
import { routeModel } from '../activities/model-providers';
import { FINAL_OUTPUT_TOOL, outputSchemaProblem } from '../activities/output';

/**
 * Refuses an `output` that cannot be checked (not a JSON Schema with an object at its root, or one that does not
 * compile) and a typed agent that names a capability called like the tool that gives its answer.
 * @throws AgentConfigError naming the file and the line of `output` or `capabilities`.
 */
export function checkOutputs(agents: AgentRegistry): void {
  for (const agent of agents.values()) {
    if (agent.output === undefined) continue;
    const text = fs.existsSync(agent.source) ? fs.readFileSync(agent.source, 'utf8') : '';
    const problem =
      typeof agent.output !== 'object' || agent.output === null || agent.output.type !== 'object'
        ? "must be a JSON Schema whose root is 'type: object'"
        : outputSchemaProblem(agent.output);
    if (problem !== undefined) {
      throw new AgentConfigError(agent.source, frontmatterLine(text, 'output'), `field 'output' ${problem}`);
    }
    if (agent.capabilities.includes(FINAL_OUTPUT_TOOL)) {
      throw new AgentConfigError(
        agent.source,
        frontmatterLine(text, 'capabilities'),
        `capability '${FINAL_OUTPUT_TOOL}' is the tool a typed agent (one with 'output') answers through: rename it`,
      );
    }
  }
}

/** A bad agent file: names the file, the line when known, and the reason. Stops start-up. */
export class AgentConfigError extends Error {
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${file}${line === undefined ? '' : `:${line}`}: ${reason}`, options);
    this.name = new.target.name;
  }
}

/** The agents a worker can run, by name. */
export type { AgentRegistry };

/** Frontmatter that parsed as YAML but is not a mapping of fields: a list, a string, a number. */
class NotAMappingError extends Error {
  constructor(readonly kind: string) {
    super(`the frontmatter must be a YAML mapping of fields (name: …, description: …), not ${kind}`);
  }
}

/** Frontmatter is parsed with `yaml` (YAML 1.2, precise error positions) instead of gray-matter's default js-yaml. */
const yamlEngine = {
  parse: (text: string): object => {
    const parsed: unknown = YAML.parse(text, { prettyErrors: true });
    if (parsed === null || parsed === undefined) return {};
    if (Array.isArray(parsed)) throw new NotAMappingError('a list');
    if (typeof parsed !== 'object') throw new NotAMappingError(`a ${typeof parsed}`);
    return parsed;
  },
};

/** What a YAML value is, in words, for "must be a list (got a string)". */
function describeValue(value: unknown): string {
  if (value === null) return 'null';
  // The number itself says more than its type: a whole number was expected and 1.5 came.
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value}`;
}

/** What a schema expected, in words. */
function describeExpected(expected: string): string {
  if (expected === 'array') return 'a list';
  if (expected === 'object') return 'a mapping';
  if (expected === 'int') return 'a whole number';
  return `a ${expected}`;
}

/**
 * Parses one agent file's text.
 * @throws AgentConfigError naming the file and line for YAML errors, missing or invalid fields.
 */
export function parseAgentFile(fileText: string, source: string): AgentDefinition {
  // Editors on Windows may start a UTF-8 file with a byte-order mark; it is not part of the text.
  const text = fileText.startsWith('\uFEFF') ? fileText.slice(1) : fileText;
  if (!text.startsWith('---')) {
    throw new AgentConfigError(source, 1, 'missing YAML frontmatter: the file must start with a line "---"');
  }
  let parsed: matter.GrayMatterFile<string>;
  try {
    // An empty options object bypasses gray-matter's cache, which would hand back stale results for equal text.
    parsed = matter(text, { engines: { yaml: yamlEngine } });
  } catch (error) {
    if (error instanceof NotAMappingError) throw new AgentConfigError(source, 2, error.message, { cause: error });
    const linePos = (error as { linePos?: { line: number }[] }).linePos?.[0]?.line;
    // The file line is reported separately; drop the parser's position within the frontmatter.
    const reason = (error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)).replace(
      / at line \d+, column \d+:?$/,
      '',
    );
    // The frontmatter starts on line 2 of the file.
    throw new AgentConfigError(source, linePos === undefined ? undefined : linePos + 1, `invalid YAML: ${reason}`, {
      cause: error,
    });
  }
  const result = agentFrontmatterSchema.safeParse(parsed.data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const path = (issue?.path ?? []).map(String);
    const field = path.join('.') || '(frontmatter)';
    // zod does not report the input by default: look the value up, so a wrong type is not called missing.
    const given = valueAt(parsed.data, path);
    // An unknown key inside a mapping (`context: { max_token: … }`) is named with its parent.
    const unknown = issue?.code === 'unrecognized_keys' ? issue.keys.map((key) => [...path, key].join('.')) : [];
    const reason =
      issue?.code === 'invalid_type' && given === undefined
        ? `missing required field '${field}'`
        : issue?.code === 'invalid_type'
          ? `field '${field}' must be ${describeExpected(issue.expected)} (got ${describeValue(given)})`
          : issue?.code === 'unrecognized_keys'
            ? `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}`
            : `field '${field}' ${issue?.message ?? 'is invalid'}`;
    const linePath = issue?.code === 'unrecognized_keys' ? [...path, issue.keys[0] ?? ''] : path;
    throw new AgentConfigError(source, linePath.length === 0 ? undefined : frontmatterLine(text, linePath), reason);
  }
  return { ...result.data, body: parsed.content.trim(), source };
}

/** The value at `path` in parsed frontmatter, or `undefined`. */
function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let value = data;
  for (const segment of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, segment)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[segment];
  }
  return value;
}

/**
 * 1-based line of a frontmatter key, for error messages: a top-level key, or a nested one (`context.max_tokens`)
 * written on its own line under its parent; else the deepest parent found (a flow mapping `{ … }` is one line).
 */
function frontmatterLine(text: string, key: string | readonly string[]): number | undefined {
  const [top, ...nested] = typeof key === 'string' ? [key] : key;
  const lines = text.split('\n');
  let index = lines.findIndex((line, i) => i > 0 && line.startsWith(`${top}:`));
  if (index < 0) return undefined;
  for (const segment of nested) {
    // Look only inside the parent's block: the indented lines that follow it.
    let i = index + 1;
    while (i < lines.length && /^\s+\S/.test(lines[i] ?? '') && !(lines[i] ?? '').trimStart().startsWith(`${segment}:`))
      i++;
    if (i >= lines.length || !/^\s+\S/.test(lines[i] ?? '')) break;
    index = i;
  }
  return index + 1;
}

export interface LoadAgentsOptions {
  /** Tool names agents may declare as capabilities (besides each other's names). */
  toolNames: readonly string[];
  /** Tools the workflow carries out (`ask_human`, `wait`, `fork_join`): no approval can gate them. */
  workflowTools?: readonly string[];
  /** The providers an agent's `model` may name as `provider/model` (see `routeModel`). @default none */
  providers?: readonly string[];
  /** The MCP servers an agent's `mcp:<server>` capability may name. @default none */
  mcpServers?: readonly string[];
}

/**
 * Loads every `*.md` file of `dir` as an agent.
 * @throws AgentConfigError for a missing directory, a bad file, a duplicate name, a capability that is neither a
 * tool nor an agent, or a `model` naming a provider that is not configured.
 */
export function loadAgents(dir: string, options: LoadAgentsOptions): AgentRegistry {
  const root = path.resolve(dir);
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) {
    throw new AgentConfigError(root, undefined, 'agents directory not found');
  }
  const agents = new Map<string, AgentDefinition>();
  for (const file of fs
    .readdirSync(root)
    .filter((name) => name.endsWith('.md'))
    .sort()) {
    const source = path.join(root, file);
    const definition = parseAgentFile(fs.readFileSync(source, 'utf8'), source);
    const existing = agents.get(definition.name);
    if (existing) {
      throw new AgentConfigError(
        source,
        frontmatterLine(fs.readFileSync(source, 'utf8'), 'name'),
        `duplicate agent name '${definition.name}' (also defined in ${existing.source})`,
      );
    }
    agents.set(definition.name, definition);
  }
  if (agents.size === 0) throw new AgentConfigError(root, undefined, 'no agent files (*.md) found');
  checkCapabilities(agents, options.toolNames, options.workflowTools, options.mcpServers);
  checkModels(agents, options.providers ?? []);
  checkOutputs(agents);
  return agents;
}

/**
 * Refuses a capability that names neither a tool nor an agent, and an `approval` entry that names no tool the agent
 * can call and the activity runs.
 * @throws AgentConfigError naming the file and the line of `capabilities` or `approval`.
 */
export function checkCapabilities(
  agents: AgentRegistry,
  toolNames: readonly string[],
  workflowTools: readonly string[] = [],
  mcpServers: readonly string[] = [],
): void {
  const fileText = (agent: AgentDefinition) =>
    fs.existsSync(agent.source) ? fs.readFileSync(agent.source, 'utf8') : '';
  for (const agent of agents.values()) {
    for (const capability of agent.capabilities) {
      if (toolNames.includes(capability) || agents.has(capability)) continue;
      const server = mcpServerOfCapability(capability);
      if (server !== undefined) {
        if (mcpServers.includes(server)) continue;
        throw new AgentConfigError(
          agent.source,
          frontmatterLine(fileText(agent), 'capabilities'),
          `capability '${capability}' names no MCP server of this worker (${mcpServers.length > 0 ? `servers: ${mcpServers.join(', ')}` : 'none is configured: give a configuration file with --mcp or BATON_MCP_CONFIG'})`,
        );
      }
      throw new AgentConfigError(
        agent.source,
        frontmatterLine(fileText(agent), 'capabilities'),
        `capability '${capability}' is neither a tool nor an agent (tools: ${toolNames.join(', ')}; agents: ${[...agents.keys()].join(', ')})`,
      );
    }
    for (const entry of agent.approval) {
      const tool = approvalTool(entry);
      const callable = isUniversalCapability(tool) || grantsCapability(agent.capabilities, tool);
      const reason = !toolNames.includes(tool)
        ? agents.has(tool)
          ? `approval '${tool}' names an agent: approvals gate tool calls, not delegations`
          : `approval '${tool}' names no tool (tools: ${toolNames.join(', ')})`
        : workflowTools.includes(tool)
          ? `approval '${tool}' names a tool Baton's workflow carries out itself: no approval can gate it`
          : !callable
            ? `approval '${tool}' names a tool this agent cannot call: add it to 'capabilities'`
            : undefined;
      if (reason !== undefined) {
        throw new AgentConfigError(agent.source, frontmatterLine(fileText(agent), 'approval'), reason);
      }
    }
  }
}

/**
 * Refuses a `model` that routes nowhere: `provider/model` naming a provider that is not configured, so a misspelt
 * provider stops start-up (or a `baton dev` reload) instead of sending requests to the wrong endpoint.
 * @throws AgentConfigError naming the file and the line of `model`.
 */
export function checkModels(agents: AgentRegistry, providers: readonly string[]): void {
  for (const agent of agents.values()) {
    for (const model of modelChain(agent)) {
      const routed = routeModel(model, providers);
      if (!('problem' in routed)) continue;
      const text = fs.existsSync(agent.source) ? fs.readFileSync(agent.source, 'utf8') : '';
      throw new AgentConfigError(agent.source, frontmatterLine(text, 'model'), routed.problem);
    }
  }
}
