import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import { forkAggregate, parseCommit } from '../common/commit';
import { ErrorType } from '../common/errors';
import { turnSummary } from '../common/text';
import type {
  FinishForkInput,
  FinishForkResult,
  OpenForkInput,
  OpenForkResult,
  ReclaimForkTasksInput,
  ReclaimForkTasksResult,
} from '../common/types';
import { discardStagedProposals, mergeTaskCommits, type MergeResult } from '../db/env-commits';
import type { EnvStore } from '../db/env-data';
import {
  findFork,
  forkTaskLabel,
  latestReplies,
  openFork as openForkRows,
  reclaimForkTasks as reclaimForkTaskRows,
  recordForkOutcome,
} from '../db/forks';
import { appendMessage, findMessageByOperation, findMessageBySeq } from '../db/transcripts';
import type { AgentStore } from './agent-store';
import { delegatedMessage } from './delegations';
import { toApplicationFailure } from './failures';
import { answerObject } from './output';
import { forkJoinParameters } from './tools/fork-join';

export interface ForkActivityOptions {
  pool: Pool;
  agentStore: AgentStore;
  env: EnvStore;
  /** Wakes the watchers of the root after a merge changed its shared data (every key: `undefined`). @default none */
  envChanged?: (rootThreadId: string, keys?: readonly string[]) => Promise<void>;
}

/** Characters of each task's reply quoted in the `fork_join` result; the whole reply stays in its thread. */
export const MAX_FORK_REPLY_CHARS = 4000;

