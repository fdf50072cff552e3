/**
 * Every variable a world may set that Baton itself reads, once: its name, what it does, the values it takes, its
 * default and what reads it. The code that reads a world variable takes its name from here, and the reference page
 * (`docs/reference/world-variables.md`, written by `npm run docs`) is generated from here, so the two cannot drift.
 * Pure data: the workflow sandbox and the activities both import it.
 */
import type { ContextLimits } from './context-policy';
import { DEFAULT_DELEGATION_LIMITS, type DelegationLimits } from './types';
import { DEFAULT_WATCH_LIMITS, type WatchLimits } from './watchers';

/** One world variable, as the reference page shows it. */
export interface WorldVariable {
  /** The name as it is set (`baton world set NAME=value`); case-sensitive. */
  readonly name: string;
  /** What it does, for a user: one or two sentences. */
  readonly meaning: string;
  /** The values it takes, and what happens to any other. */
  readonly values: string;
  /** What holds when the world does not set it. */
  readonly default: string;
  /** What reads it, and when: so a user knows when a change takes effect. */
  readonly readBy: string;
  /** The guide that explains it, relative to `docs/`. */
  readonly guide: string;
}

/** A positive whole number: what `limitsFromVariables` and `contextLimitsFor` accept (activities/worlds.ts). */
const POSITIVE_WHOLE_NUMBER =
  'a whole number from 1 to 999999999, in plain decimal digits; any other value is ignored with a warning';

/** An amount of dollars: what `limitsFromVariables` accepts for a dollar budget (activities/worlds.ts). */
const POSITIVE_AMOUNT =
  'a positive amount up to 1000000, in plain decimal digits with at most 6 after the point (e.g. 2.50); any other value is ignored with a warning';

/** What reads the delegation limits: the root turn resolves them once, and they hold for the tree below it. */
const READ_AS_A_TURN_BEGINS =
  "each human message's turn, as it begins (the limits hold for every delegation, fork and wait below it); a " +
  "conversation's `startThread({ limits })` wins";

/** The limits of a conversation's delegation tree, its forks and its waits (`DelegationLimits`). */
export const DELEGATION_LIMIT_VARIABLES = {
  maxDepth: {
    name: 'BATON_MAX_DELEGATION_DEPTH',
    meaning: 'How deep a chain of agents calling agents may go; a delegation past it is refused.',
    values: POSITIVE_WHOLE_NUMBER,
    default: String(DEFAULT_DELEGATION_LIMITS.maxDepth),
    readBy: READ_AS_A_TURN_BEGINS,
    guide: 'guides/teams.md',
  },
  maxRepeats: {
    name: 'BATON_MAX_AGENT_REPEATS',
    meaning: 'How many times one agent may appear in one chain of delegations (more is a cycle, and is refused).',
    values: POSITIVE_WHOLE_NUMBER,
    default: String(DEFAULT_DELEGATION_LIMITS.maxRepeats),
    readBy: READ_AS_A_TURN_BEGINS,
    guide: 'guides/teams.md',
  },
  taskContextLimit: {
    name: 'BATON_TASK_CONTEXT_CHARS',
    meaning: "Characters of the root human message quoted to every delegated agent as its task's context.",
    values: POSITIVE_WHOLE_NUMBER,
    default: String(DEFAULT_DELEGATION_LIMITS.taskContextLimit),
    readBy: READ_AS_A_TURN_BEGINS,
    guide: 'guides/teams.md',
  },
  maxForkTasks: {
    name: 'BATON_MAX_FORK_TASKS',
    meaning: 'The most tasks one `fork_join` call may start; a call with more is refused and starts none.',
    values: POSITIVE_WHOLE_NUMBER,
    default: String(DEFAULT_DELEGATION_LIMITS.maxForkTasks),
    readBy: READ_AS_A_TURN_BEGINS,
    guide: 'guides/fork-join.md',
  },
  maxWaitSeconds: {
    name: 'BATON_MAX_WAIT_SECONDS',
    meaning: 'The longest one `wait` call may last, in seconds; a longer wait is refused and waits not at all.',
    values: POSITIVE_WHOLE_NUMBER,
    default: `${String(DEFAULT_DELEGATION_LIMITS.maxWaitSeconds)} (7 days)`,
    readBy: READ_AS_A_TURN_BEGINS,
    guide: 'guides/durable-jobs.md',
  },
  budgetTokens: {
    name: 'BATON_BUDGET_TOKENS',
    meaning:
      "The token budget (input and output) of every root conversation of the world and all of its agents' turns below it; a model call past it is not made.",
    values: POSITIVE_WHOLE_NUMBER,
    default: 'no budget',
    readBy:
      "a root conversation's first turn, as it begins (the budget it opens is kept); a conversation's `startThread({ limits: { budget } })` or `baton run --budget-tokens` wins",
    guide: 'guides/budgets.md',
  },
  budgetUsd: {
    name: 'BATON_BUDGET_USD',
    meaning:
      "The budget in US dollars of every root conversation of the world and all of its agents' turns below it, at the workers' prices (`BATON_MODEL_PRICES`); a model call past it is not made.",
    values: POSITIVE_AMOUNT,
    default: 'no budget',
    readBy:
      "a root conversation's first turn, as it begins (the budget it opens is kept); a conversation's `startThread({ limits: { budget } })` or `baton run --budget-usd` wins",
    guide: 'guides/budgets.md',
  },
} as const satisfies Record<keyof DelegationLimits, WorldVariable>;

