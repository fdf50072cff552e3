import type { z } from 'zod';
import type { AgentDefinition } from '../../common/agent-definition';
import type { ThreadScope } from '../../common/types';
import type { EnvStore } from '../../db/env-data';

/** What a tool run knows about its caller. Scope comes from the workflow, never from the model's arguments. */
export interface ToolContext {
  readonly scope: ThreadScope;
  /** The definition (at the version the turn started with) of the agent calling the tool. */
  readonly agent: AgentDefinition;
  /** The workflow-computed id of this call: writes record it so a retried call never writes twice. */
  readonly operationId: string;
  /** The shared environment data (scoped by `scope.rootThreadId`). */
  readonly env: EnvStore;
  /** The world the conversation runs in, with its variables as they are now (parsed from its `.env` text). */
  readonly world: WorldContext;
  /** Aborted when the activity is cancelled; long-running tools must honour it. */
  readonly signal: AbortSignal;
  /** Reports liveness from long-running tools (the activity's heartbeat). */
  heartbeat(details?: unknown): void;
}

/** A world as tools see it. */
export interface WorldContext {
  readonly name: string;
  /** The world's variables (last assignment wins); `working_directory` is the directory tools work in. */
  readonly variables: Readonly<Record<string, string>>;
}

/** What a tool returns: text as is, anything else as its JSON. */
export type ToolOutput = string | Record<string, unknown> | unknown[];

/**
 * A tool's parameters, description and behaviour, declared once: the model receives JSON Schema generated from
 * `parameters`, and arguments are parsed with the same schema before `run` sees them.
 */
export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  /** What the model reads to decide when to call it. */
  readonly description: string;
  /** A `z.strictObject`, so invented arguments (a scope, say) are refused rather than ignored. */
  readonly parameters: S;
  /**
   * `activity`: `run` executes inside the tool activity. `workflow`: the workflow carries it out (waiting for a
   * human, delegating), and `run` is absent.
   */
  readonly handledBy: 'activity' | 'workflow';
  /**
   * The tool changes things outside Baton's own fenced, idempotent writes (the shell does). It then runs at most once
   * per operation id: a retried activity never runs it again, and it never runs for a reclaimed turn.
   * @default false
   */
  readonly sideEffects?: boolean;
  /**
   * Runs the tool with validated arguments.
   * @throws ToolError for a failure the model can act on (its message becomes the tool result).
   */
  run?(args: z.infer<S>, context: ToolContext): Promise<ToolOutput>;
  /**
   * Checks that need more than the schema (the caller's capabilities, which agents exist), before anything runs.
   * Returns the refusal the model reads, or `undefined` when the call may go ahead.
   */
  check?(args: z.infer<S>, caller: AgentDefinition, agents: AgentLookup): string | undefined;
}

/** What a tool's `check` may ask about agents. */
export interface AgentLookup {
  isAgent(name: string): boolean;
}

/** A failure the model can act on: its message is returned as the tool result and the turn goes on. */
export class ToolError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Declares a tool; keeps the argument type of `run` tied to `parameters`. */
export function defineTool<S extends z.ZodType>(definition: ToolDefinition<S>): ToolDefinition<S> {
  return definition;
}
