/**
 * The typed client SDK: start root threads, send them messages and read their state. The `baton` CLI is a thin
 * layer over it.
 */
import {
  Client,
  Connection,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  type WorkflowHandle,
} from '@temporalio/client';
import { threadIdProblem, threadWorkflowId } from '../common/ids';
import { BatonSearchAttributes } from '../common/search-attributes';
import { truncateBytes } from '../common/text';
import type { SendMessageInput, SendMessageResult, ThreadStatus, ThreadWorkflowInput } from '../common/types';
import type { threadWorkflow } from '../workflows';
import { BatonClientError } from './errors';
import { newThreadId } from './thread-ids';

export { BatonClientError } from './errors';

export interface ConnectOptions {
  /** Temporal frontend `host:port`. */
  address: string;
  /** @default 'default' */
  namespace?: string;
  /** The task queue Baton's workers poll. @default 'baton' */
  taskQueue?: string;
}

export interface StartThreadOptions {
  /** The agent that answers this thread. */
  agent: string;
  /** A thread id of your own (letters, digits, `_ - .`); a new one is made when omitted. */
  threadId?: string;
}

/** A connected Baton client. Close it when done. */
export class BatonClient {
  constructor(
    readonly temporal: Client,
    private readonly connection: Connection,
    readonly taskQueue: string,
  ) {}

  /**
   * Starts a root thread answered by `agent`.
   * @throws BatonClientError for an invalid or already used thread id.
   */
  async startThread(options: StartThreadOptions): Promise<ThreadHandle> {
    const threadId = options.threadId ?? newThreadId();
    const problem = threadIdProblem(threadId);
    if (problem) throw new BatonClientError(problem);
    const input: ThreadWorkflowInput = { rootThreadId: threadId, agent: options.agent };
    try {
      await this.temporal.workflow.start<typeof threadWorkflow>('threadWorkflow', {
        workflowId: threadWorkflowId(threadId),
        taskQueue: this.taskQueue,
        args: [input],
        // A thread id names one conversation and its data forever: an ended thread is not started again.
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        staticSummary: truncateBytes(`thread: ${options.agent}`, 200),
        typedSearchAttributes: [
          { key: BatonSearchAttributes.rootThreadId, value: threadId },
          { key: BatonSearchAttributes.threadId, value: threadId },
          { key: BatonSearchAttributes.agent, value: options.agent },
        ],
      });
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        throw new BatonClientError(`thread '${threadId}' already exists; send it a message to continue it`, {
          cause: error,
        });
      }
      throw error;
    }
    return this.thread(threadId);
  }

  /** A handle on an existing root thread. */
  thread(threadId: string): ThreadHandle {
    return new ThreadHandle(
      threadId,
      this.temporal.workflow.getHandle<typeof threadWorkflow>(threadWorkflowId(threadId)),
    );
  }

  async close(): Promise<void> {
    await this.connection.close();
  }
}

/** One root thread. */
export class ThreadHandle {
  constructor(
    readonly threadId: string,
    readonly workflow: WorkflowHandle<typeof threadWorkflow>,
  ) {}

  get workflowId(): string {
    return this.workflow.workflowId;
  }

  /** Sends a human message and waits for the agent's reply (its turn may take minutes). */
  async send(message: string): Promise<SendMessageResult> {
    return this.workflow.executeUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', { args: [{ message }] });
  }

  /** What the thread is doing now. */
  async status(): Promise<ThreadStatus> {
    return this.workflow.query<ThreadStatus>('status');
  }

  /** Ends the thread once its running turns finish. */
  async end(): Promise<void> {
    await this.workflow.signal('endThread');
  }
}

/** Connects to Temporal and returns a Baton client. */
export async function connect(options: ConnectOptions): Promise<BatonClient> {
  const connection = await Connection.connect({ address: options.address });
  const namespace = options.namespace ?? 'default';
  return new BatonClient(new Client({ connection, namespace }), connection, options.taskQueue ?? 'baton');
}
