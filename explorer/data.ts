/**
 * What the explorer's pages and `/api/` show, read through the client SDK and the read-only queries of
 * `db/explorer.ts`. Every view is plain JSON-able data; the pages render it and the API returns it as it is.
 */
import type { BatonClient, QuestionRow, ThreadUsage, TranscriptMessage, TreeNode } from '../client';
import { threadWorkflowId } from '../common/ids';
import type { Watcher } from '../common/watchers';
import { findApproval, listApprovals, type ApprovalRow } from '../db/approvals';
import {
  findThreadWakeup,
  getRootScopeEntry,
  listDelegations,
  listEnvLog,
  listPendingProposals,
  listRootScopeEntries,
  listRootThreads,
  listThreadDetails,
  rootScopeAsOf,
  type DelegationRecord,
  type EnvLogEvent,
  type EnvProposal,
  type RootThreadSummary,
  type ScopedEnvEntry,
  type ThreadWakeup,
} from '../db/explorer';
import { listForks, type ForkRow, type ForkTaskRow } from '../db/forks';
import { findThread, type ThreadRow } from '../db/threads';
import { findExperiment, listExperiments, type EvalCaseRow, type ExperimentRow } from '../db/evals';
import { listWakeups, listWatchers, type WakeupRow } from '../db/watchers';

export type { ApprovalRow, EnvLogEvent, EnvProposal, RootThreadSummary, ScopedEnvEntry, ThreadWakeup, WakeupRow };

/** Most wake-ups of one watcher the explorer shows (its `wakeups` counts them all). */
export const WAKEUPS_SHOWN = 20;

/** A watcher of a root with its latest wake-ups, newest first (at most `WAKEUPS_SHOWN`). */
export interface ExplorerWatcher extends Watcher {
  recentWakeups: WakeupRow[];
}

/** A thread of the tree with what the explorer adds to `TreeNode`. */
export interface ExplorerNode extends Omit<TreeNode, 'children'> {
  /**
   * The workflow to open in the Temporal Web UI: the root's thread workflow, the latest delegation's turn, or a
   * watcher's wake-up's turn.
   */
  workflowId: string;
  startedAt: Date | null;
  forkTask: string | null;
  world: string;
  epoch: number;
  /** The watcher whose wake-up this thread runs under (threads below a wake-up inherit it), or `null`. */
  watcher: string | null;
  /** Set on a wake-up's own thread (`<root>/watch.<name>.<n>`): which wake-up of which watcher it runs. */
  wakeup: ThreadWakeup | null;
  /** Each delegation to this thread, oldest first, with the message (preamble included) it received. */
  delegations: Omit<DelegationRecord, 'threadId' | 'parentThreadId'>[];
  /** Children started by plain delegation. */
  children: ExplorerNode[];
  /** `fork_join` calls this thread made, each task with the subtree it ran. */
  forks: ExplorerFork[];
}

export interface ExplorerFork extends Omit<ForkRow, 'tasks'> {
  tasks: (ForkTaskRow & { node: ExplorerNode | undefined })[];
}

export interface ThreadOverview {
  thread: ThreadRow;
  tree: ExplorerNode;
  /** Every question of the tree, open and closed, oldest first. */
  questions: QuestionRow[];
  /** Every approval of the tree, pending and decided, oldest first. */
  approvals: ApprovalRow[];
  /** The root's watchers by name (removed and stopped ones too), each with its latest wake-ups. */
  watchers: ExplorerWatcher[];
  usage: Pick<ThreadUsage, 'totalTokens' | 'modelCalls' | 'byProvider' | 'costUsd' | 'budget'>;
}

/** The explorer's reads, over one connected client (which must have a database URL). */
export class ExplorerData {
  constructor(private readonly client: BatonClient) {}

  private get db() {
    return this.client.database();
  }

  rootThreads(search?: string): Promise<RootThreadSummary[]> {
    return listRootThreads(this.db, search ? { search } : {});
  }

  /** The newest experiments (docs/guides/evals.md). */
  experiments(): Promise<ExperimentRow[]> {
    return listExperiments(this.db);
  }

  /** One experiment and its cases, or `undefined`. */
  experiment(experimentId: string): Promise<{ experiment: ExperimentRow; cases: EvalCaseRow[] } | undefined> {
    return findExperiment(this.db, experimentId);
  }

  /** A stored thread, or `undefined`. */
  thread(threadId: string): Promise<ThreadRow | undefined> {
    return findThread(this.db, threadId);
  }

