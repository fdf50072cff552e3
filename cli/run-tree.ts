/**
 * What `baton run`, `send` and `watch` show of a root thread's run feed: the delegation tree built from its events
 * (delegation_started, fork_task_started, turn_started.parentThread), each agent's streamed and stored text under its
 * name, its tool calls and results one line each. Pure: `RunTree` folds events into that state, `renderRunTree`
 * draws it as lines for a terminal of a given width, and `plainEventLine` says one stored event as one plain line
 * (for output that is not a terminal). Nothing here writes anywhere; `live-view.ts` does.
 */
import type { RunEvent, StoredRunEvent } from '../common/run-events';
import { describeWatchChange } from '../common/watchers';

/** One agent's thread in the tree. */
interface TreeNode {
  threadId: string;
  agent: string;
  /** The caller's thread; undefined for the root, and for a thread whose start was before the events read. */
  parent: string | undefined;
  /** `fork 1 task 0` for a fork task. */
  label: string | undefined;
  /** `running`, or how its last turn ended (`completed`, `failed`, `max_steps`, `reclaimed`, …); `idle` before. */
  status: string;
  error: string | undefined;
  /** Milliseconds since the epoch, from the events' commit times. */
  startedAt: number | undefined;
  endedAt: number | undefined;
  entries: Entry[];
}

type Entry =
  | { kind: 'human'; text: string }
  | { kind: 'text'; text: string }
  /** Output of a model call still streaming (`stream` is its `<operationId>#<attempt>`). */
  | { kind: 'stream'; stream: string; text: string; calls: Map<number, { name: string; args: string }> }
  | { kind: 'call'; toolCallId: string; name: string; args: string; done: boolean }
  | { kind: 'result'; name: string; content: string; error: boolean }
  | { kind: 'note'; text: string; error?: boolean }
  | { kind: 'child'; threadId: string };

/** Lines a finished text block shows before `… (n more lines)`; a streaming one shows its last lines. */
const TEXT_LINES = 8;

export class RunTree {
  private readonly nodes = new Map<string, TreeNode>();
  /** The parent thread of each fork number, from fork_started (fork tasks name their fork, not their caller). */
  private readonly forkParents = new Map<number, string>();
  /** Names of tool calls by id, for results that come without one. */
  private readonly callNames = new Map<string, string>();

  constructor(
    readonly rootThreadId: string,
    rootAgent = '',
  ) {
    this.node(rootThreadId, rootAgent);
  }

  get root(): TreeNode {
    return this.node(this.rootThreadId, '');
  }

  /** Whether anything has been shown yet (a root that never started shows nothing). */
  get empty(): boolean {
    return this.root.status === 'idle' && this.root.entries.length === 0;
  }

  /** Folds one event into the tree. */
  apply(event: RunEvent): void {
    if (event.type === 'delta') {
      const node = this.node(event.threadId, event.agent);
      let entry = node.entries.find(
        (e): e is Extract<Entry, { kind: 'stream' }> => e.kind === 'stream' && e.stream === event.stream,
      );
      if (!entry) {
        entry = { kind: 'stream', stream: event.stream, text: '', calls: new Map() };
        node.entries.push(entry);
      }
      if (event.text) entry.text += event.text;
      for (const call of event.toolCalls ?? []) {
        const current = entry.calls.get(call.index) ?? { name: '', args: '' };
        entry.calls.set(call.index, {
          name: current.name + (call.name ?? ''),
          args: current.args + (call.arguments ?? ''),
        });
      }
      return;
    }
    if (event.type === 'stream_abandoned') {
      // Its attempt died; a retry streams anew (or the stored reply never comes).
      const node = this.nodes.get(event.threadId);
      if (node) node.entries = node.entries.filter((e) => !(e.kind === 'stream' && e.stream === event.stream));
      return;
    }
    this.applyStored(event);
  }

