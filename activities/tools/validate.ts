import type { z } from 'zod';
import type { AgentDefinition } from '../../common/agent-definition';
import { grantsCapability, isUniversalCapability } from '../../common/capabilities';
import type { ToolCallRequest } from '../../common/types';
import type { ToolRegistry } from '.';
import { delegationParameters, type DelegationArguments } from './delegation';
import type { ToolDefinition } from './types';

export type CheckedToolCall =
  | { ok: true; kind: 'tool'; tool: ToolDefinition; args: unknown }
  | { ok: true; kind: 'agent'; agent: string; args: DelegationArguments }
  | { ok: false; error: string };

/**
 * Checks one tool call the model made against the agent's capabilities and the tool's schema. Every refusal is a
 * sentence the model can act on (it becomes the tool result, prefixed with "Error: ", and the turn goes on).
 */
export function checkToolCall(call: ToolCallRequest, agent: AgentDefinition, registry: ToolRegistry): CheckedToolCall {
  const allowed = [...registry.expand(agent.capabilities), ...registry.universal];
  const tool = registry.get(call.name);
  if (!tool && !registry.isAgent(call.name)) {
    return { ok: false, error: `Unknown tool or agent '${call.name}'. You can call: ${allowed.join(', ')}.` };
  }
  if (!isUniversalCapability(call.name) && !grantsCapability(agent.capabilities, call.name)) {
    return {
      ok: false,
      error: `'${call.name}' is not one of your capabilities. You can call: ${allowed.join(', ')}.`,
    };
  }
  let raw: unknown;
  try {
    raw = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      error: `The arguments of '${call.name}' are not valid JSON (${reason}). Send them as one JSON object.`,
    };
  }
  if (!tool) {
    const parsed = delegationParameters.safeParse(raw);
    if (!parsed.success) {
      return { ok: false, error: `Invalid arguments for '${call.name}': ${describeIssues(parsed.error.issues)}.` };
    }
    return { ok: true, kind: 'agent', agent: call.name, args: parsed.data };
  }
  const parsed = tool.parameters.safeParse(raw);
  if (!parsed.success) {
    return { ok: false, error: `Invalid arguments for '${call.name}': ${describeIssues(parsed.error.issues)}.` };
  }
  const refusal = tool.check?.(parsed.data, agent, registry);
  if (refusal !== undefined) return { ok: false, error: `Invalid call of '${call.name}': ${refusal}` };
  return { ok: true, kind: 'tool', tool, args: parsed.data };
}

/** zod's issues as one clause each, joined; `noun` names what an unknown key is (an argument, a field). */
export function describeIssues(issues: readonly z.core.$ZodIssue[], noun = 'argument'): string {
  return issues
    .map((issue) => {
      if (issue.code === 'unrecognized_keys') {
        return `unknown ${noun}${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
      }
      const where = issue.path.length > 0 ? `'${issue.path.join('.')}' ` : '';
      return `${where}${issue.message}`;
    })
    .join('; ');
}
