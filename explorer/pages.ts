/**
 * The explorer's pages, server-rendered from the views of `data.ts`. Pure functions from data to `Html`; every value
 * goes through the `html` template, which escapes it. Links to threads encode the id (delegation ids hold `/`).
 */
import type { ProviderUsage, QuestionRow, TranscriptMessage } from '../client';
import { formatBudget, formatUsd, namedProviders, tokensByProvider } from '../client/format';
import { MAX_APPROVAL_REASON_CHARS, MAX_DECIDED_BY_CHARS } from '../common/types';
import type { ThreadRow } from '../db/threads';
import type {
  ApprovalRow,
  EnvLogEvent,
  EnvProposal,
  ExplorerFork,
  ExplorerNode,
  ExplorerWatcher,
  RootThreadSummary,
  ScopedEnvEntry,
  ThreadOverview,
  ThreadWakeup,
  WakeupRow,
} from './data';
import { html, seg, type Html } from './html';

/** Where the pages link out to. */
export interface PageContext {
  /** The Temporal Web UI, when one runs (`http://127.0.0.1:8233`). */
  uiUrl?: string | undefined;
  /** A trace UI's search for one root's traces, `{rootThreadId}` in it (see {@link traceUrlProblem}). */
  traceUrl?: string | undefined;
  namespace: string;
  /** Rendering time, for durations of what still runs. */
  now: Date;
  /**
   * The root's run feed number read before the page's data: the page's script follows the feed from there
   * (`/api/threads/<root>/events?since=`), so nothing committed after the read is missed. Unset: no live updates.
   */
  feedSince?: number | undefined;
}

export function threadPath(threadId: string, suffix = ''): string {
  return `/threads/${seg(threadId)}${suffix}`;
}

/** The Web UI page of one workflow: `<uiUrl>/namespaces/<ns>/workflows/<workflowId>`. */
export function workflowUrl(context: PageContext, workflowId: string): string | undefined {
  if (!context.uiUrl || !workflowId) return undefined;
  return `${context.uiUrl.replace(/\/+$/, '')}/namespaces/${seg(context.namespace)}/workflows/${seg(workflowId)}`;
}

/** The placeholder a trace URL template holds, replaced by the root thread's id (URL-encoded). */
export const TRACE_URL_PLACEHOLDER = '{rootThreadId}';

/** Why `template` cannot be a trace URL template, or `undefined` when it can. */
export function traceUrlProblem(template: string): string | undefined {
  if (!/^https?:\/\//.test(template)) return `the trace URL must start with http:// or https://, not '${template}'`;
  if (!template.includes(TRACE_URL_PLACEHOLDER)) {
    return `the trace URL must hold ${TRACE_URL_PLACEHOLDER}, where the root thread's id goes`;
  }
  return undefined;
}

/** The trace UI's page of one root's traces, when a template is configured. */
export function traceUrl(context: PageContext, rootThreadId: string): string | undefined {
  return context.traceUrl?.split(TRACE_URL_PLACEHOLDER).join(encodeURIComponent(rootThreadId));
}

export function layout(title: string, body: Html, options: { crumbs?: Html; bodyData?: Html } = {}): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Baton explorer</title>
<link rel="stylesheet" href="/assets/explorer.css">
<script src="/assets/explorer.js" defer></script>
</head>
<body${options.bodyData ?? ''}>
<header><a class="brand" href="/">Baton explorer</a>${options.crumbs ?? ''}</header>
<main>
${body}
</main>
</body>
</html>
`;
}

function time(date: Date | null | undefined): Html {
  if (!date) return html`<span class="muted">—</span>`;
  const iso = new Date(date).toISOString();
  return html`<time datetime="${iso}" title="${iso}">${iso.slice(11, 19)}</time>`;
}

export function dateTime(date: Date | null | undefined): Html {
  if (!date) return html`<span class="muted">—</span>`;
  const iso = new Date(date).toISOString();
  return html`<time datetime="${iso}" title="${iso}">${iso.slice(0, 19).replace('T', ' ')}</time>`;
}

function duration(from: Date | null | undefined, to: Date | null | undefined, now: Date): string {
  if (!from) return '';
  const ms = Math.max(0, new Date(to ?? now).getTime() - new Date(from).getTime());
  const text = ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60_000)} min`;
  return to ? text : `${text} so far`;
}

