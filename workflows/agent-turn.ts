import { log, workflowInfo } from '@temporalio/workflow';
import { operationId } from '../common/ids';
import { TurnStatus, type AgentTurnInput, type AgentTurnResult, type ThreadScope } from '../common/types';
import { addUsage, ZERO_USAGE } from '../common/usage';
import { db, model } from './activity-profiles';

/** Steps a turn may take when its agent sets no `max_steps`. */
export const DEFAULT_MAX_STEPS = 25;

/**
 * One agent handling one incoming message until it answers: record the message, then model call → tool
 * results → model call … until a final answer or `maxSteps`. Control flow only: every effect is an activity, and
 * every write carries an operation id derived from this run so retries never write twice.
 */
export async function agentTurnWorkflow(input: AgentTurnInput): Promise<AgentTurnResult> {
  const { runId } = workflowInfo();
  const scope: ThreadScope = {
    rootThreadId: input.rootThreadId,
    threadId: input.threadId,
    agent: input.agent,
    epoch: input.epoch,
  };
  const maxSteps = input.maxSteps ?? DEFAULT_MAX_STEPS;

  await db.recordMessage.executeWithOptions({ summary: `transcript: message from ${input.sender}` }, [
    { scope, operationId: operationId(runId, 'in'), message: { role: 'user', content: input.message } },
  ]);

  let usage = ZERO_USAGE;
  for (let step = 0; step < maxSteps; step++) {
    const reply = await model.callModel.executeWithOptions({ summary: `model: ${input.agent} step ${step + 1}` }, [
      { scope, operationId: operationId(runId, 'model', step), step },
    ]);
    usage = addUsage(usage, reply.usage);
    if (reply.toolCalls.length === 0) {
      return { status: TurnStatus.Completed, reply: reply.content ?? '', steps: step + 1, usage };
    }
    // Tools arrive with the agent loop; until then every call gets an error the model can act on.
    await Promise.all(
      reply.toolCalls.map((call, index) =>
        db.recordMessage.executeWithOptions({ summary: `tool: ${call.name}` }, [
          {
            scope,
            operationId: operationId(runId, 'tool', step, index),
            message: {
              role: 'tool',
              toolCallId: call.id,
              content: `Error: unknown tool '${call.name}'. This agent has no tools; answer directly.`,
            },
          },
        ]),
      ),
    );
  }
  log.warn('turn ran out of steps', { agent: input.agent, maxSteps });
  return { status: TurnStatus.MaxSteps, reply: '', steps: maxSteps, usage };
}
