/**
 * The run feed of a root thread (migration 014): every durable step of its tree as a typed event, in order, and the
 * streamed text of model replies as they are generated. Pure: the rows are read by `db/run-events.ts` and watched by
 * the client SDK; this file says what they mean.
 */
import { setBounded } from './bounded-map';
import { wakeupOfThread, type WatchChange } from './watchers';

/**
 * The channel a root's writers announce its stored events on after commit (`{ rootThreadId }`); readers then read the
 * rows. One channel per root (named from a hash of its id: a channel name holds at most 63 bytes), so a reader's
 * connection is handed its own root's announcements only, however many roots are running.
 */
export function runEventsChannel(rootThreadId: string): string {
  return `baton_run_${channelHash(rootThreadId)}`;
}

/** The channel a root's streamed model output is published on, best effort, a few batches a second per stream. */
export function runDeltasChannel(rootThreadId: string): string {
  return `baton_delta_${channelHash(rootThreadId)}`;
}

/**
 * 64 bits of FNV-1a (two 32-bit passes with different offsets) as 16 hex digits. A collision costs two roots'
 * readers each other's notifications, which they drop (every payload names its root), never an event.
 */
function channelHash(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x01000193) >>> 0;
  }
  return a.toString(16).padStart(8, '0') + b.toString(16).padStart(8, '0');
}
/** Largest NOTIFY payload Postgres takes is 8000 bytes; a batch is cut below it. */
export const MAX_DELTA_PAYLOAD_BYTES = 7000;

