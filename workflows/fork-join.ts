/**
 * `fork_join` inside an agent turn: child turns started in a cancellation scope through a sliding window of
 * `max_parallel`, joined with `Promise.all` up to a deadline. Tasks given up on (the deadline, or the first failure
 * under `fail_fast`) are reclaimed in Postgres (their threads' epochs bumped, so any late write is refused) before
 * they are cancelled and before the join returns. Then one activity merges and records the result.
 */
import {
  CancellationScope,
  ChildWorkflowCancellationType,
  condition,
  executeChild,
  isCancellation,
  ParentClosePolicy,
  patched,
  setCurrentDetails,
  workflowInfo,
} from '@temporalio/workflow';
import { operationId } from '../common/ids';
import { BatonSearchAttributes } from '../common/search-attributes';
import { truncateBytes } from '../common/text';
import {
  DEFAULT_MAX_FORK_TASKS,
  TurnStatus,
  type AgentTurnInput,
  type AgentTurnResult,
  type DelegationLimits,
  type ForkTaskStatus,
  type OpenForkResult,
  type OpenedForkTask,
  type PlannedForkJoin,
  type ThreadScope,
} from '../common/types';
import { DELEGATION_LIMIT_VARIABLES } from '../common/world-variables';
import type { db, localDb } from './activity-profiles';
import { isPastDeadline, isTimeout, rootMessage } from './failure-text';
import { BatonAttribute, GenAiAttribute, threadSpanAttributes } from '../common/span-attributes';
import { inWorkflowSpan } from './spans';
import { beginTurnHere } from './thread-turns';

/**
 * A delegated turn or fork task that fails (its own error, or stopped by its `timeout_s`) is fenced by its caller:
 * `fenceFailedTurn` moves the epochs of its thread and of every thread below it on, so activities it left running
 * can write nothing more, and cancels their pending approvals and open questions. Before this patch a failed
 * delegation was only marked failed (`finishTurn`), and a failed fork task not even that.
 */
export const FENCE_FAILED_TURNS_PATCH = 'baton-fence-failed-turns';

/**
 * A fork task begins in its fork's workflow task (`beginTurnHere`, as a root turn begins in its thread's): its
 * `beginTurn` and, when its agent's steps are `local` or `batched`, its steps until the answer run as local activities
 * of the fork's workflow, side by side with the other tasks'. A task becomes a child workflow only when it needs one
 * (`forkTaskTurnWorkflow`, going on from where the fork left it), or from the start when it has a `timeout_s` of its
 * own (a workflow's execution timeout enforces it). Before this patch every task was a child `agentTurnWorkflow`.
 */
export const FORK_TASKS_BEGIN_IN_FORK_PATCH = 'baton-fork-tasks-begin-in-fork';

/**
 * A fork task whose agent's steps are `activity` steps in its fork's workflow too, each step an activity of the
 * fork's workflow (`model: kid (fork 1 task 2) step 1`), until its answer or a call only a turn workflow carries out:
 * a task that answers there starts no workflow, as a local-step task does not. Before this patch such a task went on
 * in a `forkTaskTurnWorkflow` right after its `beginTurn`. Its steps are still dispatched one by one, so a crash costs
 * the step that was running, as in any turn with activity steps.
 */
export const FORK_ACTIVITY_STEPS_IN_FORK_PATCH = 'baton-fork-activity-steps-in-fork';

/** A turn workflow's signature: tasks are child turns, started by type name (the turn module runs forks). */
type AgentTurnWorkflow = (input: AgentTurnInput) => Promise<AgentTurnResult>;

/** What a fork needs from the turn that runs it. */
export interface ForkJoinContext {
  scope: ThreadScope;
  /** The calling agent's version (its description goes into each task's preamble). */
  agentVersion: string;
  /** Agents from the root down to the caller. */
  chain: string[];
  world: string;
  limits: DelegationLimits;
  /** Why delegating to `agent` would break the depth or cycle limits, or `undefined`. */
  delegationRefusal(agent: string): string | undefined;
  /** Records the call's tool result when the fork is refused before it starts. */
  record(content: string): Promise<void>;
  /** What the turn shows as its current details when the fork is over. */
  idleDetails: string;
  /** The fork's Postgres steps run through this: local activities in turns from the fewer-dispatches patch on. */
  pg: typeof db | typeof localDb;
}

interface TaskOutcome {
  status: ForkTaskStatus;
  error?: string;
  /** The task's answer is the JSON of an object its agent's `output` schema matched (`FinishForkInput.outcomes`). */
  typed?: true;
}

