import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import type { AgentDefinition, ResolvedAgent } from '../common/agent-definition';
import { ErrorType } from '../common/errors';
import { findAgentVersion, saveAgentVersion } from '../db/agent-versions';
import type { AgentRegistry } from '../common/agent-definition';

/**
 * Agent definitions by version. A turn resolves its agent by name once, at its start, and from then on every model
 * call and tool run loads that exact version, so editing an agent file changes new turns only.
 */
export interface AgentStore {
  /** Stores the current definition of `name` and returns its version. @throws ApplicationFailure `Agent.NotFound` */
  resolve(name: string): Promise<ResolvedAgent>;
  /** The definition stored under `version`. @throws ApplicationFailure `Agent.NotFound` */
  load(version: string): Promise<AgentDefinition>;
  /** Whether an agent of that name is currently defined. */
  has(name: string): boolean;
}

/**
 * Content hash of a definition, nested settings included (a changed `context`, `output` or model chain is a new
 * version); the file path is left out so the same agent has one version on every machine.
 */
export function agentVersion(definition: AgentDefinition): string {
  const { source: _source, ...content } = definition;
  return createHash('sha256').update(canonicalJson(content)).digest('hex').slice(0, 16);
}

/**
 * JSON of `value` with the keys of every object, at every depth, in one order, so equal content has one text. (A
 * replacer array would sort the top level but also drop every nested key not named in it.)
 */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}

/**
 * Stores the version of every agent in `agents`, so clients can tell a known agent from a typo before a turn runs
 * (`isKnownAgent`). Idempotent; a worker calls it when it starts and whenever it reloads its agents.
 */
export async function publishAgentVersions(pool: Pool, agents: AgentRegistry): Promise<void> {
  for (const definition of agents.values()) await saveAgentVersion(pool, agentVersion(definition), definition);
}

export function createAgentStore(options: { pool: Pool; agents: () => AgentRegistry }): AgentStore {
  const cache = new Map<string, AgentDefinition>();
  return {
    has: (name) => options.agents().has(name),
    async resolve(name) {
      const definition = options.agents().get(name);
      if (!definition) {
        throw ApplicationFailure.create({
          type: ErrorType.AgentNotFound,
          message: `agent '${name}' is not defined on this worker (known: ${[...options.agents().keys()].join(', ')})`,
          nonRetryable: true,
        });
      }
      const version = agentVersion(definition);
      if (!cache.has(version)) {
        await saveAgentVersion(options.pool, version, definition);
        cache.set(version, definition);
      }
      return {
        name,
        version,
        maxSteps: definition.max_steps,
        ...(definition.on_budget === 'ask' ? { onBudget: 'ask' as const } : {}),
      };
    },
    async load(version) {
      const cached = cache.get(version);
      if (cached) return cached;
      const stored = await findAgentVersion(options.pool, version);
      if (!stored) {
        throw ApplicationFailure.create({
          type: ErrorType.AgentNotFound,
          message: `agent version '${version}' is not stored`,
          nonRetryable: true,
        });
      }
      cache.set(version, stored);
      return stored;
    },
  };
}
