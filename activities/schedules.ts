import { Context } from '@temporalio/activity';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ErrorType } from '../common/errors';
import { threadWorkflowId } from '../common/ids';
import { RUN_REPLY_CHARS } from '../common/schedules';
import { threadStartOptions } from '../common/thread-start';
import type { SendMessageInput, SendMessageResult } from '../common/types';

export interface DeliverScheduledMessageInput {
  threadId: string;
  agent: string;
  world: string;
  message: string;
  /** Start the root thread first (a `--new-thread` run); an existing thread of that id is the one a repeat made. */
  createThread: boolean;
  /** Derived from the schedule and the scheduled time: Temporal runs one turn per Update id. */
  updateId: string;
}

export interface DeliverScheduledMessageResult {
  createdThread: boolean;
  turn: number;
  status: string;
  /** The reply's first `RUN_REPLY_CHARS` characters. */
  reply: string;
}

/**
 * The activity that posts a scheduled message: the one way in for every message is the thread's `sendMessage`
 * Update, so a scheduled message queues behind a running turn like a human's. It waits for the reply (heartbeating),
 * which keeps the run busy for as long as the agent works: that is what overlap `skip` looks at.
 */
export function createScheduleActivities(options: { heartbeatIntervalMs?: number } = {}) {
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 2000;

  /**
   * Starts the thread when asked (a thread that exists already was started by an earlier attempt of this run), then
   * sends the message under `updateId` and waits for the turn to end. A retry re-attaches to the same Update.
   * @throws ApplicationFailure `Thread.NotFound` (non-retryable) when the thread does not exist or has ended.
   */
  async function deliverScheduledMessage(input: DeliverScheduledMessageInput): Promise<DeliverScheduledMessageResult> {
    const context = Context.current();
    const client = context.client;
    let createdThread = false;
    if (input.createThread) {
      try {
        await client.workflow.start(
          'threadWorkflow',
          threadStartOptions(
            { rootThreadId: input.threadId, agent: input.agent, world: input.world },
            context.info.taskQueue,
          ),
        );
        createdThread = true;
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }
    }
    const heartbeat = setInterval(() => context.heartbeat({ threadId: input.threadId }), heartbeatIntervalMs);
    try {
      const result = await client.workflow
        .getHandle(threadWorkflowId(input.threadId))
        .executeUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', {
          args: [{ message: input.message }],
          updateId: input.updateId,
        });
      return {
        createdThread,
        turn: result.turn,
        status: result.status,
        reply: [...result.reply].slice(0, RUN_REPLY_CHARS).join(''),
      };
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        throw ApplicationFailure.create({
          type: ErrorType.ThreadNotFound,
          message: `thread '${input.threadId}' does not exist or has ended`,
          nonRetryable: true,
        });
      }
      if (error instanceof WorkflowUpdateFailedError) {
        // The thread refused the message (it is ending) or its turn failed: no retry changes that.
        throw ApplicationFailure.create({
          type: ErrorType.TurnFailed,
          message: `thread '${input.threadId}': ${error.cause?.message ?? error.message}`,
          nonRetryable: true,
        });
      }
      throw error;
    } finally {
      clearInterval(heartbeat);
    }
  }

  return { deliverScheduledMessage };
}