/** Activities behind `fork_join`: opening the tasks, reclaiming the ones given up on, merging and reporting. */
export function createForkActivities({ pool, agentStore, env, envChanged }: ForkActivityOptions) {
  /**
   * Opens a fork: reads the `fork_join` call's arguments from the stored reply, builds each task's message (the
   * delegation preamble, saying which task of how many it is and who its siblings are, then the task's message) and
   * creates every task's thread in one transaction. Once per operation id. Messages stay in Postgres: the result
   * carries ids and short summaries only.
   * @throws ApplicationFailure `Input.Invalid` (the arguments no longer parse), `Agent.NotFound`, `Thread.StaleEpoch`
   */
  async function openFork(input: OpenForkInput): Promise<OpenForkResult> {
    const { scope } = input;
    const reply = await findMessageBySeq(pool, scope.threadId, input.callerMessageSeq);
    const call = reply?.toolCalls?.find((candidate) => candidate.id === input.toolCallId);
    const parsed = call ? forkJoinParameters.safeParse(JSON.parse(call.arguments || '{}')) : undefined;
    if (!parsed?.success) {
      throw ApplicationFailure.create({
        type: ErrorType.InvalidInput,
        message: `fork_join call '${input.toolCallId}' is not in message ${input.callerMessageSeq} of '${scope.threadId}' with valid arguments`,
        nonRetryable: true,
      });
    }
    const args = parsed.data;
    const caller = await agentStore.load(input.callerVersion);
    const callees = await Promise.all(
      args.tasks.map(async (task) => agentStore.load((await agentStore.resolve(task.agent)).version)),
    );
    const view = { threadId: scope.threadId };
    const manifest = await env.list(scope.rootThreadId, {}, view);
    const agents = args.tasks.map((task) => task.agent);
    const store = args.store ?? 'isolated';
    try {
      const fork = await openForkRows(pool, scope, input.operationId, {
        store,
        ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
        failFast: args.fail_fast ?? false,
        deadlineSeconds: args.deadline_seconds ?? 900,
        maxParallel: args.max_parallel ?? 8,
        tasks: args.tasks.map((task, position) => ({
          delegation: {
            callee: task.agent,
            mode: task.thread ?? 'new',
            chain: [...input.chain, task.agent],
            callerMessageSeq: input.callerMessageSeq,
            budget: callees[position]?.budget,
          },
          buildMessage: (reads, { forkNumber, prefix }) =>
            delegatedMessage(task.message, {
              caller,
              callee: callees[position] ?? caller,
              chain: input.chain,
              reads,
              taskContextLimit: input.taskContextLimit,
              manifest,
              contextKeys: task.context_keys ?? [],
              fork: { forkNumber, taskIndex: position + 1, taskCount: args.tasks.length, agents, store, prefix },
            }),
        })),
      });
      return {
        forkNumber: fork.number,
        prefix: fork.prefix,
        tasks: fork.tasks.map((task) => {
          const timeout = callees[task.taskIndex - 1]?.timeout_s;
          return {
            taskIndex: task.taskIndex,
            agent: task.agent,
            threadId: task.threadId,
            workflowId: task.workflowId,
            epoch: task.epoch,
            delegationOperationId: task.delegationOperationId,
            summary: turnSummary(task.agent, args.tasks[task.taskIndex - 1]?.message ?? ''),
            ...(timeout === undefined ? {} : { timeoutSeconds: timeout }),
          };
        }),
      };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /**
   * Gives up on unfinished tasks: bumps the epochs of their threads (and of everything they delegated to) so any write
   * they still attempt is refused and logged, and records how they ended. Runs before the join returns.
   */
  async function reclaimForkTasks(input: ReclaimForkTasksInput): Promise<ReclaimForkTasksResult> {
    const reclaimedThreads = await reclaimForkTaskRows(pool, input.rootThreadId, input.forkNumber, input.tasks);
    return { reclaimedThreads };
  }

  /**
   * Joins a fork: merges each successful isolated task's store (and the commit in its answer) into the caller's store
   * as one commit each, in task order, all in one transaction; discards what the others staged; records every task's
   * outcome and the aggregate, and records the `fork_join` tool result (every task in input order, with its reply and
   * merge) in the caller's transcript. Once per operation id; fenced by the caller's epoch.
   * @throws ApplicationFailure `Thread.StaleEpoch`, `Thread.NotFound`
   */
  async function finishFork(input: FinishForkInput): Promise<FinishForkResult> {
    const { scope } = input;
    try {
      const fork = await findFork(pool, scope.rootThreadId, { number: input.forkNumber });
      if (!fork) {
        throw ApplicationFailure.create({
          type: ErrorType.InvalidInput,
          message: `fork ${input.forkNumber} of '${scope.rootThreadId}' does not exist`,
          nonRetryable: true,
        });
      }
      const statuses = input.outcomes.map((outcome) => outcome.status);
      const status = forkAggregate(statuses, input.stoppedBy);
      const recorded = await findMessageByOperation(pool, input.operationId, scope);
      if (recorded) {
        // An earlier attempt merged and recorded; it may have died before it woke the watchers.
        if (fork.store === 'isolated') await envChanged?.(scope.rootThreadId);
        return { status, seq: recorded.seq };
      }

      const known = input.outcomes.flatMap((outcome) => {
        const task = fork.tasks.find((candidate) => candidate.taskIndex === outcome.taskIndex);
        return task === undefined ? [] : [{ task, outcome }];
      });
      const succeeded = known.filter(({ outcome }) => outcome.status === 'success');
      const replies = await latestReplies(
        pool,
        succeeded.map(({ task }) => task.threadId),
      );
      // The successful tasks' stores merge in task order, in one transaction; what the others staged is discarded.
      const merges =
        fork.store === 'isolated'
          ? await mergeTaskCommits(
              pool,
              scope,
              succeeded.map(({ task }) => {
                const reply = replies.get(task.threadId);
                return {
                  operationId: `${input.operationId}:merge:${task.taskIndex}`,
                  task: {
                    forkNumber: fork.number,
                    taskIndex: task.taskIndex,
                    prefix: fork.prefix,
                    threadId: task.threadId,
                    agent: task.agent,
                    forkTask: forkTaskLabel(fork.number, task.taskIndex),
                    explicit: reply === undefined ? { kind: 'none' as const } : parseCommit(reply),
                  },
                };
              }),
              (value) => env.serialize(value),
            )
          : [];
      const mergeOf = new Map(succeeded.map(({ task }, index) => [task.taskIndex, merges[index]]));
      if (fork.store === 'isolated') {
        const unsuccessful = known.filter(({ outcome }) => outcome.status !== 'success');
        await discardStagedProposals(
          pool,
          scope.rootThreadId,
          unsuccessful.map(({ task }) => task.threadId),
        );
      }
      const tasks = known.map(({ task, outcome }) => ({
        task,
        outcome,
        reply: outcome.status === 'success' ? replies.get(task.threadId) : undefined,
        merge: mergeOf.get(task.taskIndex),
      }));
      if (tasks.some(({ merge }) => merge !== undefined)) await envChanged?.(scope.rootThreadId);
      await recordForkOutcome(
        pool,
        scope.rootThreadId,
        fork.number,
        tasks.map(({ outcome, merge }) => ({
          taskIndex: outcome.taskIndex,
          status: outcome.status,
          ...(outcome.error === undefined ? {} : { error: outcome.error }),
          ...(merge === undefined ? {} : { merge }),
          ...(outcome.ranInWorkflowId === undefined ? {} : { ranInWorkflowId: outcome.ranInWorkflowId }),
        })),
        status,
      );
      const content = JSON.stringify({
        fork: fork.number,
        status,
        store: fork.store,
        ...(fork.store === 'isolated' ? { prefix: fork.prefix } : {}),
        ...(input.stoppedBy === undefined ? {} : { stopped_by: input.stoppedBy }),
        tasks: tasks.map(({ task, outcome, reply, merge }) => ({
          task_index: task.taskIndex,
          agent: task.agent,
          thread_id: task.threadId,
          status: outcome.status,
          ...(reply === undefined ? {} : taskAnswer(reply, task.threadId, outcome.typed === true)),
          ...(outcome.error === undefined ? {} : { error: outcome.error }),
          ...(merge === undefined ? {} : { merge: mergeView(merge) }),
        })),
      });
      const { message } = await appendMessage(pool, scope, input.operationId, {
        role: 'tool',
        toolCallId: input.toolCallId,
        content,
      });
      return { status, seq: message.seq };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  return { openFork, reclaimForkTasks, finishFork };
}

/**
 * A task's answer in the `fork_join` result: a typed task's object as it is (so the caller can merge on its fields)
 * while its JSON fits the quote, else its reply quoted.
 */
function taskAnswer(reply: string, threadId: string, typed: boolean): { output: unknown } | { reply: string } {
  if (typed && [...reply].length <= MAX_FORK_REPLY_CHARS) {
    try {
      return { output: answerObject(reply) };
    } catch {
      // Checked when it was stored; a reply that no longer parses is quoted as any other.
    }
  }
  return { reply: quote(reply, threadId) };
}

function quote(reply: string, threadId: string): string {
  const chars = [...reply];
  if (chars.length <= MAX_FORK_REPLY_CHARS) return reply;
  return `${chars.slice(0, MAX_FORK_REPLY_CHARS).join('')}… (cut at ${MAX_FORK_REPLY_CHARS} characters; the whole reply is in thread ${threadId})`;
}

function mergeView(merge: MergeResult) {
  return {
    commit_id: merge.commitId,
    created: merge.created,
    ...(merge.createdMore === undefined ? {} : { created_more: merge.createdMore }),
    links: merge.links,
    proposals: merge.proposals,
    errors: merge.errors,
  };
}
