/**
 * The JSON-only objects that cross Temporal: workflow and activity inputs and results. No `Map`, `Date` or class
 * instances (the default converter is `JSON.stringify`), and nothing large: transcripts stay in Postgres.
 */
import type { ResolvedAgent } from './agent-definition';
import type { Delivery, EndedInThread } from './deliveries';
import type { TokenUsage } from './usage';

/**
 * Where a write lands and under which fence. The workflow builds it; no model argument can name another scope
 * (docs/architecture.md §4, invariant 1).
 */
export interface ThreadScope {
  rootThreadId: string;
  threadId: string;
  agent: string;
  /** The thread epoch this turn runs under; a write under an older epoch is refused. */
  epoch: number;
}

/** A tool call the model asked for, as stored in the transcript. */
export interface ToolCallRequest {
  id: string;
  name: string;
  /** The raw JSON argument text the model produced. */
  arguments: string;
}

export type { TokenUsage } from './usage';

export interface EnsureThreadInput {
  threadId: string;
  rootThreadId: string;
  /** @default 'default' */
  world?: string;
  parentThreadId?: string;
  agent: string;
  caller?: string;
}

export interface EnsureThreadResult {
  epoch: number;
}

export interface RecordMessageInput {
  scope: ThreadScope;
  operationId: string;
  message:
    | { role: 'user'; content: string }
    | { role: 'tool'; toolCallId: string; content: string }
    /** The message a delegation stored for this thread (fork tasks: it stays out of workflow history). */
    | { role: 'user'; delegationOperationId: string };
}

export interface RecordMessageResult {
  seq: number;
}

export interface CallModelInput {
  scope: ThreadScope;
  /** The world whose variables fill the prompt's `{{ name }}` placeholders, as they are at this call. */
  world: string;
  /** The agent version the turn resolved at its start. */
  agentVersion: string;
  operationId: string;
  /** 0-based model step within the turn, for summaries and logs. */
  step: number;
  /**
   * The id of the MCP tool list the turn's first model call offered (`CallModelResult.mcpToolList`, stored in
   * Postgres): later calls of the turn offer only those tools (of those the worker still has), so a server changing
   * its tool list changes no turn already running. History carries the id, never the names.
   */
  mcpToolList?: string;
  /**
   * A reply without tool calls also records the turn completed on the thread's row (for `baton tree`), so the turn
   * ends without a step of its own for that. Set by turns from the `baton-finish-with-answer` patch on.
   */
  finishTurnOnAnswer?: boolean;
}

/**
 * What the workflow does with one tool call of a model reply. Arguments stay in Postgres (the stored assistant
 * message) except the few a workflow-handled call needs.
 */
export type PlannedToolCall =
  /** Run by `executeToolCall`, which also records a refusal (unknown tool, bad arguments) as the result. */
  | PlannedActivityToolCall
  /** Carried out by the workflow: store the question, wait for the answer. */
  | { id: string; name: string; kind: 'ask_human'; question: string; timeoutSeconds?: number }
  /** Carried out by the workflow: a child turn of the named agent. */
  | {
      id: string;
      name: string;
      kind: 'agent';
      message: string;
      contextKeys: string[];
      thread: DelegationThreadMode;
    }
  /** Carried out by the workflow: child turns fanned out and joined (`fork_join`). Task messages stay in Postgres. */
  | PlannedForkJoin
  /**
   * Carried out by the workflow: a durable timer (`wait`). Exactly one of `seconds` and `until` (an ISO 8601 time);
   * the workflow checks it against the clock and the world's limit, so the check replays the same way.
   */
  | { id: string; name: string; kind: 'wait'; seconds?: number; until?: string; reason: string };

/**
 * A tool call an activity runs. Users' tools carry their own limits, which the workflow turns into the call's
 * activity options; Baton's own tools carry none and run under the tool profile.
 */
export interface PlannedActivityToolCall {
  id: string;
  name: string;
  kind: 'tool';
  /** The tool's `timeout_s`: the activity's own timeout is set a little above it. */
  timeoutSeconds?: number;
  /** The tool's `retries`: the activity may be attempted that many more times (and a few to record a failure). */
  retries?: number;
  sideEffects?: boolean;
  /**
   * A person must approve the call before it runs (the tool's `needsApproval`, or the agent's `approval`); the
   * workflow waits for the decision, for at most `timeoutSeconds` when set.
   */
  approval?: { timeoutSeconds?: number };
}