/** One row of the feed as `run_feed_after` returns it. */
export interface RunFeedRow {
  seq: number;
  threadId: string;
  agent: string | null;
  kind: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** What every stored event carries. */
export interface RunEventBase {
  /**
   * The feed position of the write this event comes from. One write can make several events (an assistant message
   * is a model call's end, its text and its tool calls); they share the number and always arrive together, so
   * resuming after `seq` never splits them.
   */
  seq: number;
  /** `seq`, or `seq.n` for the n-th further event of one write: unique, and what the explorer's stream sends as id. */
  id: string;
  threadId: string;
  agent: string | null;
  /** When the write committed (ISO 8601). */
  at: string;
}

export interface TokenUsageEvent {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** A streamed piece of a tool call: `id` and `name` come with its first piece, `arguments` in pieces after. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  name?: string;
  arguments?: string;
}

/** Events of the feed, each from the write that made its step durable (`seq`), or streamed output (no `seq`). */
export type RunEvent =
  | (RunEventBase & { type: 'turn_started'; parentThread?: string; caller?: string; forkTask?: string })
  | (RunEventBase & {
      type: 'turn_ended';
      status: string;
      error?: string;
      parentThread?: string;
      forkTask?: string;
    })
  | (RunEventBase & { type: 'message'; content: string })
  | (RunEventBase & {
      type: 'model_call_started';
      operationId: string;
      step: number;
      attempt: number;
      /** `<operationId>#<attempt>`: the deltas of this attempt carry it. */
      stream: string;
      streaming: boolean;
      provider?: string;
      model?: string;
    })
  | (RunEventBase & {
      type: 'model_call_waiting';
      operationId: string;
      step: number;
      /** The limit it waits for: a provider, or `provider/model` (`BATON_MODEL_LIMITS`). */
      scope: string;
      /** Why there is no room, e.g. `1 call(s) at once` or `Retry-After`. */
      reason: string;
    })
  | (RunEventBase & {
      type: 'model_call_ended';
      operationId: string;
      usage?: TokenUsageEvent;
      provider?: string;
      model?: string;
    })
  | (RunEventBase & { type: 'assistant_message'; operationId: string; content: string })
  | (RunEventBase & { type: 'tool_call'; toolCallId: string; name: string; arguments: string })
  | (RunEventBase & { type: 'tool_result'; toolCallId: string; name?: string; content: string; error: boolean })
  | (RunEventBase & { type: 'wait_started'; toolCallId: string; arguments: string })
  | (RunEventBase & { type: 'wait_ended'; toolCallId: string; content: string })
  | (RunEventBase & {
      type: 'delegation_started';
      childThread: string;
      childAgent: string;
      number: number;
      mode: string;
      workflowId: string;
      message: string;
    })
  | (RunEventBase & { type: 'delegation_ended'; childThread: string; status: string; error?: string })
  | (RunEventBase & { type: 'fork_started'; fork: number; store: string; prefix: string; maxParallel: number })
  | (RunEventBase & { type: 'fork_ended'; fork: number; status: string })
  | (RunEventBase & { type: 'fork_task_started'; fork: number; task: number; workflowId: string })
  | (RunEventBase & {
      type: 'fork_task_ended';
      fork: number;
      task: number;
      status: string;
      error?: string;
      reclaimed: boolean;
    })
  | (RunEventBase & { type: 'question_asked'; questionId: string; question: string; expiresAt?: string })
  | (RunEventBase & {
      type: 'question_closed';
      questionId: string;
      status: string;
      answer?: string;
      reason?: string;
    })
  | (RunEventBase & {
      type: 'approval_requested';
      approvalId: string;
      tool: string;
      toolCallId: string;
      arguments: string;
      expiresAt?: string;
    })
  | (RunEventBase & {
      type: 'approval_decided';
      approvalId: string;
      tool: string;
      status: string;
      decidedBy?: string;
      reason?: string;
    })
  | (RunEventBase & {
      type: 'env_written';
      key: string;
      scope: string;
      action: string;
      version?: number;
      valueSize?: number;
    })
  | (RunEventBase & { type: 'env_refused'; key: string; scope: string; reason?: string; refusalType?: string })
  | (RunEventBase & {
      type: 'write_refused';
      write: string;
      operationId: string;
      writeEpoch: number;
      currentEpoch: number;
      detail?: string;
    })
  | (RunEventBase & {
      type: 'watcher_changed';
      watcher: string;
      /** What happened to the watcher. */
      state: 'added' | 'paused' | 'resumed' | 'removed' | 'stopped';
      keys: string[];
      reason?: string;
      /** Until when a pause lasts. */
      until?: string;
      origin?: string;
      createdBy?: string;
    })
  | (RunEventBase & {
      /** A watcher woke: `threadId` is the wake-up's own thread. */
      type: 'watch_woke';
      watcher: string;
      wakeup: number;
      depth: number;
      changes: WatchChange[];
      workflowId: string;
    })
  | (RunEventBase & { type: 'watch_finished'; watcher: string; wakeup: number; status: string; error?: string })
  | (RunEventBase & { type: 'watch_skipped'; watcher: string; keys: string[]; depth: number; maxDepth: number })
  | RunDeltaEvent
  | StreamAbandonedEvent;

/** Streamed output of one model call attempt: not stored, best effort; the stored reply is what counts. */
export interface RunDeltaEvent {
  type: 'delta';
  threadId: string;
  agent: string;
  stream: string;
  step: number;
  attempt: number;
  /** Numbered per stream from 0, so a reader sees a batch it missed. */
  part: number;
  text?: string;
  toolCalls?: ToolCallDelta[];
}

/**
 * The streamed output of `stream` will not be completed: its attempt died (a retry started, or its turn ended without
 * storing the reply). Drop what was shown of it.
 */
export interface StreamAbandonedEvent {
  type: 'stream_abandoned';
  threadId: string;
  stream: string;
  reason: 'retried' | 'turn_ended';
}

export type StoredRunEvent = Exclude<RunEvent, RunDeltaEvent | StreamAbandonedEvent>;

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const optionalText = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const num = (value: unknown): number => (typeof value === 'number' ? value : Number(value ?? 0));
const textList = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];

/**
 * The typed events of one feed row, in the order they happened. An unknown kind (a newer Baton's) is skipped, so an
 * older reader goes on.
 */