function span(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return s < 172_800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86_400)} days`;
}

/** `12 s ago` for a past time, `in 3 min` for a future one. */
function relative(date: Date, now: Date): string {
  const ms = new Date(date).getTime() - now.getTime();
  return ms > 0 ? `in ${span(ms)}` : `${span(ms)} ago`;
}

/** A tree's cost beside its tokens, where its workers priced its replies. */
function costOf(costUsd: number | undefined): string {
  return costUsd === undefined ? '' : ` (${formatUsd(costUsd)})`;
}

export function status(value: string): Html {
  return html`<span class="status status-${value.replace(/[^a-z_]/g, '')}">${value}</span>`;
}

/** JSON indented for reading, with arrays of plain values (grid rows, lists of ids) kept on one line. */
export function compactJson(value: unknown, indent = ''): string {
  if (Array.isArray(value)) {
    if (value.every((item) => item === null || typeof item !== 'object')) {
      return `[${value.map((item) => JSON.stringify(item) ?? 'null').join(', ')}]`;
    }
    const inner = `${indent}  `;
    return `[\n${value.map((item) => inner + compactJson(item, inner)).join(',\n')}\n${indent}]`;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0) return '{}';
    const inner = `${indent}  `;
    return `{\n${entries.map(([key, item]) => `${inner}${JSON.stringify(key)}: ${compactJson(item, inner)}`).join(',\n')}\n${indent}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Pretty JSON when `text` holds an object or an array, else `undefined`. */
export function prettyJson(text: string | null | undefined): string | undefined {
  if (!text) return undefined;
  const trimmed = text.trim();
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return undefined;
  try {
    return compactJson(JSON.parse(trimmed));
  } catch {
    return undefined;
  }
}

function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

export function errorPage(title: string, message: string): Html {
  return layout(
    title,
    html`<h1>${title}</h1>
      <p class="error-text">${message}</p>
      <p><a href="/">All threads</a></p>`,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Root threads

export function rootListPage(rows: readonly RootThreadSummary[], search: string): Html {
  const body = html`<h1>Threads</h1>
    <p><a href="/experiments">Experiments</a></p>
    <form class="search" method="get" action="/">
      <input
        type="search"
        name="q"
        value="${search}"
        placeholder="thread id, agent or first message"
        aria-label="Search threads"
      />
      <button type="submit">Search</button>${search ? html` <a href="/">clear</a>` : ''}
    </form>
    ${
      rows.length === 0
        ? html`<p class="muted">
            ${search ? 'No thread matches.' : 'No threads yet: start one with `npx baton run <agent> "<message>"`.'}
          </p>`
        : html`<table class="threads">
            <thead>
              <tr>
                <th>thread</th>
                <th>agent</th>
                <th>status</th>
                <th class="num">turns</th>
                <th class="num">threads</th>
                <th class="num">tokens</th>
                <th>started</th>
                <th>first message</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (row) =>
                  html`<tr data-thread="${row.threadId}">
                    <td>
                      <a href="${threadPath(row.threadId)}">${row.threadId}</a
                      >${row.openQuestions > 0 ? html` <span class="badge" title="open questions">${row.openQuestions} ?</span>` : ''}${
                        row.pendingApprovals > 0
                          ? html` <span class="badge badge-approval" title="tool calls waiting for approval"
                              >${row.pendingApprovals} to approve</span
                            >`
                          : ''
                      }
                    </td>
                    <td>${row.agent}</td>
                    <td>${status(row.status)}</td>
                    <td class="num">${row.turns}</td>
                    <td class="num">${row.threads}</td>
                    <td class="num">${row.totalTokens}</td>
                    <td>${dateTime(row.createdAt)}</td>
                    <td class="muted">${oneLine(row.firstMessage ?? '', 100)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }`;
  return layout('Threads', body);
}

// ---------------------------------------------------------------------------------------------------------------
// One root: the tree, forks, questions

function crumbs(thread: Pick<ThreadRow, 'threadId' | 'rootThreadId'>, here?: string): Html {
  const root = thread.rootThreadId;
  return html`<nav class="crumbs">
    <a href="${threadPath(root)}">${root}</a>${
      thread.threadId === root
        ? ''
        : html` / <a href="${threadPath(thread.threadId, '/transcript')}">${thread.threadId}</a>`
    }${here ? html` / ${here}` : ''}
  </nav>`;
}

/**
 * The attributes that make a page follow its root's run feed (`explorer.js`): the stream's address, and the thread
 * whose transcript the page shows (none on the tree, which shows every thread).
 */
function liveData(root: string, context: PageContext, thread?: string): Html {
  if (context.feedSince === undefined) return html``;
  return html` data-events="/api/threads/${seg(root)}/events?since=${context.feedSince}"${
    thread === undefined ? '' : html` data-thread="${thread}"`
  }`;
}

/** Says whether the page follows the run; hidden until the script connects (without it the page is as served). */
function liveLine(context: PageContext): Html {
  if (context.feedSince === undefined) return html``;
  return html`<p class="live" id="run-live" hidden>Live: connecting…</p>`;
}

/** What changes while a conversation runs; without the live feed the page reloads itself when it differs. */
export function overviewSignature(overview: ThreadOverview): string {
  const parts: string[] = [];
  const visit = (node: ExplorerNode) => {
    parts.push(`${node.threadId}:${node.status}:${node.modelCalls}`);
    node.children.forEach(visit);
    for (const fork of node.forks) {
      parts.push(`fork${fork.number}:${fork.status}`);
      for (const task of fork.tasks) {
        parts.push(`${task.taskIndex}:${task.status}`);
        if (task.node) visit(task.node);
      }
    }
  };
  visit(overview.tree);
  parts.push(`q:${overview.questions.map((q) => `${q.questionId}=${q.status}`).join(',')}`);
  parts.push(`a:${overview.approvals.map((a) => `${a.approvalId}=${a.status}`).join(',')}`);
  for (const watcher of overview.watchers) {
    const wakeups = watcher.recentWakeups.map((w) => `${w.wakeup}=${w.status}`).join(',');
    parts.push(`w:${watcher.name}=${watcher.status}:${watcher.pausedUntil ?? ''}:${wakeups}`);
  }
  return parts.join('|');
}

/** ` · via default, local` when a provider other than the default endpoint answered some of a thread's calls. */
function viaProviders(usage: readonly ProviderUsage[]): string {
  const providers = namedProviders(usage);
  return providers === undefined ? '' : ` · via ${providers}`;
}

function nodeCard(node: ExplorerNode, context: PageContext): Html {
  const link = workflowUrl(context, node.workflowId);
  const started = node.startedAt ?? node.createdAt;
  const delegation = node.delegations.at(-1);
  return html`<div class="node" data-thread="${node.threadId}" data-status="${node.status}">
    <div class="node-head">
      <strong class="agent">${node.agent}</strong> ${status(node.status)}
      <a class="thread-id" href="${threadPath(node.threadId, '/transcript')}">${node.threadId}</a>
      ${node.forkTask ? html`<span class="badge">${node.forkTask}</span>` : ''}
      ${
        node.wakeup
          ? html`<a class="badge badge-watcher" href="#watcher-${node.wakeup.watcher}">${wakeupLabel(node.wakeup)}</a>`
          : ''
      }
    </div>
    <div class="node-meta">
      ${node.modelCalls} model call${node.modelCalls === 1 ? '' : 's'} · ${node.totalTokens}
      tokens${viaProviders(node.providers)}${node.budget ? html` · budget ${formatBudget(node.budget)}` : ''} · started
      ${time(started)}${node.finishedAt ? html` · finished ${time(node.finishedAt)}` : ''} ·
      ${duration(started, node.finishedAt, context.now)}${
        node.caller ? html` · called by ${node.caller}` : ''
      }${link ? html` · <a class="webui" href="${link}" target="_blank" rel="noopener">Web UI: ${node.workflowId}</a>` : html` · <span class="muted">${node.workflowId}</span>`}
    </div>
    ${node.lastError ? html`<div class="error-text">${node.lastError}</div>` : ''}
    ${
      delegation
        ? html`<details class="preamble">
            <summary>
              message received from
              ${delegation.caller}${node.delegations.length > 1 ? html` (latest of ${node.delegations.length})` : ''}
            </summary>
            <pre>${delegation.message}</pre>
          </details>`
        : ''
    }
  </div>`;
}

function treeNode(node: ExplorerNode, context: PageContext): Html {
  const inner = [
    ...node.children.map((child) => treeNode(child, context)),
    ...node.forks.map((fork) => forkGroup(fork, context)),
  ];
  return html`<li>
    ${nodeCard(node, context)}${
      inner.length > 0
        ? html`<ul>
            ${inner}
          </ul>`
        : ''
    }
  </li>`;
}

function forkGroup(fork: ExplorerFork, context: PageContext): Html {
  const t0 = new Date(fork.createdAt).getTime();
  const ends = fork.tasks.map((task) => new Date(task.finishedAt ?? task.reclaimedAt ?? context.now).getTime());
  const t1 = Math.max(
    new Date(fork.deadlineAt).getTime(),
    fork.finishedAt ? new Date(fork.finishedAt).getTime() : 0,
    ...ends,
    t0 + 1,
  );
  const pct = (ms: number) => (((ms - t0) / (t1 - t0)) * 100).toFixed(2);
  const deadline = new Date(fork.deadlineAt).getTime();
  return html`<li class="fork-item">
    <div class="fork" data-fork="${fork.number}">
      <div class="fork-head">
        <strong>fork ${fork.number}</strong> ${status(fork.status)} · ${fork.tasks.length}
        task${fork.tasks.length === 1 ? '' : 's'} · store
        ${fork.store}${fork.store === 'isolated' ? html` (merged under <code>${fork.prefix}/</code>)` : ''} · deadline
        ${fork.deadlineSeconds} s (${time(fork.deadlineAt)}) · at most ${fork.maxParallel} at
        once${fork.failFast ? ' · fail fast' : ''}
      </div>
      <div class="timeline" aria-label="fork ${fork.number} timeline">
        ${fork.tasks.map((task, index) => {
          const start = new Date(task.startedAt ?? fork.createdAt).getTime();
          const end = ends[index] ?? start;
          return html`<div class="lane">
            <span class="lane-label">task ${task.taskIndex} · ${task.agent}</span>
            <div class="lane-track">
              <div
                class="deadline"
                style="left:${pct(deadline)}%"
                title="deadline ${new Date(fork.deadlineAt).toISOString()}"
              ></div>
              <div
                class="bar bar-${task.status.replace(/[^a-z]/g, '')}"
                style="left:${pct(start)}%;width:${Math.max(0.5, Number(pct(end)) - Number(pct(start))).toFixed(2)}%"
                title="${task.status}: ${new Date(start).toISOString()} → ${new Date(end).toISOString()}"
              ></div>
              ${task.reclaimedAt ? html`<div class="reclaimed" style="left:${pct(new Date(task.reclaimedAt).getTime())}%" title="reclaimed ${new Date(task.reclaimedAt).toISOString()}"></div>` : ''}
            </div>
          </div>`;
        })}
      </div>
      <table class="fork-tasks">
        <thead>
          <tr>
            <th>task</th>
            <th>agent</th>
            <th>status</th>
            <th>started</th>
            <th>finished</th>
            <th>reclaimed</th>
            <th>thread</th>
            <th>workflow</th>
          </tr>
        </thead>
        <tbody>
          ${fork.tasks.map((task) => {
            const link = workflowUrl(context, task.workflowId);
            return html`<tr data-task="${task.taskIndex}">
              <td>${task.taskIndex}</td>
              <td>${task.agent}</td>
              <td>${status(task.status)}${task.error ? html`<div class="error-text">${task.error}</div>` : ''}</td>
              <td>${time(task.startedAt)}</td>
              <td>${time(task.finishedAt)}</td>
              <td>${time(task.reclaimedAt)}</td>
              <td><a href="${threadPath(task.threadId, '/transcript')}">${task.threadId}</a></td>
              <td>
                ${link ? html`<a class="webui" href="${link}" target="_blank" rel="noopener">${task.workflowId}</a>` : task.workflowId}
              </td>
            </tr>`;
          })}
        </tbody>
      </table>
      ${
        fork.tasks.some((task) => task.node)
          ? html`<ul>
              ${fork.tasks.flatMap((task) => (task.node ? [treeNode(task.node, context)] : []))}
            </ul>`
          : ''
      }
    </div>
  </li>`;
}

/** The open questions, each with its answer box, then the answered, expired and cancelled ones with how they ended. */
function questionSection(root: string, questions: readonly QuestionRow[]): Html {
  const closed = questions.filter((q) => q.status !== 'open');
  return html`${questionForms(
    root,
    questions.filter((q) => q.status === 'open'),
  )}${
    closed.length === 0
      ? ''
      : html`<details class="question-history">
          <summary>${closed.length} answered, expired or cancelled</summary>
          <table class="questions">
            <thead>
              <tr>
                <th>question</th>
                <th>agent</th>
                <th>asked</th>
                <th>outcome</th>
                <th>answer or reason</th>
                <th>closed</th>
              </tr>
            </thead>
            <tbody>
              ${closed.map(
                (q) =>
                  html`<tr data-question="${q.questionId}">
                    <td>
                      <a href="${threadPath(q.threadId, '/transcript')}">${q.questionId}</a>: ${oneLine(q.question, 80)}
                    </td>
                    <td>${q.agent}</td>
                    <td>${dateTime(q.createdAt)}</td>
                    <td>${status(q.status)}</td>
                    <td>${q.answer ?? q.reason ?? ''}</td>
                    <td>${dateTime(q.closedAt)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </details>`
  }`;
}

function questionForms(root: string, questions: readonly QuestionRow[]): Html {
  if (questions.length === 0) return html`<p class="muted" id="no-questions">No question is waiting for a human.</p>`;
  return html`${questions.map(
    (q) =>
      html`<form
        class="question"
        method="post"
        action="${threadPath(root, `/questions/${seg(q.questionId)}/answer`)}"
        data-question="${q.questionId}"
      >
        <div>
          <strong>${q.questionId}</strong> from <strong>${q.agent}</strong> (<a
            href="${threadPath(q.threadId, '/transcript')}"
            >${q.threadId}</a
          >) asked ${dateTime(q.createdAt)}${q.expiresAt ? html`, expires ${dateTime(q.expiresAt)}` : ''}:
        </div>
        <blockquote>${q.question}</blockquote>
        <label>Answer <textarea name="answer" rows="2" required></textarea></label>
        <button type="submit">Send answer</button>
      </form>`,
  )}`;
}

/**
 * What the explorer adds to the name a person gives when deciding (`alice (in the explorer)`): the name is theirs to
 * claim, the way the decision came (a request with the explorer's token) is the explorer's to record.
 */
export const EXPLORER_CHANNEL = ' (in the explorer)';
/** The longest name a person may give, so that it and `EXPLORER_CHANNEL` fit in a decision's `decidedBy`. */
export const MAX_EXPLORER_NAME_CHARS = MAX_DECIDED_BY_CHARS - EXPLORER_CHANNEL.length;

/** Where a decision form sends the person back to: the tree, or the transcript holding the call. */
export type DecisionOrigin = 'tree' | 'transcript';

/**
 * Approve and Reject for one pending approval. Pressing Enter in a field submits nothing (the form's default button
 * is a disabled one): a decision takes a click on the button that names it.
 */
function decisionForm(root: string, approval: ApprovalRow, from: DecisionOrigin): Html {
  const action = (decision: string) => threadPath(root, `/approvals/${seg(approval.approvalId)}/${decision}`);
  return html`<form class="decide" method="post" action="${action('approve')}" data-approval="${approval.approvalId}">
    <button type="submit" class="implicit" disabled hidden aria-hidden="true"></button>
    <input type="hidden" name="from" value="${from}" />
    <label class="reason"
      >Reason
      <input
        type="text"
        name="reason"
        maxlength="${MAX_APPROVAL_REASON_CHARS}"
        placeholder="why, told to the agent when you reject"
    /></label>
    <label class="by"
      >as
      <input type="text" name="by" maxlength="${MAX_EXPLORER_NAME_CHARS}" placeholder="your name" autocomplete="name"
    /></label>
    <button type="submit" class="approve">Approve</button>
    <button type="submit" class="reject" formaction="${action('reject')}">Reject</button>
  </form>`;
}

function approvalTiming(approval: ApprovalRow, now: Date): Html {
  return html`requested ${dateTime(approval.createdAt)}
  (${relative(approval.createdAt, now)})${
    approval.expiresAt
      ? html`, rejected unless decided by ${dateTime(approval.expiresAt)} (${relative(approval.expiresAt, now)})`
      : ''
  }`;
}

/** How a closed approval ended, in a few words: `approved by alice`, `rejected by bob: too risky`, `expired`. */
export function outcomeText(approval: ApprovalRow): string {
  const by = approval.decidedBy ?? 'a person';
  switch (approval.status) {
    case 'pending':
      return 'waiting for a decision';
    case 'approved':
      return `approved by ${by}`;
    case 'rejected':
      return `rejected by ${by}${approval.reason ? `: ${approval.reason}` : ''}`;
    case 'expired':
      return 'expired: nobody decided in time, so it did not run';
    case 'cancelled':
      return `cancelled${approval.reason ? ` (${approval.reason})` : ''}`;
  }
}

function callPath(approval: ApprovalRow): string {
  return threadPath(approval.threadId, `/transcript#m${approval.messageSeq}`);
}

function pendingApproval(root: string, approval: ApprovalRow, now: Date): Html {
  return html`<div class="approval" data-approval="${approval.approvalId}" data-thread="${approval.threadId}">
    <div>
      <strong>${approval.approvalId}</strong>: <strong>${approval.agent}</strong> (<a href="${callPath(approval)}"
        >${approval.threadId}</a
      >) wants to call <code class="tool">${approval.tool}</code>, ${approvalTiming(approval, now)}:
    </div>
    <pre class="arguments">${prettyJson(approval.arguments) ?? approval.arguments}</pre>
    ${decisionForm(root, approval, 'tree')}
  </div>`;
}

function approvalSection(root: string, approvals: readonly ApprovalRow[], now: Date): Html {
  const pending = approvals.filter((approval) => approval.status === 'pending');
  const closed = approvals.filter((approval) => approval.status !== 'pending');
  return html`<section id="approvals">
    <h2>Approvals waiting</h2>
    ${
      pending.length === 0
        ? html`<p class="muted" id="no-approvals">No tool call is waiting for approval.</p>`
        : pending.map((approval) => pendingApproval(root, approval, now))
    }
    ${
      closed.length === 0
        ? ''
        : html`<details class="approval-history">
            <summary>${closed.length} decided, expired or cancelled</summary>
            <table class="approvals">
              <thead>
                <tr>
                  <th>approval</th>
                  <th>agent</th>
                  <th>tool</th>
                  <th>arguments</th>
                  <th>outcome</th>
                  <th>by</th>
                  <th>reason</th>
                  <th>requested</th>
                  <th>closed</th>
                </tr>
              </thead>
              <tbody>
                ${closed.map(
                  (approval) =>
                    html`<tr data-approval="${approval.approvalId}">
                      <td><a href="${callPath(approval)}">${approval.approvalId}</a></td>
                      <td>${approval.agent}</td>
                      <td><code>${approval.tool}</code></td>
                      <td><code>${oneLine(approval.arguments, 80)}</code></td>
                      <td>${status(approval.status)}</td>
                      <td>${approval.decidedBy ?? ''}</td>
                      <td>${approval.reason ?? ''}</td>
                      <td>${dateTime(approval.createdAt)}</td>
                      <td>${dateTime(approval.decidedAt)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </details>`
    }
  </section>`;
}

// ---------------------------------------------------------------------------------------------------------------
// Watchers

/** `watcher reviewer, wake-up 2` (and its chain depth when a watcher's write woke it). */
export function wakeupLabel(wakeup: Pick<ThreadWakeup, 'watcher' | 'number' | 'depth'>): string {
  return `watcher ${wakeup.watcher}, wake-up ${wakeup.number}${wakeup.depth > 1 ? ` (depth ${wakeup.depth})` : ''}`;
}

/** A key's versions across a change: `v0→1` for a new key, `v1→2`, `v2→deleted`. */
export function versionChange(change: { oldVersion: number | null; newVersion: number | null }): string {
  return `v${change.oldVersion ?? 0}→${change.newVersion ?? 'deleted'}`;
}

/** What a watcher does now: active; paused until when and why; removed or stopped, and why. */
function watcherState(watcher: ExplorerWatcher, now: Date): Html {
  const reason = watcher.reason ? html`: ${watcher.reason}` : '';
  if (watcher.status === 'paused') {
    const until = watcher.pausedUntil
      ? html` until ${dateTime(new Date(watcher.pausedUntil))} (${relative(new Date(watcher.pausedUntil), now)})`
      : '';
    return html`${status('paused')}${until}${reason}`;
  }
  return html`${status(watcher.status)}${watcher.status === 'active' ? '' : reason}`;
}

function wakeupRow(wakeup: WakeupRow): Html {
  return html`<tr data-wakeup="${wakeup.wakeup}">
    <td class="num">${wakeup.wakeup}</td>
    <td><a href="${threadPath(wakeup.threadId, '/transcript')}">${wakeup.threadId}</a></td>
    <td class="num">${wakeup.depth}</td>
    <td>
      ${status(wakeup.status)}${wakeup.error ? html`<div class="error-text">${oneLine(wakeup.error, 300)}</div>` : ''}
    </td>
    <td>${dateTime(new Date(wakeup.startedAt))}</td>
    <td>
      ${
        wakeup.changes.length === 0
          ? html`<span class="muted">—</span>`
          : html`<ul class="changes">
              ${wakeup.changes.map(
                (change) =>
                  html`<li>
                    <code>${change.key}</code> ${versionChange(change)} by ${change.writer.agent} (<a
                      href="${threadPath(change.writer.thread, '/transcript')}"
                      >${change.writer.thread}</a
                    >)
                  </li>`,
              )}
            </ul>`
      }
    </td>
  </tr>`;
}

/** `declared in auditor's frontmatter`, `added at run time by cli`. */
function watcherOrigin(watcher: ExplorerWatcher): string {
  if (watcher.origin === 'run_time') return `added at run time by ${watcher.createdBy}`;
  const declared = `declared in ${watcher.agent}'s frontmatter`;
  return watcher.createdBy === `frontmatter of ${watcher.agent}` ? declared : `${declared} (${watcher.createdBy})`;
}

function watcherCard(watcher: ExplorerWatcher, now: Date): Html {
  const shown = watcher.recentWakeups.length;
  return html`<div class="watcher" id="watcher-${watcher.name}" data-watcher="${watcher.name}">
    <div class="watcher-head">
      <strong>${watcher.name}</strong> · agent <strong>${watcher.agent}</strong> · ${watcherState(watcher, now)}
    </div>
    <div class="node-meta">
      keys ${watcher.keys.map((key, index) => html`${index > 0 ? ', ' : ''}<code>${key}</code>`)} ·
      ${watcherOrigin(watcher)} · since
      ${dateTime(new Date(watcher.createdAt))}${watcher.debounceS === undefined ? '' : ` · debounce ${watcher.debounceS} s`}
      · ${watcher.wakeups}
      wake-up${watcher.wakeups === 1 ? '' : 's'}${
        watcher.lastWokeAt ? html` · last woke ${dateTime(new Date(watcher.lastWokeAt))}` : ''
      }
    </div>
    ${
      watcher.message
        ? html`<details class="watch-message">
            <summary>instruction</summary>
            <pre>${watcher.message}</pre>
          </details>`
        : ''
    }
    ${
      shown === 0
        ? ''
        : html`<table class="wakeups">
            <caption>
              ${shown < watcher.wakeups ? `latest ${shown} of ${watcher.wakeups} wake-ups` : 'wake-ups'}, newest first
            </caption>
            <thead>
              <tr>
                <th class="num">#</th>
                <th>thread</th>
                <th class="num">depth</th>
                <th>status</th>
                <th>woke</th>
                <th>changes</th>
              </tr>
            </thead>
            <tbody>
              ${watcher.recentWakeups.map(wakeupRow)}
            </tbody>
          </table>`
    }
  </div>`;
}

/** The root's watchers and their latest wake-ups; nothing when it has none. */
function watcherSection(watchers: readonly ExplorerWatcher[], now: Date): Html {
  if (watchers.length === 0) return html``;
  return html`<section id="watchers">
    <h2>Watchers</h2>
    ${watchers.map((watcher) => watcherCard(watcher, now))}
  </section>`;
}

export function overviewPage(overview: ThreadOverview, context: PageContext): Html {
  const root = overview.thread.threadId;
  const link = workflowUrl(context, overview.tree.workflowId);
  const listLink = context.uiUrl
    ? `${context.uiUrl.replace(/\/+$/, '')}/namespaces/${seg(context.namespace)}/workflows?query=${encodeURIComponent(`BatonRootThreadId="${root}"`)}`
    : undefined;
  const traces = traceUrl(context, root);
  const signature = overviewSignature(overview);
  const body = html`<h1 id="title">${root} <small>${overview.tree.agent} · ${status(overview.tree.status)}</small></h1>
    <p class="links">
      <a href="${threadPath(root, '/transcript')}">transcript</a> ·
      <a href="${threadPath(root, '/env')}">environment data</a>${
        link
          ? html` · <a class="webui" href="${link}" target="_blank" rel="noopener">thread workflow in the Web UI</a>`
          : ''
      }${listLink ? html` · <a class="webui" href="${listLink}" target="_blank" rel="noopener">every workflow of this thread</a>` : ''}${
        traces ? html` · <a class="traces" href="${traces}" target="_blank" rel="noopener">traces</a>` : ''
      }
      · <a href="/api/threads/${seg(root)}">JSON</a>
    </p>
    <p class="muted" id="usage">
      ${overview.usage.modelCalls} model calls · ${overview.usage.totalTokens} tokens
      ${tokensByProvider(overview.usage.byProvider)}${costOf(overview.usage.costUsd)} in the whole tree · world
      ${overview.tree.world}${overview.usage.budget ? html` · budget ${formatBudget(overview.usage.budget)}` : ''}
    </p>
    ${liveLine(context)}
    <section id="questions">
      <h2>Waiting for a human</h2>
      ${questionSection(root, overview.questions)}
    </section>
    ${approvalSection(root, overview.approvals, context.now)} ${watcherSection(overview.watchers, context.now)}
    <section id="tree">
      <h2>Delegation tree</h2>
      <ul class="tree">
        ${treeNode(overview.tree, context)}
      </ul>
    </section>`;
  return layout(root, body, {
    crumbs: crumbs(overview.thread),
    bodyData: html` data-poll="/api/threads/${seg(root)}" data-signature="${signature}"${liveData(root, context)}`,
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Transcript

const PREAMBLE_START = '---\n[Delegation Context]';

/** The delegation preamble of a received message and the caller's own words, when it has one. */
export function splitPreamble(content: string): { preamble?: string; message: string } {
  if (!content.startsWith(PREAMBLE_START)) return { message: content };
  const end = content.indexOf('\n---\n', PREAMBLE_START.length);
  if (end < 0) return { message: content };
  return { preamble: content.slice(0, end + 4), message: content.slice(end + 5).replace(/^\n/, '') };
}

function jsonBlock(summary: Html | string, pretty: string, open = false): Html {
  return html`<details class="json" ${open ? html` open` : ''}>
    <summary>${summary}</summary>
    <pre>${pretty}</pre>
  </details>`;
}

/** The approval of a call, for the transcript: Approve and Reject while it waits, else how it ended. */
function callApproval(root: string, approval: ApprovalRow, now: Date): Html {
  if (approval.status === 'pending') {
    return html`<div class="approval approval-pending" data-approval="${approval.approvalId}">
      <div class="approval-head">
        ${status('pending')} <strong>${approval.approvalId}</strong>: this call waits for a person's approval,
        ${approvalTiming(approval, now)}
      </div>
      ${decisionForm(root, approval, 'transcript')}
    </div>`;
  }
  return html`<div class="approval-note" data-approval="${approval.approvalId}">
    ${status(approval.status)} <strong>${approval.approvalId}</strong>:
    ${outcomeText(approval)}${approval.decidedAt ? html` · ${dateTime(approval.decidedAt)}` : ''}
  </div>`;
}

/** Approvals of a thread's calls, by `<message seq>:<tool call id>`. */
function approvalsByCall(approvals: readonly ApprovalRow[]): Map<string, ApprovalRow[]> {
  const byCall = new Map<string, ApprovalRow[]>();
  for (const approval of approvals) {
    const key = `${approval.messageSeq}:${approval.toolCallId}`;
    byCall.set(key, [...(byCall.get(key) ?? []), approval]);
  }
  return byCall;
}

interface TranscriptContext {
  root: string;
  toolNames: ReadonlyMap<string, string>;
  approvals: ReadonlyMap<string, ApprovalRow[]>;
  now: Date;
}

function messageBody(message: TranscriptMessage, transcript: TranscriptContext): Html {
  const { toolNames } = transcript;
  const content = message.content ?? '';
  if (message.role === 'tool') {
    const name = message.toolCallId ? (toolNames.get(message.toolCallId) ?? 'tool') : 'tool';
    const failed = /^\s*Error\b/.test(content);
    const pretty = prettyJson(content);
    return html`<div class="tool-result${failed ? ' error' : ''}">
      <span class="arrow">←</span> <strong>${name}</strong>${
        pretty
          ? jsonBlock(html`result (${content.length} characters of JSON)`, pretty)
          : html`<pre class="content">${content}</pre>`
      }
    </div>`;
  }
  const { preamble, message: text } = message.role === 'user' ? splitPreamble(content) : { message: content };
  return html`${
    preamble
      ? html`<details class="preamble" open>
          <summary>delegation preamble</summary>
          <pre>${preamble}</pre>
        </details>`
      : ''
  }${text ? html`<pre class="content">${text}</pre>` : ''}${(message.toolCalls ?? []).map((call) => {
    const pretty = prettyJson(call.arguments) ?? call.arguments;
    const approvals = transcript.approvals.get(`${message.seq}:${call.id}`) ?? [];
    // A call waiting for a decision shows what it would run.
    const waiting = approvals.some((approval) => approval.status === 'pending');
    return html`<div class="tool-call" data-call="${call.id}">
      <span class="arrow">→</span> <strong>${call.name}</strong> <code class="muted">${call.id}</code>${jsonBlock(
        html`<code>${oneLine(call.arguments, 120)}</code>`,
        pretty,
        waiting,
      )}${approvals.map((approval) => callApproval(transcript.root, approval, transcript.now))}
    </div>`;
  })}`;
}

/** ` · via local/llama3.1` on a reply whose provider was recorded (the default endpoint's too). */
function answeredBy(message: TranscriptMessage): Html | '' {
  if (!message.provider) return '';
  const model = message.model ? `/${message.model}` : '';
  return html` <span class="muted provider">· via ${message.provider}${model}</span>`;
}

export function transcriptPage(
  thread: ThreadRow,
  messages: readonly TranscriptMessage[],
  approvals: readonly ApprovalRow[],
  context: PageContext,
  /** Set when the thread is a watcher's wake-up: it says so instead of naming a caller. */
  wakeup?: ThreadWakeup,
): Html {
  const toolNames = new Map<string, string>();
  for (const message of messages) for (const call of message.toolCalls ?? []) toolNames.set(call.id, call.name);
  const transcript: TranscriptContext = {
    root: thread.rootThreadId,
    toolNames,
    approvals: approvalsByCall(approvals),
    now: context.now,
  };
  const body = html`<h1 id="title">
      Transcript of ${thread.threadId} <small>${thread.agent} · ${status(thread.status)}</small>
    </h1>
    <p class="links">
      ${
        wakeup
          ? html`<span class="badge badge-watcher">${wakeupLabel(wakeup)}</span> of
              <a href="${threadPath(thread.rootThreadId, `#watcher-${wakeup.watcher}`)}">${thread.rootThreadId}</a> · `
          : thread.parentThreadId
            ? html`called by ${thread.caller ?? '?'} from
                <a href="${threadPath(thread.parentThreadId, '/transcript')}">${thread.parentThreadId}</a> · `
            : ''
      }<a href="${threadPath(thread.rootThreadId)}">tree</a> ·
      <a href="/api/threads/${seg(thread.threadId)}/transcript">JSON</a>
    </p>
    ${liveLine(context)}
    <p class="muted" id="transcript-empty" ${messages.length > 0 ? html` hidden` : ''}>No messages yet.</p>
    <ol class="transcript" id="transcript">
      ${messages.map(
        (message) =>
          html`<li class="msg role-${message.role}" id="m${message.seq}" data-seq="${message.seq}">
            <div class="msg-head">
              <a href="#m${message.seq}">[${message.seq}]</a> <strong>${message.role}</strong> (${message.agent})
              ${time(message.createdAt)}${
                message.usage ? html` <span class="muted">· ${message.usage.totalTokens} tokens</span>` : ''
              }${answeredBy(message)}
            </div>
            ${messageBody(message, transcript)}
          </li>`,
      )}
    </ol>`;
  return layout(`Transcript of ${thread.threadId}`, body, {
    crumbs: crumbs(thread, 'transcript'),
    bodyData: liveData(thread.rootThreadId, context, thread.threadId),
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Env data

function actor(by: { agent: string; thread: string; task: string | null }): Html {
  return html`${by.agent} (<a href="${threadPath(by.thread, '/transcript')}">${by.thread}</a
    >)${by.task ? html` <span class="badge">${by.task}</span>` : ''}`;
}

export function entryRow(root: string, entry: ScopedEnvEntry, withValue: boolean): Html {
  return html`<tr data-key="${entry.key}">
    <td><code>${entry.key}</code></td>
    <td class="num" data-field="version">${entry.version}</td>
    <td data-field="by">${actor(entry.storedBy)}</td>
    <td data-field="updated">${time(entry.updatedAt)}</td>
    <td data-field="description">${entry.shortDescription}</td>
    <td>
      ${
        withValue
          ? jsonBlock('value', compactJson(entry.value))
          : html`<details
              class="value"
              data-src="/api/threads/${seg(root)}/env/value?key=${encodeURIComponent(entry.key)}"
            >
              <summary>value</summary>
              <pre>loading…</pre>
            </details>`
      }
    </td>
  </tr>`;
}

export interface EnvPageData {
  thread: ThreadRow;
  entries: ScopedEnvEntry[];
  log: EnvLogEvent[];
  proposals: EnvProposal[];
  /** The last event's sequence number (0 without events). */
  lastSeq: number;
  /** Set when the page shows the state as of this event. */
  asOf?: number | undefined;
}

export function envPage(data: EnvPageData, context: PageContext): Html {
  const root = data.thread.threadId;
  const seqs = data.log.map((event) => event.seq);
  const asOf = data.asOf;
  const previous = asOf === undefined ? seqs.at(-1) : [...seqs].reverse().find((s) => s < asOf);
  const next = asOf === undefined ? undefined : seqs.find((s) => s > asOf);
  const body = html`<h1>Environment data of ${root}</h1>
    <p class="links">
      <a href="${threadPath(root)}">tree</a> ·
      <a href="/api/threads/${seg(root)}/env${asOf === undefined ? '' : `?asOf=${asOf}`}">JSON</a> ·
      <a href="/api/threads/${seg(root)}/env/events">events JSON</a>
    </p>
    <form class="asof" method="get" action="${threadPath(root, '/env')}">
      <label
        >State as of event #
        <input type="number" name="asOf" min="0" max="${data.lastSeq}" value="${asOf ?? data.lastSeq}"
      /></label>
      <button type="submit">Show</button>
      ${previous !== undefined ? html`<a href="${threadPath(root, `/env?asOf=${previous}`)}" rel="prev">◀ #${previous}</a>` : ''}
      ${next !== undefined ? html`<a href="${threadPath(root, `/env?asOf=${next}`)}" rel="next">#${next} ▶</a>` : ''}
      ${asOf !== undefined ? html`<a href="${threadPath(root, '/env')}">live</a>` : ''}
    </form>
    ${
      asOf === undefined
        ? html`<p
            class="live"
            id="live-status"
            data-stream="/api/threads/${seg(root)}/env/stream?since=${data.lastSeq}"
          >
            Live: changes appear as they commit.
          </p>`
        : html`<p class="asof-banner" id="asof-banner">
            State as of event #${asOf} (the log's last is #${data.lastSeq}), rebuilt from the event log.
            <a href="${threadPath(root, '/env')}">Back to live</a>
          </p>`
    }
    <section>
      <h2>Manifest <small>(root scope)</small></h2>
      <table class="manifest" id="manifest">
        <thead>
          <tr>
            <th>key</th>
            <th class="num">version</th>
            <th>stored by</th>
            <th>updated</th>
            <th>description</th>
            <th>value</th>
          </tr>
        </thead>
        <tbody>
          ${data.entries.map((entry) => entryRow(root, entry, asOf !== undefined))}
        </tbody>
      </table>
      <p class="muted" id="manifest-empty" ${data.entries.length > 0 ? html` hidden` : ''}>
        No entries${asOf === undefined ? '' : ' at that point'}.
      </p>
    </section>
    <section>
      <h2>Proposals waiting</h2>
      ${
        data.proposals.length === 0
          ? html`<p class="muted">No pending proposal.</p>`
          : html`<table class="proposals">
              <thead>
                <tr>
                  <th>proposal</th>
                  <th>key</th>
                  <th>scope</th>
                  <th>base version</th>
                  <th>proposed by</th>
                  <th>at</th>
                  <th>change</th>
                </tr>
              </thead>
              <tbody>
                ${data.proposals.map(
                  (p) =>
                    html`<tr data-proposal="${p.proposalId}">
                      <td>${p.proposalId}</td>
                      <td><code>${p.key}</code></td>
                      <td>${p.scope || '(root)'}</td>
                      <td class="num">${p.baseVersion ?? '—'}</td>
                      <td>${actor(p.proposedBy)}</td>
                      <td>${time(p.createdAt)}</td>
                      <td>
                        ${jsonBlock(p.patch !== null && p.patch !== undefined ? 'patch' : 'value', compactJson(p.patch ?? p.value))}${p.shortDescription ? html`<div class="muted">${p.shortDescription}</div>` : ''}
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>`
      }
    </section>
    <section>
      <h2>Event log</h2>
      <table class="events" id="events">
        <thead>
          <tr>
            <th class="num">#</th>
            <th>time</th>
            <th>action</th>
            <th>key</th>
            <th>scope</th>
            <th class="num">version</th>
            <th>by</th>
            <th class="num">size</th>
            <th>reason</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          ${data.log.map((event) => eventRow(root, event, asOf))}
        </tbody>
      </table>
    </section>`;
  void context;
  return layout(`Environment data of ${root}`, body, { crumbs: crumbs(data.thread, 'environment data') });
}

function eventRow(root: string, event: EnvLogEvent, asOf: number | undefined): Html {
  const later = asOf !== undefined && event.seq > asOf;
  return html`<tr data-seq="${event.seq}" class="action-${event.action}${later ? ' later' : ''}">
    <td class="num">${event.seq}</td>
    <td>${time(event.createdAt)}</td>
    <td>${event.action}</td>
    <td><code>${event.key}</code></td>
    <td>${event.scope || '(root)'}</td>
    <td class="num">${event.version ?? ''}</td>
    <td>${actor(event.actor)}</td>
    <td class="num">${event.valueSize ?? ''}</td>
    <td class="${event.action === 'rejected' ? 'error-text' : 'muted'}">${event.reason ?? ''}</td>
    <td><a href="${threadPath(root, `/env?asOf=${event.seq}`)}">as of</a></td>
  </tr>`;
}
