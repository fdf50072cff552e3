/**
 * All of Baton's I/O, as Temporal activities built by factories from their dependencies. Workflows proxy the
 * `Activities` type; they never import values from here.
 */
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import type { ResolveAgentInput } from '../common/types';
import { DEFAULT_STEP_MODE, type AgentRegistry, type ResolvedAgent, type StepMode } from '../common/agent-definition';
import { EnvStore } from '../db/env-data';
import { announceRunEvents } from '../db/run-events';
import { createAgentStore } from './agent-store';
import { createApprovalActivities } from './approvals';
import { createDelegationActivities } from './delegations';
import { createDeliveryActivities } from './deliveries';
import { createForkActivities } from './forks';
import { createModelActivities } from './model';
import type { ModelLimits } from './model-limits';
import type { ModelPrices } from './model-prices';
import type { ModelProviders } from './model-providers';
import { createQuestionActivities } from './questions';
import { createScheduleActivities } from './schedules';
import { refuseAttemptPastDeadline, toApplicationFailure } from './failures';
import { createThreadActivities } from './threads';
import { createToolCallActivities } from './tool-calls';
import { createTurnActivities } from './turns';
import {
  createWatcherActivities,
  addWatcherFromTool,
  createWatchTrigger,
  type AddWatcherRequest,
  registerFrontmatterWatchers,
  startWatchers,
  type WatchFaults,
} from './watchers';
import { createWorldActivities, loadWorldVariables, stepModeFor } from './worlds';
import type { ToolRegistry } from './tools';
import { meterEnvWrites, type ActivityMetrics } from './metrics';
import type { ActivityTracing } from './tracing';
import { createReplayAnswers } from './eval-replay';

export interface ActivityDependencies {
  pool: Pool;
  /** An `openai` client constructed with `maxRetries: 0`: Temporal's retry policy owns retries. */
  openai: OpenAI;
  /** Model name sent when an agent names none. */
  model: string;
  /** The other endpoints an agent's `model` may name as `provider/model`. @default none */
  providers?: ModelProviders;
  /** Limits on model calls every worker of the task queue shares (`BATON_MODEL_LIMITS`). @default none */
  modelLimits?: ModelLimits;
  /** What model calls cost, for budgets in dollars (`BATON_MODEL_PRICES`). @default none */
  modelPrices?: ModelPrices;
  /** Providers whose endpoints a typed agent asks for structured output (`BATON_STRUCTURED_OUTPUT`). */
  structuredOutput?: readonly string[];
  /** The current agent definitions (a function, so a reloaded set is seen by turns that start later). */
  agents: () => AgentRegistry;
  tools: ToolRegistry;
  /** How often long activities heartbeat. @default 2000 */
  heartbeatIntervalMs?: number;
  /** Largest env-data value, as JSON. @default 100 KiB */
  maxEnvValueBytes?: number;
  /** Ask for streamed model replies and assemble them (`BATON_MODEL_STREAM=on`). @default false */
  modelStream?: boolean;
  /** Where turns run their steps when neither their agent nor their world says (`BATON_STEPS`). @default 'activity' */
  steps?: StepMode;
  /** Faults tests inject (`BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL`). @default none */
  watchFaults?: WatchFaults;
  /**
   * The watch sweep's interval (`BATON_WATCH_SWEEP_SECONDS`): a signal claimed this long ago and never sent is sent
   * again by the next writer. @default DEFAULT_WATCH_SWEEP_SECONDS
   */
  watchSweepSeconds?: number;
  /**
   * The deployment's decision key (`BATON_DECISION_KEY`): approvals' decisions are written only with a proof made
   * with it (activities/decision-proofs.ts). @default none: every decision is written, whoever sent it
   */
  decisionKey?: string;
  /** Spans for model requests and tool runs (activities/tracing.ts). @default none: nothing is traced */
  tracing?: ActivityTracing;
  /** Metrics of model requests and tool runs (activities/metrics.ts). @default none recorded */
  metrics?: ActivityMetrics;
  /**
   * Answer the calls of the root threads an experiment replays from their records (activities/eval-replay.ts): set
   * on the workers of an evaluation's task queue only. @default false
   */
  evalReplays?: boolean;
}

