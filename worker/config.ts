import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_MAX_ENV_VALUE_BYTES } from '../common/env-data';

/**
 * The ARC-AGI-1 training tasks the repository carries (`data/arc/training`), resolved from the repository root, not
 * the working directory: `load_arc_task` reads them when `BATON_ARC_DIR` is unset.
 */
export const DEFAULT_ARC_DATA_DIR = path.resolve(__dirname, '..', 'data', 'arc', 'training');

/** A configuration error found at start-up: names every bad setting at once. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = new.target.name;
  }
}

const optionalText = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

/** Environment variables of a Baton worker (the README's table documents each one). */
export const workerEnvSchema = z.object({
  TEMPORAL_ADDRESS: z.string().trim().min(1, 'is required (host:port of the Temporal frontend)'),
  TEMPORAL_NAMESPACE: z.string().trim().min(1).default('default'),
  BATON_TASK_QUEUE: z.string().trim().min(1).default('baton'),
  DATABASE_URL: z.url({ message: 'must be a postgres:// URL' }),
  OPENAI_BASE_URL: z.url({ message: 'must be an http(s) URL' }).optional(),
  OPENAI_API_KEY: optionalText,
  BATON_MODEL: z.string().trim().min(1).default('gpt-4o-mini'),
  BATON_AGENTS_DIR: z.string().trim().min(1).default('agents'),
  BATON_FILES_ROOT: optionalText,
  BATON_ARC_DIR: optionalText,
  BATON_ENV_MAX_VALUE_BYTES: z.coerce
    .number({ message: 'must be a number of bytes' })
    .int({ message: 'must be a whole number of bytes' })
    .min(1024, { message: 'must be at least 1024 bytes' })
    .max(16 * 1024 * 1024, { message: 'must be at most 16 MiB' })
    .optional(),
});

export interface WorkerConfig {
  readonly temporalAddress: string;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly databaseUrl: string;
  readonly model: ModelConfig;
  readonly agentsDir: string;
  readonly tools: ToolsConfig;
}

export interface ToolsConfig {
  /** The directory `read_file` and `list_files` are confined to. */
  readonly filesRoot: string;
  /** The directory of ARC task files for `load_arc_task`. */
  readonly arcDataDir: string;
  /** Largest env-data value, as JSON. @default 100 KiB */
  readonly maxEnvValueBytes: number;
  /** The base environment of shell commands: the worker's PATH, HOME and LANG (see {@link toolEnvironment}). */
  readonly shellEnv: Readonly<Record<string, string>>;
}

/**
 * Tool settings from the environment; `cwd` is the files root when `BATON_FILES_ROOT` is unset.
 * @throws ConfigError for an invalid `BATON_ENV_MAX_VALUE_BYTES`.
 */
export function readToolsConfig(env: Record<string, string | undefined>, cwd: string): ToolsConfig {
  const limit = workerEnvSchema.shape.BATON_ENV_MAX_VALUE_BYTES.safeParse(
    env.BATON_ENV_MAX_VALUE_BYTES?.trim() || undefined,
  );
  if (!limit.success) {
    throw new ConfigError(limit.error.issues.map((issue) => `BATON_ENV_MAX_VALUE_BYTES ${issue.message}`));
  }
  return Object.freeze({
    filesRoot: path.resolve(cwd, env.BATON_FILES_ROOT?.trim() || '.'),
    arcDataDir: path.resolve(cwd, env.BATON_ARC_DIR?.trim() || DEFAULT_ARC_DATA_DIR),
    maxEnvValueBytes: limit.data ?? DEFAULT_MAX_ENV_VALUE_BYTES,
    shellEnv: Object.freeze(toolEnvironment(env)),
  });
}

export interface ModelConfig {
  /** OpenAI-compatible endpoint; the `openai` client's default when unset. */
  readonly baseURL?: string | undefined;
  readonly apiKey: string;
  readonly model: string;
}

/**
 * Reads the worker configuration from environment variables, once, at the edge.
 * @throws ConfigError naming every invalid or missing variable.
 */
export function readWorkerConfig(env: Record<string, string | undefined>, cwd = process.cwd()): WorkerConfig {
  const parsed = workerEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`));
  }
  const value = parsed.data;
  if (!value.OPENAI_API_KEY) {
    throw new ConfigError([
      'OPENAI_API_KEY is required for a production worker (use `baton dev` for the scripted model)',
    ]);
  }
  return Object.freeze({
    temporalAddress: value.TEMPORAL_ADDRESS,
    namespace: value.TEMPORAL_NAMESPACE,
    taskQueue: value.BATON_TASK_QUEUE,
    databaseUrl: value.DATABASE_URL,
    model: Object.freeze({ baseURL: value.OPENAI_BASE_URL, apiKey: value.OPENAI_API_KEY, model: value.BATON_MODEL }),
    agentsDir: value.BATON_AGENTS_DIR,
    tools: readToolsConfig(env, cwd),
  });
}

/** The worker's variables a tool's process may see; everything else (DATABASE_URL, OPENAI_*, TEMPORAL_*) stays out. */
export const TOOL_ENV_VARIABLES = ['PATH', 'HOME', 'LANG'] as const;

/** The base environment of tool processes (the shell), picked from the worker's: PATH, HOME and LANG only. */
export function toolEnvironment(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of TOOL_ENV_VARIABLES) {
    const value = env[name];
    if (value !== undefined && value !== '') picked[name] = value;
  }
  return picked;
}