/** What reads the context limits: every model call, for agents whose frontmatter sets no `context` limit. */
const READ_AT_EVERY_MODEL_CALL = 'every model call of an agent whose frontmatter sets no such `context` limit';

/** The context policy of agents that set none in their frontmatter (`ContextLimits`). */
export const CONTEXT_LIMIT_VARIABLES = {
  maxMessages: {
    name: 'BATON_CONTEXT_MAX_MESSAGES',
    meaning:
      'The most transcript messages one model request carries; older ones are left out (the transcript keeps them).',
    values: POSITIVE_WHOLE_NUMBER,
    default: 'no limit',
    readBy: READ_AT_EVERY_MODEL_CALL,
    guide: 'guides/agents.md',
  },
  maxTokens: {
    name: 'BATON_CONTEXT_MAX_TOKENS',
    meaning:
      'The most tokens (estimated: characters / 4) one model request carries; older messages are left out to fit.',
    values: POSITIVE_WHOLE_NUMBER,
    default: 'no limit',
    readBy: READ_AT_EVERY_MODEL_CALL,
    guide: 'guides/agents.md',
  },
} as const satisfies Record<keyof ContextLimits, WorldVariable>;

/** What reads the watch limits: each watcher as it decides whether to wake. */
const READ_BY_WATCHERS = "every watcher of the world's conversations, each time a change may wake it";

/** The limits every watcher of a world runs under (`WatchLimits`). */
export const WATCH_LIMIT_VARIABLES = {
  debounceS: {
    name: 'BATON_WATCH_DEBOUNCE_SECONDS',
    meaning: 'How long a watcher that names no `debounce_s` waits after the first change before it wakes.',
    values: 'seconds, 0 or more (decimals allowed); any other value is ignored with a warning',
    default: String(DEFAULT_WATCH_LIMITS.debounceS),
    readBy: READ_BY_WATCHERS,
    guide: 'guides/watchers.md',
  },
  maxDepth: {
    name: 'BATON_WATCH_MAX_DEPTH',
    meaning: 'How deep a chain of watchers waking watchers may go; a change made deeper wakes no other watcher.',
    values: 'a number, 1 or more; any other value is ignored with a warning',
    default: String(DEFAULT_WATCH_LIMITS.maxDepth),
    readBy: READ_BY_WATCHERS,
    guide: 'guides/watchers.md',
  },
  cooldownS: {
    name: 'BATON_WATCH_COOLDOWN_SECONDS',
    meaning: "Seconds between the end of one watcher's wake-up and the start of its next.",
    values: 'seconds, 0 or more (decimals allowed); any other value is ignored with a warning',
    default: String(DEFAULT_WATCH_LIMITS.cooldownS),
    readBy: READ_BY_WATCHERS,
    guide: 'guides/watchers.md',
  },
  maxPerHour: {
    name: 'BATON_WATCH_MAX_WAKEUPS_PER_HOUR',
    meaning: 'Wake-ups one watcher may have in any hour in one conversation; past it, it pauses until one more fits.',
    values: 'a number, 1 or more; any other value is ignored with a warning',
    default: String(DEFAULT_WATCH_LIMITS.maxPerHour),
    readBy: READ_BY_WATCHERS,
    guide: 'guides/watchers.md',
  },
} as const satisfies Record<keyof WatchLimits, WorldVariable>;

