import type { ThreadScope } from '../../common/types';
import type { Watcher, WatchSpec } from '../../common/watchers';
import type {
  EnvEntry,
  EnvListFilters,
  EnvManifestEntry,
  EnvManifestPage,
  EnvProposal,
  EnvStore,
  EnvStoreInput,
  EnvUpdateInput,
  EnvWriteResult,
} from '../../db/env-data';

/** A root's watchers, as a tool call reaches them (`activities/watchers.ts`). */
export interface EnvWatchers {
  /**
   * Wakes the watchers of `keys` after a change to them committed. Best effort, never rejects: a watcher that cannot
   * be told now is woken by the sweep, from the change in Postgres (`activities/watchers.ts`).
   */
  changed(rootThreadId: string, keys: readonly string[]): Promise<void>;
  /**
   * Adds a run-time watcher to a root and starts its workflow; the same request made again (a retried call) finds
   * the watcher it added. @throws EnvDataError-like errors as `Error`s with a message for the model
   */
  add(request: WatchRequest & { rootThreadId: string; createdBy: string }): Promise<Watcher>;
}

/** What an agent asks to watch: a watcher of `agent` (by default its own) on `keys`. */
export interface WatchRequest extends WatchSpec {
  agent: string;
  name?: string;
}

/**
 * The shared environment data as one tool call sees it: read and written as the calling agent, in its thread's
 * view (a fork task's own isolated store first, then the shared data), fenced by its epoch, every write idempotent.
 * The scope comes from the workflow: a tool cannot name another conversation's data.
 *
 * Each write of the call gets its own operation id derived from the call's: the first write uses the call's id
 * itself, the n-th `<id>:env:<n>`. A tool that writes in the same order on every attempt (the usual case) therefore
 * writes nothing twice when its activity is retried.
 */
export class AgentEnv {
  private writes = 0;

  constructor(
    private readonly envStore: EnvStore,
    private readonly scope: ThreadScope,
    private readonly operationId: string,
    private readonly watchers?: EnvWatchers,
  ) {}

  /** The value under `key` that the calling thread sees, or `undefined`. */
  get(key: string): Promise<EnvEntry | undefined> {
    return this.envStore.get(this.scope.rootThreadId, key, this.view());
  }

  /** Every entry the calling thread sees (no values), by key. Use `listPage` where the manifest may be large. */
  list(filters: EnvListFilters = {}): Promise<EnvManifestEntry[]> {
    return this.envStore.list(this.scope.rootThreadId, filters, this.view());
  }

  /** One page of what `list` returns: up to `limit` entries after the key `after`. */
  listPage(filters: EnvListFilters = {}, page: { limit?: number; after?: string } = {}): Promise<EnvManifestPage> {
    return this.envStore.listPage(this.scope.rootThreadId, filters, this.view(), page);
  }

  /** Pending proposals from fork tasks that the calling thread can see. */
  proposals(): Promise<EnvProposal[]> {
    return this.envStore.proposals(this.scope.rootThreadId, { view: this.view() });
  }

  /**
   * Creates the entry or replaces its value (last write wins).
   * @throws EnvDataError for a refused key, description or value (the model reads it as an `Error:` result)
   */
  store(entry: EnvStoreInput): Promise<EnvWriteResult> {
    return this.told(entry.key, this.envStore.store(this.scope, this.nextOperationId(), entry));
  }

  /**
   * Changes an existing entry; with `expectedVersion`, only if nobody changed it since. In an isolated fork task, a
   * change to shared data becomes a proposal (`action: 'proposed'`).
   * @throws EnvDataError for a missing key or a stale `expectedVersion`
   */
  update(change: EnvUpdateInput): Promise<EnvWriteResult> {
    return this.told(change.key, this.envStore.update(this.scope, this.nextOperationId(), change));
  }

  /** Deletes an entry (its history stays in the event log); `reason` is kept in the event. */
  delete(key: string, reason?: string): Promise<EnvWriteResult> {
    return this.told(key, this.envStore.delete(this.scope, this.nextOperationId(), key, reason));
  }

  /** Applies a pending proposal to its entry, as the calling agent. */
  acceptProposal(key: string, proposalId: string): Promise<EnvWriteResult> {
    return this.told(key, this.envStore.acceptProposal(this.scope, this.nextOperationId(), { key, proposalId }));
  }

  /**
   * Once a write committed (or was found committed by an earlier attempt), wakes the watchers of its key. That never
   * fails the write: a tool with side effects runs once, so a failure here would report a committed write as failed
   * and never be retried; a watcher not told now is told by the sweep. A proposal changed nothing yet.
   */
  private async told(key: string, write: Promise<EnvWriteResult>): Promise<EnvWriteResult> {
    const result = await write;
    if (this.watchers !== undefined && result.action !== 'proposed') {
      await this.watchers.changed(this.scope.rootThreadId, [key]);
    }
    return result;
  }

  /**
   * Adds a watcher of this conversation: from now on a committed change to one of its keys wakes a turn of its agent.
   * @throws Error when this worker cannot add watchers, or the request is refused (the message says why)
   */
  watch(request: WatchRequest): Promise<Watcher> {
    if (this.watchers === undefined) return Promise.reject(new Error('watchers cannot be added here'));
    return this.watchers.add({ ...request, rootThreadId: this.scope.rootThreadId, createdBy: this.scope.agent });
  }

  private view() {
    return { threadId: this.scope.threadId };
  }

  private nextOperationId(): string {
    this.writes += 1;
    return this.writes === 1 ? this.operationId : `${this.operationId}:env:${this.writes}`;
  }
}
