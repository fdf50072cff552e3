/**
 * `baton`, the package's main entry: the client SDK (start threads, send messages, answer questions, read
 * transcripts and env data, manage worlds and schedules) and what a user's tool module needs (`defineTool`,
 * `ToolError` and the types of a tool). The worker is `baton/worker`, the test kit `baton/testing`; nothing else is
 * public (docs/architecture.md §3).
 */
export * from './client';
export { defineTool, ToolError } from './activities/tools/types';
export type { AgentLookup, ToolContext, ToolDefinition, ToolOutput, WorldContext } from './activities/tools/types';
export type { AgentDefinition } from './common/agent-definition';
export type {
  AgentTurnResult,
  AnswerQuestionResult,
  DelegationLimits,
  SendMessageResult,
  ThreadScope,
  ThreadStatus,
  TokenUsage,
  TurnStatus,
  WakeResult,
} from './common/types';
