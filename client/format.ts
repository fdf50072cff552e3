/** Human-readable output of the CLI and the demo: turns, questions, transcripts, trees and env data. */
import type {
  EnvEvent,
  EnvManifestEntry,
  ProviderUsage,
  QuestionRow,
  ScheduleDetails,
  ScheduleSummaryRow,
  ThreadUsage,
  TranscriptMessage,
  TreeNode,
} from '.';
import { DEFAULT_PROVIDER } from '../activities/model-providers';
import { describeWait, truncateBytes } from '../common/text';
import type { StoredRunEvent } from '../common/run-events';
import type { SendMessageResult, ThreadStatus, WaitInfo, WakeResult } from '../common/types';
import { describeWatchChange, wakeupOfThread, type Watcher } from '../common/watchers';
import type { MergeResult } from '../db/env-commits';
import type { ApprovalRow } from '../db/approvals';
import type { Budget, BudgetAmount } from '../db/budgets';
import { sumByProvider } from '../db/transcripts';
import type { EnvProposal } from '../db/env-data';
import type { ForkRow } from '../db/forks';
import type { RefusedWrite } from '../db/refusals';

/** Characters of one message the human-readable transcript shows; `--json` gives everything. */
const TRANSCRIPT_PREVIEW_CHARS = 500;

/** The reply, or a line saying why there is none. */
export function describeTurn(result: SendMessageResult): string {
  return result.status === 'completed'
    ? result.reply
    : `(the turn ended without an answer: ${result.status} after ${result.steps} steps)`;
}

/** A wait as one line: who waits (and in which thread, when delegated), until when and why. */
function waitLine(wait: WaitInfo, rootThreadId: string): string {
  const where = wait.threadId === rootThreadId ? '' : ` (thread ${wait.threadId})`;
  return `${wait.agent}${where} is ${describeWait(wait)}`;
}

/** `baton status`: the thread, its turns, and what it waits for. */
export function formatStatus(status: ThreadStatus): string {
  const doing = status.busy ? 'running a turn' : 'idle, waiting for a message';
  const lines = [`thread ${status.rootThreadId} (${status.agent}): ${status.turns} turn(s), ${doing}`];
  for (const wait of status.waits ?? []) lines.push(`  ${waitLine(wait, status.rootThreadId)}`);
  return lines.join('\n');
}

/** `baton wake`: the waits it ended early. */
export function formatWake(result: WakeResult): string {
  if (result.woken.length === 0) return `Nothing in thread ${result.threadId} was waiting.`;
  return [
    `Woke ${result.woken.length} wait(s) in thread ${result.threadId}:`,
    ...result.woken.map((wait) => `  ${waitLine(wait, result.threadId)}`),
  ].join('\n');
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

/** Questions as a table: id, agent, age and the question, with `all` their status (a cancelled one's with why). */
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
      ...(all ? [row.reason === null ? row.status : `${row.status} (${oneLine(row.reason)})`] : []),
      oneLine(row.question),
    ]),
  ]);
}

/** Approvals as a table: id, agent, age, tool and its arguments (cut to one line), and the status with `all`. */
export function formatApprovals(rows: readonly ApprovalRow[], all: boolean): string {
  if (rows.length === 0) return all ? 'No approvals.' : 'No tool calls are waiting for approval.';
  const now = Date.now();
  const call = (row: ApprovalRow) => truncateBytes(`${row.tool}(${row.arguments.replace(/\s+/g, ' ').trim()})`, 200);
  const outcome = (row: ApprovalRow) =>
    row.status === 'pending'
      ? row.expiresAt === null
        ? 'pending'
        : `pending until ${row.expiresAt.toISOString()}`
      : [row.status, row.decidedBy === null ? '' : `by ${row.decidedBy}`, row.reason === null ? '' : `(${row.reason})`]
          .filter((part) => part !== '')
          .join(' ');
  return columns([
    all ? ['ID', 'AGENT', 'THREAD', 'AGE', 'STATUS', 'CALL'] : ['ID', 'AGENT', 'THREAD', 'AGE', 'CALL'],
    ...rows.map((row) => [
      row.approvalId,
      row.agent,
      row.threadId,
      age(row.createdAt, now),
      ...(all ? [outcome(row)] : []),
      call(row),
    ]),
  ]);
}