/** A `fork_join` call as the workflow needs it: how many tasks, to whom, and how to run them. */
export interface PlannedForkJoin {
  id: string;
  name: string;
  kind: 'fork_join';
  /** Each task's agent, in input order. */
  agents: string[];
  failFast: boolean;
  deadlineSeconds: number;
  maxParallel: number;
  store: ForkStoreMode;
}

/** Where fork workers write: each into its own scope merged back as a commit, or all straight into the caller's. */
export type ForkStoreMode = 'isolated' | 'shared';

/** Which thread a delegation runs in: a new one, the callee's last one under this caller, or a copy of the caller's. */
export type DelegationThreadMode = 'new' | 'reuse' | 'clone';

/** Limits on delegation, carried down the tree. */
export interface DelegationLimits {
  /** Levels of delegation below the root agent. @default 8 */
  maxDepth: number;
  /** Times one agent may appear in a chain (more means a cycle). @default 2 */
  maxRepeats: number;
  /** Characters of the root human message quoted as task context. @default 500 */
  taskContextLimit: number;
  /**
   * Tasks one `fork_join` call may start. Optional only because conversations started before fork/join carry
   * limits without it. @default 32
   */
  maxForkTasks?: number;
  /**
   * The longest a `wait` may last, in seconds. Optional only because conversations started before `wait` carry
   * limits without it. @default 604800 (7 days)
   */
  maxWaitSeconds?: number;
  /**
   * Tokens (input and output) the whole tree of a root thread may spend, over all its turns; unset, no budget. Read
   * when the root's first turn begins: later changes to the world do not move a budget already opened.
   */
  budgetTokens?: number;
  /**
   * US dollars the whole tree may spend, at the workers' prices (`BATON_MODEL_PRICES`); unset, no dollar budget. Read
   * as `budgetTokens` is.
   */
  budgetUsd?: number;
}

export const DEFAULT_MAX_FORK_TASKS = 32;
export const DEFAULT_MAX_WAIT_SECONDS = 7 * 24 * 3600;
/**
 * The most seconds a `wait` call may name (about 31 years; the most `BATON_MAX_WAIT_SECONDS` can say), so its deadline
 * is always a date the workflow can compute with. The world's limit is the one that matters.
 */
export const MAX_WAIT_SECONDS_ARGUMENT = 999_999_999;

export const DEFAULT_DELEGATION_LIMITS: DelegationLimits = Object.freeze({
  maxDepth: 8,
  maxRepeats: 2,
  taskContextLimit: 500,
  maxForkTasks: DEFAULT_MAX_FORK_TASKS,
  maxWaitSeconds: DEFAULT_MAX_WAIT_SECONDS,
});

export interface OpenDelegationInput {
  /** The calling turn's scope. */
  scope: ThreadScope;
  callerVersion: string;
  operationId: string;
  /** The caller's assistant message that made the call (a clone copies what came before it). */
  callerMessageSeq: number;
  callee: string;
  mode: DelegationThreadMode;
  message: string;
  contextKeys: string[];
  /** Agents from the root to the caller. */
  chain: string[];
  taskContextLimit: number;
}

export interface OpenDelegationResult {
  threadId: string;
  workflowId: string;
  epoch: number;
  /** The message the callee receives: the delegation preamble, then the caller's message. */
  message: string;
  /** The callee's `timeout_s`, when it has one. */
  timeoutSeconds?: number;
}

export interface FinishTurnInput {
  threadId: string;
  status: 'running' | 'completed' | 'max_steps' | 'failed';
  error?: string;
}

/** A delegated turn or fork task its caller saw fail (its own error, or stopped by its `timeout_s`). */
export interface FenceFailedTurnInput {
  rootThreadId: string;
  threadId: string;
  /** The epoch the turn ran at: a thread that has moved past it is left alone. */
  epoch: number;
  /** Why it failed, as the caller words it. */
  error: string;
}

export interface FenceFailedTurnResult {
  /** Threads whose epoch moved: the turn's and every thread below it (none when it had moved on already). */
  fencedThreads: number;
}

