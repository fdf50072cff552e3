/** A `ToolContext` for unit-testing tools without a worker, typed against the real contract. */
import pg from 'pg';
import { createToolContext, type ToolCallParts } from '../activities/tools/context';
import type { ToolContext } from '../activities/tools/types';
import { agentFrontmatterSchema, type AgentDefinition } from '../common/agent-definition';
import { EnvStore } from '../db/env-data';

/** A minimal agent, built through the frontmatter schema so options the definition gains get their defaults. */
export const testAgent: AgentDefinition = {
  ...agentFrontmatterSchema.parse({ name: 'a', description: 'd' }),
  body: '',
  source: 'a.md',
};

/**
 * A context for tools that need no database: its env store's pool is lazy and never connects, so a tool that does
 * touch env data fails loudly instead of writing somewhere.
 */
export function fakeToolContext(overrides: Partial<ToolCallParts> = {}): ToolContext {
  return createToolContext({
    scope: { rootThreadId: 't', threadId: 't', agent: 'a', epoch: 0 },
    agent: testAgent,
    operationId: 'run-1:tool:0:0',
    world: { name: 'default', variables: {} },
    envStore: new EnvStore(new pg.Pool({ connectionString: 'postgres://127.0.0.1:1/unused' })),
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    ...overrides,
  });
}