/** The provider that answered, when it was not the default endpoint: ` via local/llama3.1`. */
function viaProvider(message: TranscriptMessage): string {
  if (message.provider === null || message.provider === DEFAULT_PROVIDER) return '';
  return ` via ${message.provider}${message.model === null ? '' : `/${message.model}`}`;
}

/**
 * `[seq] role (agent): content`, with tool calls as `→ name(args)` and tool results as `← name: result`; a reply from
 * a provider other than the default endpoint says which (`assistant (solver via local/llama3.1)`).
 */
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
      return `[${message.seq}] ${message.role} (${message.agent}${viaProvider(message)}): ${indent(lines.join('\n'))}`;
    })
    .join('\n');
}

/**
 * `default, local`: the providers of some usage rows, when one of them is not the default endpoint (the CLI and the
 * explorer name providers only then: with one endpoint there is nothing to tell apart).
 */
export function namedProviders(usage: readonly ProviderUsage[]): string | undefined {
  if (!usage.some((row) => row.provider !== null && row.provider !== DEFAULT_PROVIDER)) return undefined;
  return usage.map((row) => row.provider ?? 'unrecorded').join(', ');
}

/** ` (hosted 3454, local 21425)`: tokens by provider, when one of them is not the default endpoint; else ''. */
export function tokensByProvider(usage: readonly ProviderUsage[]): string {
  if (namedProviders(usage) === undefined) return '';
  return ` (${usage.map((row) => `${row.provider ?? 'unrecorded'} ${row.totalTokens}`).join(', ')})`;
}

/**
 * The delegation tree, one thread a line: agent, status, model calls, tokens, the providers that answered (when one
 * is not the default endpoint), thread id; errors under failures. The tasks of a fork are drawn as one group under
 * their caller, each with its status and what it merged. The total splits by provider in the same case.
 */
/** Dollars as costs are kept, to the millionth, without trailing zeros: `$0.0045`. */
export function formatUsd(amount: number): string {
  return `$${Number(amount.toFixed(6))}`;
}

/**
 * A budget in a few words, per unit it limits: `1200 of 5000 tokens spent, 300 held, 3500 left; $0.12 of $5 spent,
 * $4.88 left` (held: what open delegations and fork tasks reserved and have not spent).
 */
export function formatBudget(budget: Budget): string {
  const parts: string[] = [];
  const describe = (amount: BudgetAmount, show: (n: number) => string, unit: string) => {
    const held = amount.granted - amount.spent - amount.left;
    parts.push(
      `${show(amount.spent)} of ${show(amount.granted)}${unit} spent` +
        `${held > 0 ? `, ${show(held)} held` : ''}, ${show(Math.max(amount.left, 0))} left`,
    );
  };
  if (budget.tokens) describe(budget.tokens, String, ' tokens');
  if (budget.usd) describe(budget.usd, formatUsd, '');
  return parts.join('; ');
}

/** `baton usage`: a tree's tokens, by provider, and its budget. */
export function formatUsage(usage: ThreadUsage): string {
  const lines = [
    `${usage.totalTokens} tokens (${usage.promptTokens} in, ${usage.completionTokens} out) in ${usage.modelCalls} model call${usage.modelCalls === 1 ? '' : 's'}` +
      `${usage.costUsd === undefined ? '' : `, ${formatUsd(usage.costUsd)} at the workers' prices`}`,
  ];
  for (const entry of usage.byProvider) {
    const calls = `${entry.modelCalls} call${entry.modelCalls === 1 ? '' : 's'}`;
    lines.push(`  ${entry.provider ?? '(unrecorded provider)'}: ${entry.totalTokens} tokens in ${calls}`);
  }
  lines.push(usage.budget === undefined ? 'no budget' : `budget: ${formatBudget(usage.budget)}`);
  return lines.join('\n');
}

