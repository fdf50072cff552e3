import type { AgentDefinition } from '../../common/agent-definition';
import { grantsCapability, isUniversalCapability } from '../../common/capabilities';
import type { ToolCallRequest } from '../../common/types';
import type { ToolRegistry } from '.';
import { delegationParameters, type DelegationArguments } from './delegation';
import type { ToolDefinition } from './types';
import { describeIssues } from './zod-issues';

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
