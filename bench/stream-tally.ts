/**
 * What a reader of the stream bench counts of each event it takes, shared by the readers in the bench's process
 * (`send`'s `onEvent`) and those in their own (bench/stream-readers.ts).
 */
import type { RunEvent } from '../client';

export interface Tally {
  /** Ids of the stored events, in delivery order. */
  ids: string[];
  deltas: number;
  /** Per stored event: delivery time − its `at`, ms. */
  lagsMs: number[];
}

/** Counts one event; true when it is the end of the root thread's turn. */
export function tallyEvent(tally: Tally, event: RunEvent, rootThreadId: string): boolean {
  if (event.type === 'delta') {
    tally.deltas++;
    return false;
  }
  if (event.type === 'stream_abandoned') return false;
  tally.ids.push(event.id);
  tally.lagsMs.push(Date.now() - Date.parse(event.at));
  return event.type === 'turn_ended' && event.threadId === rootThreadId;
}