export function runEventsOf(row: RunFeedRow): StoredRunEvent[] {
  const d = row.data;
  const at = row.createdAt instanceof Date ? row.createdAt.toISOString() : String(row.createdAt);
  const events: StoredRunEvent[] = [];
  const push = (event: Record<string, unknown> & { type: StoredRunEvent['type'] }, threadId = row.threadId) => {
    const id = events.length === 0 ? String(row.seq) : `${row.seq}.${events.length}`;
    events.push({ seq: row.seq, id, threadId, agent: row.agent, at, ...event } as StoredRunEvent);
  };
  switch (row.kind) {
    case 'turn_started':
      push({
        type: 'turn_started',
        parentThread: optionalText(d.parentThread),
        caller: optionalText(d.caller),
        forkTask: optionalText(d.forkTask),
      });
      break;
    case 'turn_ended':
      push({
        type: 'turn_ended',
        status: text(d.status),
        error: optionalText(d.error),
        parentThread: optionalText(d.parentThread),
        forkTask: optionalText(d.forkTask),
      });
      // A delegated thread's turn is its caller's delegation, an event of the caller's thread and agent (as its
      // delegation_started is); a fork task's end is its own row's event.
      // A watcher's wake-up thread (`<root>/watch.<name>.<n>`) was not delegated: its end is its own.
      if (
        typeof d.parentThread === 'string' &&
        d.forkTask === undefined &&
        wakeupOfThread(row.threadId) === undefined
      ) {
        push(
          {
            type: 'delegation_ended',
            childThread: row.threadId,
            status: text(d.status),
            error: optionalText(d.error),
            agent: optionalText(d.caller) ?? null,
          },
          d.parentThread,
        );
      }
      break;
    case 'message':
      push({ type: 'message', content: text(d.content) });
      break;
    case 'model_call_started':
      push({
        type: 'model_call_started',
        operationId: text(d.operationId),
        step: num(d.step),
        attempt: num(d.attempt),
        stream: text(d.stream),
        streaming: d.streaming === true,
        provider: optionalText(d.provider),
        model: optionalText(d.model),
      });
      break;
    case 'model_call_waiting':
      push({
        type: 'model_call_waiting',
        operationId: text(d.operationId),
        step: num(d.step),
        scope: text(d.scope),
        reason: text(d.reason),
      });
      break;
    case 'assistant_message': {
      push({
        type: 'model_call_ended',
        operationId: text(d.operationId),
        usage: d.usage ?? undefined,
        provider: optionalText(d.provider),
        model: optionalText(d.model),
      });
      if (typeof d.content === 'string' && d.content !== '') {
        push({ type: 'assistant_message', operationId: text(d.operationId), content: d.content });
      }
      const calls = Array.isArray(d.toolCalls) ? (d.toolCalls as Record<string, unknown>[]) : [];
      for (const call of calls) {
        push({ type: 'tool_call', toolCallId: text(call.id), name: text(call.name), arguments: text(call.arguments) });
        if (call.name === 'wait')
          push({ type: 'wait_started', toolCallId: text(call.id), arguments: text(call.arguments) });
      }
      break;
    }
    case 'tool_result':
      push({
        type: 'tool_result',
        toolCallId: text(d.toolCallId),
        name: optionalText(d.name),
        content: text(d.content),
        error: d.error === true,
      });
      if (d.name === 'wait') push({ type: 'wait_ended', toolCallId: text(d.toolCallId), content: text(d.content) });
      break;
    case 'delegation_started':
      push({
        type: 'delegation_started',
        childThread: text(d.thread),
        childAgent: text(d.agent),
        number: num(d.number),
        mode: text(d.mode),
        workflowId: text(d.workflowId),
        message: text(d.message),
      });
      break;
    case 'fork_started':
      push({
        type: 'fork_started',
        fork: num(d.fork),
        store: text(d.store),
        prefix: text(d.prefix),
        maxParallel: num(d.maxParallel),
      });
      break;
    case 'fork_ended':
      push({ type: 'fork_ended', fork: num(d.fork), status: text(d.status) });
      break;
    case 'fork_task_started':
      push({ type: 'fork_task_started', fork: num(d.fork), task: num(d.task), workflowId: text(d.workflowId) });
      break;
    case 'fork_task_ended':
      push({
        type: 'fork_task_ended',
        fork: num(d.fork),
        task: num(d.task),
        status: text(d.status),
        error: optionalText(d.error),
        reclaimed: d.reclaimed === true,
      });
      break;
    case 'question_asked':
      push({
        type: 'question_asked',
        questionId: text(d.questionId),
        question: text(d.question),
        expiresAt: optionalText(d.expiresAt),
      });
      break;
    case 'question_closed':
      push({
        type: 'question_closed',
        questionId: text(d.questionId),
        status: text(d.status),
        answer: optionalText(d.answer),
        reason: optionalText(d.reason),
      });
      break;
    case 'approval_requested':
      push({
        type: 'approval_requested',
        approvalId: text(d.approvalId),
        tool: text(d.tool),
        toolCallId: text(d.toolCallId),
        arguments: text(d.arguments),
        expiresAt: optionalText(d.expiresAt),
      });
      break;
    case 'approval_decided':
      push({
        type: 'approval_decided',
        approvalId: text(d.approvalId),
        tool: text(d.tool),
        status: text(d.status),
        decidedBy: optionalText(d.decidedBy),
        reason: optionalText(d.reason),
      });
      break;
    case 'env_written':
      push({
        type: 'env_written',
        key: text(d.key),
        scope: text(d.scope),
        action: text(d.action),
        version: typeof d.version === 'number' ? d.version : undefined,
        valueSize: typeof d.valueSize === 'number' ? d.valueSize : undefined,
      });
      break;
    case 'env_refused':
      push({
        type: 'env_refused',
        key: text(d.key),
        scope: text(d.scope),
        reason: optionalText(d.reason),
        refusalType: optionalText(d.refusalType),
      });
      break;
    case 'write_refused':
      push({
        type: 'write_refused',
        write: text(d.write),
        operationId: text(d.operationId),
        writeEpoch: num(d.writeEpoch),
        currentEpoch: num(d.currentEpoch),
        detail: optionalText(d.detail),
      });
      break;
    case 'watch_added':
    case 'watch_paused':
    case 'watch_resumed':
    case 'watch_removed':
    case 'watch_stopped':
      push({
        type: 'watcher_changed',
        watcher: text(d.watcher),
        state: row.kind.slice('watch_'.length),
        keys: textList(d.keys),
        reason: optionalText(d.reason),
        until: optionalText(d.until),
        origin: optionalText(d.origin),
        createdBy: optionalText(d.createdBy),
      });
      break;
    case 'watch_woke':
      push({
        type: 'watch_woke',
        watcher: text(d.watcher),
        wakeup: num(d.wakeup),
        depth: num(d.depth),
        // The feed strips null fields: a change without an old (or new) version has it back as null.
        changes: (Array.isArray(d.changes) ? (d.changes as Partial<WatchChange>[]) : []).map((change) => ({
          ...change,
          oldVersion: change.oldVersion ?? null,
          newVersion: change.newVersion ?? null,
        })),
        workflowId: text(d.workflowId),
      });
      break;
    case 'watch_finished':
      push({
        type: 'watch_finished',
        watcher: text(d.watcher),
        wakeup: num(d.wakeup),
        status: text(d.status),
        error: optionalText(d.error),
      });
      break;
    case 'watch_skipped':
      push({
        type: 'watch_skipped',
        watcher: text(d.watcher),
        keys: textList(d.keys),
        depth: num(d.depth),
        maxDepth: num(d.maxDepth),
      });
      break;
    default:
      break;
  }
  // Optional fields that are absent stay absent (not `undefined` keys), so events compare and print cleanly.
  return events.map((event) =>
    Object.fromEntries(Object.entries(event).filter(([, v]) => v !== undefined)),
  ) as StoredRunEvent[];
}