  private applyStored(event: StoredRunEvent): void {
    const at = Date.parse(event.at);
    const node = this.node(event.threadId, event.agent ?? '');
    switch (event.type) {
      case 'turn_started':
        if (event.parentThread !== undefined) this.attach(node, event.parentThread);
        if (event.forkTask !== undefined && node.label === undefined) node.label = event.forkTask;
        node.status = 'running';
        node.error = undefined;
        node.startedAt = at;
        node.endedAt = undefined;
        break;
      case 'turn_ended':
        node.status = event.status;
        node.error = event.error;
        node.endedAt = at;
        // Whatever still streams in this thread will not be completed now.
        node.entries = node.entries.filter((e) => e.kind !== 'stream');
        break;
      case 'message':
        // A delegated thread's message is its caller's call (shown there) behind a preamble: only the root's.
        if (event.threadId === this.rootThreadId) node.entries.push({ kind: 'human', text: event.content });
        break;
      case 'model_call_ended': {
        // The stored reply replaces what was streamed of it, where it was.
        const index = node.entries.findIndex(
          (e) => e.kind === 'stream' && e.stream.startsWith(`${event.operationId}#`),
        );
        node.entries = node.entries.filter(
          (e) => !(e.kind === 'stream' && e.stream.startsWith(`${event.operationId}#`)),
        );
        this.insertAt = index < 0 ? undefined : { threadId: node.threadId, index };
        return;
      }
      case 'assistant_message':
        this.insert(node, { kind: 'text', text: event.content });
        return;
      case 'tool_call':
        this.callNames.set(event.toolCallId, event.name);
        this.insert(node, {
          kind: 'call',
          toolCallId: event.toolCallId,
          name: event.name,
          args: event.arguments,
          done: false,
        });
        return;
      case 'tool_result': {
        const call = node.entries.find(
          (e): e is Extract<Entry, { kind: 'call' }> => e.kind === 'call' && e.toolCallId === event.toolCallId,
        );
        if (call) call.done = true;
        node.entries.push({ kind: 'result', name: this.toolName(event), content: event.content, error: event.error });
        break;
      }
      case 'delegation_started': {
        const child = this.node(event.childThread, event.childAgent);
        this.attach(child, node.threadId);
        break;
      }
      case 'fork_started':
        this.forkParents.set(event.fork, node.threadId);
        break;
      case 'fork_task_started':
        node.label ??= `fork ${event.fork} task ${event.task}`;
        if (node.parent === undefined && node.threadId !== this.rootThreadId) {
          this.attach(node, this.forkParents.get(event.fork) ?? this.rootThreadId);
        }
        break;
      case 'model_call_waiting':
        node.entries.push({ kind: 'note', text: `waiting for capacity: ${event.scope}: ${event.reason}` });
        break;
      case 'question_asked':
        node.entries.push({ kind: 'note', text: `? ${event.questionId} asks a person: ${event.question}` });
        break;
      case 'question_closed':
        node.entries.push({ kind: 'note', text: questionClosed(event) });
        break;
      case 'approval_requested':
        node.entries.push({
          kind: 'note',
          text: `! ${event.approvalId}: ${event.tool} waits for a person's approval (baton approve ${this.rootThreadId} ${event.approvalId})`,
        });
        break;
      case 'approval_decided':
        node.entries.push({
          kind: 'note',
          text: `${event.approvalId} ${event.status}${event.decidedBy ? ` by ${event.decidedBy}` : ''}${event.reason ? `: ${event.reason}` : ''}`,
          error: event.status !== 'approved',
        });
        break;
      case 'env_written':
        node.entries.push({ kind: 'note', text: envWritten(event) });
        break;
      case 'env_refused':
        node.entries.push({
          kind: 'note',
          text: `env: refused a write of '${event.key}'${event.reason ? `: ${event.reason}` : ''}`,
          error: true,
        });
        break;
      case 'write_refused':
        node.entries.push({
          kind: 'note',
          text: `refused a late ${event.write} (epoch ${event.writeEpoch}, now ${event.currentEpoch})`,
          error: true,
        });
        break;
      case 'watch_woke':
        // The wake-up's thread hangs under the root, marked as the watcher's.
        node.label ??= `watcher ${event.watcher}, wake-up ${event.wakeup}`;
        if (node.parent === undefined && node.threadId !== this.rootThreadId) this.attach(node, this.rootThreadId);
        node.entries.push({ kind: 'note', text: watchWoke(event) });
        break;
      case 'watcher_changed':
        node.entries.push({ kind: 'note', text: watcherChanged(event), error: event.state === 'paused' });
        break;
      case 'watch_skipped':
        node.entries.push({ kind: 'note', text: watchSkipped(event), error: true });
        break;
      default:
        // model_call_started (the stream says it), delegation/fork/fork task ends (the child's status says
        // them), wait_started/ended (the call and result say them).
        break;
    }
    this.insertAt = undefined;
  }

