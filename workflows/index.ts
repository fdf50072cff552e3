/**
 * Baton's workflows: deterministic control flow only. Runs in Temporal's sandbox, so this folder imports only
 * `@temporalio/workflow`, `common/` and types from `activities/` (lint enforces it).
 */
export { agentTurnWorkflow, forkTaskTurnWorkflow, rootTurnWorkflow } from './agent-turn';
export { threadWorkflow, sendMessageUpdate, statusQuery, endThreadSignal, wakeUpdate } from './thread';
export { scheduledRunWorkflow } from './scheduled-run';
export { envWatcherWorkflow, envChangedSignal, watcherStateQuery } from './watcher';
