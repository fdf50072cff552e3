/**
 * Identifiers. Thread ids are chosen at the edge (the client, or the caller); workflow ids are derived from them,
 * never random, so a run can be found in the Web UI from the thread id alone.
 */

/** Letters, digits, `_`, `-` and `.`; short, because every workflow id of the tree embeds it. */
export const THREAD_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Agent names: lowercase letters, digits, `_` and `-`. */
export const AGENT_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** Returns a reason when `threadId` is not a valid thread id, else `undefined`. */
export function threadIdProblem(threadId: string): string | undefined {
  if (THREAD_ID_PATTERN.test(threadId)) return undefined;
  return `thread id '${threadId}' must be 1-64 characters of letters, digits, '_', '-' or '.', starting with a letter or digit`;
}

/** Workflow id of a root thread: `baton/<rootThreadId>`. */
export function threadWorkflowId(rootThreadId: string): string {
  return `baton/${rootThreadId}`;
}

/** Workflow id of the `turn`-th turn (1-based) of a root thread: `baton/<rootThreadId>/turn-<n>`. */
export function rootTurnWorkflowId(rootThreadId: string, turn: number): string {
  return `baton/${rootThreadId}/turn-${turn}`;
}

/**
 * Operation id of one write inside a workflow run. The run id is part of it because activity ids restart after
 * continue-as-new; the step and index say which write of the run it is.
 */
export function operationId(runId: string, ...parts: (string | number)[]): string {
  return [runId, ...parts].join(':');
}

/**
 * Operation id of the approval a tool call waits for: the workflow opens it under this id, and the tool activity
 * looks it up by the same id before it runs a call that needs approval.
 */
export function approvalOperationId(toolCallOperationId: string): string {
  return `${toolCallOperationId}:approval`;
}