export interface CallModelResult {
  /** Transcript sequence number of the stored assistant message. */
  seq: number;
  content: string | null;
  toolCalls: PlannedToolCall[];
  usage: TokenUsage | null;
  /** True when the reply was already stored by an earlier attempt and the model was not called again. */
  reused: boolean;
  /** The id of the MCP tool list this call offered, when the agent has any: the turn keeps it for its later calls. */
  mcpToolList?: string;
  /** The reply has no tool calls and the turn was recorded completed (`CallModelInput.finishTurnOnAnswer`). */
  turnFinished?: boolean;
  /** The answer's object, when the agent has an `output` schema and the answer matched it (typed results). */
  output?: unknown;
  /**
   * The answer did not match the agent's `output` schema: a message asking the model to fix it was stored after it,
   * and the turn takes another step (typed results).
   */
  outputRepair?: true;
}

export interface ExecuteToolCallInput {
  scope: ThreadScope;
  /** The world whose variables (`working_directory`) the tool sees. */
  world: string;
  agentVersion: string;
  operationId: string;
  /** Transcript sequence number of the assistant message that made the call. */
  messageSeq: number;
  toolCallId: string;
}

/** A turn's start as one activity: the agent is `scope.agent`; the message is recorded under `operationId`. */
export interface BeginTurnInput {
  scope: ThreadScope;
  operationId: string;
  message: RecordMessageInput['message'];
  /** The turn's world, whose `BATON_STEPS` may set its step mode. @default 'default' */
  world?: string;
  /** Resolve the turn's delegation limits from the world too (a root turn), with these set for the conversation. */
  limits?: { overrides?: Partial<DelegationLimits> };
  /**
   * When the agent's steps are `batched`, also run the turn's first batch (`runSteps` from step 0) in this activity,
   * under operation ids starting with `operationBase`; its answer records the turn completed. A first batch that fails
   * is left to a `runSteps` of the turn's own, which finds every step it stored.
   */
  firstBatch?: { operationBase: string };
  /**
   * Open the thread's record first (`ensureThread`), as the thread's first turn does when its message came with the
   * thread's start: the turn's writes then go under the epoch the record has (not `scope.epoch`), which the result
   * hands back (`BegunTurn.epoch`).
   */
  openThread?: EnsureThreadInput;
}

/** The tool calls of one model reply (each as `executeToolCall` takes it), then the model call that follows. */
export interface RunToolsThenCallModelInput {
  toolCalls: ExecuteToolCallInput[];
  model: CallModelInput;
}

/**
 * Consecutive steps of a turn in one activity (`steps: batched`): `toolCalls`, then the model call `model`, then, while
 * a reply's calls all go with the next model call (`runsWithNextModelCall`), those calls and the next model call.
 */
export interface RunStepsInput extends RunToolsThenCallModelInput {
  /** The names of `toolCalls`, in order (the batch's result lists what each step ran). */
  toolNames: string[];
  /** What the turn's operation ids start with: each later step's calls get the ids the workflow would give them. */
  operationBase: string;
  /** The turn's `max_steps`: no step at or past it is taken. */
  maxSteps: number;
}

export interface RunStepsResult extends CallModelResult {
  /** The step (from 0) this reply answers: the last one the batch took. */
  step: number;
  /** The batch's token usage: every step it took, from its first. */
  usage: TokenUsage | null;
  /** What the batch did, step by step (for the Web UI, where the batch is one marker): the tools each step ran first. */
  steps: { step: number; ranTools: string[]; reused: boolean }[];
}

export interface ExecuteToolCallResult {
  /** Transcript sequence number of the stored tool result. */
  seq: number;
  ok: boolean;
}

export interface ResolveAgentInput {
  name: string;
}

export interface OpenQuestionInput {
  scope: ThreadScope;
  operationId: string;
  /** The turn workflow that waits for the answer. */
  workflowId: string;
  toolCallId: string;
  question: string;
  timeoutSeconds?: number;
}

export interface OpenQuestionResult {
  questionId: string;
}

export interface CloseQuestionInput {
  rootThreadId: string;
  questionId: string;
  outcome: { status: 'answered'; answer: string } | { status: 'expired' };
}

export type CloseQuestionResult =
  | { status: 'answered'; answer: string }
  | { status: 'expired' }
  /** Its turn was reclaimed, timed out or failed before the answer arrived. */
  | { status: 'cancelled'; reason: string };

/** Update argument that answers a question a turn is waiting on. */
export interface AnswerQuestionInput {
  questionId: string;
  answer: string;
}

export interface AnswerQuestionResult {
  questionId: string;
  status: 'answered';
}

