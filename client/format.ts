/** Human-readable output of the CLI and the demo: turns, questions, transcripts, trees and env data. */
import type { EnvEvent, EnvManifestEntry, QuestionRow, TranscriptMessage, TreeNode } from '.';
import type { SendMessageResult } from '../common/types';

/** Characters of one message the human-readable transcript shows; `--json` gives everything. */
const TRANSCRIPT_PREVIEW_CHARS = 500;

/** The reply, or a line saying why there is none. */
export function describeTurn(result: SendMessageResult): string {
  return result.status === 'completed'
    ? result.reply
    : `(the turn ended without an answer: ${result.status} after ${result.steps} steps)`;
}

/** `text` cut to `max` characters (code points), saying how much was left out. */
export function preview(text: string, max: number): string {
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max).join('')}… (${chars.length - max} more characters)`;
}

/** How long ago `iso` was, coarsely: `45s`, `12m`, `3h`, `2d`. */
function age(since: Date, now: number): string {
  const seconds = Math.max(0, Math.floor((now - since.getTime()) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

/** Rows of cells as left-aligned columns separated by two spaces; the last column is not padded. */
function columns(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, index) => Math.max(...rows.map((row) => (row[index] ?? '').length))) ?? [];
  return rows
    .map((row) =>
      row.map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  '),
    )
    .join('\n');
}

export function formatQuestions(rows: readonly QuestionRow[], all: boolean): string {
  if (rows.length === 0) return all ? 'No questions.' : 'No open questions.';
  const now = Date.now();
  const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
  return columns([
    all ? ['ID', 'AGENT', 'AGE', 'STATUS', 'QUESTION'] : ['ID', 'AGENT', 'AGE', 'QUESTION'],
    ...rows.map((row) => [
      row.questionId,
      row.agent,
      age(row.createdAt, now),
      ...(all ? [row.status] : []),
      oneLine(row.question),
    ]),
  ]);
}

/** `[seq] role (agent): content`, with tool calls as `→ name(args)` and tool results as `← name: result`. */
export function formatTranscript(messages: readonly TranscriptMessage[]): string {
  if (messages.length === 0) return 'No messages yet.';
  const toolNames = new Map<string, string>();
  for (const message of messages) for (const call of message.toolCalls ?? []) toolNames.set(call.id, call.name);
  // Continuation lines are indented so each message's `[seq]` stands out.
  const indent = (text: string) => text.replaceAll('\n', '\n    ');
  return messages
    .map((message) => {
      const lines: string[] = [];
      if (message.role === 'tool') {
        const name = message.toolCallId ? toolNames.get(message.toolCallId) : undefined;
        lines.push(
          `← ${name ? `${name}: ` : ''}${preview((message.content ?? '').trimEnd(), TRANSCRIPT_PREVIEW_CHARS)}`,
        );
      } else if (message.content) {
        lines.push(preview(message.content.trimEnd(), TRANSCRIPT_PREVIEW_CHARS));
      }
      for (const call of message.toolCalls ?? []) {
        lines.push(`→ ${call.name}(${preview(call.arguments, TRANSCRIPT_PREVIEW_CHARS)})`);
      }
      return `[${message.seq}] ${message.role} (${message.agent}): ${indent(lines.join('\n'))}`;
    })
    .join('\n');
}

/** The delegation tree, one thread a line: agent, status, model calls, tokens, thread id; errors under failures. */
export function formatTree(root: TreeNode): string {
  const lines: string[] = [];
  const visit = (node: TreeNode, prefix: string, branch: string) => {
    const calls = `${node.modelCalls} model call${node.modelCalls === 1 ? '' : 's'}`;
    lines.push(
      `${prefix}${branch}${node.agent}  ${node.status}  ${calls}  ${node.totalTokens} tokens  (${node.threadId})`,
    );
    const inner = prefix + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    if (node.lastError) lines.push(`${inner}   ! ${preview(node.lastError, 200)}`);
    node.children.forEach((child, index) => visit(child, inner, index === node.children.length - 1 ? '└─ ' : '├─ '));
  };
  visit(root, '', '');
  const total = (node: TreeNode): number => node.totalTokens + node.children.reduce((sum, c) => sum + total(c), 0);
  lines.push(`total: ${total(root)} tokens`);
  return lines.join('\n');
}

/** `text` on one line: runs of whitespace become one space. */
function singleLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** `512 B`, `12.5 KiB`. */
function formatSize(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

export function formatEnvManifest(entries: readonly EnvManifestEntry[]): string {
  if (entries.length === 0) return 'No environment data.';
  const now = Date.now();
  return columns([
    ['KEY', 'VERSION', 'STORED BY', 'UPDATED', 'DESCRIPTION'],
    ...entries.map((entry) => [
      entry.key,
      String(entry.version),
      `${entry.storedBy.agent} (${entry.storedBy.thread})`,
      `${age(entry.updatedAt, now)} ago`,
      singleLine(entry.shortDescription),
    ]),
  ]);
}

/** `#seq time action key vN by agent (thread) size`, and `: reason` for a refusal. */
export function formatEnvEvent(event: EnvEvent): string {
  const parts = [`#${event.seq}`, event.createdAt.toISOString(), event.action, event.key];
  if (event.version !== null) parts.push(`v${event.version}`);
  parts.push(`by ${event.actor.agent} (${event.actor.thread})`);
  if (event.valueSize !== null) parts.push(formatSize(event.valueSize));
  const line = parts.join(' ');
  return event.reason === null ? line : `${line}: ${singleLine(event.reason)}`;
}
