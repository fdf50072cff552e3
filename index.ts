/**
 * `baton`, the package's main entry: the client SDK (start threads, send messages, answer questions, read
 * transcripts and env data, decide approvals, manage worlds and schedules) and what a user's tool module needs
 * (`defineTool`, `ToolError` and the types of a tool and its context). The worker is `baton/worker`, the test kit `baton/testing`; nothing else is
 * public (docs/architecture.md §3).
 */
export * from './client';
export { defineTool, isToolError, ToolError } from './activities/tools/types';
export type {
  AgentLookup,
  ApprovalContext,
  ToolContext,
  ToolDefinition,
  ToolOutput,
  WorldContext,
} from './activities/tools/types';
export type { AgentEnv } from './activities/tools/agent-env';
// What `ctx.env` throws for a refused write: a tool that updates with `expectedVersion` reads `conflict` to retry.
export { EnvDataError, EnvDataErrorType } from './db/env-data';
export type { EnvConflict } from './db/env-data';
export {
  DEFAULT_USER_TOOL_MAX_RESULT_BYTES,
  DEFAULT_USER_TOOL_RETRIES,
  DEFAULT_USER_TOOL_TIMEOUT_S,
} from './activities/tools/user-tools';
export type { AgentDefinition } from './common/agent-definition';
export type {
  AgentTurnResult,
  AnswerQuestionResult,
  DecideApprovalResult,
  DelegationLimits,
  SendMessageResult,
  ThreadScope,
  ThreadStatus,
  TokenUsage,
  TurnStatus,
  WakeResult,
} from './common/types';