  /** Where the entries of a stored reply go: where its streamed output was, in order. */
  private insertAt: { threadId: string; index: number } | undefined;

  private insert(node: TreeNode, entry: Entry): void {
    const at = this.insertAt;
    if (at && at.threadId === node.threadId && at.index <= node.entries.length) {
      node.entries.splice(at.index, 0, entry);
      at.index += 1;
    } else {
      node.entries.push(entry);
    }
  }

  private node(threadId: string, agent: string): TreeNode {
    let node = this.nodes.get(threadId);
    if (!node) {
      node = {
        threadId,
        agent,
        parent: undefined,
        label: undefined,
        status: 'idle',
        error: undefined,
        startedAt: undefined,
        endedAt: undefined,
        entries: [],
      };
      this.nodes.set(threadId, node);
    } else if (node.agent === '' && agent !== '') {
      node.agent = agent;
    }
    return node;
  }

  /** Puts `child` under `parentThreadId`, where the tree is now (moving it when it hung elsewhere). */
  private attach(child: TreeNode, parentThreadId: string): void {
    if (child.parent === parentThreadId || child.threadId === this.rootThreadId) return;
    if (child.parent !== undefined) {
      const old = this.nodes.get(child.parent);
      if (old) old.entries = old.entries.filter((e) => !(e.kind === 'child' && e.threadId === child.threadId));
    }
    const parent = this.node(parentThreadId, '');
    child.parent = parentThreadId;
    parent.entries.push({ kind: 'child', threadId: child.threadId });
  }

  /** A thread whose start came before the events read hangs under the root, so nothing is lost from view. */
  private orphans(): TreeNode[] {
    return [...this.nodes.values()].filter((n) => n.threadId !== this.rootThreadId && n.parent === undefined);
  }

  /** The name of the tool a result answers: its own, else its call's. */
  toolName(result: { toolCallId: string; name?: string }): string {
    return result.name ?? this.callNames.get(result.toolCallId) ?? 'tool';
  }

  /** How deep `threadId` is below the root (0 for the root). */
  depth(threadId: string): number {
    let depth = 0;
    let node = this.nodes.get(threadId);
    const seen = new Set<string>();
    while (node?.parent !== undefined && !seen.has(node.threadId)) {
      seen.add(node.threadId);
      depth += 1;
      node = this.nodes.get(node.parent);
    }
    return threadId === this.rootThreadId ? 0 : Math.max(depth, 1);
  }

  /** @internal for `renderRunTree`. */
  view(): { root: TreeNode; nodes: ReadonlyMap<string, TreeNode>; orphans: TreeNode[] } {
    return { root: this.root, nodes: this.nodes, orphans: this.orphans() };
  }
}

function questionClosed(event: Extract<StoredRunEvent, { type: 'question_closed' }>): string {
  if (event.status === 'answered') return `${event.questionId} answered: ${event.answer ?? ''}`;
  return `${event.questionId} ${event.status}${event.reason ? `: ${event.reason}` : ''}`;
}

function envWritten(event: Extract<StoredRunEvent, { type: 'env_written' }>): string {
  const scope = event.scope === '' ? '' : ` (scope ${event.scope})`;
  const version = event.version === undefined ? '' : ` v${event.version}`;
  const size = event.valueSize === undefined ? '' : `, ${event.valueSize} B`;
  return `env: ${event.action} '${event.key}'${version}${size}${scope}`;
}

export interface RenderOptions {
  /** Columns of the terminal; no line is wider than this minus one. */
  width: number;
  /** For the elapsed time of what still runs. */
  now: number;
  /** The spinner's frame for what still runs; without it, no spinner (a frame printed for good). */
  spinner?: string;
  /** Bold names, dim results, red failures (SGR codes); off for NO_COLOR. */
  color?: boolean;
}

const SGR = { bold: '\x1b[1m', dim: '\x1b[2m', red: '\x1b[31m', green: '\x1b[32m', reset: '\x1b[0m' } as const;