export function formatTree(root: TreeNode, forks: readonly ForkRow[] = []): string {
  const lines: string[] = [];
  const forkTasks = new Map(
    forks.flatMap((fork) => fork.tasks.map((task) => [task.threadId, { fork, task }] as const)),
  );
  const visit = (node: TreeNode, prefix: string, branch: string, label = '') => {
    const calls = `${node.modelCalls} model call${node.modelCalls === 1 ? '' : 's'}`;
    const providers = namedProviders(node.providers);
    lines.push(
      `${prefix}${branch}${label}${node.agent}  ${node.status}  ${calls}  ${node.totalTokens} tokens  ` +
        `${providers === undefined ? '' : `via ${providers}  `}` +
        `${node.budget === undefined ? '' : `budget ${formatBudget(node.budget)}  `}(${node.threadId})`,
    );
    const inner = prefix + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    if (node.lastError) lines.push(`${inner}   ! ${preview(node.lastError, 200)}`);
    const plain = node.children.filter((child) => !forkTasks.has(child.threadId));
    const groups = forks.filter((fork) => fork.parentThreadId === node.threadId);
    const items = [...plain.map((child) => ({ child })), ...groups.map((fork) => ({ fork }))];
    items.forEach((item, index) => {
      const last = index === items.length - 1;
      if ('child' in item) {
        const wakeup = wakeupOfThread(item.child.threadId);
        const tag = wakeup === undefined ? '' : `[watcher ${wakeup.watcher}, wake-up ${wakeup.wakeup}] `;
        return visit(item.child, inner, last ? '└─ ' : '├─ ', tag);
      }
      const { fork } = item;
      const succeeded = fork.tasks.filter((task) => task.status === 'success').length;
      const store = fork.store === 'isolated' ? `isolated → ${fork.prefix}/` : 'shared';
      lines.push(
        `${inner}${last ? '└─ ' : '├─ '}fork ${fork.number}  ${store}  ${fork.status}  ` +
          `(${succeeded} of ${fork.tasks.length} succeeded, deadline ${fork.deadlineSeconds} s)`,
      );
      const taskPrefix = inner + (last ? '   ' : '│  ');
      fork.tasks.forEach((task, taskIndex) => {
        const taskBranch = taskIndex === fork.tasks.length - 1 ? '└─ ' : '├─ ';
        const child = node.children.find((candidate) => candidate.threadId === task.threadId);
        const tag = `[task ${task.taskIndex}: ${task.status}] `;
        if (child) visit(child, taskPrefix, taskBranch, tag);
        else lines.push(`${taskPrefix}${taskBranch}${tag}${task.agent}  (${task.threadId})`);
        const detail = taskPrefix + (taskBranch === '└─ ' ? '   ' : '│  ');
        if (task.status !== 'success' && task.error) lines.push(`${detail}   ! ${preview(task.error, 200)}`);
        const merge = task.merge as MergeResult | null;
        if (merge) lines.push(`${detail}   ${formatMerge(merge)}`);
      });
    });
  };
  visit(root, '', '');
  const total = (node: TreeNode): number => node.totalTokens + node.children.reduce((sum, c) => sum + total(c), 0);
  const usage = (node: TreeNode): ProviderUsage[] => [...node.providers, ...node.children.flatMap(usage)];
  lines.push(`total: ${total(root)} tokens${tokensByProvider(sumByProvider(usage(root)))}`);
  return lines.join('\n');
}

/** `merged 2 keys (fork/1/1/a, …), 1 link, proposals p2; errors: …` */
function formatMerge(merge: MergeResult): string {
  const count = merge.created.length + (merge.createdMore ?? 0);
  const keys = count === 0 ? '' : ` (${merge.created.slice(0, 3).join(', ')}${count > 3 ? ', …' : ''})`;
  const parts = [
    `merged ${count} key${count === 1 ? '' : 's'}${keys}`,
    `${merge.links} link${merge.links === 1 ? '' : 's'}`,
  ];
  if (merge.proposals.length > 0) parts.push(`proposals ${merge.proposals.join(', ')}`);
  const line = parts.join(', ');
  return merge.errors.length === 0 ? line : `${line}; errors: ${preview(merge.errors.join('; '), 200)}`;
}

