import { z } from 'zod';
import { AGENT_NAME_PATTERN } from './ids';
import { MAX_BUDGET_TOKENS, MAX_BUDGET_USD } from './budgets';
import { MAX_DEBOUNCE_SECONDS, MAX_WATCH_MESSAGE_CHARS, MAX_WATCH_PATTERNS, watchPatternProblem } from './watchers';

/** A watcher's key pattern; a refusal says what is wrong with it (its characters, its length, its wildcards). */
export const watchPatternSchema = z.string().superRefine((pattern, context) => {
  const problem = watchPatternProblem(pattern);
  if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
});

/** The longest an approval may wait for a decision: 30 days, like a question. */
export const MAX_APPROVAL_WAIT_S = 30 * 24 * 3600;

/**
 * Where a turn runs its model calls and the tool calls its activity runs: `activity`, each an activity task of its
 * own (the server dispatches it; a crash re-runs only the step that was running); `local`, local activities inside
 * the turn's workflow task, one per step (no server round trip between steps; a crash re-runs the steps since the
 * last completed workflow task, from what is stored); or `batched`, consecutive steps together in one local activity
 * (no return to the workflow between them either: the Web UI shows one marker for the steps it ran, whose result
 * lists them; a crash re-runs the batch, from what is stored). Delegations, forks, questions, approvals and waits
 * leave the task in every mode.
 */
export const STEP_MODES = ['local', 'batched', 'activity'] as const;
export type StepMode = (typeof STEP_MODES)[number];
/** The step mode of a turn whose agent, world and worker set none. */
export const DEFAULT_STEP_MODE: StepMode = 'activity';

/** Steps a turn may take when its agent sets no `max_steps`. */
export const DEFAULT_MAX_STEPS = 25;

/** Answers not matching an agent's `output` the model is asked to fix when the agent sets no `output_repairs`. */
export const DEFAULT_OUTPUT_REPAIRS = 2;

/** Most models one agent's fallback chain lists. */
export const MAX_FALLBACK_MODELS = 5;

/** What is wrong with a `model` field that is neither a model name nor a list of them (zod names no branch). */
function modelFieldProblem(value: unknown): string {
  if (!Array.isArray(value)) return 'must be a model name or a list of model names';
  if (value.length === 0) return 'must list at least one model';
  if (value.length > MAX_FALLBACK_MODELS) return `must list at most ${MAX_FALLBACK_MODELS} models`;
  return 'must list model names, each a non-empty text';
}
/** Attempts of one model of a chain, for failures a retry can fix, before the next is asked. */
export const DEFAULT_FALLBACK_AFTER_ATTEMPTS = 2;

/**
 * Frontmatter of a prompt object (an agent markdown file). Unknown keys are refused so a typo in an option
 * stops start-up instead of being silently ignored.
 */