/** The tree as lines, each at most `width - 1` columns wide, without line ends. */
export function renderRunTree(tree: RunTree, options: RenderOptions): string[] {
  const { root, nodes, orphans } = tree.view();
  const width = Math.max(options.width - 1, 20);
  const paint = (code: keyof typeof SGR, text: string) => (options.color ? `${SGR[code]}${text}${SGR.reset}` : text);
  const lines: string[] = [];
  const seen = new Set<string>();

  const line = (indent: number, text: string, style?: keyof typeof SGR, suffix = '') => {
    const room = Math.max(width - indent - displayWidth(suffix), 10);
    const cut = cutToWidth(text, room);
    lines.push(' '.repeat(indent) + (style ? paint(style, cut) : cut) + suffix);
  };
  const block = (indent: number, text: string, streaming: boolean) => {
    const room = Math.max(width - indent, 10);
    const wrapped = cleanText(text)
      .split('\n')
      .flatMap((paragraph) => wrapToWidth(paragraph, room));
    while (wrapped.length > 0 && wrapped.at(-1) === '') wrapped.pop();
    if (wrapped.length <= TEXT_LINES) {
      for (const l of wrapped) line(indent, l);
    } else if (streaming) {
      line(indent, `… (${wrapped.length - TEXT_LINES} lines above)`, 'dim');
      for (const l of wrapped.slice(-TEXT_LINES)) line(indent, l);
    } else {
      for (const l of wrapped.slice(0, TEXT_LINES)) line(indent, l);
      line(indent, `… (${wrapped.length - TEXT_LINES} more lines)`, 'dim');
    }
  };

  const drawNode = (node: TreeNode, indent: number) => {
    if (seen.has(node.threadId)) return;
    seen.add(node.threadId);
    const name = paint('bold', oneLine(node.agent || node.threadId));
    const label = node.label ? ` (${oneLine(node.label)})` : '';
    lines.push(' '.repeat(indent) + name + cutToWidth(label + statusText(node, options, paint), width - indent));
    const inner = indent + 2;
    for (const entry of node.entries) {
      switch (entry.kind) {
        case 'human':
          line(inner, `> ${oneLine(entry.text)}`);
          break;
        case 'text':
          block(inner, entry.text, false);
          break;
        case 'stream':
          if (entry.text !== '') block(inner, entry.text, true);
          for (const call of entry.calls.values()) line(inner, `→ ${oneLine(call.name)} ${oneLine(call.args)}`, 'dim');
          break;
        case 'call': {
          // A call still running (its result not stored yet) turns a spinner.
          const running = !entry.done && node.status === 'running' && options.spinner !== undefined;
          line(
            inner,
            `→ ${oneLine(entry.name)} ${oneLine(entry.args)}`,
            undefined,
            running ? ` ${options.spinner}` : '',
          );
          break;
        }
        case 'result':
          line(inner, `← ${oneLine(entry.name)}: ${oneLine(entry.content)}`, entry.error ? 'red' : 'dim');
          break;
        case 'note':
          line(inner, oneLine(entry.text), entry.error ? 'red' : undefined);
          break;
        case 'child': {
          const child = nodes.get(entry.threadId);
          if (child) drawNode(child, inner);
          break;
        }
      }
    }
  };

  if (!tree.empty || orphans.length > 0) drawNode(root, 0);
  for (const orphan of orphans) drawNode(orphan, 2);
  return lines;
}

function statusText(
  node: TreeNode,
  options: RenderOptions,
  paint: (code: keyof typeof SGR, text: string) => string,
): string {
  if (node.status === 'idle') return '';
  if (node.status === 'running') {
    const elapsed = node.startedAt === undefined ? '' : ` ${duration(options.now - node.startedAt, false)}`;
    return options.spinner === undefined ? `  running${elapsed}` : `  ${options.spinner}${elapsed}`;
  }
  const took =
    node.startedAt !== undefined && node.endedAt !== undefined
      ? ` ${duration(node.endedAt - node.startedAt, true)}`
      : '';
  if (node.status === 'completed') return `  ${paint('green', '✓')}${took}`;
  const why = node.error ? `: ${oneLine(node.error)}` : '';
  return `  ${paint('red', `✗ ${node.status}`)}${took}${why}`;
}

/** `850ms`, `3.2s`, `12s`, `1m05s`; whole seconds for what still runs (it changes every tenth otherwise). */
export function duration(ms: number, precise: boolean): string {
  const safe = Math.max(0, ms);
  if (precise && safe < 1000) return `${Math.round(safe)}ms`;
  if (precise && safe < 10_000) return `${(safe / 1000).toFixed(1)}s`;
  const seconds = Math.floor(safe / 1000);
  if (seconds < 60) return `${seconds}s`;
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}