/** Pending (or all) proposals, one a line: id, key, who proposed it, what it would change. */
export function formatProposals(proposals: readonly EnvProposal[]): string {
  if (proposals.length === 0) return 'No proposals.';
  return columns([
    ['PROPOSAL', 'KEY', 'STATUS', 'PROPOSED BY', 'CHANGE'],
    ...proposals.map((proposal) => [
      proposal.proposalId,
      proposal.key,
      proposal.status + (proposal.decidedBy ? ` by ${proposal.decidedBy.agent}` : ''),
      proposal.forkTask ? `${proposal.proposedBy.agent} (${proposal.forkTask})` : proposal.proposedBy.agent,
      preview(JSON.stringify(proposal.patch === null ? { value: proposal.value } : { patch: proposal.patch }), 80),
    ]),
  ]);
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
      `${entry.storedBy.agent} (${entry.storedByTask ?? entry.storedBy.thread})`,
      `${age(entry.updatedAt, now)} ago`,
      singleLine(entry.shortDescription),
    ]),
  ]);
}

/** `#seq time action key vN by agent (thread) size`, and `: reason` for a refusal. */
export function formatEnvEvent(event: EnvEvent): string {
  const parts = [`#${event.seq}`, event.createdAt.toISOString(), event.action];
  // A link reads as a sentence ("fork/1/1/verdict contradicts arc_task"); a write names its key and version.
  if (event.action === 'linked' && event.shortDescription !== null) parts.push(event.shortDescription);
  else {
    parts.push(event.key);
    if (event.version !== null) parts.push(`v${event.version}`);
  }
  if (event.scope !== '') parts.push('in its isolated store');
  parts.push(`by ${event.actor.agent} (${event.actorTask ?? event.actor.thread})`);
  if (event.valueSize !== null) parts.push(formatSize(event.valueSize));
  const line = parts.join(' ');
  return event.reason === null ? line : `${line}: ${singleLine(event.reason)}`;
}

/** `#seq time kind op <id> by agent (thread): issued under epoch W, thread at C` — one refused write a line. */
export function formatRefusedWrites(rows: readonly RefusedWrite[]): string {
  if (rows.length === 0) return 'No refused writes.';
  return rows
    .map(
      (row) =>
        `#${row.seq} ${row.createdAt.toISOString()} ${row.kind} ${row.operationId} by ${row.agent} (${row.threadId}): ` +
        `issued under epoch ${row.writeEpoch}, the thread is at ${row.currentEpoch}`,
    )
    .join('\n');
}

/** `baton schedule list`: one schedule a line. */
export function formatScheduleList(rows: readonly ScheduleSummaryRow[]): string {
  if (rows.length === 0) return 'No schedules. Create one with `baton schedule create`.';
  return columns([
    ['NAME', 'AGENT', 'TARGET', 'STATE', 'NEXT RUN'],
    ...rows.map((row) => [
      row.name,
      row.agent ?? '?',
      row.target ?? '?',
      row.paused ? 'paused' : 'active',
      row.paused ? '-' : (row.nextRun ?? '-'),
    ]),
  ]);
}