export const agentFrontmatterSchema = z.strictObject({
  name: z
    .string()
    .regex(AGENT_NAME_PATTERN, 'must be lowercase letters, digits, "_" or "-" (at most 64)')
    .describe('How the agent is called: lowercase letters, digits, `_` and `-`, at most 64 characters.'),
  description: z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(500)
    .describe('What it does; agents that can call it read it, and so does its delegation preamble.'),
  /** Tool and agent names this agent may call, beyond the universal capabilities. */
  capabilities: z
    .array(z.string().min(1))
    .default([])
    .describe('The tools and agents it may call beyond the universal ones.'),
  /**
   * Tools whose every call by this agent waits for a person to approve it (`baton approve`), each a name or
   * `{ tool, timeout_s }` (rejected when nobody decides in time).
   */
  approval: z
    .array(
      z.union([
        z.string().min(1),
        z.strictObject({
          tool: z.string().min(1),
          timeout_s: z.int().min(1).max(MAX_APPROVAL_WAIT_S).optional(),
        }),
      ]),
    )
    .default([])
    .describe(
      'Tools whose every call waits for a person: names, or `{ tool, timeout_s }` to reject it when nobody decides in time.',
    ),
  /** Model name for this agent, or the models to fall back through in order; the worker's default when omitted. */
  model: z
    .union(
      [
        z.string().trim().min(1),
        z
          .array(z.string().trim().min(1))
          .min(1, { error: 'must list at least one model' })
          .max(MAX_FALLBACK_MODELS, { error: `must list at most ${MAX_FALLBACK_MODELS} models` }),
      ],
      { error: (issue) => modelFieldProblem(issue.input) },
    )
    .optional()
    .describe(
      "The model name; `provider/model` names a provider's endpoint. A list is a fallback chain: a call moves to the next model when one fails in a way another may not (see Model fallback). Default: the worker's BATON_MODEL.",
    ),
  /** Attempts of one model of a fallback chain, for failures a retry can fix, before the next model is asked. */
  fallback_after_attempts: z
    .int()
    .min(1)
    .max(10)
    .optional()
    .describe(
      `With a list of models: attempts of one model (429, 5xx, timeouts, connection failures) before the next is asked. Default: ${DEFAULT_FALLBACK_AFTER_ATTEMPTS}.`,
    ),
  temperature: z.number().min(0).max(2).optional().describe("Sampling temperature. Default: the endpoint's."),
  /** Where this agent's steps run (`STEP_MODES`); the world's `BATON_STEPS`, else the worker's, when omitted. */
  steps: z
    .enum(STEP_MODES, { error: 'must be local, batched or activity' })
    .optional()
    .describe("Where a turn's model calls and tool runs go. Default: the world's BATON_STEPS, else the worker's."),
  /** Model calls one turn may make before it ends with `max_steps`. */
  max_steps: z
    .int()
    .min(1)
    .max(1000)
    .default(DEFAULT_MAX_STEPS)
    .describe('Model calls one turn may make; a turn that uses them all ends with status `max_steps`.'),
  /** How much a delegated call to this agent is told about its caller: `false` for no preamble. */
  delegation_context: z
    .union([z.enum(['minimal', 'standard', 'verbose']), z.literal(false)])
    .default('standard')
    .describe('How much a delegated call to this agent is told about its caller; `false` for nothing.'),
  /**
   * The token budget a delegation or fork task to this agent reserves from its caller's budget when the tree has one
   * (capped by what the caller has left); without it a delegation takes half of what its caller has left and a fork's
   * tasks share it evenly.
   */
  budget: z
    .strictObject({
      tokens: z
        .int()
        .min(1)
        .max(MAX_BUDGET_TOKENS)
        .optional()
        .describe("Tokens (input and output) a delegated turn of this agent may spend, taken from its caller's."),
      usd: z
        .number()
        .positive()
        .max(MAX_BUDGET_USD)
        .optional()
        .describe("US dollars a delegated turn of this agent may spend, taken from its caller's."),
    })
    .refine((budget) => budget.tokens !== undefined || budget.usd !== undefined, {
      error: 'must set tokens, usd or both',
    })
    .optional()
    .describe(
      "Under a budgeted tree: what a delegated turn of this agent reserves from its caller's budget, in each unit the caller's limits. Default: half of what the caller has left (a fork's tasks: an even share).",
    ),
  /** What a turn of this agent does when its budget is spent: stop (fail), or ask a person for more and wait. */
  on_budget: z
    .enum(['stop', 'ask'], { error: 'must be stop or ask' })
    .optional()
    .describe(
      "When a turn's budget is spent: `stop` fails the turn before its next model call; `ask` waits for a person to approve more (the agent's `budget`, else as much again as it was granted). Default: stop.",
    ),
  /**
   * A JSON Schema (an object at its root) the turn's answer must match: the turn ends with a validated object
   * (`docs/guides/typed-results.md`). Optional (no default), so the versions of agents that set none stay as they were.
   */
  output: z
    .record(z.string(), z.unknown())
    .refine((schema) => schema.type === 'object', { error: "must be a JSON Schema whose root is 'type: object'" })
    .optional()
    .describe(
      "A JSON Schema (root `type: object`) the turn's answer must match: the model is asked for it (the provider's structured output, else a `final_output` tool), and the caller gets the validated object.",
    ),
  /** Answers that do not match `output` the model is asked to fix, with the validation errors, before the turn fails. */
  output_repairs: z
    .int()
    .min(0)
    .max(10)
    .optional()
    .describe(
      `With \`output\`: answers that do not match it the model is told why and asked again, before the turn fails with Output.Invalid. Default: ${DEFAULT_OUTPUT_REPAIRS}.`,
    ),
  /** A delegated turn of this agent that runs longer than this fails the caller's tool call (it is cancelled). */
  timeout_s: z
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .optional()
    .describe("Seconds a delegated turn of this agent may run; past that it is stopped and the caller's call fails."),
  /**
   * What of the thread one model request carries (`common/context-policy.ts`); each limit unset here falls back to
   * the world's `BATON_CONTEXT_MAX_MESSAGES` / `BATON_CONTEXT_MAX_TOKENS`, else no limit.
   */
  context: z
    .strictObject({
      max_messages: z.int().min(1, 'must be at least 1').optional(),
      max_tokens: z.int().min(1, 'must be at least 1').optional(),
    })
    .optional()
    .describe(
      "What of the thread each model request carries. Default: the world's BATON_CONTEXT_MAX_MESSAGES and BATON_CONTEXT_MAX_TOKENS.",
    ),
  /**
   * Env-data keys this agent watches in every root it runs in (`common/watchers.ts`): a committed change to one wakes
   * a turn of it, in a thread of its own, told what changed. Optional (no default), so the versions of agents that
   * set none stay as they were.
   */
  watches: z
    .array(
      z.strictObject({
        keys: z.array(watchPatternSchema).min(1, 'must name at least one key pattern').max(MAX_WATCH_PATTERNS),
        debounce_s: z.number().min(0).max(MAX_DEBOUNCE_SECONDS).optional(),
        message: z.string().trim().min(1, 'must not be empty').max(MAX_WATCH_MESSAGE_CHARS).optional(),
      }),
    )
    .max(10)
    .optional()
    .describe(
      'Env-data keys this agent watches in every root it runs in: a committed change to one wakes a turn of it.',
    ),
});

