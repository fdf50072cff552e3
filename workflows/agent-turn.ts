import {
  ApplicationFailure,
  condition,
  defineQuery,
  defineUpdate,
  log,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { ErrorType } from '../common/errors';
import { operationId } from '../common/ids';
import { truncateBytes } from '../common/text';
import {
  TurnStatus,
  type AgentTurnInput,
  type AgentTurnResult,
  type AnswerQuestionInput,
  type AnswerQuestionResult,
  type PlannedToolCall,
  type ThreadScope,
} from '../common/types';
import { addUsage, ZERO_USAGE } from '../common/usage';
import { db, model, tools } from './activity-profiles';

/** The longest answer a human may give (it travels through workflow history). */
export const MAX_ANSWER_BYTES = 16 * 1024;

/** Answers a question this turn is waiting on (`ask_human`). */
export const answerQuestionUpdate = defineUpdate<AnswerQuestionResult, [AnswerQuestionInput]>('answerQuestion');
/** The ids of the questions this turn is waiting on. */
export const openQuestionsQuery = defineQuery<string[]>('openQuestions');

/**
 * One agent handling one incoming message until it answers: resolve the agent's version, record the message, then
 * model call → tool calls (all calls of one reply concurrently) → model call … until a final answer or the agent's
 * `max_steps`. Control flow only: every effect is an activity, and every write carries an operation id derived from
 * this run so retries never write twice.
 */
export async function agentTurnWorkflow(input: AgentTurnInput): Promise<AgentTurnResult> {
  const { runId, workflowId } = workflowInfo();
  const scope: ThreadScope = {
    rootThreadId: input.rootThreadId,
    threadId: input.threadId,
    agent: input.agent,
    epoch: input.epoch,
  };

  // Questions waiting for a human: id → answer once given. Handlers are registered before the first await.
  const waiting = new Map<string, string | undefined>();
  setHandler(openQuestionsQuery, () => [...waiting].filter(([, answer]) => answer === undefined).map(([id]) => id));
  setHandler(
    answerQuestionUpdate,
    async ({ questionId, answer }) => {
      const closed = await db.closeQuestion.executeWithOptions({ summary: `question: ${questionId} answered` }, [
        { rootThreadId: scope.rootThreadId, questionId, outcome: { status: 'answered', answer } },
      ]);
      if (closed.status !== 'answered') {
        throw ApplicationFailure.create({
          type: ErrorType.InvalidInput,
          message: `question '${questionId}' expired before the answer arrived`,
        });
      }
      if (waiting.has(questionId)) waiting.set(questionId, closed.answer);
      return { questionId, status: 'answered' };
    },
    {
      validator: ({ questionId, answer }: AnswerQuestionInput) => {
        if (!waiting.has(questionId) || waiting.get(questionId) !== undefined) {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidInput,
            message: `question '${questionId}' is not waiting for an answer in this turn`,
          });
        }
        if (typeof answer !== 'string' || answer.trim() === '') {
          throw ApplicationFailure.create({ type: ErrorType.InvalidInput, message: 'the answer must not be empty' });
        }
        if (answer.length > MAX_ANSWER_BYTES) {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidInput,
            message: `the answer is too long (at most ${MAX_ANSWER_BYTES} characters)`,
          });
        }
      },
    },
  );

  const agent = await db.resolveAgent.executeWithOptions({ summary: `agent: resolve ${input.agent}` }, [
    { name: input.agent },
  ]);
  await db.recordMessage.executeWithOptions({ summary: `transcript: message from ${input.sender}` }, [
    { scope, operationId: operationId(runId, 'in'), message: { role: 'user', content: input.message } },
  ]);

  async function askHuman(call: Extract<PlannedToolCall, { kind: 'ask_human' }>, opId: string): Promise<void> {
    const { questionId } = await db.openQuestion.executeWithOptions({ summary: `question: ${input.agent} asks` }, [
      {
        scope,
        operationId: `${opId}:question`,
        workflowId,
        toolCallId: call.id,
        question: call.question,
        ...(call.timeoutSeconds === undefined ? {} : { timeoutSeconds: call.timeoutSeconds }),
      },
    ]);
    waiting.set(questionId, undefined);
    setCurrentDetails(
      `Waiting for a human to answer ${questionId}: "${truncateBytes(call.question, 300)}"\n` +
        `Answer with: baton answer ${scope.rootThreadId} ${questionId} "<answer>"`,
    );
    const answered = await condition(
      () => waiting.get(questionId) !== undefined,
      call.timeoutSeconds === undefined ? undefined : call.timeoutSeconds * 1000,
    );
    let answer = waiting.get(questionId);
    if (!answered) {
      // Refuse later answers (the validator checks `waiting`); an answer already on its way may still win the race.
      waiting.delete(questionId);
      const closed = await db.closeQuestion.executeWithOptions({ summary: `question: ${questionId} expired` }, [
        { rootThreadId: scope.rootThreadId, questionId, outcome: { status: 'expired' } },
      ]);
      answer = closed.status === 'answered' ? closed.answer : undefined;
    }
    const content =
      answer === undefined
        ? `Error: the human did not answer within ${call.timeoutSeconds} seconds. Go on without the answer.`
        : `The human answered: ${answer}`;
    setCurrentDetails(`${input.agent} is working.`);
    await db.recordMessage.executeWithOptions({ summary: `tool: ask_human ${questionId}` }, [
      { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
    ]);
  }

  let usage = ZERO_USAGE;
  for (let step = 0; step < agent.maxSteps; step++) {
    const reply = await model.callModel.executeWithOptions({ summary: `model: ${input.agent} step ${step + 1}` }, [
      { scope, agentVersion: agent.version, operationId: operationId(runId, 'model', step), step },
    ]);
    usage = addUsage(usage, reply.usage);
    if (reply.toolCalls.length === 0) {
      return { status: TurnStatus.Completed, reply: reply.content ?? '', steps: step + 1, usage };
    }
    await Promise.all(
      reply.toolCalls.map((call, index) => {
        const opId = operationId(runId, 'tool', step, index);
        if (call.kind === 'ask_human') return askHuman(call, opId);
        return tools.executeToolCall.executeWithOptions({ summary: `tool: ${call.name}` }, [
          { scope, agentVersion: agent.version, operationId: opId, messageSeq: reply.seq, toolCallId: call.id },
        ]);
      }),
    );
  }
  log.warn('turn ran out of steps', { agent: input.agent, maxSteps: agent.maxSteps });
  return { status: TurnStatus.MaxSteps, reply: '', steps: agent.maxSteps, usage };
}