/** `baton schedule describe`: the schedule, its next runs, and its recent runs with their threads. */
export function formatScheduleDetails(details: ScheduleDetails): string {
  const { timing } = details;
  const when = [
    timing.cron === undefined ? `every ${timing.every ?? '?'}` : `cron "${timing.cron}"`,
    timing.timezone ? `in ${timing.timezone}` : '',
    timing.jitter ? `jitter ${timing.jitter}` : '',
    timing.until ? `until ${timing.until}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const lines = [
    `Schedule ${details.name} (${details.scheduleId}): ${details.paused ? 'paused' : 'active'}${details.note ? ` (${details.note})` : ''}`,
    `  agent:    ${details.agent} in world ${details.world}`,
    `  target:   ${details.target.kind === 'thread' ? `thread ${details.target.threadId}` : 'a new thread per run'}`,
    `  when:     ${when}`,
    `  overlap:  ${details.overlap}; catch-up window ${details.catchupWindow}`,
    `  message:  ${preview(details.message, 200)}`,
    `  runs:     ${details.runsTaken} taken, ${details.skippedOverlap} skipped (overlap), ${details.missedCatchup} missed (catch-up)`,
    `Next runs: ${details.paused ? '(paused)' : details.nextRuns.slice(0, 5).join(', ') || '(none)'}`,
  ];
  if (details.recentRuns.length === 0) {
    lines.push('Recent runs: none yet.');
  } else {
    lines.push('Recent runs:');
    lines.push(
      columns([
        ['SCHEDULED', 'STATUS', 'THREAD', 'OUTCOME'],
        ...details.recentRuns.map((run) => [
          run.scheduledAt,
          run.status,
          run.threadId ?? '-',
          run.result
            ? `turn ${run.result.turn} ${run.result.status}${details.target.kind === 'new-thread' && !run.result.createdThread ? ' (a repeat: its thread existed)' : ''}`
            : (run.error ?? ''),
        ]),
      ]),
    );
  }
  return lines.join('\n');
}

/**
 * A root's watchers, one a line (name, agent, keys, status with why, wake-ups), then its recent wake-ups, newest
 * first, each with the changes that caused it.
 */
export function formatWatchers(
  watchers: readonly Watcher[],
  wakeups: readonly {
    watcher: string;
    wakeup: number;
    threadId: string;
    depth: number;
    status: string;
    changes: Parameters<typeof describeWatchChange>[0][];
    error?: string;
    startedAt: string;
  }[] = [],
): string {
  if (watchers.length === 0) return 'no watchers';
  const lines = watchers.map((watcher) => {
    const status =
      watcher.status === 'paused'
        ? `paused until ${watcher.pausedUntil ?? '?'}${watcher.reason ? `: ${watcher.reason}` : ''}`
        : watcher.status === 'active'
          ? 'active'
          : `${watcher.status}${watcher.reason ? `: ${watcher.reason}` : ''}`;
    const debounce = watcher.debounceS === undefined ? '' : `  debounce ${watcher.debounceS} s`;
    return (
      `${watcher.name}  agent ${watcher.agent}  keys ${watcher.keys.join(', ')}${debounce}  ${status}  ` +
      `${watcher.wakeups} wake-up${watcher.wakeups === 1 ? '' : 's'}  (${watcher.origin === 'frontmatter' ? 'frontmatter' : `added by ${watcher.createdBy}`})`
    );
  });
  if (wakeups.length > 0) lines.push('', 'wake-ups (newest first):');
  for (const wakeup of wakeups) {
    const changes = wakeup.changes.map(describeWatchChange).join('; ');
    lines.push(
      `  ${wakeup.watcher} #${wakeup.wakeup}  ${wakeup.status}  depth ${wakeup.depth}  ${wakeup.startedAt}  (${wakeup.threadId})`,
      `     ${preview(changes, 300)}`,
    );
    if (wakeup.error) lines.push(`     ! ${preview(wakeup.error, 200)}`);
  }
  return lines.join('\n');
}

/** What a root's watchers did, one event a line, oldest first (`thread.watchEvents()`). */
export function formatWatchEvents(events: readonly StoredRunEvent[]): string {
  const lines: string[] = [];
  for (const event of events) {
    const at = `${String(event.seq).padStart(5)} ${event.at}`;
    switch (event.type) {
      case 'watch_woke':
        lines.push(`${at}  ${event.watcher} woke (wake-up ${event.wakeup}, depth ${event.depth}) in ${event.threadId}`);
        for (const change of event.changes) lines.push(`        ${describeWatchChange(change)}`);
        break;
      case 'watch_finished':
        lines.push(
          `${at}  ${event.watcher} wake-up ${event.wakeup} ${event.status}${event.error ? `: ${preview(event.error, 200)}` : ''}`,
        );
        break;
      case 'watch_skipped':
        lines.push(
          `${at}  ${event.watcher} did not wake for ${event.keys.join(', ')}: a chain ${event.depth} watchers deep, ` +
            `past the limit of ${event.maxDepth}`,
        );
        break;
      case 'watcher_changed': {
        const why = event.reason ? `: ${event.reason}` : '';
        const until = event.until ? ` until ${event.until}` : '';
        const detail = event.state === 'added' ? ` (${event.keys.join(', ')})` : `${until}${why}`;
        lines.push(`${at}  ${event.watcher} ${event.state}${detail}`);
        break;
      }
      default:
        break;
    }
  }
  return lines.length === 0 ? 'no watcher events' : lines.join('\n');
}
