/**
 * The typed client SDK: start root threads, send them messages and read their state. The `baton` CLI is a thin
 * layer over it.
 */
import {
  Client,
  Connection,
  WorkflowIdConflictPolicy,
  isGrpcServiceError,
  ServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  WorkflowUpdateStage,
  WithStartWorkflowOperation,
  type TLSConfig,
  type WorkflowHandle,
  type WorkflowUpdateHandle,
} from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { messageIdProblem, messageTextProblem } from '../common/deliveries';
import { ENV_EVENTS_CHANNEL } from '../common/env-data';
import { threadIdProblem, threadWorkflowId } from '../common/ids';
import { threadStartOptions, watcherSignalWithStartOptions } from '../common/thread-start';
import { traceparentProblem } from '../common/traceparent';
import {
  ENV_CHANGED_SIGNAL,
  watcherNameProblem,
  watcherWorkflowId,
  watchSpecOf,
  watchSpecProblem,
  type Watcher,
  type WatchSpec,
} from '../common/watchers';
import {
  endWatcher,
  listWakeups,
  listWatchers,
  listWatchFeed,
  registerWatcher,
  WatcherExistsError,
  WatcherNotFoundError,
  type WakeupRow,
} from '../db/watchers';
import type {
  AnswerQuestionResult,
  SendMessageInput,
  SendMessageResult,
  ThreadStatus,
  ThreadWorkflowInput,
  WakeResult,
} from '../common/types';
import { MAX_BUDGET_TOKENS, MAX_BUDGET_USD } from '../common/budgets';
import type { AnswerQuestionInput, DecideApprovalInput, DecideApprovalResult, DelegationLimits } from '../common/types';
import { createPool } from '../db/pool';
import { findConnection, type FoundConnection } from './find-connection';
import { describeConnectFailure } from '../worker/temporal-settings';
import fs from 'node:fs';
import path from 'node:path';
import { EnvTextError, envTextProblem, parseEnvText, setEnvVariables, unsetEnvVariable } from '../common/env-text';
import { AGENT_NAME_PATTERN } from '../common/ids';
import { budgetOf, type Budget } from '../db/budgets';
import { listTree, type TreeRow } from '../db/delegations';
import { DEFAULT_WORLD, editWorldVariablesText, getWorldVariablesText, setWorldVariablesText } from '../db/worlds';
import {
  EnvDataError,
  EnvStore,
  type EnvEntry,
  type EnvEvent,
  type EnvListFilters,
  type EnvManifestEntry,
  type EnvProposal,
  type EnvWriteResult,
} from '../db/env-data';
import { listForks, type ForkRow } from '../db/forks';
import { listRefusedWrites, type RefusedWrite } from '../db/refusals';
import { findQuestion, listQuestions, type QuestionRow } from '../db/questions';
import { findApproval, listApprovals, type ApprovalRow } from '../db/approvals';
import { ensureThread, findThread } from '../db/threads';
import { ThreadNotFoundError } from '../db/errors';
import type { EnvManifestPage } from '../db/env-data';
import {
  findLastReply,
  listMessages,
  listMessagesPage,
  sumUsage,
  type ProviderUsage,
  type TranscriptMessage,
} from '../db/transcripts';
import pg, { type Pool } from 'pg';
import type { threadWorkflow } from '../workflows';
import { checkKnownAgent, findStoredAgent, listStoredAgents, type StoredAgent } from './agents';
import { BatonClientError } from './errors';
import { newThreadId } from './thread-ids';
import { Schedules } from './schedules';
import { FeedWatcher, type FeedSource, type FeedWatch } from './feed-watch';
import { lastRunFeedSeq, readRunFeed } from '../db/run-events';
import { DEFAULT_WATCH_SWEEP_SECONDS, wakeWatchers } from '../activities/watch-signals';
import { decisionProof } from '../activities/decision-proofs';
import { ErrorType } from '../common/errors';
import { accessTokenProblem } from '../stack/access-token';
import {
  parseDeltaAnnouncement,
  runDeltasChannel,
  runEventsChannel,
  runEventsOf,
  type DeltaAnnouncement,
  type RunEvent,
  type RunFeedRow,
  type StoredRunEvent,
} from '../common/run-events';
import { ThreadEvents, type ThreadEventsOptions } from './thread-events';
import { traceContextInterceptor, withTraceparent } from './trace-context';

export { BatonClientError } from './errors';
export { findConnection, type FindConnectionOptions, type FoundConnection } from './find-connection';
export type { Watcher, WatchChange, WatchSpec, WatcherStatus, WatcherOrigin } from '../common/watchers';
export type { WakeupRow } from '../db/watchers';
export type { Budget } from '../db/budgets';
export type { FeedWatch } from './feed-watch';
export type { ThreadEvents, ThreadEventsOptions } from './thread-events';
export type {
  RunDeltaEvent,
  RunEvent,
  RunEventBase,
  StoredRunEvent,
  StreamAbandonedEvent,
  TokenUsageEvent,
  ToolCallDelta,
} from '../common/run-events';
export {
  BatonScheduleHandle,
  OVERLAP_POLICIES,
  Schedules,
  type CreateScheduleOptions,
  type OverlapPolicy,
  type ScheduleDetails,
  type ScheduleRun,
  type ScheduleSummaryRow,
  type UpdateScheduleOptions,
} from './schedules';

export interface ConnectOptions {
  /** Temporal frontend `host:port`. */
  address: string;
  /** @default 'default' */
  namespace?: string;
  /**
   * TLS to Temporal: `true` for the system's roots, or the CA, client certificate pair (mTLS) and server name.
   * `connect()` with no options reads them as Temporal's tools do (`TEMPORAL_TLS_*`, a `temporal.toml` profile).
   * @default plaintext, or TLS when `apiKey` is set
   */
  tls?: TLSConfig | boolean;
  /** An API key for Temporal Cloud, sent as a bearer token (over TLS). */
  apiKey?: string;
  /** gRPC headers sent with every call to Temporal. */
  metadata?: Readonly<Record<string, string>>;
  /** The task queue Baton's workers poll. @default 'baton' */
  taskQueue?: string;
  /**
   * Baton's Postgres, for what lives there rather than in workflows: transcripts, questions, usage. Without it
   * those methods throw.
   */
  databaseUrl?: string;
  /**
   * The shortest `every` a schedule may have, in seconds. For tests only (the CLI reads
   * `BATON_SCHEDULE_MIN_INTERVAL_S`): anything shorter than a minute floods a thread with turns.
   * @default 60
   */
  scheduleMinimumIntervalSeconds?: number;
  /**
   * The deployment's decision key (the workers' `BATON_DECISION_KEY`, at least 32 characters): `approve` and
   * `reject` sign their decisions with it, and workers that have a key write no decision without such a proof. The
   * CLI reads it from `BATON_DECISION_KEY` or `BATON_DECISION_KEY_FILE`, else the local stack's `.baton/token`.
   * @default none: decisions are unsigned, which only workers without a key accept
   */
  decisionKey?: string;
}

export type {
  ApprovalRow,
  StoredAgent,
  DecideApprovalResult,
  EnvEntry,
  EnvEvent,
  EnvListFilters,
  EnvManifestEntry,
  ProviderUsage,
  QuestionRow,
  TranscriptMessage,
  TreeRow,
};

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
  /** What the calls cost in US dollars, where their workers had prices for the models (`BATON_MODEL_PRICES`). */
  costUsd?: number;
  /** The same by the provider that answered (`default` for the default endpoint), in provider order. */
  byProvider: ProviderUsage[];
  /** The root's token budget, when it has one: granted, spent by the whole tree, and left (less what is reserved). */
  budget?: Budget;
}

export interface StartThreadOptions {
  /** The agent that answers this thread. */
  agent: string;
  /** A thread id of your own (letters, digits, `_ - .`); a new one is made when omitted. */
  threadId?: string;
  /** Continue the thread's workflow as new after this many turns. @default 100 */
  continueAsNewAfterTurns?: number;
  /** The world the conversation runs in: its variables fill prompts and set limits. @default 'default' */
  world?: string;
  /**
   * Limits for the whole tree: delegation limits over the world's, and a token budget (docs/guides/budgets.md).
   * @default DEFAULT_DELEGATION_LIMITS, and the world's `BATON_BUDGET_TOKENS` (else no budget)
   */
  limits?: ThreadLimits;
  /**
   * A W3C `traceparent` whose span becomes the parent of the thread's spans on a traced worker (docs/guides/observing-runs.md).
   * @default the active OpenTelemetry context, when your application runs the OpenTelemetry SDK; else none
   */
  traceparent?: string;
}

