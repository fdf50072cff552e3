/**
 * The JSON-only objects that cross Temporal: workflow and activity inputs and results. No `Map`, `Date` or class
 * instances (the default converter is `JSON.stringify`), and nothing large: transcripts stay in Postgres.
 */

/**
 * Where a write lands and under which fence. The workflow builds it; no model argument can name another scope
 * (DESIGN.md §4.1).
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

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface EnsureThreadInput {
  threadId: string;
  rootThreadId: string;
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
  message: { role: 'user'; content: string } | { role: 'tool'; toolCallId: string; content: string };
}

export interface RecordMessageResult {
  seq: number;
}

export interface CallModelInput {
  scope: ThreadScope;
  operationId: string;
  /** 0-based model step within the turn, for summaries and logs. */
  step: number;
}

export interface CallModelResult {
  /** Transcript sequence number of the stored assistant message. */
  seq: number;
  content: string | null;
  toolCalls: ToolCallRequest[];
  usage: TokenUsage | null;
  /** True when the reply was already stored by an earlier attempt and the model was not called again. */
  reused: boolean;
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
  /** @default 25 */
  maxSteps?: number;
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
}

/** Input of `threadWorkflow`: a root thread a human (or a client program) talks to. */
export interface ThreadWorkflowInput {
  rootThreadId: string;
  agent: string;
}

export interface SendMessageInput {
  message: string;
}

export interface SendMessageResult extends AgentTurnResult {
  threadId: string;
  /** 1-based number of this turn in the thread. */
  turn: number;
}

export interface ThreadStatus {
  rootThreadId: string;
  agent: string;
  turns: number;
  busy: boolean;
}