export interface OpenApprovalInput {
  scope: ThreadScope;
  operationId: string;
  /** The turn workflow that waits for the decision. */
  workflowId: string;
  /** The stored reply holding the call, and the call's id in it (its name and arguments are read from there). */
  messageSeq: number;
  toolCallId: string;
  timeoutSeconds?: number;
  /** What is asked for when it is not a tool call of the reply (`extend_budget`): its name and JSON arguments. */
  request?: { name: string; arguments: string };
}

/** Input of `extendBudget`: what a person approved adding to the turn's budget (`on_budget: ask`). */
export interface ExtendBudgetInput {
  scope: ThreadScope;
  /** The approval that asked for it. */
  approvalOperationId: string;
  extension: { tokens?: number; usd?: number };
}

/** What a model call that found its turn's budget spent says it would take to go on (its failure's details). */
export interface BudgetExhaustedDetails {
  /** What to ask a person to add (`on_budget: ask`): the agent's `budget`, else as much again as was granted. */
  extension: { tokens?: number; usd?: number };
  /** The step whose model call was not made. */
  step: number;
  /** A batch of steps (`runSteps`) that met it: what its earlier steps used. */
  batchUsage?: TokenUsage;
}

export interface OpenApprovalResult {
  approvalId: string;
}

/** A person's decision on an approval. */
export type ApprovalDecision =
  { status: 'approved'; decidedBy: string } | { status: 'rejected'; decidedBy: string; reason?: string };

export interface CloseApprovalInput {
  rootThreadId: string;
  approvalId: string;
  outcome: ApprovalDecision | { status: 'expired' } | { status: 'cancelled'; reason: string };
  /**
   * The decision's proof, from its Update (`DecideApprovalInput.proof`): a worker with a decision key writes an
   * `approved` or `rejected` outcome only when it matches. Expiries and cancellations, the turn's own, carry none.
   */
  proof?: string;
}

/** How an approval ended, whoever got there first. */
export type CloseApprovalResult = ApprovalDecision | { status: 'expired' } | { status: 'cancelled'; reason: string };

/** The longest reason a person may give with a decision, and the longest name of who decided. */
export const MAX_APPROVAL_REASON_CHARS = 2000;
export const MAX_DECIDED_BY_CHARS = 200;

/** Update argument that decides an approval a turn is waiting on. */
export interface DecideApprovalInput {
  approvalId: string;
  approve: boolean;
  /** Why (kept with a rejection, and told to the model). */
  reason?: string;
  /** Who decided, for the record. @default 'a person' */
  decidedBy?: string;
  /**
   * That the decider holds the deployment's decision key: `decisionProof(key, { rootThreadId, approvalId, approve })`
   * (activities/decision-proofs.ts), which the client SDK attaches when connected with `decisionKey`. Required by
   * workers that have a key. At most `MAX_DECISION_PROOF_CHARS` characters.
   */
  proof?: string;
}

/** The longest proof a decision's Update may carry (a `v1.` proof is 46 characters; room for a later scheme). */
export const MAX_DECISION_PROOF_CHARS = 200;

export interface DecideApprovalResult {
  approvalId: string;
  status: 'approved' | 'rejected';
}

/** Input of `agentTurnWorkflow`: one agent handling one incoming message until it answers. */
export interface AgentTurnInput {
  rootThreadId: string;
  threadId: string;
  parentThreadId?: string;
  agent: string;
  /** The incoming message, as the sender wrote it. */
  message: string;
  /** Who sent the message: `human`, or the calling agent's name. */
  sender: string;
  epoch: number;
  /** Agents from the root down to this one (this one included). @default [agent] */
  chain?: string[];
  /** The world the conversation runs in. @default 'default' */
  world?: string;
  /** @default DEFAULT_DELEGATION_LIMITS */
  limits?: DelegationLimits;
  /**
   * A root turn from the `baton-limits-in-turn` patch on: `limits` is not given, and the turn resolves them from its
   * world as it begins, with these set for the conversation winning.
   */
  limitsFromWorld?: { overrides?: Partial<DelegationLimits> };
  /**
   * When set, the incoming message is the one stored with this delegation (fork tasks), and `message` is only its
   * first line for logs; the full text never passes through workflow history.
   */
  delegationOperationId?: string;
  /**
   * A root turn its thread began (`beginTurn` in the thread's workflow, the `baton-turns-begin-in-thread` patch): the
   * message is recorded and the agent and limits resolved, so the turn does not begin again. With `progress`, the
   * thread also ran the turn's first local steps, and the turn goes on from the reply whose calls it did not run. With
   * `resume`, the turn's budget was spent at a model call and its agent asks a person for more: the turn goes on with
   * that call, here, where it can wait.
   */
  begun?: { agent: ResolvedAgent; limits: DelegationLimits; progress?: TurnProgress; resume?: StepResume };
}