/** What `startThread({ limits })` may set for a conversation's whole tree. */
export interface ThreadLimits extends Partial<Omit<DelegationLimits, 'budgetTokens' | 'budgetUsd'>> {
  /**
   * What every turn of the thread and every agent below it may spend together (docs/guides/budgets.md): tokens (input
   * and output), US dollars at the workers' prices, or both; a model call once one is spent is not made. Each wins
   * over the world's `BATON_BUDGET_TOKENS` / `BATON_BUDGET_USD`; opened by the thread's first turn.
   */
  budget?: { tokens?: number; usd?: number };
}

/** `BatonClient.run`: a new root thread and its first message, with how to send it. */
export interface RunOptions<T = unknown> extends StartThreadOptions, SendOptions<T> {
  /** The first message. */
  message: string;
}

/** What `BatonClient.run` did: the thread it started, and its first turn's result. */
export interface ThreadRun<T = unknown> {
  thread: ThreadHandle;
  result: SendMessageResult<T>;
}

/** A message a thread accepted (`thread.post`): its turn runs, or waits behind the one running. */
export interface PostedMessage {
  threadId: string;
  /** The id it was posted under: `thread.reply(messageId)` reads its turn's result. */
  messageId: string;
}

/** One page of a thread's transcript (`thread.transcriptPage`). */
export interface TranscriptPage {
  messages: TranscriptMessage[];
  /** Pass as `after` to read the next page; absent on the last one. */
  nextAfter?: number;
}

/** Called with each env-data event of a watched root thread, in order; the next waits until it settles. */
export type EnvEventListener = (event: EnvEvent) => void | Promise<void>;

export interface WatchEnvOptions {
  /** Deliver only events after this sequence number; 0 replays the whole log first. @default 0 */
  since?: number;
}

/** What checks a typed agent's answer on the caller's side and gives it its type: a zod schema, or anything with `parse`. */
export interface OutputParser<T> {
  parse(value: unknown): T;
}

export interface SendOptions<T = unknown> {
  /** Delivered once however often it is sent (see `send`). At most 200 characters. */
  messageId?: string;
  /**
   * For an agent with an `output` schema: checks the turn's `output` with this (a zod schema, say) and types it. The
   * call fails when the turn gave no `output` (its agent sets none) or this refuses it. @default the output unchecked
   */
  output?: OutputParser<T>;
  /**
   * Called with each event of the tree (`thread.events`) from the moment the message is sent until the reply, in
   * order, each once, the turn's last events (its `turn_ended`) included; the next waits until it settles, and the
   * call resolves only once it has settled for the last. When it throws (or rejects), it is given no further event
   * and the call rejects with its error once the turn has replied.
   */
  onEvent?: (event: RunEvent) => void | Promise<void>;
  /** Whether `onEvent` gets streamed text (`delta`). @default true */
  deltas?: boolean;
  /**
   * A W3C `traceparent` whose span becomes the parent of this turn's spans on a traced worker.
   * @default the active OpenTelemetry context, when your application runs the OpenTelemetry SDK; else none
   */
  traceparent?: string;
}

/** A running env-data watch (`thread.watchEnv`). */
export type EnvWatch = FeedWatch;

/** @throws BatonClientError for a `traceparent` that is not one */
function checkTraceparent(traceparent: string | undefined): void {
  const problem = traceparent === undefined ? undefined : traceparentProblem(traceparent);
  if (problem !== undefined) throw new BatonClientError(problem);
}

const DATABASE_NEEDED = "this needs Baton's database: connect with `databaseUrl` (the CLI reads it from the stack)";

/** A connected Baton client. Close it when done. */
export class BatonClient {
  private readonly watches = new Set<FeedWatch>();
  /** Baton's schedules: create, list, and a handle per schedule (see client/schedules.ts). */
  readonly schedules: Schedules;

  constructor(
    readonly temporal: Client,
    private readonly connection: Connection,
    readonly taskQueue: string,
    private readonly pool: Pool | undefined,
    /** Where `pool` connects; env watches open a connection of their own there, since LISTEN holds it. */
    private readonly databaseUrl?: string,
    options: { scheduleMinimumIntervalSeconds?: number; decisionKey?: string; connectedVia?: string } = {},
  ) {
    this.schedules = new Schedules(temporal, taskQueue, () => this.database(), options.scheduleMinimumIntervalSeconds);
    this.#decisionKey = options.decisionKey;
    this.connectedVia = options.connectedVia ?? 'the options given';
  }

  /**
   * Where this client's settings came from: `connect()` without options says whether it used `TEMPORAL_ADDRESS` or
   * which running `baton dev` (see {@link findConnection}).
   */
  readonly connectedVia: string;

  /** Truly private (not a property anything can read or serialise): it signs decisions. */
  readonly #decisionKey: string | undefined;

  /** Whether this client signs its decisions (it was connected with a `decisionKey`). */
  get signsDecisions(): boolean {
    return this.#decisionKey !== undefined;
  }

  /**
   * The proof `decision` carries: signed with this client's decision key, or none without one.
   * @internal
   */
  decisionProof(decision: { rootThreadId: string; approvalId: string; approve: boolean }): string | undefined {
    return this.#decisionKey === undefined ? undefined : decisionProof(this.#decisionKey, decision);
  }

  /** @throws BatonClientError when the client was connected without a database URL. */
  database(): Pool {
    if (!this.pool) throw new BatonClientError(DATABASE_NEEDED);
    return this.pool;
  }

  /**
   * Starts an env-data watch of `rootThreadId` on a dedicated connection; `close()` stops it. Use
   * `thread.watchEnv`, which checks that the thread exists first.
   * @internal
   * @throws BatonClientError without a database URL; the connection's error when it cannot connect or LISTEN.
   */
  async startEnvWatch(rootThreadId: string, onEvent: EnvEventListener, since: number): Promise<EnvWatch> {
    const store = new EnvStore(this.database());
    return this.startFeedWatch(
      {
        name: 'env watch',
        rootThreadId,
        channels: [ENV_EVENTS_CHANNEL],
        read: (after, limit) => store.events(rootThreadId, { since: after, limit }),
        deliver: onEvent,
      },
      since,
    );
  }

  /**
   * Starts a watch of `rootThreadId`'s run feed on a dedicated connection; `close()` stops it. Use `thread.events`.
   * @internal
   * @throws BatonClientError without a database URL; the connection's error when it cannot connect or LISTEN.
   */
  async startRunWatch(
    rootThreadId: string,
    onRow: (row: RunFeedRow) => void | Promise<void>,
    since: number,
    onDelta?: (delta: DeltaAnnouncement) => void,
  ): Promise<FeedWatch> {
    const db = this.database();
    return this.startFeedWatch(
      {
        name: 'event watch',
        rootThreadId,
        // Env-data writes announce on their own channel; their events are part of the feed.
        channels: [runEventsChannel(rootThreadId), ENV_EVENTS_CHANNEL],
        read: (after, limit) => readRunFeed(db, rootThreadId, { since: after, limit }),
        deliver: onRow,
        ...(onDelta === undefined
          ? {}
          : {
              extra: {
                channels: [runDeltasChannel(rootThreadId)],
                receive: (_channel: string, payload: string | undefined) => {
                  const delta = parseDeltaAnnouncement(payload);
                  if (delta?.rootThreadId === rootThreadId) onDelta(delta);
                },
              },
            }),
      },
      since,
    );
  }

  private async startFeedWatch<Row extends { seq: number }>(
    source: FeedSource<Row>,
    since: number,
  ): Promise<FeedWatch> {
    if (!this.databaseUrl) throw new BatonClientError(DATABASE_NEEDED);
    const listener = new pg.Client({
      connectionString: this.databaseUrl,
      application_name: 'baton-client-watch',
      connectionTimeoutMillis: 10_000,
      // A watch idles for hours; keepalives notice a server that vanished without closing the connection.
      keepAlive: true,
    });
    const watcher: FeedWatcher<Row> = new FeedWatcher(listener, source, since, () => this.watches.delete(watcher));
    this.watches.add(watcher);
    await watcher.start();
    return watcher;
  }

