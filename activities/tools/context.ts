import type { AgentDefinition } from '../../common/agent-definition';
import type { ThreadScope } from '../../common/types';
import type { EnvStore } from '../../db/env-data';
import { AgentEnv, type EnvWatchers } from './agent-env';
import type { ToolContext, WorldContext } from './types';

/** What one tool call runs with; everything else in its context is derived from these. */
export interface ToolCallParts {
  scope: ThreadScope;
  agent: AgentDefinition;
  operationId: string;
  world: WorldContext;
  envStore: EnvStore;
  /** The root's watchers: woken by a changed key, added by `watch_env_data`. @default none */
  watchers?: EnvWatchers;
  signal: AbortSignal;
  heartbeat(details?: unknown): void;
}

/** The context a tool's `run` receives: the call's ids, its caller, the env data as the caller, its signal. */
export function createToolContext(parts: ToolCallParts): ToolContext {
  const { scope } = parts;
  return {
    operationId: parts.operationId,
    threadId: scope.threadId,
    rootThreadId: scope.rootThreadId,
    scope,
    agent: parts.agent,
    env: new AgentEnv(parts.envStore, scope, parts.operationId, parts.watchers),
    world: parts.world,
    signal: parts.signal,
    heartbeat: (details) => parts.heartbeat(details),
  };
}