export type AgentFrontmatter = z.infer<typeof agentFrontmatterSchema>;

/** A loaded agent: its frontmatter, its system-prompt body and where it came from. */
export interface AgentDefinition extends AgentFrontmatter {
  /** The markdown body after the frontmatter: the system-prompt template. */
  body: string;
  /** Path of the file it was loaded from, for error messages. */
  source: string;
}

/**
 * The models an agent's calls go to, in the order they are tried: its `model` (one, or a fallback chain), or the
 * worker's default (`undefined`) when it names none.
 */
export function modelChain(agent: Pick<AgentFrontmatter, 'model'>): readonly (string | undefined)[] {
  if (agent.model === undefined) return [undefined];
  return typeof agent.model === 'string' ? [agent.model] : agent.model;
}

/** The approval rule an agent sets for `tool` (`approval` in its frontmatter), or `undefined` when it sets none. */
export function agentApprovalRule(agent: AgentDefinition, tool: string): { timeoutS?: number } | undefined {
  for (const entry of agent.approval) {
    if (typeof entry === 'string' ? entry === tool : entry.tool === tool) {
      return typeof entry === 'string' || entry.timeout_s === undefined ? {} : { timeoutS: entry.timeout_s };
    }
  }
  return undefined;
}

/** The tool an `approval` entry names. */
export function approvalTool(entry: AgentFrontmatter['approval'][number]): string {
  return typeof entry === 'string' ? entry : entry.tool;
}

/** The agents a worker can run, by name (loaded by `worker/agents.ts`, read by activities). */
export type AgentRegistry = ReadonlyMap<string, AgentDefinition>;

/** What a turn keeps of its agent: the version it resolved at start and the limits it runs under. */
export interface ResolvedAgent {
  name: string;
  /** Content hash of the definition; model calls and tools load exactly this version. */
  version: string;
  maxSteps: number;
  /**
   * Where the turn's steps run, decided as it begins (`beginTurn`: the agent's `steps`, else the world's, else the
   * worker's) and recorded with that local activity, so a replay runs them the same way. Absent in turns begun before
   * step modes existed, and in those that resolve their agent without `beginTurn`: activities.
   */
  steps?: StepMode;
  /** `ask` when the agent's turns ask a person for more once their budget is spent (`on_budget`); absent: they stop. */
  onBudget?: 'ask';
}
