/**
 * How `baton run`, `send` and `watch` print a root thread's run feed: a tree redrawn in place on a terminal, plain
 * lines where stdout is not one, or one JSON event a line. The tree itself is `run-tree.ts`; this file writes it.
 */
import type { RunEvent, StoredRunEvent } from '../common/run-events';
import type { SendMessageResult } from '../common/types';
import type { SendOptions, ThreadHandle } from '../client';
import { RunTree, plainEventLine, renderRunTree } from './run-tree';

/**
 * - `live`: the tree, redrawn in place with ANSI sequences (stdout is a terminal);
 * - `lines`: one plain line per stored event, no control characters (streamed text shows once stored);
 * - `json`: every event (streamed deltas included) as one JSON document a line.
 */
export type EventOutput = 'live' | 'lines' | 'json';

export interface OutputFlags {
  quiet?: boolean;
  json?: boolean;
  stream?: boolean;
}

/** Where the events go: the process's stdout, or a test's buffer (`runCli`). */
export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
  readonly rows?: number;
}

/** Whether `stream` can be redrawn in place: a terminal that understands cursor movement. */
export function isLiveTerminal(stream: OutputStream, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && env.TERM !== 'dumb';
}

/**
 * What `baton run` and `send` print while the turn runs: nothing with `--quiet` or `--json` alone (today's output),
 * JSON lines with `--json --stream`, plain lines with `--stream`, the live tree on a terminal, else nothing (a pipe
 * or a file gets the reply alone, as before, so `reply=$(baton run …)` keeps working).
 */
export function outputForSend(
  flags: OutputFlags,
  stdout: OutputStream,
  env: NodeJS.ProcessEnv,
): EventOutput | undefined {
  if (flags.json) return flags.stream ? 'json' : undefined;
  if (flags.quiet) return undefined;
  if (flags.stream) return 'lines';
  return isLiveTerminal(stdout, env) ? 'live' : undefined;
}

/** What `baton watch` prints: JSON lines with `--json`, the live tree on a terminal, plain lines otherwise. */
export function outputForWatch(json: boolean, stdout: OutputStream, env: NodeJS.ProcessEnv): EventOutput {
  if (json) return 'json';
  return isLiveTerminal(stdout, env) ? 'live' : 'lines';
}

export interface EventView {
  onEvent(event: RunEvent): void;
  /** Prints what is still to print (the last frame, for good) and gives the terminal back as it was. */
  finish(): void;
}

export interface EventViewOptions {
  out: OutputStream;
  rootThreadId: string;
  /** The root's agent, when known before its first event (the header shows it at once). */
  rootAgent?: string;
  env: NodeJS.ProcessEnv;
}

export function createEventView(output: EventOutput, options: EventViewOptions): EventView {
  switch (output) {
    case 'json':
      return {
        onEvent: (event) => void options.out.write(`${JSON.stringify(event)}\n`),
        finish: () => undefined,
      };
    case 'lines':
      return new PlainView(options);
    case 'live':
      return new TerminalView(options);
  }
}

function isStored(event: RunEvent): event is StoredRunEvent {
  return event.type !== 'delta' && event.type !== 'stream_abandoned';
}

/** One plain line per stored event; a root turn's end starts a fresh tree, so a long watch does not grow. */
class PlainView implements EventView {
  private tree: RunTree;

  constructor(private readonly options: EventViewOptions) {
    this.tree = new RunTree(options.rootThreadId, options.rootAgent);
  }

  onEvent(event: RunEvent): void {
    if (!isStored(event)) return;
    this.tree.apply(event);
    const line = plainEventLine(this.tree, event);
    if (line !== undefined) this.options.out.write(`${line}\n`);
    if (event.type === 'turn_ended' && event.threadId === this.options.rootThreadId) {
      this.tree = new RunTree(this.options.rootThreadId, event.agent ?? this.options.rootAgent);
    }
  }

  finish(): void {}
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/** How often the frame is redrawn (the spinner turns, elapsed times tick, streamed text shows). */
const FRAME_MS = 100;
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

/**
 * The tree redrawn in place: the frame printed last is erased (cursor up over its lines, erase below) and printed
 * again every `FRAME_MS`. A frame taller than the terminal shows its last lines, since lines scrolled away cannot be
 * redrawn. When the root's turn ends the whole tree is printed for good, without a spinner, and a fresh one starts.
 */
class TerminalView implements EventView {
  private tree: RunTree;
  private rootAgent: string | undefined;
  /** Lines of the frame on screen now, below which the cursor waits. */
  private shown = 0;
  private tick = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly color: boolean;
  private readonly restoreCursor = () => this.options.out.write(SHOW_CURSOR);

  constructor(private readonly options: EventViewOptions) {
    this.rootAgent = options.rootAgent;
    this.tree = new RunTree(options.rootThreadId, options.rootAgent);
    // https://no-color.org: any value turns colour off.
    this.color = options.env.NO_COLOR === undefined || options.env.NO_COLOR === '';
  }

