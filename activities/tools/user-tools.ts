/**
 * Users' own tools: the checks a tool definition from outside Baton must pass before a worker starts, and the
 * defaults it then runs with. Where the definitions come from (a module file, `createBatonWorker({ tools })`) is the
 * caller's business; every refusal names that source.
 */
import { z } from 'zod';
import { MAX_APPROVAL_WAIT_S } from '../../common/agent-definition';
import type { ToolDefinition } from './types';

/** Seconds a user tool's run may take when it sets no `timeout_s`. */
export const DEFAULT_USER_TOOL_TIMEOUT_S = 300;
/** The longest `timeout_s` a user tool may set: a day. */
export const MAX_USER_TOOL_TIMEOUT_S = 24 * 3600;
/** Retries of a user tool without side effects when it sets no `retries`. */
export const DEFAULT_USER_TOOL_RETRIES = 2;
export const MAX_USER_TOOL_RETRIES = 10;
/** The longest result a user tool returns to the model when it sets no `maxResultBytes`. */
export const DEFAULT_USER_TOOL_MAX_RESULT_BYTES = 64 * 1024;
export const MAX_USER_TOOL_MAX_RESULT_BYTES = 1024 * 1024;
/** What the Chat Completions API accepts as a function name. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** A user tool definition that cannot run: names where it came from and why. Stops start-up. */
export class ToolDefinitionError extends Error {
  constructor(
    readonly source: string,
    readonly reason: string,
  ) {
    super(`${source}: ${reason}`);
    this.name = new.target.name;
  }
}

/** A checked user tool and where it was defined, for error messages that name it. */
export interface UserTool {
  readonly tool: ToolDefinition;
  readonly source: string;
}

const FIELDS = [
  'name',
  'description',
  'parameters',
  'run',
  'sideEffects',
  'timeout_s',
  'retries',
  'needsApproval',
  'approvalTimeout_s',
  'maxResultBytes',
  'handledBy',
] as const;

/**
 * Checks what a tool module exported (an array of tools made with `defineTool`) and fills in the defaults.
 * @throws ToolDefinitionError naming `source`, the tool and what is wrong with it
 */
export function prepareUserTools(exported: unknown, source: string): UserTool[] {
  if (!Array.isArray(exported)) {
    throw new ToolDefinitionError(
      source,
      'the tools must be an array of tools made with defineTool (export default [ … ] or export const tools = [ … ])',
    );
  }
  const seen = new Set<string>();
  return exported.map((candidate, index) => {
    const tool = prepareUserTool(candidate, source, index);
    if (seen.has(tool.name)) throw new ToolDefinitionError(source, `tool '${tool.name}' is defined twice`);
    seen.add(tool.name);
    return { tool, source };
  });
}

function prepareUserTool(candidate: unknown, source: string, index: number): ToolDefinition {
  const fail = (what: string, reason: string) => new ToolDefinitionError(source, `${what}: ${reason}`);
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) {
    throw fail(`tool ${index + 1}`, 'must be a tool made with defineTool({ name, description, parameters, run })');
  }
  const definition = candidate as Record<string, unknown>;
  const { name } = definition;
  if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) {
    throw fail(
      `tool ${index + 1}${typeof name === 'string' ? ` ('${name}')` : ''}`,
      "'name' must be 1 to 64 letters, digits, '_' or '-' (what the model API accepts as a function name)",
    );
  }
  const what = `tool '${name}'`;
  const unknown = Object.keys(definition).filter((key) => !(FIELDS as readonly string[]).includes(key));
  if (unknown.length > 0) {
    throw fail(what, `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((key) => `'${key}'`).join(', ')}`);
  }
  if (typeof definition.description !== 'string' || definition.description.trim() === '') {
    throw fail(what, "'description' must be text saying what the tool does (the model reads it)");
  }
  if (typeof definition.run !== 'function') throw fail(what, "'run' must be a function (args, context) => result");
  if (definition.handledBy !== undefined && definition.handledBy !== 'activity') {
    throw fail(what, "'handledBy' may only be 'activity' for a user tool");
  }
  checkParameters(definition.parameters, (reason) => fail(what, reason));
  const { sideEffects } = definition;
  if (sideEffects !== undefined && typeof sideEffects !== 'boolean')
    throw fail(what, "'sideEffects' must be true or false");
  const wholeNumber = (field: string, min: number, max: number): number | undefined => {
    const value = definition[field];
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw fail(what, `'${field}' must be a whole number from ${min} to ${max}`);
    }
    return value;
  };
  const timeoutS = wholeNumber('timeout_s', 1, MAX_USER_TOOL_TIMEOUT_S);
  const retries = wholeNumber('retries', 0, MAX_USER_TOOL_RETRIES);
  if (sideEffects && retries !== undefined && retries > 0) {
    throw fail(what, "a tool with 'sideEffects' runs at most once per call: 'retries' must be 0 or left out");
  }
  const approvalTimeoutS = wholeNumber('approvalTimeout_s', 1, MAX_APPROVAL_WAIT_S);
  const maxResultBytes = wholeNumber('maxResultBytes', 1, MAX_USER_TOOL_MAX_RESULT_BYTES);
  const { needsApproval } = definition;
  if (needsApproval !== undefined && typeof needsApproval !== 'boolean' && typeof needsApproval !== 'function') {
    throw fail(what, "'needsApproval' must be true, false or a function (args, context) => boolean");
  }
  if (approvalTimeoutS !== undefined && (needsApproval === undefined || needsApproval === false)) {
    throw fail(what, "'approvalTimeout_s' is set but the tool never needs approval ('needsApproval')");
  }
  return {
    ...(definition as unknown as ToolDefinition),
    handledBy: 'activity',
    sideEffects: sideEffects ?? false,
    timeout_s: timeoutS ?? DEFAULT_USER_TOOL_TIMEOUT_S,
    retries: retries ?? (sideEffects ? 0 : DEFAULT_USER_TOOL_RETRIES),
    maxResultBytes: maxResultBytes ?? DEFAULT_USER_TOOL_MAX_RESULT_BYTES,
  };
}

/**
 * A tool's parameters must be a zod object whose JSON Schema can be generated (the model receives it). Checked by
 * shape, not `instanceof`: a user project may load its own copy of zod 4.
 */
function checkParameters(parameters: unknown, fail: (reason: string) => Error): void {
  const def = (parameters as { _zod?: { def?: { type?: unknown } } } | null)?._zod?.def;
  if (typeof (parameters as { safeParse?: unknown } | null)?.safeParse !== 'function' || def === undefined) {
    throw fail("'parameters' must be a zod 4 schema: z.object({ … })");
  }
  if (def.type !== 'object') {
    throw fail(`'parameters' must be a zod object, z.object({ … }) (got a zod ${String(def.type)})`);
  }
  try {
    z.toJSONSchema(parameters as z.ZodType, { io: 'input' });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw fail(`'parameters' cannot be given to the model as JSON Schema: ${reason}`);
  }
}
