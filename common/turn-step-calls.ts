/**
 * What a turn's steps are made of, shared by the workflow (which runs them one by one) and by an activity that runs
 * several of them in a row (`steps: batched`): which tool calls go with the next model call, and the ids and inputs
 * of a step's calls. Both sides derive them the same way, so a step has the same operation ids wherever it runs and a
 * re-run finds what an earlier run stored.
 */
import { operationId } from './ids';
import type { CallModelInput, ExecuteToolCallInput, PlannedToolCall, ThreadScope } from './types';

/**
 * The longest `timeout_s` of a tool whose calls may run with the next model call (under the step activity's 25
 * minutes, which must also hold the model call); a longer-running tool gets an activity of its own.
 */
export const MAX_CARRIED_TOOL_SECONDS = 840;

/**
 * Whether a call may run at the start of the next model call's activity: a tool the activity runs, that needs no
 * approval and fits in that activity's time beside the model call.
 */
export function runsWithNextModelCall(call: PlannedToolCall): boolean {
  return call.kind === 'tool' && call.approval === undefined && (call.timeoutSeconds ?? 0) <= MAX_CARRIED_TOOL_SECONDS;
}

/** What identifies a turn's steps: whose they are, and what their operation ids start with. */
export interface TurnStepIds {
  scope: ThreadScope;
  world: string;
  agent: { version: string };
  /**
   * What the turn's operation ids start with: the run id of a turn's own workflow, or, for a turn whose steps run in
   * its thread's workflow, that run's id and the turn's number (`threadTurnOperationBase`).
   */
  operationBase: string;
}

/** The operation id of step `step`'s model call. */
export function modelCallOperationId(ids: Pick<TurnStepIds, 'operationBase'>, step: number): string {
  return operationId(ids.operationBase, 'model', step);
}

/**
 * Step `step`'s model call: under the turn's MCP tool list once its first call named one, and recording the turn
 * completed with its answer when `finishTurnOnAnswer`.
 */
export function modelCallInput(
  ids: TurnStepIds,
  step: number,
  options: { mcpToolList?: string | undefined; finishTurnOnAnswer: boolean },
): CallModelInput {
  return {
    scope: ids.scope,
    world: ids.world,
    agentVersion: ids.agent.version,
    operationId: modelCallOperationId(ids, step),
    step,
    ...(options.mcpToolList === undefined ? {} : { mcpToolList: options.mcpToolList }),
    ...(options.finishTurnOnAnswer ? { finishTurnOnAnswer: true } : {}),
  };
}

/** What `executeToolCall` needs to run call `index` of the reply stored at `messageSeq` in step `step`. */
export function toolCallInput(
  ids: TurnStepIds,
  call: PlannedToolCall,
  step: number,
  index: number,
  messageSeq: number,
): ExecuteToolCallInput {
  return {
    scope: ids.scope,
    world: ids.world,
    agentVersion: ids.agent.version,
    operationId: operationId(ids.operationBase, 'tool', step, index),
    messageSeq,
    toolCallId: call.id,
  };
}