export function createActivities(deps: ActivityDependencies) {
  const agentStore = createAgentStore({ pool: deps.pool, agents: deps.agents });
  const store = new EnvStore(deps.pool, { maxValueBytes: deps.maxEnvValueBytes });
  const env = deps.metrics === undefined ? store : meterEnvWrites(store, deps.metrics);
  const envChanged = createWatchTrigger(deps.pool, deps.watchFaults, deps.watchSweepSeconds);
  const shared = {
    pool: deps.pool,
    agentStore,
    tools: deps.tools,
    heartbeatIntervalMs: deps.heartbeatIntervalMs,
    ...(deps.tracing === undefined ? {} : { tracing: deps.tracing }),
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    env,
    watchers: { changed: envChanged, add: (request: AddWatcherRequest) => addWatcherFromTool(deps.pool, request) },
    ...(deps.evalReplays === true ? { replay: createReplayAnswers(deps.pool) } : {}),
  };
  // Opening a thread with its message is part of a turn's beginning, not an activity of its own.
  const { openThreadWithMessage, ...threads } = createThreadActivities({ pool: deps.pool });
  // A batch's model call with the reply it stored is part of `runSteps`, not an activity of its own.
  const { callModelStoring, ...modelCalls } = createModelActivities({
    ...shared,
    openai: deps.openai,
    model: deps.model,
    providers: deps.providers,
    ...(deps.modelLimits === undefined ? {} : { limits: deps.modelLimits }),
    ...(deps.modelPrices === undefined ? {} : { prices: deps.modelPrices }),
    ...(deps.structuredOutput === undefined ? {} : { structuredOutput: deps.structuredOutput }),
    ...(deps.modelStream === undefined ? {} : { stream: deps.modelStream }),
  });
  // A batch's tool call whose result its next model call stores is part of `runSteps`, not an activity of its own.
  const { runToolCallForNextStep, ...toolCalls } = createToolCallActivities(shared);
  const delegations = createDelegationActivities({ pool: deps.pool, agentStore, env });
  /** Resolves an agent by name to the version a turn will use throughout. @throws `Agent.NotFound` */
  const resolveAgent = (input: ResolveAgentInput) => agentStore.resolve(input.name);
  /** The agent's `steps`, else its world's, else this worker's: the world is read only when the agent sets none. */
  const stepModeOf = async (
    agent: ResolvedAgent,
    worldVariables: () => Promise<Record<string, string>>,
  ): Promise<StepMode> => {
    const definition = await agentStore.load(agent.version);
    const workerDefault = deps.steps ?? DEFAULT_STEP_MODE;
    if (definition.steps !== undefined) return definition.steps;
    return stepModeFor(definition, await worldVariables(), workerDefault);
  };
  /** Registers the watchers the agent's frontmatter declares in the turn's root, starting those that are new. */
  const registerWatchersOf = async (agent: ResolvedAgent, rootThreadId: string): Promise<void> => {
    const definition = await agentStore.load(agent.version);
    if (definition.watches === undefined || definition.watches.length === 0) return;
    await startWatchers(await registerFrontmatterWatchers(deps.pool, rootThreadId, definition));
  };
  const worlds = createWorldActivities({ pool: deps.pool });
  return withTypedFailuresAndAnnouncements(deps.pool, {
    ...threads,
    ...createQuestionActivities({ pool: deps.pool }),
    ...createApprovalActivities({ pool: deps.pool, decisionKey: deps.decisionKey }),
    ...modelCalls,
    ...toolCalls,
    ...delegations,
    ...createForkActivities({ pool: deps.pool, agentStore, env, envChanged }),
    ...createWatcherActivities({ pool: deps.pool, heartbeatIntervalMs: deps.heartbeatIntervalMs }),
    ...worlds,
    ...createScheduleActivities({ heartbeatIntervalMs: deps.heartbeatIntervalMs }),
    ...createDeliveryActivities({ pool: deps.pool }),
    ...createTurnActivities({
      ...threads,
      ...modelCalls,
      ...toolCalls,
      ...delegations,
      ...worlds,
      resolveAgent,
      callModelStoring,
      runToolCallForNextStep,
      stepModeOf,
      loadWorldVariables: (world: string) => loadWorldVariables(deps.pool, world),
      openThreadWithMessage,
      registerWatchersOf,
    }),
    resolveAgent,
  });
}

/**
 * Every activity turns repository errors into typed failures on the way out (see `toApplicationFailure`), so a stale
 * epoch or data Postgres refuses ends retries whichever activity meets it, instead of being retried as unknown. And
 * every activity tells its root's run-feed readers that events may have committed (its writes made them, through
 * triggers, migration 014), after its transactions and whether it succeeded or not (a refused write is an event too).
 */
function withTypedFailuresAndAnnouncements<T extends object>(pool: Pool, activities: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, activity] of Object.entries(activities)) {
    wrapped[name] =
      typeof activity === 'function'
        ? async (...args: unknown[]): Promise<unknown> => {
            try {
              refuseAttemptPastDeadline();
              return await (activity as (...args: unknown[]) => Promise<unknown>)(...args);
            } catch (error) {
              throw toApplicationFailure(error);
            } finally {
              const root = rootThreadOf(args[0]);
              if (root !== undefined) announceRunEvents(pool, root);
            }
          }
        : activity;
  }
  return wrapped as T;
}

/** The root thread an activity input concerns: its scope's, or the root part of the thread id it names. */
function rootThreadOf(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const fields = input as {
    scope?: { rootThreadId?: unknown };
    rootThreadId?: unknown;
    threadId?: unknown;
    model?: unknown;
  };
  if (typeof fields.scope?.rootThreadId === 'string') return fields.scope.rootThreadId;
  if (typeof fields.rootThreadId === 'string') return fields.rootThreadId;
  // A thread id is `<root>` or `<root>/…` (a root id holds no `/`).
  if (typeof fields.threadId === 'string') return fields.threadId.split('/')[0];
  return fields.model === undefined ? undefined : rootThreadOf(fields.model);
}

export type Activities = ReturnType<typeof createActivities>;
