/**
 * The names of the metrics Baton records beside the Temporal SDK's, as they are exported (the runtime's `temporal_`
 * prefix is for the SDK's own): the activities' (activities/metrics.ts), the watcher workflow's, and the waiting gauges
 * every worker reads from Postgres (worker/waiting-metrics.ts). docs/guides/observing-runs.md says what each means.
 */
export const BatonMetric = {
  modelCalls: 'baton_model_calls',
  modelLatency: 'baton_model_call_latency',
  modelTokens: 'baton_model_tokens',
  toolCalls: 'baton_tool_calls',
  approvalsWaiting: 'baton_approvals_waiting',
  approvalOldestWait: 'baton_approval_oldest_wait_seconds',
  questionsWaiting: 'baton_questions_waiting',
  questionOldestWait: 'baton_question_oldest_wait_seconds',
  watcherWakeups: 'baton_watcher_wakeups',
  watcherPauses: 'baton_watcher_pauses',
  envWrites: 'baton_env_writes',
} as const;