  onEvent(event: RunEvent): void {
    this.tree.apply(event);
    if (event.type === 'turn_started' && event.threadId === this.options.rootThreadId && event.agent) {
      this.rootAgent = event.agent;
    }
    if (event.type === 'turn_ended' && event.threadId === this.options.rootThreadId) {
      this.commit();
      return;
    }
    this.start();
  }

  finish(): void {
    this.stop();
    if (!this.tree.empty) this.commit();
  }

  private start(): void {
    if (this.timer) return;
    this.options.out.write(HIDE_CURSOR);
    // Whatever ends the process (an error, process.exit) gives the cursor back.
    process.once('exit', this.restoreCursor);
    this.timer = setInterval(() => {
      this.tick += 1;
      this.draw();
    }, FRAME_MS);
    this.timer.unref();
    this.draw();
  }

  private stop(): void {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
    process.off('exit', this.restoreCursor);
    this.options.out.write(SHOW_CURSOR);
  }

  private width(): number {
    return this.options.out.columns || 80;
  }

  /** Moves to the start of the frame on screen and erases it and everything below. */
  private erase(): string {
    return this.shown > 0 ? `\r\x1b[${this.shown}A\x1b[J` : '\r\x1b[J';
  }

  private draw(): void {
    const lines = renderRunTree(this.tree, {
      width: this.width(),
      now: Date.now(),
      spinner: SPINNER[this.tick % SPINNER.length] ?? '',
      color: this.color,
    });
    const rows = Math.max((this.options.out.rows || 24) - 1, 3);
    const visible =
      lines.length <= rows ? lines : [`… (${lines.length - rows + 1} lines above)`, ...lines.slice(-(rows - 1))];
    this.options.out.write(this.erase() + visible.map((line) => `${line}\n`).join(''));
    this.shown = visible.length;
  }

  /** Prints the whole tree for good (it scrolls up like any output) and starts a fresh one. */
  private commit(): void {
    this.stop();
    const lines = renderRunTree(this.tree, { width: this.width(), now: Date.now(), color: this.color });
    this.options.out.write(this.erase() + lines.map((line) => `${line}\n`).join(''));
    this.shown = 0;
    this.tree = new RunTree(this.options.rootThreadId, this.rootAgent);
  }
}

/**
 * `thread.send` (or `options.send`) with its tree's events shown as `output` says, until the reply. Ctrl-C on a live terminal gives the
 * cursor back and says the turn goes on before ending the process, as Ctrl-C always did (exit 130).
 */
export async function sendShowingEvents(
  thread: ThreadHandle,
  message: string,
  output: EventOutput,
  options: Pick<SendOptions, 'messageId' | 'traceparent'> & {
    rootAgent?: string;
    out: OutputStream;
    env: NodeJS.ProcessEnv;
    /** How the message goes out (`thread.send` unless given; `baton run` starts the thread with it). */
    send?: (message: string, options: SendOptions) => Promise<SendMessageResult>;
  },
): Promise<SendMessageResult> {
  const view = createEventView(output, {
    out: options.out,
    rootThreadId: thread.threadId,
    env: options.env,
    ...(options.rootAgent === undefined ? {} : { rootAgent: options.rootAgent }),
  });
  const onInterrupt = () => {
    view.finish();
    process.stderr.write(
      `baton: stopped showing thread ${thread.threadId}; its turn goes on (\`baton watch ${thread.threadId}\` shows it)\n`,
    );
    process.exit(130);
  };
  if (output === 'live') process.once('SIGINT', onInterrupt);
  try {
    const send = options.send ?? ((text: string, sendOptions: SendOptions) => thread.send(text, sendOptions));
    return await send(message, {
      ...(options.messageId === undefined ? {} : { messageId: options.messageId }),
      ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
      // Plain lines show stored messages only: streamed text would only be dropped.
      deltas: output !== 'lines',
      onEvent: (event) => view.onEvent(event),
    });
  } finally {
    process.off('SIGINT', onInterrupt);
    view.finish();
  }
}

/**
 * `baton watch`: the events of `thread` after `since`, shown as `output` says, until `signal` aborts (Ctrl-C).
 * @throws what ended the feed otherwise (a database unreachable for minutes).
 */
export async function watchEvents(
  thread: ThreadHandle,
  output: EventOutput,
  options: {
    since: number;
    deltas: boolean;
    signal: AbortSignal;
    rootAgent?: string;
    out: OutputStream;
    env: NodeJS.ProcessEnv;
  },
): Promise<void> {
  const view = createEventView(output, {
    out: options.out,
    rootThreadId: thread.threadId,
    env: options.env,
    ...(options.rootAgent === undefined ? {} : { rootAgent: options.rootAgent }),
  });
  try {
    const deltas = options.deltas && output !== 'lines';
    for await (const event of thread.events({ since: options.since, deltas, signal: options.signal })) {
      view.onEvent(event);
    }
  } finally {
    view.finish();
  }
}
