/**
 * The attribute names Baton's spans carry (the OpenTelemetry GenAI semantic conventions' and Baton's own), and those
 * of every span of a thread's work, shared by the activities' spans (activities/tracing.ts) and the workflows'
 * (workflows/spans.ts). Pure data.
 */

/** The attribute names of the GenAI semantic conventions Baton sets. */
export const GenAiAttribute = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  requestTemperature: 'gen_ai.request.temperature',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  agentName: 'gen_ai.agent.name',
  conversationId: 'gen_ai.conversation.id',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
} as const;

/** Baton's own attributes on its spans. */
export const BatonAttribute = {
  threadId: 'baton.thread_id',
  rootThreadId: 'baton.root_thread_id',
  agent: 'baton.agent',
  epoch: 'baton.epoch',
  operationId: 'baton.operation_id',
  step: 'baton.step',
  attempt: 'baton.attempt',
  local: 'baton.local_activity',
  mcpServer: 'baton.mcp.server',
  replyReused: 'baton.model.reply_reused',
  turn: 'baton.turn',
  forkTask: 'baton.fork_task',
  approvalId: 'baton.approval_id',
  approvalStatus: 'baton.approval.status',
  questionId: 'baton.question_id',
  questionAnswered: 'baton.question.answered',
  watcher: 'baton.watcher',
  watchWakeup: 'baton.watch.wakeup',
  watchKeys: 'baton.watch.keys',
  watchChanges: 'baton.watch.changes',
  watchOutcome: 'baton.watch.outcome',
} as const;

/** The attributes every span of a thread's work carries; a thread whose epoch is not known yet goes without it. */
export function threadSpanAttributes(scope: {
  readonly rootThreadId: string;
  readonly threadId: string;
  readonly agent: string;
  readonly epoch?: number;
}): Record<string, string | number> {
  return {
    [GenAiAttribute.conversationId]: scope.rootThreadId,
    [GenAiAttribute.agentName]: scope.agent,
    [BatonAttribute.rootThreadId]: scope.rootThreadId,
    [BatonAttribute.threadId]: scope.threadId,
    [BatonAttribute.agent]: scope.agent,
    ...(scope.epoch === undefined ? {} : { [BatonAttribute.epoch]: scope.epoch }),
  };
}