  /**
   * Starts a root thread answered by `agent`. On a client with Baton's database the thread's record is written before
   * this returns (the thread then waits for nothing before it takes a message).
   * @throws BatonClientError for an invalid or already used thread id; when the thread started but its record could
   *   not be written (its first message's turn writes it).
   */
  async startThread(options: StartThreadOptions): Promise<ThreadHandle> {
    const { traceparent, ...start } = options;
    // With Baton's database the client opens the thread's record itself, once the workflow has started, so the
    // thread's first task has nothing to wait for and a message sent now is taken at once.
    const input: ThreadWorkflowInput = { ...threadInput(start), ...(this.pool ? { recordOpenedByStarter: true } : {}) };
    checkTraceparent(traceparent);
    await withTraceparent(traceparent, () => startThreadWorkflow(this.temporal, input, this.taskQueue));
    if (this.pool) await openStartedThread(this.pool, input);
    return this.thread(input.rootThreadId);
  }

  /**
   * Starts a root thread answered by `options.agent` and sends it `options.message`, in one call to Temporal
   * (Update-with-Start): the thread's first workflow task takes the message, so its turn begins without a second task
   * and the reply comes sooner than `startThread` then `send` (a server that refuses Update-with-Start gets those two
   * calls instead). `messageId`, `onEvent` and `deltas` work as in `send`. Under a `messageId` the call is safe to
   * repeat (after a lost connection, say): when a thread already runs under `threadId`, it is sent the message instead,
   * which it takes once per id, so a repeated call gets the first call's reply.
   * @throws BatonClientError for an invalid thread id, or one already used when no `messageId` is given; an empty or
   * unstorable message (checked before anything starts); an invalid message id.
   */
  async run<T = unknown>(options: RunOptions<T>): Promise<ThreadRun<T>> {
    const { message, messageId, onEvent, deltas, traceparent, output, ...start } = options;
    const input = threadInput(start);
    const problem = messageTextProblem(message);
    if (problem !== undefined) throw new BatonClientError(problem);
    const thread = this.thread(input.rootThreadId);
    const send = {
      ...(messageId === undefined ? {} : { messageId }),
      ...(onEvent === undefined ? {} : { onEvent }),
      ...(deltas === undefined ? {} : { deltas }),
      ...(traceparent === undefined ? {} : { traceparent }),
      ...(output === undefined ? {} : { output }),
    };
    return { thread, result: await thread.sendStarting(input, message, send) };
  }

  /** A world (created when first written): its variables as one `.env` text. @throws BatonClientError for a bad name */
  world(name: string = DEFAULT_WORLD): WorldHandle {
    return new WorldHandle(this, worldName(name));
  }

  /** Every agent a worker on Baton's database has defined, each with its newest stored definition, by name. */
  async agents(): Promise<StoredAgent[]> {
    return listStoredAgents(this.database());
  }

  /**
   * One agent's newest stored definition.
   * @throws BatonClientError for an agent no worker on Baton's database has defined (naming the known ones).
   */
  async agent(name: string): Promise<StoredAgent> {
    return findStoredAgent(this.database(), name);
  }

  /** A handle on an existing root thread. */
  thread(threadId: string): ThreadHandle {
    return new ThreadHandle(this, threadId);
  }

  /** Stops the open env watches, then closes the Temporal connection and the database pool. */
  async close(): Promise<void> {
    await Promise.all([...this.watches].map((watch) => watch.stop()));
    await this.connection.close();
    await this.pool?.end();
  }
}

/**
 * The input of a new root thread's workflow.
 * @throws BatonClientError for an invalid thread id.
 */
function threadInput(options: StartThreadOptions): ThreadWorkflowInput {
  const threadId = options.threadId ?? newThreadId();
  const problem = threadIdProblem(threadId);
  if (problem) throw new BatonClientError(problem);
  return {
    rootThreadId: threadId,
    agent: options.agent,
    ...(options.world === undefined ? {} : { world: worldName(options.world) }),
    ...(options.continueAsNewAfterTurns === undefined
      ? {}
      : { continueAsNewAfterTurns: options.continueAsNewAfterTurns }),
    ...(options.limits ? { limits: delegationLimitsOf(options.limits) } : {}),
  };
}

/**
 * The limits a thread's workflow carries, from what `startThread` was given.
 * @throws BatonClientError for a budget with neither unit, tokens that are not a whole number from 1 to 999999999,
 *   or dollars that are not an amount above 0 and up to 1000000
 */
function delegationLimitsOf(limits: ThreadLimits): Partial<DelegationLimits> {
  const { budget, ...delegation } = limits;
  if (budget === undefined) return delegation;
  const { tokens, usd } = budget;
  if (tokens === undefined && usd === undefined) {
    throw new BatonClientError('limits.budget must set tokens, usd or both');
  }
  if (tokens !== undefined && (!Number.isSafeInteger(tokens) || tokens < 1 || tokens > MAX_BUDGET_TOKENS)) {
    throw new BatonClientError(
      `limits.budget.tokens must be a whole number from 1 to ${MAX_BUDGET_TOKENS}, not ${String(tokens)}`,
    );
  }
  if (usd !== undefined && (!Number.isFinite(usd) || usd <= 0 || usd > MAX_BUDGET_USD)) {
    throw new BatonClientError(
      `limits.budget.usd must be an amount above 0 and up to ${MAX_BUDGET_USD}, not ${String(usd)}`,
    );
  }
  return {
    ...delegation,
    ...(tokens === undefined ? {} : { budgetTokens: tokens }),
    ...(usd === undefined ? {} : { budgetUsd: usd }),
  };
}

/**
 * Opens the record of a root thread whose workflow was started with `recordOpenedByStarter` (idempotent, as the
 * thread's own opening is).
 * @throws BatonClientError when it cannot be written: the thread has started, and its first message's turn opens it
 */
