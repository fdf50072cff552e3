/**
 * The typed client SDK: start root threads, send them messages and read their state. The `baton` CLI is a thin
 * layer over it.
 */
import {
  Client,
  Connection,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  type WorkflowHandle,
} from '@temporalio/client';
import { threadIdProblem, threadWorkflowId } from '../common/ids';
import { BatonSearchAttributes } from '../common/search-attributes';
import { truncateBytes } from '../common/text';
import type {
  AnswerQuestionResult,
  SendMessageInput,
  SendMessageResult,
  ThreadStatus,
  ThreadWorkflowInput,
} from '../common/types';
import { DEFAULT_DELEGATION_LIMITS, type DelegationLimits, type AnswerQuestionInput } from '../common/types';
import { createPool } from '../db/pool';
import { listTree, type TreeRow } from '../db/delegations';
import { findQuestion, listQuestions, type QuestionRow } from '../db/questions';
import { findThread } from '../db/threads';
import { listMessages, sumUsage, type TranscriptMessage } from '../db/transcripts';
import type { Pool } from 'pg';
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
  /**
   * Baton's Postgres, for what lives there rather than in workflows: transcripts, questions, usage. Without it
   * those methods throw.
   */
  databaseUrl?: string;
}

export type { QuestionRow, TranscriptMessage, TreeRow };

/** A thread of a delegation tree with the threads it delegated to. */
export interface TreeNode extends TreeRow {
  children: TreeNode[];
}

/** Token usage of a whole delegation tree. */
export interface ThreadUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  modelCalls: number;
}

export interface StartThreadOptions {
  /** The agent that answers this thread. */
  agent: string;
  /** A thread id of your own (letters, digits, `_ - .`); a new one is made when omitted. */
  threadId?: string;
  /** Continue the thread's workflow as new after this many turns. @default 100 */
  continueAsNewAfterTurns?: number;
  /** Delegation limits for the whole tree. @default DEFAULT_DELEGATION_LIMITS */
  limits?: Partial<DelegationLimits>;
}

/** A connected Baton client. Close it when done. */
export class BatonClient {
  constructor(
    readonly temporal: Client,
    private readonly connection: Connection,
    readonly taskQueue: string,
    private readonly pool: Pool | undefined,
  ) {}

  /** @throws BatonClientError when the client was connected without a database URL. */
  database(): Pool {
    if (!this.pool) {
      throw new BatonClientError(
        "this needs Baton's database: connect with `databaseUrl` (the CLI reads it from the stack)",
      );
    }
    return this.pool;
  }

  /**
   * Starts a root thread answered by `agent`.
   * @throws BatonClientError for an invalid or already used thread id.
   */
  async startThread(options: StartThreadOptions): Promise<ThreadHandle> {
    const threadId = options.threadId ?? newThreadId();
    const problem = threadIdProblem(threadId);
    if (problem) throw new BatonClientError(problem);
    const input: ThreadWorkflowInput = {
      rootThreadId: threadId,
      agent: options.agent,
      ...(options.continueAsNewAfterTurns === undefined
        ? {}
        : { continueAsNewAfterTurns: options.continueAsNewAfterTurns }),
      ...(options.limits ? { limits: { ...DEFAULT_DELEGATION_LIMITS, ...options.limits } } : {}),
    };
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
    return new ThreadHandle(this, threadId);
  }

  async close(): Promise<void> {
    await this.connection.close();
    await this.pool?.end();
  }
}

/** One root thread. */
export class ThreadHandle {
  readonly workflow: WorkflowHandle<typeof threadWorkflow>;

  constructor(
    private readonly client: BatonClient,
    readonly threadId: string,
  ) {
    this.workflow = client.temporal.workflow.getHandle<typeof threadWorkflow>(threadWorkflowId(threadId));
  }

  get workflowId(): string {
    return this.workflow.workflowId;
  }

