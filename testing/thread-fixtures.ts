/** Thread records for tests that call activities or stores directly, without a workflow to create them. */
import type { Pool } from 'pg';
import type { ThreadScope } from '../common/types';
import { ensureThread } from '../db/threads';
import { uniqueThreadId } from './test-env';

/** A new root thread of `agent`, and the scope a turn of it would write under. */
export async function openRootThread(pool: Pool, agent: string): Promise<ThreadScope> {
  const threadId = uniqueThreadId(agent);
  const { epoch } = await ensureThread(pool, { threadId, rootThreadId: threadId, agent });
  return { rootThreadId: threadId, threadId, agent, epoch };
}

/** A delegation thread of `agent` below `parent`, sharing its root's env data. */
export async function openChildThread(pool: Pool, parent: ThreadScope, agent: string): Promise<ThreadScope> {
  const threadId = uniqueThreadId(agent);
  const { epoch } = await ensureThread(pool, {
    threadId,
    rootThreadId: parent.rootThreadId,
    parentThreadId: parent.threadId,
    agent,
  });
  return { rootThreadId: parent.rootThreadId, threadId, agent, epoch };
}
