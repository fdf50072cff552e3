/**
 * Message ids a root thread remembers across continue-as-new. Temporal deduplicates an Update id within one workflow
 * run only; a client that lost the result of a delivery (`send --message-id`, a scheduled run's retried delivery)
 * sends it again under the same id, maybe after the thread continued as new. So the thread carries the ids it handled
 * into its next run, each with the turn it ran as, and answers a repeat with that turn's outcome.
 */

import { hasUnstorableText, utf8Length } from './text';
import type { TokenUsage } from './usage';

/** A message delivered under an Update id, and the turn of the thread it ran as. */
export interface Delivery {
  id: string;
  turn: number;
  /**
   * How the turn ended when it ended in the thread's own workflow, where no turn workflow keeps its outcome: the
   * operation id its answer is stored under (with its steps and usage), or why it failed. Absent for a turn that ran
   * (or went on) as a turn workflow, whose outcome that workflow keeps.
   */
  ended?: EndedInThread;
}

export type EndedInThread =
  /** `typed`: the answer is the JSON of an object its agent's `output` schema matched, given back as `output`. */
  { answerOperationId: string; steps: number; usage: TokenUsage; typed?: true } | { failed: string };

/** The longest message id a client may give (`messageId`, `--message-id`): a carried id costs history. */
export const MAX_MESSAGE_ID_CHARS = 200;

/** How many of the most recent deliveries a thread carries into its next run. */
export const MAX_CARRIED_DELIVERIES = 100;

/**
 * The most of a failed turn's reason a delivery carries (`EndedInThread.failed`): with the longest ids, the deliveries
 * a run hands its successor stay under 64 KiB.
 */
export const MAX_CARRIED_FAILURE_BYTES = 240;

/**
 * The most bytes of deliveries (as JSON) a run hands its successor: far below a payload's 64 KiB however long the ids
 * (200 characters of up to 3 UTF-8 bytes each) and what their turns' ends carry.
 */
export const MAX_CARRIED_DELIVERY_BYTES = 48 * 1024;

/**
 * What a run hands its successor: the deliveries it was handed and those it handled, the most recent ones, at most
 * `MAX_CARRIED_DELIVERIES` of them and `MAX_CARRIED_DELIVERY_BYTES` in all.
 */
export function carriedDeliveries(earlier: readonly Delivery[], handled: readonly Delivery[]): Delivery[] {
  const recent = [...earlier, ...handled]
    .filter((delivery) => delivery.id.length <= MAX_MESSAGE_ID_CHARS)
    .slice(-MAX_CARRIED_DELIVERIES);
  let bytes = 0;
  let from = recent.length;
  while (from > 0) {
    const size = utf8Length(JSON.stringify(recent[from - 1])) + 1;
    if (bytes + size > MAX_CARRIED_DELIVERY_BYTES) break;
    bytes += size;
    from -= 1;
  }
  return recent.slice(from);
}

/**
 * What is wrong with a human message a thread is sent, or `undefined`: the thread's `sendMessage` validator refuses
 * such a message, and `BatonClient.run` checks it before it starts a thread, which a refused first message would leave
 * started without one.
 */
export function messageTextProblem(message: unknown): string | undefined {
  if (typeof message !== 'string' || message.trim() === '') return 'message must be a non-empty string';
  if (hasUnstorableText(message)) return 'message must not hold a NUL character (U+0000) or a lone UTF-16 surrogate';
  return undefined;
}

/** Why a message id cannot be used, or undefined when it can. */
export function messageIdProblem(id: string): string | undefined {
  return id.length >= 1 && id.length <= MAX_MESSAGE_ID_CHARS
    ? undefined
    : `messageId must be 1 to ${MAX_MESSAGE_ID_CHARS} characters (got ${id.length})`;
}
