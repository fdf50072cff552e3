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
} from '@temporalio/workflow';
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
import type { db, localDb } from './activity-profiles';
import { isTimeout, rootMessage } from './failure-text';

/**
 * A delegated turn or fork task that fails (its own error, or stopped by its `timeout_s`) is fenced by its caller:
 * `fenceFailedTurn` moves the epochs of its thread and of every thread below it on, so activities it left running
 * can write nothing more, and cancels their pending approvals and open questions. Before this patch a failed
 * delegation was only marked failed (`finishTurn`), and a failed fork task not even that.
 */
export const FENCE_FAILED_TURNS_PATCH = 'baton-fence-failed-turns';

/** `agentTurnWorkflow`'s signature: tasks are child turns, started by type name (the turn module runs forks). */
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
}

export async function runForkJoin(
  context: ForkJoinContext,
  call: PlannedForkJoin,
  operationId: string,
  callerMessageSeq: number,
): Promise<void> {
  const { scope } = context;
  const maxTasks = context.limits.maxForkTasks ?? DEFAULT_MAX_FORK_TASKS;
  if (call.agents.length > maxTasks) {
    return context.record(
      `Error: fork_join got ${call.agents.length} tasks; at most ${maxTasks} may run in one fork (world variable ` +
        `BATON_MAX_FORK_TASKS). Nothing was started: split the work into smaller forks.`,
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
          operationId: `${operationId}:fork`,
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
      const result = await children.run(() => startTask(context, fork, task));
      settle(
        task,
        result.status === TurnStatus.Completed
          ? { status: 'success' }
          : { status: 'failed', error: `${task.agent} ran out of steps (${result.steps}) without an answer` },
      );
    } catch (error) {
      if (!isCancellation(error)) {
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
      operationId,
      forkNumber: fork.forkNumber,
      toolCallId: call.id,
      outcomes: fork.tasks.map((task) => ({
        taskIndex: task.taskIndex,
        ...(outcomes.get(task.taskIndex) ?? { status: 'failed', error: 'no outcome was recorded' }),
      })),
      ...(stoppedBy === undefined ? {} : { stoppedBy }),
    },
  ]);
  setCurrentDetails(context.idleDetails);
}

/** One task's child turn: its message is read from its delegation, so it never passes through history. */
function startTask(context: ForkJoinContext, fork: OpenForkResult, task: OpenedForkTask) {
  const { scope } = context;
  return executeChild<AgentTurnWorkflow>('agentTurnWorkflow', {
    workflowId: task.workflowId,
    args: [
      {
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
      },
    ],
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