/**
 * One stored event as one plain line (no control characters), indented by its thread's depth in `tree`, which must
 * have applied it; `undefined` for events not worth a line (model call boundaries). A reply's further lines follow
 * indented. Streamed output is not shown this way: its stored message is, once complete.
 */
export function plainEventLine(tree: RunTree, event: StoredRunEvent): string | undefined {
  const what = plainWhat(tree, event);
  if (what === undefined) return undefined;
  const indent = '  '.repeat(tree.depth(event.threadId));
  const who = oneLine(event.agent ?? event.threadId);
  const prefix = `${String(event.seq).padStart(5)} ${indent}${who}`;
  const [first = '', ...rest] = what.split('\n');
  const pad = ' '.repeat(6 + indent.length + 2);
  return [`${prefix} ${first}`, ...rest.map((l) => `${pad}${l}`)].join('\n');
}

/** Where plain lines cut a tool call's arguments or result: output that is not a terminal has no width to fit. */
const PLAIN_VALUE_COLUMNS = 160;

function plainWhat(tree: RunTree, event: StoredRunEvent): string | undefined {
  switch (event.type) {
    case 'turn_started':
      return event.forkTask !== undefined
        ? `started (${oneLine(event.forkTask)})`
        : event.caller !== undefined
          ? `started (delegated by ${oneLine(event.caller)})`
          : 'started';
    case 'turn_ended':
      return event.status === 'completed'
        ? 'completed'
        : `${event.status}${event.error ? `: ${oneLine(event.error)}` : ''}`;
    case 'message':
      return event.threadId === tree.rootThreadId ? `> ${oneLine(event.content)}` : undefined;
    case 'assistant_message':
      return cleanText(event.content).replace(/\n+$/, '');
    case 'tool_call':
      return `→ ${oneLine(event.name)} ${cutToWidth(oneLine(event.arguments), PLAIN_VALUE_COLUMNS)}`;
    case 'tool_result':
      return `← ${oneLine(tree.toolName(event))}: ${cutToWidth(oneLine(event.content), PLAIN_VALUE_COLUMNS)}`;
    case 'delegation_started':
      return `delegates to ${oneLine(event.childAgent)} (thread ${oneLine(event.childThread)})`;
    case 'delegation_ended':
      return undefined; // the delegated thread's own end says it, at its depth
    case 'fork_started':
      return `fork ${event.fork} started (store ${event.store})`;
    case 'fork_ended':
      return `fork ${event.fork} ended: ${event.status}`;
    case 'fork_task_started':
      return undefined; // the task's own thread says it started, with its label
    case 'fork_task_ended':
      return `fork ${event.fork} task ${event.task} ended: ${event.status}${event.reclaimed ? ' (reclaimed)' : ''}`;
    case 'question_asked':
      return `? ${event.questionId} asks a person: ${oneLine(event.question)}`;
    case 'question_closed':
      return oneLine(questionClosed(event));
    case 'approval_requested':
      return `! ${event.approvalId}: ${oneLine(event.tool)} ${oneLine(event.arguments)} waits for a person's approval`;
    case 'approval_decided':
      return oneLine(
        `${event.approvalId} ${event.status}${event.decidedBy ? ` by ${event.decidedBy}` : ''}${event.reason ? `: ${event.reason}` : ''}`,
      );
    case 'env_written':
      return oneLine(envWritten(event));
    case 'env_refused':
      return `env: refused a write of '${oneLine(event.key)}'${event.reason ? `: ${oneLine(event.reason)}` : ''}`;
    case 'write_refused':
      return `refused a late ${oneLine(event.write)} (epoch ${event.writeEpoch}, now ${event.currentEpoch})`;
    case 'watch_woke':
      return oneLine(watchWoke(event));
    case 'watch_finished':
      return `watcher ${oneLine(event.watcher)} wake-up ${event.wakeup} ${oneLine(event.status)}${event.error ? `: ${oneLine(event.error)}` : ''}`;
    case 'watcher_changed':
      return oneLine(watcherChanged(event));
    case 'watch_skipped':
      return oneLine(watchSkipped(event));
    default:
      return undefined;
  }
}

