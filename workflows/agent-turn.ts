import {
  ApplicationFailure,
  CancellationScope,
  condition,
  executeChild,
  defineQuery,
  defineUpdate,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import { ErrorType } from '../common/errors';
import { approvalOperationId, operationId } from '../common/ids';
import { describeExtension, EXTEND_BUDGET_REQUEST } from '../common/budgets';
import { BatonSearchAttributes } from '../common/search-attributes';
import { truncateBytes, turnSummary } from '../common/text';
import {
  DEFAULT_DELEGATION_LIMITS,
  MAX_APPROVAL_REASON_CHARS,
  MAX_DECIDED_BY_CHARS,
  MAX_DECISION_PROOF_CHARS,
  TurnStatus,
  type AgentTurnInput,
  type AgentTurnResult,
  type AnswerQuestionInput,
  type AnswerQuestionResult,
  type BudgetExhaustedDetails,
  type CloseApprovalResult,
  type DecideApprovalInput,
  type DecideApprovalResult,
  type PlannedActivityToolCall,
  type PlannedToolCall,
  type RunStepsResult,
} from '../common/types';
import type { ResolvedAgent } from '../common/agent-definition';
import type { Activities } from '../activities';
import { MAX_CARRIED_TOOL_SECONDS, toolCallInput } from '../common/turn-step-calls';
import { db, localDb, localProfile, localTools, tools, userToolProfile } from './activity-profiles';
import { isTimeout, rootMessage } from './failure-text';
import { FENCE_FAILED_TURNS_PATCH, runForkJoin } from './fork-join';
import { BatonAttribute, GenAiAttribute, threadSpanAttributes } from '../common/span-attributes';
import { inWorkflowSpan } from './spans';
import {
  BATCHED_STEPS_PATCH,
  beginTurnAndFirstBatch,
  runStepsToTheEnd,
  stepProfiles,
  turnFinisher,
  turnScope,
} from './turn-steps';
import { createTurnWaits } from './wait';

/** The longest answer a human may give (it travels through workflow history). */
export const MAX_ANSWER_BYTES = 16 * 1024;

/** Answers a question this turn is waiting on (`ask_human`). */
export const answerQuestionUpdate = defineUpdate<AnswerQuestionResult, [AnswerQuestionInput]>('answerQuestion');
/** The ids of the questions this turn is waiting on. */
export const openQuestionsQuery = defineQuery<string[]>('openQuestions');
/** Approves or rejects a tool call this turn is waiting to run (`baton approve`, `baton reject`). */
export const decideApprovalUpdate = defineUpdate<DecideApprovalResult, [DecideApprovalInput]>('decideApproval');

/**
 * Turns started from this patch on take fewer dispatches: the turn's start (resolve the agent, mark the thread
 * running, record the message), its end and the short Postgres steps of questions, delegations and forks run as
 * local activities, and a reply whose tool calls the activity runs itself has them run with the next model call, in
 * one activity. Histories recorded before it keep one activity per call. The thread workflow uses the same patch
 * for its limits lookup.
 */
export const FEWER_DISPATCHES_PATCH = 'baton-fewer-dispatches-per-step';

/**
 * Tool calls that need a person's approval wait for it (an `approval` in the planned call), and users' tools run as
 * activities with their own timeout and retries (`timeoutSeconds` in the planned call). Replies planned before
 * this code carry neither, so histories recorded before it never reach the patch.
 */
export const USER_TOOLS_PATCH = 'baton-user-tools-and-approvals';

/**
 * A turn whose agent's steps are `local` (resolved by `beginTurn` and recorded with it) runs its model calls and the
 * tool calls its activity runs as local activities, inside its workflow task. Turns begun before this code never
 * resolved a step mode, so their histories never reach the patch.
 */
export const LOCAL_STEPS_PATCH = 'baton-local-steps';

/**
 * A turn's answer (a reply without tool calls) records the turn completed on its thread's row in the model call that
 * got it (`finishTurnOnAnswer`), not in a `finishTurn` step after it: one local activity fewer at every turn's end.
 * Histories recorded before ran that step.
 */
export const FINISH_WITH_ANSWER_PATCH = 'baton-finish-with-answer';

/**
 * A decision (`decideApproval`) is written to Postgres by an activity the workflow task that accepts the Update
 * schedules, so the row is decided only once the turn's history holds the decision: an Update lost before its
 * acceptance was recorded (the worker died in the task, the server restarted, the client gave up) leaves the row
 * pending, never decided for a turn that did not hear it. Histories recorded before wrote it in a local activity, inside
 * the task and before the acceptance was recorded. Answers to questions were always written by an activity.
 */
export const DECISIONS_AFTER_ACCEPTANCE_PATCH = 'baton-decisions-after-acceptance';

/**
 * One agent handling one incoming message until it answers: resolve the agent's version, record the message, then
 * model call → tool calls (all calls of one reply concurrently) → model call … until a final answer or the agent's
 * `max_steps`. Control flow only: every effect is an activity, and every write carries an operation id derived from
 * this run so retries never write twice.
 */
export async function agentTurnWorkflow(input: AgentTurnInput): Promise<AgentTurnResult> {
  // A root turn's span is its thread's (workflows/thread.ts), a turn another workflow began is in that one's span
  // (a fork task's, workflows/fork-join.ts); any other delegated turn or fork task has its own here.
  if (input.threadId === input.rootThreadId || input.begun !== undefined) return runAgentTurn(input);
  return inWorkflowSpan(
    `invoke_agent ${input.agent}`,
    { ...threadSpanAttributes(turnScope(input)), [GenAiAttribute.operationName]: 'invoke_agent' },
    () => runAgentTurn(input),
  );
}

/** One agent turn (see {@link agentTurnWorkflow}). */
async function runAgentTurn(input: AgentTurnInput): Promise<AgentTurnResult> {
  const { runId, workflowId } = workflowInfo();
  const scope = turnScope(input);

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
          message:
            closed.status === 'cancelled'
              ? `question '${questionId}' is already cancelled: ${closed.reason}`
              : `question '${questionId}' expired before the answer arrived`,
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

  // Approvals this turn waits for: id → how it ended once decided. Registered before the first await too.
  const decisions = new Map<string, CloseApprovalResult | undefined>();
  setHandler(
    decideApprovalUpdate,
    async ({ approvalId, approve, reason, decidedBy, proof }) => {
      const by = decidedBy ?? 'a person';
      const outcome = approve
        ? ({ status: 'approved', decidedBy: by } as const)
        : ({ status: 'rejected', decidedBy: by, ...(reason === undefined ? {} : { reason }) } as const);
      const recorder = patched(DECISIONS_AFTER_ACCEPTANCE_PATCH) ? db : localDb;
      const closed = await recorder.closeApproval.executeWithOptions(
        { summary: `approval: ${approvalId} ${outcome.status} by ${by}` },
        // The activity checks the proof (it holds the key, which the history must never see); a decision it refuses
        // fails this Update alone, and the turn goes on waiting.
        [{ rootThreadId: scope.rootThreadId, approvalId, outcome, ...(proof === undefined ? {} : { proof }) }],
      );
      if (closed.status !== outcome.status) {
        throw ApplicationFailure.create({
          type: ErrorType.InvalidInput,
          message: `approval '${approvalId}' is already ${closed.status}`,
        });
      }
      if (decisions.has(approvalId)) decisions.set(approvalId, closed);
      return { approvalId, status: outcome.status };
    },
    {
      validator: ({ approvalId, approve, reason, decidedBy, proof }: DecideApprovalInput) => {
        if (!decisions.has(approvalId) || decisions.get(approvalId) !== undefined) {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidInput,
            message: `approval '${approvalId}' is not waiting for a decision in this turn`,
          });
        }
        if (typeof approve !== 'boolean') {
          throw ApplicationFailure.create({ type: ErrorType.InvalidInput, message: "'approve' must be true or false" });
        }
        for (const [field, value, limit] of [
          ['reason', reason, MAX_APPROVAL_REASON_CHARS],
          ['decidedBy', decidedBy, MAX_DECIDED_BY_CHARS],
        ] as const) {
          if (value !== undefined && (typeof value !== 'string' || value.trim() === '' || value.length > limit)) {
            throw ApplicationFailure.create({
              type: ErrorType.InvalidInput,
              message: `'${field}' must be non-empty text of at most ${limit} characters`,
            });
          }
        }
        // Checked against the key by the activity; here only kept small, as it is recorded in the history.
        if (proof !== undefined && (typeof proof !== 'string' || proof.length > MAX_DECISION_PROOF_CHARS)) {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidInput,
            message: `'proof' must be text of at most ${MAX_DECISION_PROOF_CHARS} characters`,
          });
        }
      },
    },
  );

  // `wait` calls: registered here, before the first await, like the question handlers above.
  const waits = createTurnWaits();

  const chain = input.chain ?? [input.agent];
  const world = input.world ?? 'default';
  // A root turn from `baton-limits-in-turn` on resolves its limits as it begins (below).
  let limits = input.limits ?? DEFAULT_DELEGATION_LIMITS;
  const fewerDispatches = patched(FEWER_DISPATCHES_PATCH);
  // A fork task's message stays in Postgres, stored with its delegation.
  const incoming =
    input.delegationOperationId === undefined
      ? { role: 'user' as const, content: input.message }
      : { role: 'user' as const, delegationOperationId: input.delegationOperationId };
  let agent: ResolvedAgent;
  /** Set when the turn began here under `FIRST_BATCH_IN_BEGIN_PATCH`; its first batch, when its steps are batched. */
  let firstBatchInBegin = false;
  let firstBatch: RunStepsResult | undefined;
  if (input.begun !== undefined) {
    // Begun by the thread (and maybe stepped): the message is recorded, the agent and limits resolved.
    ({ agent, limits } = input.begun);
  } else if (fewerDispatches) {
    const started = await beginTurnAndFirstBatch(
      `turn: ${input.agent} starts, message from ${input.sender}`,
      {
        scope,
        operationId: operationId(runId, 'in'),
        message: incoming,
        world,
        ...(input.limitsFromWorld === undefined ? {} : { limits: input.limitsFromWorld }),
      },
      runId,
    );
    firstBatchInBegin = started.firstBatchInBegin;
    ({ firstBatch, ...agent } = started.begun);
    limits = started.begun.limits ?? limits;
  } else {
    agent = await db.resolveAgent.executeWithOptions({ summary: `agent: resolve ${input.agent}` }, [
      { name: input.agent },
    ]);
    await db.finishTurn.executeWithOptions({ summary: `thread: ${input.agent} running` }, [
      { threadId: input.threadId, status: 'running' },
    ]);
    await db.recordMessage.executeWithOptions({ summary: `transcript: message from ${input.sender}` }, [
      { scope, operationId: operationId(runId, 'in'), message: incoming },
    ]);
  }
  /**
   * The turn's steps: model calls, combined steps and tool runs, as activities or (`steps: local` and `batched`) as
   * local activities. A tool run too long to hold a workflow task open stays an activity either way.
   */
  const localStepsOn =
    (agent.steps === 'local' || agent.steps === 'batched') && (firstBatchInBegin || patched(LOCAL_STEPS_PATCH));
  /** Consecutive steps in one local activity (`steps: batched`); turns recorded before it never had that mode. */
  const batchedOn = localStepsOn && agent.steps === 'batched' && (firstBatchInBegin || patched(BATCHED_STEPS_PATCH));
  const finishWithAnswer = firstBatchInBegin || patched(FINISH_WITH_ANSWER_PATCH);
  const toolActivities = localStepsOn ? localTools : tools;
  /** Short Postgres steps on the turn's path: local activities from the patch on, no dispatch of their own. */
  const pg = fewerDispatches ? localDb : db;

  async function askHuman(call: Extract<PlannedToolCall, { kind: 'ask_human' }>, opId: string): Promise<void> {
    const { questionId } = await pg.openQuestion.executeWithOptions({ summary: `question: ${input.agent} asks` }, [
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
    const answered = await inWorkflowSpan(
      `ask_human ${questionId}`,
      { ...threadSpanAttributes(scope), [BatonAttribute.questionId]: questionId },
      async (span) => {
        const ended = await condition(
          () => waiting.get(questionId) !== undefined,
          call.timeoutSeconds === undefined ? undefined : call.timeoutSeconds * 1000,
        );
        span.setAttribute(BatonAttribute.questionAnswered, waiting.get(questionId) !== undefined);
        return ended;
      },
    );
    let answer = waiting.get(questionId);
    // Without a timeout `condition` resolves with nothing, so only a timed wait can have run out; before the patch
    // every answered question without a timeout was also closed as expired (which found it answered).
    const expired = fewerDispatches ? answered === false : !answered;
    if (expired) {
      // Refuse later answers (the validator checks `waiting`); an answer already on its way may still win the race.
      waiting.delete(questionId);
      const closed = await pg.closeQuestion.executeWithOptions({ summary: `question: ${questionId} expired` }, [
        { rootThreadId: scope.rootThreadId, questionId, outcome: { status: 'expired' } },
      ]);
      answer = closed.status === 'answered' ? closed.answer : undefined;
    }
    const content =
      answer === undefined
        ? `Error: the human did not answer within ${call.timeoutSeconds} seconds. Go on without the answer.`
        : `The human answered: ${answer}`;
    setCurrentDetails(`${input.agent} is working.`);
    await pg.recordMessage.executeWithOptions({ summary: `tool: ask_human ${questionId}` }, [
      { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
    ]);
  }

  /** Refuses a delegation that would go too deep or loop; `undefined` when it may go ahead. */
  function delegationRefusal(callee: string): string | undefined {
    const depth = chain.length; // levels below the root once the callee runs
    if (depth > limits.maxDepth) {
      return `Error: delegating to '${callee}' would exceed the maximum delegation depth of ${limits.maxDepth} (chain: ${['human', ...chain].join(' → ')}). Answer with what you have.`;
    }
    const repeats = chain.filter((name) => name === callee).length + 1;
    if (repeats > limits.maxRepeats) {
      return `Error: delegating to '${callee}' would put it in the delegation chain ${repeats} times (chain: ${['human', ...chain].join(' → ')}), more than the limit of ${limits.maxRepeats}: this looks like a cycle. Answer with what you have.`;
    }
    return undefined;
  }

  async function delegate(
    call: Extract<PlannedToolCall, { kind: 'agent' }>,
    opId: string,
    callerMessageSeq: number,
  ): Promise<void> {
    const record = (content: string) =>
      pg.recordMessage.executeWithOptions({ summary: `tool: ${call.name} result` }, [
        { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
      ]);
    const refusal = delegationRefusal(call.name);
    if (refusal) return void (await record(refusal));

    let opened;
    try {
      opened = await pg.openDelegation.executeWithOptions({ summary: `delegate: ${input.agent} → ${call.name}` }, [
        {
          scope,
          callerVersion: agent.version,
          operationId: `${opId}:delegation`,
          callerMessageSeq,
          callee: call.name,
          mode: call.thread,
          message: call.message,
          contextKeys: call.contextKeys,
          chain,
          taskContextLimit: limits.taskContextLimit,
        },
      ]);
    } catch (error) {
      return void (await record(`Error: could not delegate to '${call.name}': ${rootMessage(error)}`));
    }
    setCurrentDetails(`Waiting for ${call.name} (${opened.workflowId}).`);
    let content: string;
    try {
      const result = await executeChild(agentTurnWorkflow, {
        workflowId: opened.workflowId,
        args: [
          {
            rootThreadId: scope.rootThreadId,
            threadId: opened.threadId,
            parentThreadId: scope.threadId,
            agent: call.name,
            message: opened.message,
            sender: input.agent,
            epoch: opened.epoch,
            chain: [...chain, call.name],
            world,
            limits,
          },
        ],
        staticSummary: turnSummary(call.name, call.message),
        typedSearchAttributes: [
          { key: BatonSearchAttributes.rootThreadId, value: scope.rootThreadId },
          { key: BatonSearchAttributes.threadId, value: opened.threadId },
          { key: BatonSearchAttributes.parentThreadId, value: scope.threadId },
          { key: BatonSearchAttributes.agent, value: call.name },
        ],
        ...(opened.timeoutSeconds === undefined ? {} : { workflowExecutionTimeout: opened.timeoutSeconds * 1000 }),
      });
      content =
        result.status === TurnStatus.Completed
          ? result.reply
          : `Error: ${call.name} ran out of steps (${result.steps}) without an answer.`;
    } catch (error) {
      const reason = isTimeout(error)
        ? `it did not finish within ${opened.timeoutSeconds} seconds and was stopped`
        : rootMessage(error);
      if (patched(FENCE_FAILED_TURNS_PATCH)) {
        // This turn is being stopped itself: whoever stops it fences the whole tree below it, the child included.
        if (CancellationScope.current().consideredCancelled) throw error;
        // The child may have left activities running (a timeout stops its workflow, not them): fence it and what it
        // delegated to, and cancel what they wait for a person to do.
        await pg.fenceFailedTurn.executeWithOptions({ summary: `delegate: fence ${call.name} (failed)` }, [
          { rootThreadId: scope.rootThreadId, threadId: opened.threadId, epoch: opened.epoch, error: reason },
        ]);
      } else {
        // A child stopped from outside (timed out, terminated) could not record its own end.
        await pg.finishTurn.executeWithOptions({ summary: `thread: ${call.name} failed` }, [
          { threadId: opened.threadId, status: 'failed', error: reason },
        ]);
      }
      content = `Error: ${call.name} failed: ${reason}`;
    }
    setCurrentDetails(`${input.agent} is working.`);
    await record(content);
  }

  /** The turn's steps, whose operation ids start with this run's id. */
  const loop = { scope, world, agent, operationBase: runId };

  /** Runs one tool call as an activity: a user tool with its own timeout and retries, Baton's under the tool profile. */
  async function runToolActivity(call: PlannedActivityToolCall, step: number, index: number, messageSeq: number) {
    const options = { summary: `tool: ${call.name}` };
    const args = [toolCallInput(loop, call, step, index, messageSeq)] as const;
    if (call.timeoutSeconds !== undefined && patched(USER_TOOLS_PATCH)) {
      const profile = userToolProfile({ ...call, timeoutSeconds: call.timeoutSeconds });
      const own =
        localStepsOn && call.timeoutSeconds <= MAX_CARRIED_TOOL_SECONDS
          ? proxyLocalActivities<Activities>(localProfile(profile))
          : proxyActivities<Activities>(profile);
      return own.executeToolCall.executeWithOptions(options, [...args]);
    }
    return toolActivities.executeToolCall.executeWithOptions(options, [...args]);
  }

  /**
   * Waits (durably, no activity running) for a person to decide approval `approvalId`, or for its timeout, and says how
   * it ended. A turn stopped while it waits (reclaimed, cancelled) closes the approval as cancelled.
   */
  async function awaitDecision(
    approvalId: string,
    what: string,
    span: { name: string; tool: string },
    timeoutSeconds: number | undefined,
  ): Promise<CloseApprovalResult> {
    decisions.set(approvalId, undefined);
    setCurrentDetails(
      `Waiting for a person to approve ${what} (${approvalId}).\n` +
        `Approve with: baton approve ${scope.rootThreadId} ${approvalId}\n` +
        `Reject with: baton reject ${scope.rootThreadId} ${approvalId} --reason "<why>"`,
    );
    const close = (outcome: { status: 'expired' } | { status: 'cancelled'; reason: string }) =>
      pg.closeApproval.executeWithOptions({ summary: `approval: ${approvalId} ${outcome.status}` }, [
        { rootThreadId: scope.rootThreadId, approvalId, outcome },
      ]);
    let outcome: CloseApprovalResult | undefined;
    try {
      await inWorkflowSpan(
        span.name,
        {
          ...threadSpanAttributes(scope),
          [BatonAttribute.approvalId]: approvalId,
          [GenAiAttribute.toolName]: span.tool,
        },
        async (opened) => {
          await condition(
            () => decisions.get(approvalId) !== undefined,
            timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000,
          );
          opened.setAttribute(BatonAttribute.approvalStatus, decisions.get(approvalId)?.status ?? 'expired');
        },
      );
      outcome = decisions.get(approvalId);
      // Refuse later decisions (the validator checks the map); one already on its way may still win in Postgres.
      decisions.delete(approvalId);
      outcome ??= await close({ status: 'expired' });
    } catch (error) {
      decisions.delete(approvalId);
      if (isCancellation(error)) {
        await CancellationScope.nonCancellable(() => close({ status: 'cancelled', reason: 'its turn was stopped' }));
      }
      throw error;
    }
    setCurrentDetails(`${input.agent} is working.`);
    return outcome;
  }

  /**
   * A call that needs a person's approval: stores it as pending, waits for `decideApproval` or the approval's timeout
   * (`awaitDecision`), then runs the call, or records why it did not run.
   */
  async function runAfterApproval(
    call: PlannedActivityToolCall & { approval: { timeoutSeconds?: number } },
    step: number,
    index: number,
    messageSeq: number,
  ): Promise<void> {
    const opId = operationId(runId, 'tool', step, index);
    const { timeoutSeconds } = call.approval;
    const { approvalId } = await pg.openApproval.executeWithOptions(
      { summary: `approval: ${input.agent} asks to run ${call.name}` },
      [
        {
          scope,
          operationId: approvalOperationId(opId),
          workflowId,
          messageSeq,
          toolCallId: call.id,
          ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }),
        },
      ],
    );
    const outcome = await awaitDecision(
      approvalId,
      `${input.agent}'s call of ${call.name}`,
      { name: `approval ${call.name}`, tool: call.name },
      timeoutSeconds,
    );
    if (outcome.status === 'approved') return void (await runToolActivity(call, step, index, messageSeq));
    const content =
      outcome.status === 'rejected'
        ? `Error: ${outcome.decidedBy} rejected this call of '${call.name}', so it did not run.` +
          (outcome.reason === undefined ? '' : ` Reason: ${outcome.reason}`)
        : outcome.status === 'expired'
          ? `Error: nobody approved this call of '${call.name}' within ${timeoutSeconds} seconds, so it did not run.`
          : `Error: the approval of this call of '${call.name}' was cancelled (${outcome.reason}), so it did not run.`;
    await pg.recordMessage.executeWithOptions({ summary: `tool: ${call.name} not approved` }, [
      { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
    ]);
  }

  /** How many times this turn asked for more budget at each step: each ask is an approval of its own. */
  const budgetAsks = new Map<number, number>();

  /**
   * The turn's budget is spent and its agent says `on_budget: ask`: asks a person to approve adding what the model
   * call's failure names (an `extend_budget` approval, listed and decided like any other), waits for the decision,
   * and adds it once approved (the activity checks the approval again in Postgres). Not approved, the turn fails with
   * the budget's failure and who declined.
   * @throws ApplicationFailure `Budget.Exhausted` when the extension was rejected, cancelled or not added
   */
  async function askForBudget(exhausted: ApplicationFailure, step: number): Promise<void> {
    const [details] = exhausted.details as [BudgetExhaustedDetails];
    const ask = (budgetAsks.get(step) ?? 0) + 1;
    budgetAsks.set(step, ask);
    const opId = operationId(runId, 'budget', step, ask);
    const approvalOpId = approvalOperationId(opId);
    const { approvalId } = await pg.openApproval.executeWithOptions(
      { summary: `approval: ${input.agent} asks for more budget` },
      [
        {
          scope,
          operationId: approvalOpId,
          workflowId,
          messageSeq: 0,
          toolCallId: `budget-${step + 1}-${ask}`,
          request: { name: EXTEND_BUDGET_REQUEST, arguments: JSON.stringify(details.extension) },
        },
      ],
    );
    const outcome = await awaitDecision(
      approvalId,
      `more budget for ${input.agent} (${describeExtension(details.extension)})`,
      { name: `approval ${EXTEND_BUDGET_REQUEST}`, tool: EXTEND_BUDGET_REQUEST },
      undefined,
    );
    const declined =
      outcome.status === 'approved'
        ? undefined
        : outcome.status === 'rejected'
          ? `${outcome.decidedBy} declined to extend it${outcome.reason === undefined ? '' : `: ${outcome.reason}`}`
          : outcome.status === 'cancelled'
            ? `its request for more was cancelled (${outcome.reason})`
            : 'nobody extended it in time';
    if (declined === undefined) {
      const { extended } = await pg.extendBudget.executeWithOptions(
        { summary: `budget: ${input.agent} gets ${describeExtension(details.extension)} more` },
        [{ scope, approvalOperationId: approvalOpId, extension: details.extension }],
      );
      if (extended) return;
    }
    throw ApplicationFailure.create({
      type: ErrorType.BudgetExhausted,
      message: `${exhausted.message}; ${declined ?? 'the extension was not added'}`,
      nonRetryable: true,
    });
  }

  /** Carries out every call of one reply at once: tools as activities, the rest in this workflow. */
  async function runToolCalls(reply: { seq: number; toolCalls: PlannedToolCall[] }, step: number): Promise<void> {
    // A 'reuse' call waits for the calls before it in this reply to the same agent, so it continues their thread
    // instead of running a second turn in it at the same time.
    const lastCallTo = new Map<string, Promise<void>>();
    await Promise.all(
      reply.toolCalls.map((call, index) => {
        const opId = operationId(runId, 'tool', step, index);
        if (call.kind === 'ask_human') return askHuman(call, opId);
        if (call.kind === 'wait') {
          return inWorkflowSpan('wait', threadSpanAttributes(scope), () =>
            waits.run(
              {
                scope,
                limits,
                record: async (content) =>
                  void (await pg.recordMessage.executeWithOptions({ summary: `tool: wait result` }, [
                    { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
                  ])),
                idleDetails: `${input.agent} is working.`,
              },
              call,
              opId,
            ),
          );
        }
        if (call.kind === 'fork_join') {
          return inWorkflowSpan('fork_join', threadSpanAttributes(scope), () =>
            runForkJoin(
              {
                scope,
                agentVersion: agent.version,
                chain,
                world,
                limits,
                delegationRefusal,
                pg,
                record: async (content) =>
                  void (await pg.recordMessage.executeWithOptions({ summary: `tool: ${call.name} refused` }, [
                    { scope, operationId: opId, message: { role: 'tool', toolCallId: call.id, content } },
                  ])),
                idleDetails: `${input.agent} is working.`,
              },
              call,
              opId,
              reply.seq,
            ),
          );
        }
        if (call.kind === 'agent') {
          const before = call.thread === 'reuse' ? lastCallTo.get(call.name) : undefined;
          const done = (before ?? Promise.resolve()).then(() => delegate(call, opId, reply.seq));
          lastCallTo.set(
            call.name,
            done.catch(() => undefined),
          );
          return done;
        }
        const { approval } = call;
        if (approval !== undefined && patched(USER_TOOLS_PATCH)) {
          return runAfterApproval({ ...call, approval }, step, index, reply.seq);
        }
        return runToolActivity(call, step, index, reply.seq);
      }),
    );
  }

  const end = await runStepsToTheEnd(
    {
      ...loop,
      activities: stepProfiles(batchedOn ? 'batched' : localStepsOn ? 'local' : 'activity'),
      carryToolCalls: fewerDispatches,
      finishTurnOnAnswer: finishWithAnswer,
      ...(input.begun?.progress === undefined ? {} : { from: input.begun.progress }),
      ...(input.begun?.resume === undefined ? {} : { resume: input.begun.resume }),
      ...(firstBatch === undefined ? {} : { firstBatch }),
      runCalls: runToolCalls,
      askForBudget,
    },
    turnFinisher(pg, input),
  );
  return end.result;
}

/**
 * A root turn its thread began (`AgentTurnInput.begun`, from the `baton-turns-begin-in-thread` patch on): the same
 * turn, under a workflow type of its own. A worker from before threads began their turns would begin it again (its
 * message recorded twice, its steps from the first); it does not know this type, so in a rolling upgrade such a turn
 * waits for a worker that does.
 */
export function rootTurnWorkflow(input: AgentTurnInput): Promise<AgentTurnResult> {
  return begunTurn('rootTurnWorkflow', input);
}

/**
 * A fork task its fork began (`AgentTurnInput.begun`, from the `baton-fork-tasks-begin-in-fork` patch on) that needs a
 * workflow of its own to go on: the same turn, under a type a worker from before that patch does not know, for the
 * reason `rootTurnWorkflow` gives.
 */
export function forkTaskTurnWorkflow(input: AgentTurnInput): Promise<AgentTurnResult> {
  return begunTurn('forkTaskTurnWorkflow', input);
}

/** A turn another workflow began: it runs no `beginTurn`, and goes on from where that workflow left it. */
async function begunTurn(type: string, input: AgentTurnInput): Promise<AgentTurnResult> {
  if (input.begun === undefined) {
    throw ApplicationFailure.create({
      type: ErrorType.InvalidInput,
      message: `${type} runs a turn another workflow began: its input needs \`begun\``,
      nonRetryable: true,
    });
  }
  return agentTurnWorkflow(input);
}

// Anything else the turn's workflow code throws (its handlers, its start) fails the turn too, never its workflow task
// for ever. Not a command: histories replay as they were recorded.
setWorkflowOptions({ failureExceptionTypes: [Error] }, agentTurnWorkflow);
setWorkflowOptions({ failureExceptionTypes: [Error] }, rootTurnWorkflow);
setWorkflowOptions({ failureExceptionTypes: [Error] }, forkTaskTurnWorkflow);