/** A streamed batch as published on its root's `runDeltasChannel`. */
export interface DeltaAnnouncement extends Omit<RunDeltaEvent, 'type'> {
  rootThreadId: string;
}

/** Reads a delta notification; `undefined` for anything else. */
export function parseDeltaAnnouncement(payload: string | undefined): DeltaAnnouncement | undefined {
  try {
    const parsed = JSON.parse(payload ?? '') as Partial<DeltaAnnouncement>;
    return typeof parsed.rootThreadId === 'string' &&
      typeof parsed.threadId === 'string' &&
      typeof parsed.stream === 'string' &&
      typeof parsed.part === 'number'
      ? (parsed as DeltaAnnouncement)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The model call a stream (`<operationId>#<attempt>`) is an attempt of. */
function operationOfStream(stream: string): string {
  return stream.slice(0, Math.max(0, stream.lastIndexOf('#')));
}

/**
 * Streams and model calls a `StreamTracker` remembers of each kind, the most recent kept: a late delta comes within
 * moments of its stream's end, and a watch may run for days.
 */
export const MAX_TRACKED_STREAMS = 4096;

/**
 * Follows the streams of a feed, so readers can be told which streamed output will never be completed: a stream ends
 * with its model call's stored reply; a newer attempt of the same call, or its thread's turn ending first, abandons it.
 * Deltas of a stream not started (yet) are passed on; those of an abandoned or ended stream are dropped. A stream
 * whose start a reader never reads (it came before the reader's `since`) is followed from its deltas once `adopt`ed.
 * It remembers at most MAX_TRACKED_STREAMS open streams, ended streams and replied calls, forgetting the oldest: a
 * delta of a stream forgotten that long ago would be taken for one whose start came before `since`.
 */
export class StreamTracker {
  /** Open streams by operation id. */
  private readonly open = new Map<string, { stream: string; threadId: string }>();
  /** Ended or abandoned streams (a `Map` for its insertion order, so the oldest is forgotten first). */
  private readonly closed = new Map<string, true>();
  /**
   * Operations whose reply was read: a delta of one of their streams comes late, even when its stream's start was
   * never read (it came before the reader's `since`) and the delta was held until a catch-up that read the reply.
   */
  private readonly replied = new Map<string, true>();

  /** What to emit for a stored event, the event itself last. */
  onStored(event: StoredRunEvent): RunEvent[] {
    const out: RunEvent[] = [];
    if (event.type === 'model_call_started') {
      const previous = this.open.get(event.operationId);
      if (previous && previous.stream !== event.stream) {
        out.push(this.abandon(event.operationId, previous, 'retried'));
      }
      setBounded(this.open, event.operationId, { stream: event.stream, threadId: event.threadId }, MAX_TRACKED_STREAMS);
    } else if (event.type === 'model_call_ended') {
      setBounded(this.replied, event.operationId, true, MAX_TRACKED_STREAMS);
      const current = this.open.get(event.operationId);
      if (current) {
        setBounded(this.closed, current.stream, true, MAX_TRACKED_STREAMS);
        this.open.delete(event.operationId);
      }
    } else if (event.type === 'turn_ended') {
      for (const [operationId, current] of this.open) {
        if (current.threadId === event.threadId) out.push(this.abandon(operationId, current, 'turn_ended'));
      }
    }
    out.push(event);
    return out;
  }

  /** Whether a delta should be shown. */
  accepts(delta: Pick<DeltaAnnouncement, 'stream'>): boolean {
    return !this.closed.has(delta.stream) && !this.replied.has(operationOfStream(delta.stream));
  }

  /** Whether `stream` was seen start (or was adopted), or its call's reply was read, whether it is still open or not. */
  knows(stream: string): boolean {
    if (this.closed.has(stream) || this.replied.has(operationOfStream(stream))) return true;
    for (const open of this.open.values()) if (open.stream === stream) return true;
    return false;
  }

  /**
   * Follows a stream known only from its deltas (its start came before the reader's `since`): a newer attempt of its
   * call, or its thread's turn ending, abandons it as if its start had been read. An older attempt than one open
   * is dropped.
   */
  adopt(delta: Pick<DeltaAnnouncement, 'stream' | 'threadId'>): void {
    if (this.knows(delta.stream)) return;
    const operationId = operationOfStream(delta.stream);
    if (this.open.has(operationId)) setBounded(this.closed, delta.stream, true, MAX_TRACKED_STREAMS);
    else setBounded(this.open, operationId, { stream: delta.stream, threadId: delta.threadId }, MAX_TRACKED_STREAMS);
  }

  private abandon(
    operationId: string,
    stream: { stream: string; threadId: string },
    reason: StreamAbandonedEvent['reason'],
  ): StreamAbandonedEvent {
    this.open.delete(operationId);
    setBounded(this.closed, stream.stream, true, MAX_TRACKED_STREAMS);
    return { type: 'stream_abandoned', threadId: stream.threadId, stream: stream.stream, reason };
  }
}