/** Where a turn's steps left off: the reply of step `step`, whose calls have not run yet, and the usage so far. */
export interface TurnProgress {
  step: number;
  usage: TokenUsage;
  reply: { seq: number; toolCalls: PlannedToolCall[] };
  /** The MCP tool list the turn's first model call offered, which its later calls keep. */
  mcpToolList?: string;
}

/**
 * A turn going on with a model call at `step` of a transcript that is stored up to it (every earlier call's result
 * included): the model call that found the turn's budget spent.
 */
export interface StepResume {
  step: number;
  /** The turn's usage before that step. */
  usage: TokenUsage;
  mcpToolList?: string;
}

export const TurnStatus = {
  Completed: 'completed',
  MaxSteps: 'max_steps',
} as const;
export type TurnStatus = (typeof TurnStatus)[keyof typeof TurnStatus];

export interface AgentTurnResult {
  status: TurnStatus;
  /** The final answer; empty when the turn ran out of steps. */
  reply: string;
  steps: number;
  usage: TokenUsage;
  /** The answer's validated object, when the agent has an `output` schema (typed results; `reply` is its JSON). */
  output?: unknown;
}

/** Input of `threadWorkflow`: a root thread a human (or a client program) talks to. */
export interface ThreadWorkflowInput {
  rootThreadId: string;
  agent: string;
  /** The world the conversation runs in. @default 'default' */
  world?: string;
  /** Turns already run by earlier runs of this thread (carried over continue-as-new). @default 0 */
  turnsSoFar?: number;
  /** Earlier runs of this thread's workflow (carried over continue-as-new). @default 0 */
  runsSoFar?: number;
  /**
   * Continue-as-new after this many turns in one run (sooner when Temporal suggests it), so history stays small.
   * @default 100
   */
  continueAsNewAfterTurns?: number;
  /** Delegation limits for the whole tree, over the world's (which default to DEFAULT_DELEGATION_LIMITS). */
  limits?: Partial<DelegationLimits>;
  /**
   * The messages earlier runs handled, by Update id, the most recent last (`carriedDeliveries`): a message sent
   * again under one of these ids gets that turn's outcome instead of a second turn. @default []
   */
  deliveries?: Delivery[];
  /**
   * The thread's starter opens its record (`startThread` on a client with Baton's database, just after the start): the
   * thread's first task does not, so a message sent right after the start is taken at once, and the turn of the first
   * message opens the record as a message sent with the start does (idempotently: the record the starter made, or a
   * new one should the starter not have made it). Only a run that takes no message before its first turn settles
   * opens it itself. A continued run does not carry it. @default false
   */
  recordOpenedByStarter?: boolean;
}

/** Input of `deliveredTurnResult`: the turn a message delivered in an earlier run of its thread ran as. */
export interface DeliveredTurnInput {
  rootThreadId: string;
  turn: number;
  /** The message's Update id, for the error when that turn failed. */
  messageId: string;
  /** How the turn ended when it ended in the thread's workflow (`Delivery.ended`); else its workflow has the outcome. */
  ended?: EndedInThread;
}

/** What `beginTurn` resolves: the agent and where its steps run, and the turn's delegation limits when asked. */
export interface BegunTurn extends ResolvedAgent {
  limits?: DelegationLimits;
  /** The turn's first batch of steps, when it was asked for (`BeginTurnInput.firstBatch`) and ran. */
  firstBatch?: RunStepsResult;
  /** The thread's epoch, when this beginning opened the thread (`BeginTurnInput.openThread`). */
  epoch?: number;
}

export interface ResolveLimitsInput {
  world: string;
  /** Limits set for this conversation; they win over the world's. */
  overrides?: Partial<DelegationLimits>;
}

export interface SendMessageInput {
  message: string;
}

export interface SendMessageResult<T = unknown> extends AgentTurnResult {
  /** The answer's validated object, when the agent has an `output` schema (typed results). */
  output?: T;
  threadId: string;
  /** 1-based number of this turn in the thread. */
  turn: number;
}

