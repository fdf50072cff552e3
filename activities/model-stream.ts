/**
 * Streamed model output, published while the reply is generated: the chunks of one model call attempt are gathered
 * and sent as a few batches a second (its root's `runDeltasChannel`), tagged with their thread, step, attempt and stream.
 * Best effort: nothing here is stored, and a failed publish never fails the call; the stored reply is what counts.
 */
import type { Pool } from 'pg';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { DeltaAnnouncement, ToolCallDelta } from '../common/run-events';
import { publishDeltas, splitDelta } from '../db/run-events';

/** How often gathered output is published. */
export const DELTA_INTERVAL_MS = 100;

export interface DeltaStream {
  rootThreadId: string;
  threadId: string;
  agent: string;
  stream: string;
  step: number;
  attempt: number;
}

export class DeltaPublisher {
  private text = '';
  private toolCalls: ToolCallDelta[] = [];
  private part = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: Pool,
    private readonly target: DeltaStream,
    private readonly intervalMs = DELTA_INTERVAL_MS,
  ) {}

  /** Gathers one chunk's text and tool call pieces; publishes within `intervalMs`. */
  add(chunk: ChatCompletionChunk): void {
    const delta = chunk.choices[0]?.delta;
    if (!delta) return;
    if (typeof delta.content === 'string') this.text += delta.content;
    for (const call of delta.tool_calls ?? []) {
      const last = this.toolCalls.at(-1);
      const piece = call.function?.arguments ?? '';
      // Argument pieces of the call gathered last are joined; a new call (or its id and name) starts a new entry.
      if (last && last.index === call.index && call.id === undefined && call.function?.name === undefined) {
        last.arguments = (last.arguments ?? '') + piece;
      } else {
        this.toolCalls.push({
          index: call.index,
          ...(call.id === undefined ? {} : { id: call.id }),
          ...(call.function?.name === undefined ? {} : { name: call.function.name }),
          ...(piece === '' ? {} : { arguments: piece }),
        });
      }
    }
    this.timer ??= setTimeout(() => void this.flush(), this.intervalMs);
  }

  /** Publishes what is gathered now; resolves when every batch so far was handed to Postgres. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.text === '' && this.toolCalls.length === 0) return this.sending;
    const batch = {
      ...this.target,
      ...(this.text === '' ? {} : { text: this.text }),
      ...(this.toolCalls.length === 0 ? {} : { toolCalls: this.toolCalls }),
    };
    this.text = '';
    this.toolCalls = [];
    const numbered: DeltaAnnouncement[] = splitDelta(batch).map((piece) => ({ ...piece, part: this.part++ }));
    // One publish at a time, in order: notifications of one connection arrive in the order sent.
    this.sending = this.sending.then(() => publishDeltas(this.pool, numbered));
    return this.sending;
  }

  /** Stops the timer without publishing (a failed or cancelled attempt: its stream is abandoned). */
  discard(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.text = '';
    this.toolCalls = [];
  }
}
