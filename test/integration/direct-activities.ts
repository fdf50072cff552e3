/**
 * A worker's activities run one by one outside any workflow, against a harness's database and scripted model: how a
 * test acts as a turn would at one step, or as a worker of older code would, on a reply it stores itself.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import type { ToolDefinition } from '../../activities/tools/types';
import { prepareUserTools } from '../../activities/tools/user-tools';
import type { ThreadScope, ToolCallRequest } from '../../common/types';
import { appendMessage } from '../../db/transcripts';
import type { AgentHarness } from '../../testing/harness';
import { createAgentCatalog } from '../../worker/agent-catalog';
import type { AgentRegistry } from '../../worker/agents';
import { createModelClient } from '../../worker/model-client';

export interface DirectActivities {
  activities: ReturnType<typeof createActivities>;
  /** Runs one activity in a mock activity context. */
  run: <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A) => Promise<R>;
  /**
   * Opens `threadId` as a root thread of `agent` and stores one reply of `toolCalls` in it, as the model activity
   * stores one: the scope, the agent's version and the reply's `seq`, for the tool activities that follow.
   */
  storeReply: (
    threadId: string,
    agent: string,
    toolCalls: ToolCallRequest[],
  ) => Promise<{ scope: ThreadScope; version: string; seq: number }>;
}

/** The activities a worker of `harness` with these agents and user tools (named after `source`) runs. */
export function directActivities(
  harness: AgentHarness,
  options: { agents: AgentRegistry; workDir: string; tools: readonly ToolDefinition[]; source: string },
): DirectActivities {
  const catalog = createAgentCatalog({
    agents: options.agents,
    filesRoot: options.workDir,
    arcDataDir: options.workDir,
    userTools: prepareUserTools([...options.tools], options.source),
  });
  const activities = createActivities({
    pool: harness.pool,
    openai: createModelClient({ baseURL: harness.model.baseURL, apiKey: 'scripted' }),
    model: 'baton-scripted',
    agents: () => catalog.agents(),
    tools: catalog.tools,
  });
  const run = <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> =>
    new MockActivityEnvironment().run(fn, ...args);
  return {
    activities,
    run,
    async storeReply(threadId, agent, toolCalls) {
      const { epoch } = await run(activities.ensureThread, { threadId, rootThreadId: threadId, agent });
      const { version } = await run(activities.resolveAgent, { name: agent });
      const scope = { rootThreadId: threadId, threadId, agent, epoch };
      const {
        message: { seq },
      } = await appendMessage(harness.pool, scope, `${threadId}:reply`, {
        role: 'assistant',
        content: null,
        toolCalls,
        usage: null,
      });
      return { scope, version, seq };
    },
  };
}