export interface ThreadStatus {
  rootThreadId: string;
  agent: string;
  /** Turns run in this thread so far, across continue-as-new. */
  turns: number;
  busy: boolean;
  /** Runs of this thread's workflow so far (1 + times it continued as new). */
  runs: number;
  /**
   * The `wait` calls in progress anywhere in the thread's tree (the root turn and its delegations), oldest first.
   * Absent from statuses of threads that ran before `wait` existed.
   */
  waits?: WaitInfo[];
}

/** One `wait` call in progress: who waits, until when and why. */
export interface WaitInfo {
  /** The operation id of the call (unique in the tree). */
  id: string;
  /** The turn workflow that waits (`baton/<root>/turn-<n>` or a delegation's). */
  workflowId: string;
  threadId: string;
  agent: string;
  /** When the wait started and when it ends on its own, ISO 8601 (UTC). */
  since: string;
  until: string;
  reason: string;
}

/** Signal from a turn to its root thread: a wait started (`wait` set) or ended (`wait` absent). */
export interface WaitChangedInput {
  id: string;
  wait?: WaitInfo;
}

/** Why a wait ended before its time: a human message arrived in the thread, or someone called `baton wake`. */
export type WakeCause = 'message' | 'wake';

/** Signal to a turn workflow: end every wait in progress in it early. */
export interface WakeTurnInput {
  cause: WakeCause;
}

/** What `baton wake` (the thread's `wake` Update) did: the waits it ended early (empty when none was in progress). */
export interface WakeResult {
  threadId: string;
  woken: WaitInfo[];
}

export interface OpenForkInput {
  /** The calling turn's scope. */
  scope: ThreadScope;
  callerVersion: string;
  /** The fork's operation id; each task's delegation derives its own from it. */
  operationId: string;
  /** The caller's assistant message holding the `fork_join` call (its arguments are read from there). */
  callerMessageSeq: number;
  toolCallId: string;
  /** Agents from the root to the caller. */
  chain: string[];
  taskContextLimit: number;
}

/** One task of an opened fork: its thread and workflow, never its message (that stays in Postgres). */
export interface OpenedForkTask {
  /** 1-based, in input order. */
  taskIndex: number;
  agent: string;
  threadId: string;
  workflowId: string;
  epoch: number;
  /** The delegation operation id the child reads its message from. */
  delegationOperationId: string;
  /** The first line of the task's message, for the Web UI (≤ 200 bytes). */
  summary: string;
  /** The agent's `timeout_s`, when it has one. */
  timeoutSeconds?: number;
}

export interface OpenForkResult {
  /** Forks are numbered per root: 1, 2, … */
  forkNumber: number;
  /** Where isolated findings merge: `<prefix>/<task index>/<key>`. */
  prefix: string;
  tasks: OpenedForkTask[];
}

/** How one fork task ended. */
export type ForkTaskStatus = 'success' | 'failed' | 'timeout' | 'cancelled';

/** A fork's aggregate: every task succeeded, some did, none did (deadline or failures). */
export type ForkStatus = 'success' | 'partial' | 'failed' | 'timeout';

export interface ReclaimForkTasksInput {
  rootThreadId: string;
  forkNumber: number;
  /** Tasks given up on, with the status they end in. */
  tasks: { taskIndex: number; status: 'timeout' | 'cancelled'; error: string }[];
}

export interface ReclaimForkTasksResult {
  /** Threads whose epoch was bumped (each task's thread and everything it delegated to). */
  reclaimedThreads: number;
}

export interface FinishForkInput {
  /** The calling turn's scope: the merge lands in its store, and the tool result in its transcript. */
  scope: ThreadScope;
  /** The `fork_join` tool call's operation id (the tool result is recorded under it). */
  operationId: string;
  forkNumber: number;
  toolCallId: string;
  /**
   * How each task ended; `ranInWorkflowId` for a task that answered in the fork's own workflow (from the
   * `baton-fork-tasks-begin-in-fork` patch on), which never started the workflow its row names; `typed` for a task
   * whose answer is the JSON of an object its agent's `output` schema matched (given to the caller as an object).
   */
  outcomes: { taskIndex: number; status: ForkTaskStatus; error?: string; ranInWorkflowId?: string; typed?: true }[];
  /** Set when the fork was cut short: by its deadline or by the first failure under `fail_fast`. */
  stoppedBy?: 'deadline' | 'fail_fast';
}

export interface FinishForkResult {
  status: ForkStatus;
  /** Transcript sequence number of the recorded tool result. */
  seq: number;
}
