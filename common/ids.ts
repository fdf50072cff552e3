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

/** What ends the operation id of a message asking the model to fix an answer that did not match its `output`. */
export const OUTPUT_REPAIR_SUFFIX = ':output-repair';

/**
 * Operation id of the message asking the model to fix the answer stored under `replyOperationId` (typed results):
 * stored once however often the step is re-run, and told apart from a person's message by its end.
 */
export function outputRepairOperationId(replyOperationId: string): string {
  return `${replyOperationId}${OUTPUT_REPAIR_SUFFIX}`;
}

/**
 * The calls of one model reply with ids that are distinct within it. A reply may give two calls one id (a model's
 * mistake, an endpoint that numbers from 0 per reply, or a crafted reply); everything after the reply tells its calls
 * apart by id (its approval's arguments, its tool result, the next request's `tool_call_id`), so a repeated id is
 * replaced before the reply is stored: `<id>#<n>` for its n-th use, with more `#` while another call holds that id.
 * The first call holding an id keeps it; a reply without repeats comes back unchanged.
 */
export function distinctToolCallIds<T extends { id: string }>(calls: readonly T[]): T[] {
  const taken = new Set(calls.map((call) => call.id));
  if (taken.size === calls.length) return [...calls];
  const kept = new Set<string>();
  const uses = new Map<string, number>();
  return calls.map((call) => {
    const use = (uses.get(call.id) ?? 0) + 1;
    uses.set(call.id, use);
    if (!kept.has(call.id)) {
      kept.add(call.id);
      return call;
    }
    let id = `${call.id}#${use}`;
    // At most one more `#` per call of the reply: each is another id a call holds.
    while (taken.has(id)) id += '#';
    taken.add(id);
    kept.add(id);
    return { ...call, id };
  });
}
