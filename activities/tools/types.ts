import type { z } from 'zod';
import type { AgentDefinition } from '../../common/agent-definition';
import type { ThreadScope } from '../../common/types';
import type { AgentEnv } from './agent-env';

/**
 * What a tool run knows about its caller. Scope comes from the workflow, never from the model's arguments.
 */
export interface ToolContext {
  /**
   * The workflow-computed id of this call (`<run id>:tool:<step>:<index>`): the same on every retry of the call and
   * different for every other call. Pass it to outside APIs as the idempotency key, so a retried call is recognised.
   */
  readonly operationId: string;
  /** The calling agent's thread. */
  readonly threadId: string;
  /** The root thread of the conversation: what scopes env data, questions and approvals. */
  readonly rootThreadId: string;
  /** The calling thread's ids and epoch, as the workflow set them. */
  readonly scope: ThreadScope;
  /** The definition (at the version the turn started with) of the agent calling the tool. */
  readonly agent: AgentDefinition;
  /** The shared environment data, read and written as the calling agent (see `AgentEnv`). */
  readonly env: AgentEnv;
  /** The world the conversation runs in, with its variables as they are now (parsed from its `.env` text). */
  readonly world: WorldContext;
  /**
   * Aborted when the call should stop: its turn was cancelled or reclaimed, or the tool ran past its `timeout_s`.
   * Long-running tools must honour it (pass it on to `fetch`, child processes, …).
   */
  readonly signal: AbortSignal;
  /** Reports liveness and progress from long-running tools (the activity's heartbeat; details show in the Web UI). */
  heartbeat(details?: unknown): void;
}

/** What `needsApproval` may look at besides the arguments. */
export interface ApprovalContext {
  readonly threadId: string;
  readonly rootThreadId: string;
  readonly agent: AgentDefinition;
  readonly world: WorldContext;
}

/** A world as tools see it. */
export interface WorldContext {
  readonly name: string;
  /** The world's variables (last assignment wins); `working_directory` is the directory tools work in. */
  readonly variables: Readonly<Record<string, string>>;
}

/** What a tool returns: text as is, anything else as its JSON (nothing as an empty result). */
export type ToolOutput = string | number | boolean | null | undefined | Record<string, unknown> | unknown[];

/**
 * A tool's parameters, description and behaviour, declared once: the model receives JSON Schema generated from
 * `parameters`, and arguments are parsed with the same schema before `run` sees them.
 */
export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  /** How agents name it in `capabilities` and how the model calls it: letters, digits, `_` and `-`, at most 64. */
  readonly name: string;
  /** What the model reads to decide when to call it. */
  readonly description: string;
  /** A zod object (`z.object`, or `z.strictObject` to refuse arguments the schema does not name). */
  readonly parameters: S;
  /**
   * `activity` (the default): `run` executes inside a tool activity. `workflow`: the workflow carries it out
   * (waiting for a human, delegating), and `run` is absent. Only Baton's own tools are `workflow`.
   */
  readonly handledBy?: 'activity' | 'workflow';
  /**
   * The tool changes things outside Baton's own fenced, idempotent writes (the shell does; so does a tool that calls
   * an outside API). It then runs at most once per operation id: a retried activity never runs it again, and when
   * the worker running it died, the model is told the outcome is unknown. It never runs for a reclaimed turn.
   * @default false
   */
  readonly sideEffects?: boolean;
  /**
   * Seconds one run may take; past them its `signal` is aborted and the model is told it did not finish. Users'
   * tools default to `DEFAULT_USER_TOOL_TIMEOUT_S`; Baton's own tools to their activity's timeout.
   */
  readonly timeout_s?: number;
  /**
   * How many more times a run that throws (anything but a `ToolError`), or whose worker died, is tried before the
   * model gets an `Error:` result. Only for tools without `sideEffects` (those run once). Users' tools default to
   * `DEFAULT_USER_TOOL_RETRIES`; Baton's own tools leave it unset, so a throw fails the attempt like any activity.
   */
  readonly retries?: number;
  /**
   * A person must approve each call before it runs (`baton approve`); a function decides per call from the arguments
   * and the caller. The turn waits durably, with no activity running. A function that throws counts as `true`.
   * @default false
   */
  readonly needsApproval?: boolean | ApprovalCheck<z.infer<S>>['decide'];
  /** Seconds an approval may wait before the call is rejected; without it, an approval waits as long as it takes. */
  readonly approvalTimeout_s?: number;
  /**
   * The longest result kept, in UTF-8 bytes: a longer one is cut and says so. Users' tools default to
   * `DEFAULT_USER_TOOL_MAX_RESULT_BYTES`; Baton's own tools bound their results themselves.
   */
  readonly maxResultBytes?: number;
  /**
   * Runs the tool with validated arguments. Text is returned as is, anything else as its JSON.
   * @throws ToolError for a failure the model can act on (its message becomes the tool result).
   */
  run?(args: z.infer<S>, context: ToolContext): ToolOutput | Promise<ToolOutput>;
  /**
   * Checks that need more than the schema (the caller's capabilities, which agents exist), before anything runs.
   * Returns the refusal the model reads, or `undefined` when the call may go ahead.
   */
  check?(args: z.infer<S>, caller: AgentDefinition, agents: AgentLookup): string | undefined;
}

/** Declared as a method so a tool typed for its own arguments fits where any tool is expected. */
interface ApprovalCheck<A> {
  decide(args: A, context: ApprovalContext): boolean | Promise<boolean>;
}

/** What a tool's `check` may ask about agents. */
export interface AgentLookup {
  isAgent(name: string): boolean;
}

/** Marks a `ToolError` across copies of Baton (a user's tool module may load another copy than the worker's). */
const TOOL_ERROR = Symbol.for('baton.ToolError');

/** A failure the model can act on: its message is returned as the tool result and the turn goes on. */
export class ToolError extends Error {
  readonly [TOOL_ERROR] = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Whether `error` is a `ToolError`, from this copy of Baton or another one. */
export function isToolError(error: unknown): error is ToolError {
  return typeof error === 'object' && error !== null && (error as { [TOOL_ERROR]?: unknown })[TOOL_ERROR] === true;
}

/** Declares a tool; keeps the argument type of `run` tied to `parameters`. */
export function defineTool<S extends z.ZodType>(definition: ToolDefinition<S>): ToolDefinition<S> {
  return definition;
}