async function openStartedThread(pool: Pool, input: ThreadWorkflowInput): Promise<void> {
  const { rootThreadId, agent, world } = input;
  try {
    await ensureThread(pool, {
      threadId: rootThreadId,
      rootThreadId,
      agent,
      ...(world === undefined ? {} : { world }),
    });
  } catch (error) {
    throw new BatonClientError(
      `thread '${rootThreadId}' started, but its record could not be written (its first message's turn will write ` +
        `it): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}

/** What a failed start of thread `threadId` throws: a clear error when its id is taken, else what failed. */
function threadStartError(threadId: string, error: unknown): unknown {
  return error instanceof WorkflowExecutionAlreadyStartedError
    ? new BatonClientError(`thread '${threadId}' already exists; send it a message to continue it`, { cause: error })
    : error;
}

/**
 * Starts a root thread's workflow; with `orRunning`, a thread id already used is not an error (the caller goes on
 * with the thread that has it).
 * @throws BatonClientError for a thread id already used, unless `orRunning`.
 */
async function startThreadWorkflow(
  temporal: Client,
  input: ThreadWorkflowInput,
  taskQueue: string,
  options: { orRunning?: boolean } = {},
): Promise<void> {
  try {
    await temporal.workflow.start<typeof threadWorkflow>('threadWorkflow', threadStartOptions(input, taskQueue));
  } catch (error) {
    if (options.orRunning === true && error instanceof WorkflowExecutionAlreadyStartedError) return;
    throw threadStartError(input.rootThreadId, error);
  }
}

/** gRPC's status codes for a call the server refuses as not allowed, and for one it does not implement. */
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNIMPLEMENTED = 12;

/**
 * Whether the server refused Update-with-Start itself, before starting anything: a server without the
 * ExecuteMultiOperation call, or one whose `frontend.enableExecuteMultiOperation` is off for the namespace.
 */
function multiOperationRefused(error: unknown): boolean {
  const cause = error instanceof ServiceError ? error.cause : error;
  if (!isGrpcServiceError(cause)) return false;
  const code = Number(cause.code);
  return (
    code === GRPC_UNIMPLEMENTED || (code === GRPC_PERMISSION_DENIED && /ExecuteMultiOperation/.test(cause.details))
  );
}

/** gRPC's status codes for a call that ran out of time, and for one cancelled. */
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_CANCELLED = 1;

/**
 * Whether a call to Temporal failed because its deadline (`deadline`, epoch ms) passed. A call whose deadline passes
 * while the server is still forwarding it can come back cancelled instead (seen on a loaded machine): past the
 * deadline, that is the same thing.
 */
function deadlineExceeded(error: unknown, deadline: number): boolean {
  const cause = error instanceof ServiceError ? error.cause : error;
  if (!isGrpcServiceError(cause)) return false;
  const code = Number(cause.code);
  return code === GRPC_DEADLINE_EXCEEDED || (code === GRPC_CANCELLED && Date.now() >= deadline);
}

/** A closed question's status, with the reason it was cancelled: `answered`, `cancelled: its turn failed: …`. */
function closedQuestion(question: QuestionRow): string {
  return question.reason === null ? question.status : `${question.status}: ${question.reason}`;
}

/** How long `answer`, `approve` and `reject` wait for a stored request's turn to start waiting for it. */
const ANSWER_WAIT_MS = 60_000;
/**
 * The shortest look `reply` takes at a message's turn: long enough for the server to answer with a result it has,
 * however busy the machine.
 */
const REPLY_LOOK_MS = 1_000;
/** How long `post` waits for the thread to accept a message: it takes a worker running the thread's workflow. */
const POST_ACCEPT_WAIT_MS = 20_000;
/** Messages `transcriptPage` returns unless told otherwise. */
const TRANSCRIPT_PAGE = 100;

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

  /**
   * Sends a human message and waits for the agent's reply (its turn may take minutes).
   *
   * With `messageId`, the message is delivered once however often it is sent: a program that lost its connection
   * (a Temporal restart, a network cut) sends it again with the same id and gets the one turn's reply, also after the
   * thread continued as new (it carries the ids of its last 100 messages, at most 48 KiB of them, into its next run).
   * At most 200 characters. Without one, each call is a new message.
   */
  async send<T = unknown>(message: string, options: SendOptions<T> = {}): Promise<SendMessageResult<T>> {
    return this.deliver(options, () => this.sendOnly(message, options.messageId));
  }

  /**
   * `send` to this thread, which the same call starts with `input` (`BatonClient.run`, which checks `message` first).
   * @internal
   */
  async sendStarting<T>(
    input: ThreadWorkflowInput,
    message: string,
    options: SendOptions<T>,
  ): Promise<SendMessageResult<T>> {
    return this.deliver(options, async () => {
      // Under a message id the call may be a retry of one whose reply was lost: the thread it started then is sent
      // the message again, which its Update id delivers once. Without one, a thread id already taken is refused.
      const retryable = options.messageId !== undefined;
      const startWorkflowOperation = new WithStartWorkflowOperation<typeof threadWorkflow>('threadWorkflow', {
        ...threadStartOptions(input, this.client.taskQueue),
        workflowIdConflictPolicy: retryable ? WorkflowIdConflictPolicy.USE_EXISTING : WorkflowIdConflictPolicy.FAIL,
      });
      try {
        return await this.client.temporal.workflow.executeUpdateWithStart<
          typeof threadWorkflow,
          SendMessageResult,
          [SendMessageInput]
        >('sendMessage', {
          args: [{ message }],
          startWorkflowOperation,
          ...(options.messageId === undefined ? {} : { updateId: options.messageId }),
        });
      } catch (error) {
        if (!multiOperationRefused(error)) throw threadStartError(this.threadId, error);
        // A server that cannot start a workflow with an Update gets the same in two calls: the message then
        // arrives in the thread's second workflow task.
        await startThreadWorkflow(this.client.temporal, input, this.client.taskQueue, { orRunning: retryable });
        return this.sendOnly(message, options.messageId);
      }
    });
  }

  /**
   * Checks `options.messageId`, then sends with `sending`, with the tree's events to `options.onEvent` if given, and
   * the turn's `output` checked by `options.output` if given.
   */
  private async deliver<T>(
    options: SendOptions<T>,
    sending: () => Promise<SendMessageResult>,
  ): Promise<SendMessageResult<T>> {
    const problem = options.messageId === undefined ? undefined : messageIdProblem(options.messageId);
    if (problem !== undefined) throw new BatonClientError(problem);
    checkTraceparent(options.traceparent);
    const traced = () => withTraceparent(options.traceparent, sending);
    const result = await (options.onEvent === undefined
      ? traced()
      : this.sendWatched(options, options.onEvent, traced));
    return typedResult(result, options.output);
  }

  /** The message's Update to the running thread, waiting for its result. */
  private async sendOnly(message: string, messageId: string | undefined): Promise<SendMessageResult> {
    try {
      return await this.workflow.executeUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', {
        args: [{ message }],
        ...(messageId === undefined ? {} : { updateId: messageId }),
      });
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        throw new BatonClientError(`thread '${this.threadId}' does not exist or has ended`, { cause: error });
      }
      throw error;
    }
  }

  /** `send`, under the name other agent frameworks use for a run with a callback (`{ onEvent }`). */
  run<T = unknown>(message: string, options: SendOptions<T> = {}): Promise<SendMessageResult<T>> {
    return this.send(message, options);
  }

  /** `sending` with the tree's events delivered to `onEvent` from the moment the message is sent until the reply. */
  private async sendWatched(
    options: Pick<SendOptions, 'deltas'>,
    onEvent: (event: RunEvent) => void | Promise<void>,
    sending: () => Promise<SendMessageResult>,
  ): Promise<SendMessageResult> {
    const since = await this.lastEventSeq();
    const events = this.events({ since, ...(options.deltas === undefined ? {} : { deltas: options.deltas }) });
    const delivering = (async () => {
      for await (const event of events) await onEvent(event);
    })();
    delivering.catch(() => undefined);
    let result: SendMessageResult;
    try {
      // Listening before the message goes out: streamed text is not stored, so what is published before the watch
      // listens never reaches it.
      await events.catchUp();
      result = await sending();
    } catch (error) {
      // A failed turn's events say how it ended: passed on as far as they can be read, then the failure.
      await events.catchUp().catch(() => undefined);
      await events.finish();
      await delivering.catch(() => undefined);
      throw error;
    }
    // The turn's last events committed before its reply: read them, stop reading, and let the callback take every
    // event queued (`finish`, unlike `return`, keeps them), so the call resolves after it has seen the turn's end.
    try {
      await events.catchUp();
    } finally {
      await events.finish();
    }
    await delivering;
    return result;
  }

  /**
   * The highest feed number of this root's tree so far (0 before any event): `events({ since })` with it delivers
   * only what happens next.
   */
  async lastEventSeq(): Promise<number> {
    return lastRunFeedSeq(this.client.database(), this.threadId);
  }

  /**
   * This root thread's run feed as an async iterator: every durable step of its tree in order, each once, with its
   * feed number (`seq`), from `since` (0, the default, is from the start; `lastEventSeq()` is from now), and the
   * streamed text of model replies as it is generated (`delta`, unless `deltas: false`; not stored, best effort;
   * `stream_abandoned` says a stream will not be completed). It LISTENs on a connection of its own; when that
   * connection drops it connects again and goes on after the last event delivered, so nothing is lost or repeated
   * (deltas published meanwhile are). It ends when the loop breaks, `signal` aborts, or `BatonClient.close()`.
   * @throws BatonClientError for a client without a database URL, or a connection lost for longer than two minutes.
   */
  events(options: ThreadEventsOptions = {}): ThreadEvents {
    return new ThreadEvents(this.client, this.threadId, options);
  }

  /**
   * Sends a human message without waiting for the reply: resolves once the thread has accepted it (its turn runs, or
   * waits behind the one running), and `reply(messageId)` reads the turn's result later, from this client or any
   * other. Under a `messageId` of your own the message is delivered once however often it is posted or sent, as
   * with `send`; without one, a new id is made.
   * @throws BatonClientError for a thread that does not exist or has ended, a bad message id, or a message not
   * accepted within `acceptWaitMs` (default 20 s: no worker is running); the thread's refusal of the message (an
   * empty one, say).
   */
  async post(message: string, options: { messageId?: string; acceptWaitMs?: number } = {}): Promise<PostedMessage> {
    const messageId = options.messageId ?? randomUUID();
    const problem = messageIdProblem(messageId);
    if (problem !== undefined) throw new BatonClientError(problem);
    const connection = this.client.temporal.connection;
    const acceptWaitMs = options.acceptWaitMs ?? POST_ACCEPT_WAIT_MS;
    let handle: WorkflowUpdateHandle<SendMessageResult>;
    try {
      handle = await connection.withDeadline(Date.now() + acceptWaitMs, () =>
        this.workflow.startUpdate<SendMessageResult, [SendMessageInput]>('sendMessage', {
          args: [{ message }],
          updateId: messageId,
          waitForStage: WorkflowUpdateStage.ACCEPTED,
        }),
      );
    } catch (error) {
      if (!(error instanceof WorkflowUpdateRPCTimeoutOrCancelledError)) throw this.notFound(error);
      // Only a running workflow task accepts a message, so without a worker the server holds it.
      throw new BatonClientError(
        `thread '${this.threadId}' has not accepted the message within ${acceptWaitMs / 1000} s (is a worker polling ` +
          `its task queue?); it may still run once one does: post it again under message id '${messageId}' to be ` +
          'sure it runs, and only once',
        { cause: error },
      );
    }
    try {
      // A refused message comes back with its outcome, which `result()` throws without asking the server; one that
      // was accepted has none yet, and a deadline already passed ends that question at once.
      await connection.withDeadline(Date.now(), () => handle.result());
    } catch (error) {
      if (!(error instanceof WorkflowUpdateRPCTimeoutOrCancelledError)) throw error;
    }
    return { threadId: this.threadId, messageId };
  }

  /**
   * The result of the turn that answered the message posted (or sent) under `messageId`, waiting for it at most
   * `waitMs` (at least a brief look); `undefined` when the turn is still running by then, or `signal` ended the wait.
   * A thread knows the messages of its current run: one from before it continued as new is found by sending it
   * again under the same id (`send` or `post`), which runs no second turn.
   * @throws BatonClientError for an unknown thread or message id; the turn's failure when it failed.
   */
  async reply(
    messageId: string,
    options: { waitMs?: number; signal?: AbortSignal } = {},
  ): Promise<SendMessageResult | undefined> {
    const handle = this.workflow.getUpdateHandle<SendMessageResult>(messageId);
    const connection = this.client.temporal.connection;
    const deadline = Date.now() + Math.max(options.waitMs ?? 0, REPLY_LOOK_MS);
    const look = () => connection.withDeadline(deadline, () => handle.result());
    const { signal } = options;
    try {
      return await (signal ? connection.withAbortSignal(signal, look) : look());
    } catch (error) {
      if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) return undefined;
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      // The workflow, or only the Update, is unknown: a thread that exists says which.
      await this.workflow.describe().catch((described: unknown) => {
        throw this.notFound(described);
      });
      throw new BatonClientError(
        `thread '${this.threadId}' has no message '${messageId}' in its current run (send it again under the same id ` +
          'to get the reply of a message from before the thread continued as new)',
        { cause: error },
      );
    }
  }

  /**
   * What the thread is doing now: turns so far, whether a turn is running, and the `wait` calls in progress in its
   * tree (`waits`, each `waiting until <time>: <reason>`). A worker answers it: without one it waits, at most
   * `timeoutMs` when given.
   * @throws BatonClientError for a thread that does not exist, or no answer within `timeoutMs`.
   */
  async status(options: { timeoutMs?: number } = {}): Promise<ThreadStatus> {
    const { timeoutMs } = options;
    const query = () => this.workflow.query<ThreadStatus>('status');
    const deadline = Date.now() + (timeoutMs ?? 0);
    try {
      return await (timeoutMs === undefined ? query() : this.client.temporal.connection.withDeadline(deadline, query));
    } catch (error) {
      if (timeoutMs !== undefined && deadlineExceeded(error, deadline)) {
        throw new BatonClientError(
          `thread '${this.threadId}' did not answer within ${timeoutMs / 1000} s (is a worker polling its task queue?)`,
          { cause: error },
        );
      }
      throw this.notFound(error);
    }
  }

  /**
   * Ends every `wait` in progress in the thread's tree early (the root turn's and its delegations'); each waiting
   * agent gets a tool result saying it was woken. Resolves with the waits it ended: none when nothing was waiting
   * (a wake is not remembered for a later wait).
   * @throws BatonClientError for a thread that does not exist or has ended.
   */
  async wake(): Promise<WakeResult> {
    try {
      return await this.workflow.executeUpdate<WakeResult, []>('wake', { args: [] });
    } catch (error) {
      throw this.notFound(error);
    }
  }

  private notFound(error: unknown): unknown {
    return error instanceof WorkflowNotFoundError
      ? new BatonClientError(`thread '${this.threadId}' does not exist or has ended`, { cause: error })
      : error;
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
   * Answers an open question; the turn that asked it goes on. A question stored a moment before its turn waits for
   * it is answered once the turn does (within `waitMs`, default 60 s). A question answered in Postgres whose turn
   * never heard it (the answer's Update failed after its write) is handed the stored answer again; the call
   * succeeds when that finished it and `answer` is the stored one.
   * @throws BatonClientError for an unknown question or one no longer open.
   */
  async answer(questionId: string, answer: string, options: { waitMs?: number } = {}): Promise<AnswerQuestionResult> {
    const db = this.client.database();
    const question = await findQuestion(db, this.threadId, questionId);
    if (!question) throw new BatonClientError(`thread '${this.threadId}' has no question '${questionId}'`);
    if (question.status === 'answered' && question.answer !== null) {
      const stored = { questionId, answer: question.answer };
      const finished = await this.finishHalfDone(question.workflowId, 'answerQuestion', stored, options.waitMs);
      if (finished && question.answer === answer) {
        return { questionId, status: 'answered' };
      }
    }
    if (question.status !== 'open') {
      throw new BatonClientError(`question '${questionId}' is already ${closedQuestion(question)}`);
    }
    return this.updateWaitingTurn<AnswerQuestionResult, AnswerQuestionInput>({
      what: `question '${questionId}'`,
      workflowId: question.workflowId,
      update: 'answerQuestion',
      input: { questionId, answer },
      notWaitingYet: /is not waiting for an answer in this turn/,
      stillWaiting: async () => {
        const now = await findQuestion(db, this.threadId, questionId);
        return now?.status === 'open' ? undefined : now ? closedQuestion(now) : 'gone';
      },
      waitMs: options.waitMs,
    });
  }

  /** Tool calls of this whole tree waiting for a person's approval: pending ones, or all with `{ all: true }`. */
  async approvals(options: { all?: boolean } = {}): Promise<ApprovalRow[]> {
    const db = this.client.database();
    await this.assertExists(db);
    return listApprovals(db, this.threadId, options.all ?? false);
  }

  /**
   * Approves a pending tool call: the turn waiting for it runs it. `by` is recorded as who decided. Deciding again a
   * call decided in Postgres whose turn never heard it (the decision's Update was lost after its write) hands the
   * turn the stored decision, so the turn and the row agree; the call succeeds when that finished it and this
   * decision is the stored one. Signed with the client's `decisionKey` (see `ConnectOptions.decisionKey`).
   * @throws BatonClientError for an unknown approval or one already decided, expired or cancelled, and for a decision
   * the workers refused as unsigned (this client has no decision key, or not theirs): the approval stays pending.
   */
  approve(approvalId: string, options: { by?: string; waitMs?: number } = {}): Promise<DecideApprovalResult> {
    return this.decide(
      approvalId,
      { approve: true, ...(options.by === undefined ? {} : { decidedBy: options.by }) },
      options,
    );
  }

  /**
   * Rejects a pending tool call: it does not run, and the agent's tool result says so, with `reason`. Signed like
   * `approve`.
   * @throws BatonClientError for an unknown approval or one already decided, expired or cancelled, and for a decision
   * the workers refused as unsigned.
   */
  reject(
    approvalId: string,
    options: { reason?: string; by?: string; waitMs?: number } = {},
  ): Promise<DecideApprovalResult> {
    return this.decide(
      approvalId,
      {
        approve: false,
        ...(options.reason === undefined ? {} : { reason: options.reason }),
        ...(options.by === undefined ? {} : { decidedBy: options.by }),
      },
      options,
    );
  }

  private async decide(
    approvalId: string,
    decision: Omit<DecideApprovalInput, 'approvalId'>,
    options: { waitMs?: number },
  ): Promise<DecideApprovalResult> {
    const db = this.client.database();
    const approval = await findApproval(db, this.threadId, approvalId);
    if (!approval) throw new BatonClientError(`thread '${this.threadId}' has no approval '${approvalId}'`);
    // Signed for this root and approval, and the way it decides, whatever the rest says (activities/decision-proofs.ts).
    const signed = (approve: boolean): Pick<DecideApprovalInput, 'proof'> => {
      const proof = this.client.decisionProof({ rootThreadId: this.threadId, approvalId, approve });
      return proof === undefined ? {} : { proof };
    };
    if (approval.status === 'approved' || approval.status === 'rejected') {
      const approve = approval.status === 'approved';
      const stored: DecideApprovalInput = {
        approvalId,
        approve,
        ...(approval.decidedBy === null ? {} : { decidedBy: approval.decidedBy }),
        ...(approval.reason === null ? {} : { reason: approval.reason }),
        ...signed(approve),
      };
      const finished = await this.finishHalfDone(approval.workflowId, 'decideApproval', stored, options.waitMs);
      if (finished && stored.approve === decision.approve) return { approvalId, status: approval.status };
    }
    if (approval.status !== 'pending') {
      throw new BatonClientError(`approval '${approvalId}' is already ${approval.status}`);
    }
    return this.updateWaitingTurn<DecideApprovalResult, DecideApprovalInput>({
      what: `approval '${approvalId}'`,
      workflowId: approval.workflowId,
      update: 'decideApproval',
      input: { approvalId, ...decision, ...signed(decision.approve) },
      notWaitingYet: /is not waiting for a decision in this turn/,
      stillWaiting: async () => {
        const now = await findApproval(db, this.threadId, approvalId);
        return now?.status === 'pending' ? undefined : (now?.status ?? 'gone');
      },
      waitMs: options.waitMs,
    });
  }

  /**
   * Hands a turn an answer or decision stored in Postgres that it may never have heard: an Update whose write landed
   * and which then failed (its turn's workflow code predating `baton-decisions-after-acceptance` wrote a decision
   * before the Update was accepted), or whose handler's activity failed after committing. The turn's handler closes
   * the row again, which finds it closed the same way and goes on. `true` when the turn took it; `false` when it was
   * not waiting for it (it heard it, or has ended), which is the usual case, or did not answer within `waitMs`.
   */
  private async finishHalfDone<Input>(
    workflowId: string,
    update: string,
    input: Input,
    waitMs = ANSWER_WAIT_MS,
  ): Promise<boolean> {
    const turn = this.client.temporal.workflow.getHandle(workflowId);
    try {
      await this.client.temporal.connection.withDeadline(Date.now() + waitMs, () =>
        turn.executeUpdate<unknown, [Input]>(update, { args: [input] }),
      );
      return true;
    } catch (error) {
      const refused = this.refusedDecision(error);
      if (refused) throw refused;
      if (
        error instanceof WorkflowNotFoundError ||
        error instanceof WorkflowUpdateFailedError ||
        error instanceof WorkflowUpdateRPCTimeoutOrCancelledError
      ) {
        return false;
      }
      throw error;
    }
  }

  /**
   * The error to throw for a decision the workers refused as unsigned (`Approval.Unauthorized`), saying which key is
   * missing or wrong; `undefined` for any other error.
   */
  private refusedDecision(error: unknown): BatonClientError | undefined {
    let cause: unknown = error;
    for (let depth = 0; cause instanceof Error && depth < 10; depth++) {
      if ((cause as { type?: unknown }).type === ErrorType.ApprovalUnauthorized) {
        const remedy = this.client.signsDecisions
          ? "this client's decision key is not the workers': give both the same BATON_DECISION_KEY"
          : 'this client has no decision key: connect with `decisionKey` (the CLI reads BATON_DECISION_KEY or ' +
            'BATON_DECISION_KEY_FILE)';
        return new BatonClientError(`${cause.message}; ${remedy}`, { cause: error });
      }
      cause = cause.cause;
    }
    return undefined;
  }

  /**
   * Sends an Update to the turn waiting for a human (an answer, a decision). The request is stored before its turn
   * starts waiting for it: an Update in between (a quick human, or a turn whose worker died right after storing it
   * and waits for another to pick it up) is refused by the turn's validator. Refused Updates leave no trace, so
   * trying again until the turn waits is safe, as long as the stored request is still open.
   */
  private async updateWaitingTurn<Result, Input>(request: {
    what: string;
    workflowId: string;
    update: string;
    input: Input;
    notWaitingYet: RegExp;
    /** `undefined` while the stored request is still open, else its status. */
    stillWaiting: () => Promise<string | undefined>;
    waitMs: number | undefined;
  }): Promise<Result> {
    const turn = this.client.temporal.workflow.getHandle(request.workflowId);
    for (let waitedMs = 0; ;) {
      try {
        return await turn.executeUpdate<Result, [Input]>(request.update, { args: [request.input] });
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) {
          // Its turn has ended without closing it (one stopped by a worker whose code predates closing them).
          const closed = await request.stillWaiting();
          throw new BatonClientError(
            closed === undefined
              ? `${request.what} is still open, but the turn waiting for it (${request.workflowId}) has ended: ` +
                  'nothing can reach it any more'
              : `${request.what} is already ${closed}`,
            { cause: error },
          );
        }
        const refused = this.refusedDecision(error);
        if (refused) throw refused;
        if (!(error instanceof WorkflowUpdateFailedError && request.notWaitingYet.test(String(error.cause?.message)))) {
          throw error;
        }
        const closed = await request.stillWaiting();
        if (closed !== undefined) throw new BatonClientError(`${request.what} is already ${closed}`, { cause: error });
        const waitLimitMs = request.waitMs ?? ANSWER_WAIT_MS;
        if (waitedMs >= waitLimitMs) {
          throw new BatonClientError(
            `${request.what} is open but its turn has not started waiting for it after ${waitLimitMs / 1000} s ` +
              '(is a worker running?); try again',
            { cause: error },
          );
        }
        const pause = Math.min(250 + waitedMs / 4, 2_000);
        await new Promise((resolve) => setTimeout(resolve, pause));
        waitedMs += pause;
      }
    }
  }

  /**
   * The thread's latest final answer (its newest assistant message with text and no tool call), or `undefined`
   * before its first.
   * @throws BatonClientError for an unknown thread.
   */
  async lastReply(): Promise<TranscriptMessage | undefined> {
    const db = this.client.database();
    await this.assertExists(db);
    return findLastReply(db, this.threadId);
  }

  /**
   * Up to `limit` messages (default 100) of the thread's transcript after sequence number `after` (default 0: from
   * the start), in order.
   * @throws BatonClientError for an unknown thread.
   */
  async transcriptPage(page: { after?: number; limit?: number } = {}): Promise<TranscriptPage> {
    const db = this.client.database();
    await this.assertExists(db);
    const limit = page.limit ?? TRANSCRIPT_PAGE;
    // One more than asked says whether another page follows.
    const rows = await listMessagesPage(db, this.threadId, { after: page.after ?? 0, limit: limit + 1 });
    const messages = rows.slice(0, limit);
    const last = messages.at(-1);
    return rows.length > limit && last ? { messages, nextAfter: last.seq } : { messages };
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
    if (!root) {
      const thread = await findThread(this.client.database(), this.threadId);
      throw new BatonClientError(
        thread
          ? `'${this.threadId}' is a delegation thread; its tree is the tree of root thread '${thread.rootThreadId}'`
          : `thread '${this.threadId}' does not exist`,
      );
    }
    return root;
  }

  /**
   * Baton's database, once this thread is known to be a root thread: env data belongs to a whole delegation tree,
   * so a delegation thread of its own would only ever show none.
   * @throws BatonClientError for an unknown thread, or a delegation thread (naming its root).
   */
  private async envDatabase(): Promise<Pool> {
    const db = this.client.database();
    const thread = await findThread(db, this.threadId);
    if (!thread) await this.assertExists(db);
    else if (thread.rootThreadId !== this.threadId) {
      throw new BatonClientError(
        `'${this.threadId}' is a delegation thread; its environment data is that of root thread '${thread.rootThreadId}'`,
      );
    }
    return db;
  }

  /**
   * The manifest of this root thread's shared environment data: every entry without its value, by key.
   * @throws BatonClientError for an unknown thread or a delegation thread.
   */
  async envData(filters: EnvListFilters = {}): Promise<EnvManifestEntry[]> {
    const db = await this.envDatabase();
    return new EnvStore(db).list(this.threadId, filters);
  }

  /**
   * One page of the manifest, by key: up to `page.limit` entries after the key `page.after`, with how many more
   * match and the cursor (`nextCursor`) of the next page. Prefer it to {@link envData} for large manifests.
   * @throws BatonClientError for an unknown thread or a delegation thread.
   */
  async envDataPage(
    filters: EnvListFilters = {},
    page: { limit?: number; after?: string } = {},
  ): Promise<EnvManifestPage> {
    const db = await this.envDatabase();
    return new EnvStore(db).listPage(this.threadId, filters, undefined, page);
  }

  /**
   * One env-data entry with its value, or `undefined` when the key holds none.
   * @throws BatonClientError for an unknown thread or a delegation thread.
   */
  async envGet(key: string): Promise<EnvEntry | undefined> {
    const db = await this.envDatabase();
    return new EnvStore(db).get(this.threadId, key);
  }

  /**
   * The env-data change log of this root thread after sequence number `since`, oldest first: every store, update,
   * delete (with the value it wrote or removed) and refusal, with who did it. Page on with the last `seq`.
   * @param options.since @default 0 (from the start)
   * @param options.limit most events returned @default 1000
   * @throws BatonClientError for an unknown thread or a delegation thread.
   */
  async envEvents(options: { since?: number; limit?: number } = {}): Promise<EnvEvent[]> {
    const db = await this.envDatabase();
    return new EnvStore(db).events(this.threadId, options);
  }

  /**
   * Calls `onEvent` for each env-data event of this root thread after `options.since`, in order, each once: first
   * those already logged, then each change as it commits. It LISTENs on a connection of its own (not one of the
   * pool's) and reads the log after every announcement, so a missed or merged notification loses nothing. Resolves
   * once listening and the events logged so far have been delivered. Stop it with `stop()` or `BatonClient.close()`.
   * @throws BatonClientError for an unknown thread, a delegation thread, or a client connected without a database URL.
   */
  async watchEnv(onEvent: EnvEventListener, options: WatchEnvOptions = {}): Promise<EnvWatch> {
    await this.envDatabase();
    return this.client.startEnvWatch(this.threadId, onEvent, options.since ?? 0);
  }

  /**
   * Proposals fork workers made against this root's shared data: pending ones by default (`status: 'all'` for every
   * one, accepted and discarded included).
   * @throws BatonClientError for an unknown thread or a delegation thread.
   */
  async envProposals(options: { status?: EnvProposal['status'] | 'all' } = {}): Promise<EnvProposal[]> {
    const db = await this.envDatabase();
    return new EnvStore(db).proposals(this.threadId, options);
  }

  /**
   * Accepts a pending proposal as the human of this root thread: applies it to its entry, and the event log records
   * who accepted it. Accepting it again returns the first outcome.
   * @throws BatonClientError for an unknown thread, a delegation thread, or a proposal that is not pending.
   */
  async envAccept(proposalId: string): Promise<EnvWriteResult> {
    const db = await this.envDatabase();
    const store = new EnvStore(db);
    const proposal = (await store.proposals(this.threadId, { status: 'all' })).find(
      (candidate) => candidate.proposalId === proposalId,
    );
    if (!proposal) throw new BatonClientError(`there is no proposal '${proposalId}' in thread '${this.threadId}'`);
    const thread = await findThread(db, this.threadId);
    const scope = { rootThreadId: this.threadId, threadId: this.threadId, agent: 'human', epoch: thread?.epoch ?? 0 };
    let accepted: EnvWriteResult;
    try {
      accepted = await store.acceptProposal(scope, `human:accept:${proposalId}`, { key: proposal.key, proposalId });
    } catch (error) {
      if (error instanceof EnvDataError) throw new BatonClientError(error.message);
      throw error;
    }
    // Announced now rather than after the store's gathering delay: a short-lived caller (the CLI) ends its pool next.
    await store.flushAnnouncements();
    // The change is committed: wake the watchers of its key as an agent's write does, best effort (the workers' sweep
    // tells a watcher this could not).
    await wakeWatchers(
      {
        pool: db,
        temporal: this.client.temporal,
        taskQueue: this.client.taskQueue,
        graceSeconds: DEFAULT_WATCH_SWEEP_SECONDS,
        warn: () => undefined,
      },
      this.threadId,
      [proposal.key],
    );
    return accepted;
  }

  /** The forks of this root's tree (`fork_join` calls), oldest first, with each task's status and merge. */
  async forks(): Promise<ForkRow[]> {
    return listForks(this.client.database(), this.threadId);
  }

  /**
   * Every write of this root's tree that was refused because its turn had been reclaimed (its thread's epoch moved
   * on): env data, transcript messages, questions, delegations, with both epochs.
   */
  async refusedWrites(options: { since?: number; limit?: number } = {}): Promise<RefusedWrite[]> {
    return listRefusedWrites(this.client.database(), this.threadId, options);
  }

  /** Token usage of every model call in this thread's tree. */
  async usage(): Promise<ThreadUsage> {
    const db = this.client.database();
    const [usage, budget] = await Promise.all([
      sumUsage(db, this.threadId),
      budgetOf(db, this.threadId, this.threadId),
    ]);
    return budget === undefined ? usage : { ...usage, budget };
  }

  /** The watchers of this root (removed and stopped ones too, with why), by name. */
  async watchers(): Promise<Watcher[]> {
    return listWatchers(this.client.database(), this.threadId);
  }

  /**
   * What this root's watchers did, oldest first: each added, paused (until when, why), resumed, removed or stopped;
   * each wake-up with the changes that caused it, and its end; each chain left at the depth limit.
   */
  async watchEvents(options: { limit?: number } = {}): Promise<StoredRunEvent[]> {
    const rows = await listWatchFeed(this.client.database(), this.threadId, options.limit);
    return rows.flatMap(runEventsOf);
  }

  /** This root's watcher wake-ups, newest first, each with the changes that caused it and how its turn ended. */
  async wakeups(options: { watcher?: string; limit?: number } = {}): Promise<WakeupRow[]> {
    return listWakeups(this.client.database(), this.threadId, options);
  }

  /**
   * Adds a watcher to this root: from now on a committed change to one of `keys` wakes a turn of `agent` in a thread
   * of its own under the root, told what changed (and `message`). Named `name`, else after its agent. Its workflow
   * starts at once, waiting for changes.
   * @throws BatonClientError for bad patterns, an unknown agent, a name in use or a thread that does not exist.
   */
  async addWatcher(request: WatchSpec & { agent: string; name?: string; createdBy?: string }): Promise<Watcher> {
    const name = request.name ?? request.agent;
    const problem = watcherNameProblem(name) ?? watchSpecProblem(request);
    if (problem !== undefined) throw new BatonClientError(problem);
    const db = this.client.database();
    await checkKnownAgent(db, request.agent);
    await this.threadRecorded();
    try {
      const { watcher } = await registerWatcher(db, {
        rootThreadId: this.threadId,
        name,
        agent: request.agent,
        spec: watchSpecOf(request),
        origin: 'run_time',
        createdBy: request.createdBy ?? 'client',
        taskQueue: this.client.taskQueue,
      });
      await this.client.temporal.workflow.signalWithStart(
        'envWatcherWorkflow',
        watcherSignalWithStartOptions(watcher, this.client.taskQueue),
      );
      return watcher;
    } catch (error) {
      if (error instanceof WatcherExistsError || error instanceof ThreadNotFoundError) {
        throw new BatonClientError(error.message);
      }
      throw error;
    }
  }

  /**
   * Waits for the root's record in Postgres, which its workflow writes in its first task (a thread just started may
   * not have it yet).
   * @throws BatonClientError for a thread that does not exist.
   */
  private async threadRecorded(): Promise<void> {
    const deadline = Date.now() + POST_ACCEPT_WAIT_MS;
    while (!(await findThread(this.client.database(), this.threadId))) {
      try {
        await this.workflow.describe();
      } catch (error) {
        throw this.notFound(error);
      }
      if (Date.now() > deadline) {
        throw new BatonClientError(`thread '${this.threadId}' has not started: is a worker running?`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * Removes a watcher of this root: it wakes no more (a wake-up running finishes). Its wake-ups stay on record.
   * @throws BatonClientError when the root has no watcher of that name.
   */
  async removeWatcher(name: string, options: { by?: string } = {}): Promise<Watcher> {
    let watcher: Watcher;
    try {
      watcher = await endWatcher(
        this.client.database(),
        this.threadId,
        name,
        'removed',
        `removed by ${options.by ?? 'a client'}`,
      );
    } catch (error) {
      if (error instanceof WatcherNotFoundError) throw new BatonClientError(error.message);
      throw error;
    }
    // Its workflow ends at its next look; tell it to look now (this starts none that is not running).
    await this.client.temporal.workflow
      .getHandle(watcherWorkflowId(this.threadId, name))
      .signal(ENV_CHANGED_SIGNAL)
      .catch((error: unknown) => {
        if (!(error instanceof WorkflowNotFoundError)) throw error;
      });
    return watcher;
  }
}

/**
 * Connects to Temporal and returns a Baton client. With no options it finds where Baton runs as the CLI does
 * ({@link findConnection}): `TEMPORAL_ADDRESS` (with `TEMPORAL_NAMESPACE`, `BATON_TASK_QUEUE`, `DATABASE_URL`,
 * `BATON_DECISION_KEY`), else the `baton dev` running from `.baton` in the working directory; `connectedVia` on the
 * client says which.
 * @throws BatonClientError for a `decisionKey` that cannot be a key (shorter than 32 characters, say), or, with no
 *   options, when neither the environment nor a running `baton dev` says where Baton runs.
 */
export async function connect(given?: ConnectOptions): Promise<BatonClient> {
  const found = given === undefined ? findConnection() : undefined;
  const options: ConnectOptions = given ?? (found as FoundConnection);
  if (options.decisionKey !== undefined) {
    const problem = accessTokenProblem(options.decisionKey);
    if (problem !== undefined) throw new BatonClientError(`decisionKey ${problem}`);
  }
  const tls = options.tls ?? (options.apiKey === undefined ? undefined : true);
  let connection: Connection;
  try {
    connection = await Connection.connect({
      address: options.address,
      ...(tls === undefined ? {} : { tls }),
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      ...(options.metadata === undefined ? {} : { metadata: { ...options.metadata } }),
    });
  } catch (error) {
    throw new BatonClientError(
      describeConnectFailure(
        {
          address: options.address,
          ...(tls === undefined ? {} : { tls }),
          ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
        },
        error,
      ),
      { cause: error },
    );
  }
  const namespace = options.namespace ?? 'default';
  const pool = options.databaseUrl
    ? createPool({ connectionString: options.databaseUrl, max: 4, applicationName: 'baton-client' })
    : undefined;
  return new BatonClient(
    new Client({ connection, namespace, interceptors: { workflow: [traceContextInterceptor] } }),
    connection,
    options.taskQueue ?? 'baton',
    pool,
    options.databaseUrl,
    {
      ...(options.scheduleMinimumIntervalSeconds === undefined
        ? {}
        : { scheduleMinimumIntervalSeconds: options.scheduleMinimumIntervalSeconds }),
      ...(options.decisionKey === undefined ? {} : { decisionKey: options.decisionKey }),
      connectedVia: found?.source ?? sourceOf(given) ?? `the options given (${options.address})`,
    },
  );
}

/** Where options came from when they are {@link findConnection}'s, passed on as they are. */
function sourceOf(options: ConnectOptions | undefined): string | undefined {
  const source = (options as Partial<FoundConnection> | undefined)?.source;
  return typeof source === 'string' ? source : undefined;
}

/** World names follow agent names: lowercase letters, digits, `_` and `-`. */
/**
 * `name` if it is a valid world name (what agent names may be).
 * @throws BatonClientError naming the rule otherwise.
 */
export function checkWorldName(name: string): string {
  return worldName(name);
}

function worldName(name: string): string {
  if (!AGENT_NAME_PATTERN.test(name)) {
    throw new BatonClientError(`world name '${name}' must be lowercase letters, digits, '_' or '-' (at most 64)`);
  }
  return name;
}

/**
 * Baton's worlds, which live only in Postgres: this client opens no Temporal connection (what `baton world` uses, so
 * it works while Temporal is down). The pool connects at the first query.
 */
export class WorldsClient {
  constructor(private readonly pool: Pool) {}

  database(): Pool {
    return this.pool;
  }

  /**
   * A handle on a world's variables (`default` unless named).
   * @throws BatonClientError for an invalid world name, before anything is connected.
   */
  world(name: string = DEFAULT_WORLD): WorldHandle {
    return new WorldHandle(this, worldName(name));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** A client for worlds alone, on Baton's database (see {@link WorldsClient}). */
export function connectWorlds(databaseUrl: string): WorldsClient {
  return new WorldsClient(createPool({ connectionString: databaseUrl, max: 2, applicationName: 'baton-client' }));
}

/**
 * A world's variables, kept as one editable `.env`-style text (see `common/env-text.ts` for the syntax). Every model
 * call reads them as they are then, so an edit shows at the next call of a running conversation.
 */
export class WorldHandle {
  constructor(
    private readonly client: Pick<BatonClient, 'database'>,
    readonly name: string,
  ) {}

  /** The raw text, or `undefined` when the world has no variables. */
  async getVariablesText(): Promise<string | undefined> {
    return getWorldVariablesText(this.client.database(), this.name);
  }

  /**
   * Replaces the whole text (what `baton world import` does).
   * @throws BatonClientError when the text holds what Postgres cannot store (a NUL character); nothing is changed.
   */
  async setVariablesText(text: string): Promise<void> {
    const problem = envTextProblem(text);
    if (problem !== undefined) throw new BatonClientError(`${problem}; nothing was changed`);
    await setWorldVariablesText(this.client.database(), this.name, text);
  }

  /** The variables parsed from the text (last assignment wins; invalid lines are ignored). */
  async getEnvMap(): Promise<Record<string, string>> {
    return { ...parseEnvText(await this.getVariablesText()) };
  }

  async getEnvValue(key: string): Promise<string | undefined> {
    return (await this.getEnvMap())[key];
  }

  /**
   * Sets variables in place, keeping comments and order (appending new ones).
   * @throws BatonClientError for an invalid name or a value with a line break; nothing is changed then.
   */
  async set(assignments: Readonly<Record<string, string>>): Promise<void> {
    try {
      await editWorldVariablesText(this.client.database(), this.name, (text) => setEnvVariables(text, assignments));
    } catch (error) {
      if (error instanceof EnvTextError) throw new BatonClientError(error.message, { cause: error });
      throw error;
    }
  }

  /** Removes every assignment of `key`; returns whether there was one. */
  async unset(key: string): Promise<boolean> {
    let had = false;
    await editWorldVariablesText(this.client.database(), this.name, (text) => {
      had = parseEnvText(text)[key] !== undefined;
      return unsetEnvVariable(text, key);
    });
    return had;
  }

  /**
   * Sets `working_directory`, the directory the shell and file tools work in, to the normalised absolute path of an
   * existing directory, and returns it.
   * @throws BatonClientError when the path is not an existing directory; nothing is changed then.
   */
  async setWorkingDirectory(directory: string): Promise<string> {
    const absolute = path.resolve(directory);
    let isDirectory = false;
    try {
      isDirectory = (await fs.promises.stat(absolute)).isDirectory();
    } catch {
      // Reported below: a path that does not exist changes nothing.
    }
    if (!isDirectory) throw new BatonClientError(`'${absolute}' is not an existing directory; nothing was changed`);
    await this.set({ working_directory: absolute });
    return absolute;
  }
}

/**
 * A turn's result with its `output` checked by `parser` (`SendOptions.output`), when one is given.
 * @throws BatonClientError when the turn gave no `output`, or `parser` refuses it (its error as the cause)
 */
function typedResult<T>(result: SendMessageResult, parser: OutputParser<T> | undefined): SendMessageResult<T> {
  if (parser === undefined) return result as SendMessageResult<T>;
  if (result.output === undefined) {
    throw new BatonClientError(
      `turn ${result.turn} of thread '${result.threadId}' gave no output to check: its agent sets no 'output' schema`,
    );
  }
  try {
    return { ...result, output: parser.parse(result.output) };
  } catch (error) {
    throw new BatonClientError(
      `the output of turn ${result.turn} of thread '${result.threadId}' was refused by the caller's schema: ` +
        `${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}