/** Where the turns of agents that set no `steps` run their steps. */
export const STEPS_WORLD_VARIABLE = {
  name: 'BATON_STEPS',
  meaning:
    'Where the turns of agents whose frontmatter sets no `steps` run their steps: one activity per step, inside ' +
    'the workflow task, or several steps per local activity.',
  values: '`activity`, `local` or `batched` (any case); any other value is ignored with a warning',
  default: "the worker's `BATON_STEPS` environment variable (`activity` unless it says otherwise)",
  readBy: 'every turn, as it begins',
  guide: 'guides/step-modes.md',
} as const satisfies WorldVariable;

/** The MCP servers whose tools the world's agents see. */
export const MCP_SERVERS_WORLD_VARIABLE = {
  name: 'BATON_MCP_SERVERS',
  meaning:
    "The MCP servers whose tools the world's agents are offered; a call of another server's tool is refused " +
    'before anything runs.',
  values: 'server names, comma-separated (empty: none)',
  default: 'every server of the worker',
  readBy: 'every model call (the tools offered) and every tool call',
  guide: 'guides/mcp-client.md',
} as const satisfies WorldVariable;

/** Whether the shell's commands have a network. */
export const SHELL_NETWORK_WORLD_VARIABLE = {
  name: 'BATON_SHELL_NETWORK',
  meaning:
    "Whether `shell` commands get a network: `on`, egress only (never the host's loopback); `off`, a loopback of " +
    'their own and nothing else.',
  values: '`on` or `off` (any case; empty is `on`); any other value refuses every command, saying why',
  default: '`on`',
  readBy: 'every `shell` call',
  guide: 'guides/worlds.md',
} as const satisfies WorldVariable;

/** The directory the shell and the file tools work in (`baton world dir PATH` sets it). */
export const WORKING_DIRECTORY_WORLD_VARIABLE = {
  name: 'working_directory',
  meaning:
    'The directory `shell` commands are confined to and run in, and the root of `read_file` and `list_files`; ' +
    '`baton world dir PATH` sets it.',
  values: 'an absolute path of an existing directory (`baton world dir` checks and normalises it)',
  default: "none: `shell` refuses every command; the file tools use the worker's `BATON_FILES_ROOT`",
  readBy: 'every `shell`, `read_file` and `list_files` call',
  guide: 'guides/worlds.md',
} as const satisfies WorldVariable;

/** World variables named `env.NAME` are meant for tools: the shell exports each as `NAME`. */
export const TOOL_VARIABLE_PREFIX = 'env.';

/** The family of variables meant for tools, as one entry of the reference. */
export const TOOL_WORLD_VARIABLES = {
  name: `${TOOL_VARIABLE_PREFIX}NAME`,
  meaning:
    'A variable meant for tools: every `shell` command gets it in its environment as `NAME`. No other world ' +
    'variable reaches a command.',
  values: 'any text; `NAME` must be a name a shell can hold (letters, digits and `_`), or it is not exported',
  default: 'none',
  readBy: 'every `shell` call',
  guide: 'guides/worlds.md',
} as const satisfies WorldVariable;

/** Every world variable Baton reads, in the order of the reference page. */
export const WORLD_VARIABLES: readonly WorldVariable[] = Object.freeze([
  WORKING_DIRECTORY_WORLD_VARIABLE,
  TOOL_WORLD_VARIABLES,
  SHELL_NETWORK_WORLD_VARIABLE,
  MCP_SERVERS_WORLD_VARIABLE,
  STEPS_WORLD_VARIABLE,
  ...Object.values(DELEGATION_LIMIT_VARIABLES),
  ...Object.values(CONTEXT_LIMIT_VARIABLES),
  ...Object.values(WATCH_LIMIT_VARIABLES),
]);

/** The names of a group of variables, by the field each sets: what the code that reads them iterates. */
export function variableNames<K extends string>(group: Readonly<Record<K, WorldVariable>>): Record<K, string> {
  const names = {} as Record<K, string>;
  for (const field of Object.keys(group) as K[]) names[field] = group[field].name;
  return names;
}