export async function runForkJoin(
  context: ForkJoinContext,
  call: PlannedForkJoin,
  callOperationId: string,
  callerMessageSeq: number,
): Promise<void> {
  const { scope } = context;
  const maxTasks = context.limits.maxForkTasks ?? DEFAULT_MAX_FORK_TASKS;
  if (call.agents.length > maxTasks) {
    return context.record(
      `Error: fork_join got ${call.agents.length} tasks; at most ${maxTasks} may run in one fork (world variable ` +
        `${DELEGATION_LIMIT_VARIABLES.maxForkTasks.name}). Nothing was started: split the work into smaller forks.`,
    );
  }
  // Every task is checked before any starts.
  for (const [index, agent] of call.agents.entries()) {
    const refusal = context.delegationRefusal(agent);
    if (refusal) return context.record(`${refusal} (task ${index + 1} of fork_join; nothing was started)`);
  }

  let fork: OpenForkResult;
  try {
    fork = await context.pg.openFork.executeWithOptions(
      { summary: `fork: open ${call.agents.length} tasks (${[...new Set(call.agents)].join(', ')})` },
      [
        {
          scope,
          callerVersion: context.agentVersion,
          operationId: `${callOperationId}:fork`,
          callerMessageSeq,
          toolCallId: call.id,
          chain: context.chain,
          taskContextLimit: context.limits.taskContextLimit,
        },
      ],
    );
  } catch (error) {
    return context.record(`Error: could not start the fork: ${rootMessage(error)}`);
  }

  const total = fork.tasks.length;
  const tasksBeginHere = patched(FORK_TASKS_BEGIN_IN_FORK_PATCH);
  // Tasks stepping in this workflow's task with local activities keep the deadline themselves: its timer fires only
  // when the task next completes, which their local activities hold open for seconds at a time. Tasks stepping here
  // with activities leave the task between steps, so the timer stops them: the scope's cancellation below.
  const deadlineAt = Date.now() + call.deadlineSeconds * 1000;
  /** Tasks that answered in this workflow: they have no workflow of their own, and the join says where they ran. */
  const answeredHere = new Set<number>();
  const outcomes = new Map<number, TaskOutcome>();
  let running = 0;
  let stoppedBy: 'deadline' | 'fail_fast' | undefined;
  const showProgress = () =>
    setCurrentDetails(
      `fork ${fork.forkNumber}: waiting: ${outcomes.size} of ${total} tasks done, ${running} running ` +
        `(at most ${call.maxParallel} at once; deadline ${call.deadlineSeconds} s)`,
    );
  /** Records a task's outcome; `false` when it was given up on already (the stopper decided its status). */
  const settle = (task: OpenedForkTask, outcome: TaskOutcome): boolean => {
    if (outcomes.has(task.taskIndex)) return false;
    outcomes.set(task.taskIndex, outcome);
    if (outcome.status === 'failed' && call.failFast) stoppedBy ??= 'fail_fast';
    return true;
  };

  // Children run in a scope of their own, so the fork can cancel them without cancelling the turn.
  const children = new CancellationScope();
  /** A fence that failed for good (Postgres gone for minutes): the turn fails with it once the join is over. */
  let fenceFailure: Error | undefined;
  const runTask = async (task: OpenedForkTask): Promise<void> => {
    // A sliding window: a task starts when a slot frees up. Re-checked after every wake-up, because one freed slot
    // wakes every waiting task at once.
    while (running >= call.maxParallel && stoppedBy === undefined) {
      await condition(() => running < call.maxParallel || stoppedBy !== undefined);
    }
    if (stoppedBy !== undefined) return;
    running++;
    showProgress();
    try {
      const result = await children.run(async () => {
        const input = taskInput(context, task);
        if (!tasksBeginHere || task.timeoutSeconds !== undefined) {
          return startTask(context, fork, task, input, 'agentTurnWorkflow');
        }
        // The task's turn span is here, where it begins, also when it goes on in a workflow of its own.
        const taskScope = {
          rootThreadId: scope.rootThreadId,
          threadId: task.threadId,
          agent: task.agent,
          epoch: task.epoch,
        };
        const attributes = {
          ...threadSpanAttributes(taskScope),
          [GenAiAttribute.operationName]: 'invoke_agent',
          [BatonAttribute.forkTask]: task.taskIndex,
        };
        return inWorkflowSpan(`invoke_agent ${task.agent}`, attributes, async () => {
          const begun = await beginTurnHere(
            input,
            operationId(callOperationId, 'task', task.taskIndex),
            `fork ${fork.forkNumber} task ${task.taskIndex}/${total}: ${task.agent} starts`,
            {
              deadlineAt,
              stepper: `${task.agent} (fork ${fork.forkNumber} task ${task.taskIndex})`,
              activityStepsHere: () => patched(FORK_ACTIVITY_STEPS_IN_FORK_PATCH),
            },
          );
          if (begun.kind === 'answered') {
            answeredHere.add(task.taskIndex);
            return begun.result;
          }
          return startTask(context, fork, task, { ...input, begun: begun.begun }, 'forkTaskTurnWorkflow');
        });
      });
      settle(
        task,
        result.status === TurnStatus.Completed
          ? { status: 'success', ...(result.output === undefined ? {} : { typed: true as const }) }
          : { status: 'failed', error: `${task.agent} ran out of steps (${result.steps}) without an answer` },
      );
    } catch (error) {
      if (isPastDeadline(error)) {
        // A task stepping here reached the fork's deadline: the deadline gives it up, with any other unfinished task.
        stoppedBy ??= 'deadline';
      } else if (!isCancellation(error)) {
        const reason = isTimeout(error)
          ? `it did not finish within its own timeout_s of ${task.timeoutSeconds} seconds`
          : rootMessage(error);
        if (settle(task, { status: 'failed', error: reason }) && patched(FENCE_FAILED_TURNS_PATCH)) {
          // At once, not at the join: the other tasks may run for a long time yet.
          await CancellationScope.nonCancellable(() =>
            context.pg.fenceFailedTurn.executeWithOptions({ summary: `fork: fence task ${task.taskIndex} (failed)` }, [
              { rootThreadId: scope.rootThreadId, threadId: task.threadId, epoch: task.epoch, error: reason },
            ]),
          ).catch((error: unknown) => {
            fenceFailure ??= error instanceof Error ? error : new Error(String(error));
          });
        }
      }
    } finally {
      running--;
      showProgress();
    }
  };

  showProgress();
  const runs = fork.tasks.map(runTask);
  const joined = await condition(() => outcomes.size === total || stoppedBy !== undefined, call.deadlineSeconds * 1000);
  if (!joined) stoppedBy = 'deadline';
  if (stoppedBy !== undefined) {
    const status = stoppedBy === 'deadline' ? 'timeout' : 'cancelled';
    const error =
      stoppedBy === 'deadline'
        ? `not finished within the fork's deadline of ${call.deadlineSeconds} seconds; stopped and reclaimed`
        : 'stopped because another task failed (fail_fast); reclaimed';
    const givenUp = fork.tasks
      .filter((task) => !outcomes.has(task.taskIndex))
      .map((task) => ({ taskIndex: task.taskIndex, status, error }) as const);
    for (const task of givenUp) outcomes.set(task.taskIndex, { status: task.status, error: task.error });
    if (givenUp.length > 0) {
      // Fenced first, then cancelled: whatever a given-up task still writes after this is refused and logged.
      await CancellationScope.nonCancellable(() =>
        context.pg.reclaimForkTasks.executeWithOptions(
          { summary: `fork: reclaim ${givenUp.length} of ${total} tasks (${stoppedBy})` },
          [{ rootThreadId: scope.rootThreadId, forkNumber: fork.forkNumber, tasks: givenUp }],
        ),
      );
    }
    children.cancel();
  }
  await Promise.all(runs);
  if (fenceFailure !== undefined) throw fenceFailure;

  await context.pg.finishFork.executeWithOptions({ summary: `fork: join fork ${fork.forkNumber} (${total} tasks)` }, [
    {
      scope,
      operationId: callOperationId,
      forkNumber: fork.forkNumber,
      toolCallId: call.id,
      outcomes: fork.tasks.map((task) => ({
        taskIndex: task.taskIndex,
        ...(outcomes.get(task.taskIndex) ?? { status: 'failed', error: 'no outcome was recorded' }),
        ...(answeredHere.has(task.taskIndex) ? { ranInWorkflowId: workflowInfo().workflowId } : {}),
      })),
      ...(stoppedBy === undefined ? {} : { stoppedBy }),
    },
  ]);
  setCurrentDetails(context.idleDetails);
}