  /**
   * A root thread's tree (forks grouped under their caller), its questions and approvals (all), its watchers with
   * their latest wake-ups, and usage.
   */
  async overview(root: ThreadRow): Promise<ThreadOverview> {
    const handle = this.client.thread(root.threadId);
    const [plainTree, details, delegations, forks, questions, approvals, watchers, usage] = await Promise.all([
      handle.tree(),
      listThreadDetails(this.db, root.threadId),
      listDelegations(this.db, root.threadId),
      listForks(this.db, root.threadId),
      handle.questions({ all: true }),
      handle.approvals({ all: true }),
      this.watchers(root.threadId),
      handle.usage(),
    ]);
    const detailsOf = new Map(details.map((d) => [d.threadId, d]));
    const taskThreads = new Set(forks.flatMap((fork) => fork.tasks.map((task) => task.threadId)));
    const nodes = new Map<string, ExplorerNode>();
    const build = (node: TreeNode): ExplorerNode => {
      const mine = delegations.filter((d) => d.threadId === node.threadId);
      const detail = detailsOf.get(node.threadId);
      const built: ExplorerNode = {
        ...node,
        workflowId:
          node.threadId === root.threadId
            ? threadWorkflowId(root.threadId)
            : (mine.at(-1)?.workflowId ?? forkWorkflowId(forks, node.threadId) ?? detail?.wakeup?.workflowId ?? ''),
        startedAt: detail?.startedAt ?? null,
        forkTask: detail?.forkTask ?? null,
        world: detail?.world ?? 'default',
        epoch: detail?.epoch ?? 0,
        watcher: detail?.watcher ?? null,
        wakeup: detail?.wakeup ?? null,
        delegations: mine.map(({ threadId: _t, parentThreadId: _p, ...rest }) => rest),
        children: [],
        forks: [],
      };
      nodes.set(node.threadId, built);
      built.children = node.children.filter((child) => !taskThreads.has(child.threadId)).map(build);
      // Fork task threads are drawn inside their fork, not as plain children.
      for (const child of node.children.filter((c) => taskThreads.has(c.threadId))) build(child);
      return built;
    };
    const tree = build(plainTree);
    for (const fork of forks) {
      const parent = nodes.get(fork.parentThreadId);
      if (!parent) continue;
      parent.forks.push({ ...fork, tasks: fork.tasks.map((task) => ({ ...task, node: nodes.get(task.threadId) })) });
    }
    return {
      thread: root,
      tree,
      questions,
      approvals,
      watchers,
      usage: {
        totalTokens: usage.totalTokens,
        modelCalls: usage.modelCalls,
        byProvider: usage.byProvider,
        ...(usage.costUsd === undefined ? {} : { costUsd: usage.costUsd }),
        ...(usage.budget === undefined ? {} : { budget: usage.budget }),
      },
    };
  }

  /** A root's watchers by name (removed and stopped ones too), each with its latest wake-ups, newest first. */
  async watchers(rootThreadId: string): Promise<ExplorerWatcher[]> {
    const watchers = await listWatchers(this.db, rootThreadId);
    return Promise.all(
      watchers.map(async (watcher) => ({
        ...watcher,
        recentWakeups:
          watcher.wakeups === 0
            ? []
            : await listWakeups(this.db, rootThreadId, { watcher: watcher.name, limit: WAKEUPS_SHOWN }),
      })),
    );
  }

  /** The wake-up a thread was opened for, or `undefined` (not a wake-up's own thread). */
  wakeupOf(threadId: string): Promise<ThreadWakeup | undefined> {
    return findThreadWakeup(this.db, threadId);
  }

  /** The highest number of a root's run feed so far: a page read after it follows the feed from there. */
  lastEventSeq(rootThreadId: string): Promise<number> {
    return this.client.thread(rootThreadId).lastEventSeq();
  }

  transcript(threadId: string): Promise<TranscriptMessage[]> {
    return this.client.thread(threadId).transcript();
  }

  questions(rootThreadId: string): Promise<QuestionRow[]> {
    return this.client.thread(rootThreadId).questions();
  }

  /** The approvals of a root's whole tree, oldest first: pending ones, or all with `all`. */
  approvals(rootThreadId: string, all: boolean): Promise<ApprovalRow[]> {
    return this.client.thread(rootThreadId).approvals({ all });
  }

  approval(rootThreadId: string, approvalId: string): Promise<ApprovalRow | undefined> {
    return findApproval(this.db, rootThreadId, approvalId);
  }

  /** The approvals of the calls one thread made, decided ones too, oldest first. */
  async threadApprovals(thread: ThreadRow): Promise<ApprovalRow[]> {
    const approvals = await listApprovals(this.db, thread.rootThreadId, true);
    return approvals.filter((approval) => approval.threadId === thread.threadId);
  }

  /** The root scope now, or as it was right after event `asOf`. */
  envEntries(rootThreadId: string, asOf?: number): Promise<ScopedEnvEntry[]> {
    return asOf === undefined
      ? listRootScopeEntries(this.db, rootThreadId)
      : rootScopeAsOf(this.db, rootThreadId, asOf);
  }

  envEntry(rootThreadId: string, key: string): Promise<ScopedEnvEntry | undefined> {
    return getRootScopeEntry(this.db, rootThreadId, key);
  }

  envLog(rootThreadId: string, options: { since?: number; limit?: number } = {}): Promise<EnvLogEvent[]> {
    return listEnvLog(this.db, rootThreadId, options);
  }

  proposals(rootThreadId: string): Promise<EnvProposal[]> {
    return listPendingProposals(this.db, rootThreadId);
  }
}

function forkWorkflowId(forks: readonly ForkRow[], threadId: string): string | undefined {
  for (const fork of forks) {
    const task = fork.tasks.find((t) => t.threadId === threadId);
    if (task) return task.workflowId;
  }
  return undefined;
}
