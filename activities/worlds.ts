import { log } from '@temporalio/activity';
import type { Pool } from 'pg';
import { STEP_MODES, type AgentDefinition, type StepMode } from '../common/agent-definition';
import type { ContextLimits } from '../common/context-policy';
import { parseEnvText } from '../common/env-text';
import { MAX_BUDGET_USD } from '../common/budgets';
import { DEFAULT_DELEGATION_LIMITS, type DelegationLimits, type ResolveLimitsInput } from '../common/types';
import {
  CONTEXT_LIMIT_VARIABLES,
  DELEGATION_LIMIT_VARIABLES,
  STEPS_WORLD_VARIABLE,
  variableNames,
} from '../common/world-variables';
import { getWorldVariablesText } from '../db/worlds';

/**
 * World variables that set a world's limits on delegation, forks and waits (`baton world set BATON_MAX_DELEGATION_DEPTH=4`),
 * by the limit each sets: names from common/world-variables.ts.
 */
export const LIMIT_VARIABLES: Readonly<Record<keyof DelegationLimits, string>> = Object.freeze(
  variableNames(DELEGATION_LIMIT_VARIABLES),
);

/** A world's variables as they are now; a world without variables (or not created yet) has none. */
export async function loadWorldVariables(pool: Pool, world: string): Promise<Record<string, string>> {
  return worldVariablesOf(world, await getWorldVariablesText(pool, world));
}

/** A world's variables from its stored text (`undefined`: none); invalid lines are skipped and logged. */
export function worldVariablesOf(world: string, text: string | undefined): Record<string, string> {
  return parseEnvText(text, {
    onInvalidLine: (lineNumber, line, reason) => {
      log.debug('ignoring an invalid line of world variables', { world, lineNumber, line, reason });
    },
  });
}

/** The delegation limits of a world: its variables over the defaults, and a conversation's overrides over both. */
export function limitsFromVariables(
  variables: Readonly<Record<string, string>>,
  overrides: Partial<DelegationLimits> = {},
): DelegationLimits {
  const limits: DelegationLimits = { ...DEFAULT_DELEGATION_LIMITS };
  for (const [field, name] of Object.entries(LIMIT_VARIABLES) as [keyof DelegationLimits, string][]) {
    const value = field === 'budgetUsd' ? amountVariable(variables, name) : positiveVariable(variables, name);
    if (value !== undefined) limits[field] = value;
  }
  return { ...limits, ...overrides };
}

/** World variables that set the context policy of agents whose frontmatter sets no `context` limit. */
export const CONTEXT_VARIABLES: Readonly<Record<keyof ContextLimits, string>> = Object.freeze(
  variableNames(CONTEXT_LIMIT_VARIABLES),
);

/** The context limits of one agent's model requests: its frontmatter's, each unset one from the world, else none. */
export function contextLimitsFor(
  agent: Pick<AgentDefinition, 'context'>,
  variables: Readonly<Record<string, string>>,
): ContextLimits {
  return {
    maxMessages: agent.context?.max_messages ?? positiveVariable(variables, CONTEXT_VARIABLES.maxMessages),
    maxTokens: agent.context?.max_tokens ?? positiveVariable(variables, CONTEXT_VARIABLES.maxTokens),
  };
}

/** The world variable that sets the step mode of agents whose frontmatter sets no `steps`. */
export const STEPS_VARIABLE = STEPS_WORLD_VARIABLE.name;

/**
 * Where one agent's turn runs its steps: its frontmatter's `steps`, else the world's `BATON_STEPS` (a value other
 * than `local`, `batched` or `activity` is ignored with a warning), else the worker's setting.
 */
export function stepModeFor(
  agent: Pick<AgentDefinition, 'steps'>,
  variables: Readonly<Record<string, string>>,
  workerDefault: StepMode,
): StepMode {
  if (agent.steps !== undefined) return agent.steps;
  const raw = variables[STEPS_VARIABLE]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return workerDefault;
  if ((STEP_MODES as readonly string[]).includes(raw)) return raw as StepMode;
  log.warn('ignoring a world variable that is not local, batched or activity', { name: STEPS_VARIABLE, value: raw });
  return workerDefault;
}

/** A world variable holding a positive whole number; anything else is ignored with a warning. */
function positiveVariable(variables: Readonly<Record<string, string>>, name: string): number | undefined {
  const raw = variables[name];
  if (raw === undefined) return undefined;
  // Plain decimal digits only: Number() would also take '0x10', '1e20' or ' 7 '.
  const value = /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : Number.NaN;
  if (Number.isSafeInteger(value) && value >= 1) return value;
  log.warn('ignoring a world variable that is not a positive whole number', { name, value: raw });
  return undefined;
}

/** A world variable holding an amount of dollars (`12`, `2.50`); anything else is ignored with a warning. */
function amountVariable(variables: Readonly<Record<string, string>>, name: string): number | undefined {
  const raw = variables[name];
  if (raw === undefined) return undefined;
  const value = /^[0-9]{1,7}(\.[0-9]{1,6})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (value > 0 && value <= MAX_BUDGET_USD) return value;
  log.warn('ignoring a world variable that is not an amount from 0.000001 to 1000000', { name, value: raw });
  return undefined;
}

export function createWorldActivities({ pool }: { pool: Pool }) {
  /** The delegation limits a turn runs under, read from its world when it starts. */
  async function resolveLimits(input: ResolveLimitsInput): Promise<DelegationLimits> {
    return limitsFromVariables(await loadWorldVariables(pool, input.world), input.overrides);
  }
  return { resolveLimits };
}
