import { agentApprovalRule, type AgentDefinition } from '../../common/agent-definition';
import type { ApprovalContext, ToolDefinition } from './types';

/**
 * Whether a call must wait for a person's approval, and for how long: the agent's `approval` rule for the tool, else
 * the tool's `needsApproval`. A `needsApproval` function that throws asks for approval: when in doubt, ask.
 */
export async function approvalFor(
  tool: ToolDefinition,
  args: unknown,
  agent: AgentDefinition,
  context: () => Promise<ApprovalContext>,
): Promise<{ timeoutSeconds?: number } | undefined> {
  const rule = agentApprovalRule(agent, tool.name);
  if (rule !== undefined) return rule.timeoutS === undefined ? {} : { timeoutSeconds: rule.timeoutS };
  const { needsApproval } = tool;
  let needed = needsApproval === true;
  if (typeof needsApproval === 'function') {
    try {
      needed = (await needsApproval(args, await context())) === true;
    } catch {
      needed = true;
    }
  }
  if (!needed) return undefined;
  return tool.approvalTimeout_s === undefined ? {} : { timeoutSeconds: tool.approvalTimeout_s };
}