  /** Sends a human message and waits for the agent's reply (its turn may take minutes). */
  async send(message: string): Promise<SendMessageResult> {
    try {
      return await this.workflow.executeUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', {
        args: [{ message }],
      });
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        throw new BatonClientError(`thread '${this.threadId}' does not exist or has ended`, { cause: error });
      }
      throw error;
    }
  }

  /** What the thread is doing now. */
  async status(): Promise<ThreadStatus> {
    return this.workflow.query<ThreadStatus>('status');
  }

  /** Ends the thread once its running turns finish. */
  async end(): Promise<void> {
    await this.workflow.signal('endThread');
  }

  /** The thread's final status, once it has ended (waits for that). */
  async result(): Promise<ThreadStatus> {
    return this.workflow.result();
  }

  /** Questions agents of this whole tree asked humans: open ones, or all with `{ all: true }`. */
  async questions(options: { all?: boolean } = {}): Promise<QuestionRow[]> {
    const db = this.client.database();
    await this.assertExists(db);
    return listQuestions(db, this.threadId, options.all ?? false);
  }

  /**
   * @throws BatonClientError unless the thread is stored or its workflow exists (a thread just started may not
   * have written its record yet).
   */
  private async assertExists(db: Pool): Promise<void> {
    if (await findThread(db, this.threadId)) return;
    try {
      await this.workflow.describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        throw new BatonClientError(`thread '${this.threadId}' does not exist`, { cause: error });
      }
      throw error;
    }
  }

  /**
   * Answers an open question; the turn that asked it goes on.
   * @throws BatonClientError for an unknown question or one no longer open.
   */
  async answer(questionId: string, answer: string): Promise<AnswerQuestionResult> {
    const question = await findQuestion(this.client.database(), this.threadId, questionId);
    if (!question) throw new BatonClientError(`thread '${this.threadId}' has no question '${questionId}'`);
    if (question.status !== 'open') {
      throw new BatonClientError(`question '${questionId}' is already ${question.status}`);
    }
    return this.client.temporal.workflow
      .getHandle(question.workflowId)
      .executeUpdate<AnswerQuestionResult, [AnswerQuestionInput]>('answerQuestion', { args: [{ questionId, answer }] });
  }

  /** The root thread's transcript, in order. @throws BatonClientError for an unknown thread. */
  async transcript(): Promise<TranscriptMessage[]> {
    const db = this.client.database();
    await this.assertExists(db);
    return listMessages(db, this.threadId);
  }

  /**
   * The delegation tree below this root thread: every thread with its agent, caller, status, timings and usage.
   * @throws BatonClientError for an unknown thread.
   */
  async tree(): Promise<TreeNode> {
    const rows = await listTree(this.client.database(), this.threadId);
    const nodes = new Map(rows.map((row) => [row.threadId, { ...row, children: [] as TreeNode[] }]));
    let root: TreeNode | undefined;
    for (const node of nodes.values()) {
      const parent = node.parentThreadId ? nodes.get(node.parentThreadId) : undefined;
      if (parent) parent.children.push(node);
      else if (node.threadId === this.threadId) root = node;
    }
    if (!root) throw new BatonClientError(`thread '${this.threadId}' does not exist`);
    return root;
  }

  /** Token usage of every model call in this thread's tree. */
  async usage(): Promise<ThreadUsage> {
    return sumUsage(this.client.database(), this.threadId);
  }
}

/** Connects to Temporal and returns a Baton client. */
export async function connect(options: ConnectOptions): Promise<BatonClient> {
  const connection = await Connection.connect({ address: options.address });
  const namespace = options.namespace ?? 'default';
  const pool = options.databaseUrl
    ? createPool({ connectionString: options.databaseUrl, max: 4, applicationName: 'baton-client' })
    : undefined;
  return new BatonClient(new Client({ connection, namespace }), connection, options.taskQueue ?? 'baton', pool);
}