/** A task's turn: its message is read from its delegation, so it never passes through history. */
function taskInput(context: ForkJoinContext, task: OpenedForkTask): AgentTurnInput {
  const { scope } = context;
  return {
    rootThreadId: scope.rootThreadId,
    threadId: task.threadId,
    parentThreadId: scope.threadId,
    agent: task.agent,
    message: task.summary,
    delegationOperationId: task.delegationOperationId,
    sender: scope.agent,
    epoch: task.epoch,
    chain: [...context.chain, task.agent],
    world: context.world,
    limits: context.limits,
  };
}

/** A task's turn as a child workflow: from its start (`agentTurnWorkflow`), or from where the fork left it. */
function startTask(
  context: ForkJoinContext,
  fork: OpenForkResult,
  task: OpenedForkTask,
  input: AgentTurnInput,
  type: 'agentTurnWorkflow' | 'forkTaskTurnWorkflow',
) {
  const { scope } = context;
  return executeChild<AgentTurnWorkflow>(type, {
    workflowId: task.workflowId,
    args: [input],
    staticSummary: truncateBytes(
      `fork ${fork.forkNumber} task ${task.taskIndex}/${fork.tasks.length}: ${task.summary}`,
      200,
    ),
    typedSearchAttributes: [
      { key: BatonSearchAttributes.rootThreadId, value: scope.rootThreadId },
      { key: BatonSearchAttributes.threadId, value: task.threadId },
      { key: BatonSearchAttributes.parentThreadId, value: scope.threadId },
      { key: BatonSearchAttributes.agent, value: task.agent },
    ],
    // The join waits until a cancelled task's workflow has closed, and a task never outlives its caller's turn.
    cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
    parentClosePolicy: ParentClosePolicy.TERMINATE,
    ...(task.timeoutSeconds === undefined ? {} : { workflowExecutionTimeout: task.timeoutSeconds * 1000 }),
  });
}