/**
 * Control characters (ESC above all) never reach the output from stored text: a model's reply could otherwise move
 * the cursor or retitle the terminal. Tabs become spaces; line ends are kept.
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

export function cleanText(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(/\t/g, '  ').replace(CONTROL, '\uFFFD');
}

/** `text` on one line: line ends and runs of spaces become one space, control characters are replaced. */
export function oneLine(text: string): string {
  return cleanText(text).replace(/\s+/g, ' ').trim();
}

/** Columns a character takes: 0 for combining marks, 2 for wide East Asian characters and emoji, else 1. */
function charWidth(char: string): number {
  const code = char.codePointAt(0) ?? 0;
  if (/\p{Mn}|\p{Me}|\u200b|\u200d|\ufe0f/u.test(char)) return 0;
  if (
    (code >= 0x1100 && code <= 0x115f) ||
    (code >= 0x2e80 && code <= 0xa4cf) ||
    (code >= 0xac00 && code <= 0xd7a3) ||
    (code >= 0xf900 && code <= 0xfaff) ||
    (code >= 0xfe30 && code <= 0xfe4f) ||
    (code >= 0xff00 && code <= 0xff60) ||
    (code >= 0xffe0 && code <= 0xffe6) ||
    (code >= 0x1f300 && code <= 0x1faff) ||
    (code >= 0x20000 && code <= 0x3fffd)
  ) {
    return 2;
  }
  return 1;
}

export function displayWidth(text: string): number {
  let width = 0;
  for (const char of text) width += charWidth(char);
  return width;
}

/** `text` cut to `width` columns, ending with `…` when cut. */
export function cutToWidth(text: string, width: number): string {
  if (displayWidth(text) <= width) return text;
  let out = '';
  let used = 0;
  for (const char of text) {
    const w = charWidth(char);
    if (used + w > width - 1) break;
    out += char;
    used += w;
  }
  return `${out}…`;
}

/** One paragraph wrapped at spaces into lines of at most `width` columns (a longer word is broken). */
export function wrapToWidth(paragraph: string, width: number): string[] {
  if (displayWidth(paragraph) <= width) return [paragraph];
  const lines: string[] = [];
  let current = '';
  let used = 0;
  for (const word of paragraph.split(/(?<= )/)) {
    const w = displayWidth(word);
    if (used + w <= width) {
      current += word;
      used += w;
      continue;
    }
    if (current !== '') lines.push(current.trimEnd());
    current = '';
    used = 0;
    for (const char of word) {
      const cw = charWidth(char);
      if (used + cw > width) {
        lines.push(current);
        current = '';
        used = 0;
      }
      current += char;
      used += cw;
    }
  }
  if (current !== '') lines.push(current.trimEnd());
  return lines;
}

/** A wake-up and the changes that caused it, in one line. */
function watchWoke(event: Extract<StoredRunEvent, { type: 'watch_woke' }>): string {
  const shown = event.changes.slice(0, 5).map(describeWatchChange).join('; ');
  const more = event.changes.length > 5 ? ` and ${event.changes.length - 5} more` : '';
  return `watcher ${event.watcher} woke (wake-up ${event.wakeup}, depth ${event.depth}): ${shown}${more}`;
}

function watcherChanged(event: Extract<StoredRunEvent, { type: 'watcher_changed' }>): string {
  const keys = event.keys.join(', ');
  switch (event.state) {
    case 'added':
      return `watcher ${event.watcher} added (${keys}${event.createdBy ? `, by ${event.createdBy}` : ''})`;
    case 'paused':
      return `watcher ${event.watcher} paused${event.until ? ` until ${event.until}` : ''}${event.reason ? `: ${event.reason}` : ''}`;
    case 'resumed':
      return `watcher ${event.watcher} resumed`;
    default:
      return `watcher ${event.watcher} ${event.state}${event.reason ? `: ${event.reason}` : ''}`;
  }
}

function watchSkipped(event: Extract<StoredRunEvent, { type: 'watch_skipped' }>): string {
  return (
    `watcher ${event.watcher} did not wake for ${event.keys.join(', ')}: a chain of watchers ${event.depth} deep, ` +
    `past the limit of ${event.maxDepth} (BATON_WATCH_MAX_DEPTH)`
  );
}
