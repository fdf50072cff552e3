/**
 * Whether a call waits for a person (`approvalFor`): the agent's `approval` rule, else the tool's `needsApproval`,
 * where a function that throws or rejects counts as `true` (README "Your own tools": when in doubt, ask).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { approvalFor } from '../../activities/tools/approval-rule';
import { defineTool, type ApprovalContext, type ToolDefinition } from '../../activities/tools/types';
import { parseAgentFile } from '../../worker/agents';

const agent = parseAgentFile('---\nname: clerk\ndescription: Files things.\n---\nYou file.\n', 'clerk.md');
const context = (): Promise<ApprovalContext> => Promise.resolve({} as ApprovalContext);

function tool(needsApproval: ToolDefinition['needsApproval'], approvalTimeout_s?: number): ToolDefinition {
  return defineTool({
    name: 'file_it',
    description: 'Files a paper.',
    parameters: z.object({ paper: z.string() }),
    ...(needsApproval === undefined ? {} : { needsApproval }),
    ...(approvalTimeout_s === undefined ? {} : { approvalTimeout_s }),
    run: () => 'filed',
  });
}

test('approval rule: a needsApproval function that throws, or whose promise rejects, asks for approval', async () => {
  const thrown = tool(() => {
    throw new Error('the policy service is down');
  });
  assert.deepEqual(await approvalFor(thrown, { paper: 'a' }, agent, context), {});
  const rejected = tool(() => Promise.reject(new Error('timed out asking the policy service')));
  assert.deepEqual(await approvalFor(rejected, { paper: 'a' }, agent, context), {});
  // The tool's approval timeout holds for a call a throw sent to a person, as for any other.
  const timed = tool(() => {
    throw new Error('no answer');
  }, 60);
  assert.deepEqual(await approvalFor(timed, { paper: 'a' }, agent, context), { timeoutSeconds: 60 });
});

test('approval rule: only `true` from the function asks; false, another value or no needsApproval runs the call', async () => {
  assert.deepEqual(
    await approvalFor(
      tool(() => true),
      { paper: 'a' },
      agent,
      context,
    ),
    {},
  );
  assert.deepEqual(await approvalFor(tool(true), { paper: 'a' }, agent, context), {});
  for (const needsApproval of [() => false, () => 'yes' as unknown as boolean, false, undefined]) {
    assert.equal(await approvalFor(tool(needsApproval), { paper: 'a' }, agent, context), undefined);
  }
});
