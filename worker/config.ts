import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { DEFAULT_STEP_MODE, STEP_MODES, type StepMode } from '../common/agent-definition';
import { DEFAULT_MAX_ENV_VALUE_BYTES } from '../common/env-data';
import { DEFAULT_PROVIDER, PROVIDER_NAME_PATTERN, PROVIDER_NAME_RULE } from '../activities/model-providers';
import type { ModelLimit, ModelLimits } from '../activities/model-limits';
import type { ModelPrice, ModelPrices } from '../activities/model-prices';
import type { ShellSandboxSetting } from '../activities/tools/shell-sandbox';
import {
  ACCESS_TOKEN_FILE,
  accessTokenProblem,
  AccessTokenError,
  readAccessTokenFile,
  stackAccessToken,
} from '../stack/access-token';
import { workflowBundleProblem } from './workflow-bundle';
import {
  metricsSettingsFrom,
  tracingEnvShape,
  tracingSettingsFrom,
  type OtlpMetricsSettings,
  type TracingSettings,
} from './tracing';
import {
  profileNamed,
  readTemporalSettings,
  TemporalSettingsError,
  type ReadTemporalSettingsOptions,
  type TemporalTlsConfig,
} from './temporal-settings';

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

/** `''` counts as unset, as docker-compose.yml passes an unset `${VAR:-}`. */
const emptyAsUnset = (value: unknown): unknown =>
  typeof value === 'string' && value.trim() === '' ? undefined : value;

/** A whole number within bounds, `default` when unset. */
function envInteger(what: string, min: number, max: number, fallback: number) {
  return z.preprocess(
    emptyAsUnset,
    z.coerce
      .number({ message: `must be a number of ${what}` })
      .int({ message: `must be a whole number of ${what}` })
      .min(min, { message: `must be at least ${min}` })
      .max(max, { message: `must be at most ${max}` })
      .default(fallback),
  );
}

/** `host:port` (`[::]:port` for IPv6) for a listening socket. */
const listenAddress = z.preprocess(
  emptyAsUnset,
  z
    .string()
    .trim()
    .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):\d{1,5}$/, { message: 'must be host:port, e.g. 0.0.0.0:9464' })
    .optional(),
);

/**
 * Baton's Postgres: a `postgres://` or `postgresql://` URL (what `pg` connects with); says "required" when missing
 * rather than "invalid". A wrong scheme is named, never the URL itself, which may hold a password.
 */
const databaseUrl = z.url({
  protocol: /^postgres(ql)?$/,
  error: (issue) => {
    if (issue.input === undefined) return 'is required (a postgres:// URL)';
    const scheme = typeof issue.input === 'string' ? /^([a-z][a-z0-9+.-]*:)\/\//i.exec(issue.input)?.[1] : undefined;
    return `must be a postgres:// or postgresql:// URL${scheme === undefined ? '' : `, not ${scheme}`}`;
  },
});

/** `host:port` of the Temporal frontend (`[::1]:7233` for IPv6), the port from 1 to 65535; no scheme, no path. */
const temporalAddress = z
  .string({ error: 'is required (host:port of the Temporal frontend)' })
  .trim()
  .min(1, 'is required (host:port of the Temporal frontend)')
  .refine(
    (address) => /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):([1-9][0-9]{0,4})$/.test(address) && portOf(address) <= 65535,
    {
      error: (issue) =>
        `must be host:port of the Temporal frontend (e.g. temporal.example:7233 or [::1]:7233), not '${String(issue.input)}'`,
    },
  );

function portOf(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1));
}

/**
 * Checks `DATABASE_URL` and `TEMPORAL_ADDRESS` where they are set, with the rules `baton worker` applies: for the CLI
 * and `baton dev`, which use them when present and start or find their own servers otherwise.
 * @throws ConfigError naming each bad variable
 */
export function checkConnectionVariables(env: Readonly<Record<string, string | undefined>>): void {
  const problems: string[] = [];
  for (const [name, schema] of [
    ['DATABASE_URL', databaseUrl],
    ['TEMPORAL_ADDRESS', temporalAddress],
  ] as const) {
    const value = env[name]?.trim();
    if (!value) continue;
    const parsed = schema.safeParse(value);
    if (!parsed.success) problems.push(...parsed.error.issues.map((issue) => `${name} ${issue.message}`));
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

/**
 * How to reach Temporal, shared by `baton worker` and `baton setup`: the variables Temporal's own tools read, and the
 * `temporal.toml` profile they name (worker/temporal-settings.ts reads them all; listed here for the reference and
 * the deployment checks). TLS is on when a client certificate, a CA, a server name or an API key is given (Temporal
 * Cloud takes either mTLS or an API key, both over TLS), or with `TEMPORAL_TLS=true`.
 */
export const temporalEnvSchema = z.object({
  /** Required, unless the profile names the address. */
  TEMPORAL_ADDRESS: optionalText,
  TEMPORAL_NAMESPACE: optionalText,
  TEMPORAL_API_KEY: optionalText,
  TEMPORAL_TLS: optionalText,
  TEMPORAL_TLS_CLIENT_CERT_PATH: optionalText,
  TEMPORAL_TLS_CLIENT_KEY_PATH: optionalText,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: optionalText,
  TEMPORAL_TLS_CLIENT_CERT_DATA: optionalText,
  TEMPORAL_TLS_CLIENT_KEY_DATA: optionalText,
  TEMPORAL_TLS_SERVER_CA_CERT_DATA: optionalText,
  TEMPORAL_TLS_SERVER_NAME: optionalText,
  TEMPORAL_PROFILE: optionalText,
  TEMPORAL_CONFIG_FILE: optionalText,
  /** Deprecated names of TEMPORAL_TLS_CLIENT_CERT_PATH, _CLIENT_KEY_PATH and _SERVER_CA_CERT_PATH. */
  TEMPORAL_TLS_CERT: optionalText,
  TEMPORAL_TLS_KEY: optionalText,
  TEMPORAL_TLS_CA: optionalText,
  BATON_LOG_LEVEL: z.preprocess(
    (value) => (typeof value === 'string' && value.trim() !== '' ? value.trim().toUpperCase() : undefined),
    z
      .enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'], { message: 'must be TRACE, DEBUG, INFO, WARN or ERROR' })
      .default('WARN'),
  ),
});

/** Environment variables of `baton setup`: Temporal, Baton's database, and the new namespace's retention. */
export const setupEnvSchema = temporalEnvSchema.extend({
  DATABASE_URL: databaseUrl,
  /** Days Temporal keeps a closed workflow's history, for a namespace `baton setup` creates. */
  BATON_NAMESPACE_RETENTION_DAYS: envInteger('days', 1, 3650, 7),
});

/** Environment variables of a Baton worker (worker/environment.ts registers each one for the reference). */
export const workerEnvSchema = temporalEnvSchema.extend({
  BATON_TASK_QUEUE: z.string().trim().min(1).default('baton'),
  DATABASE_URL: databaseUrl,
  /** Most Postgres connections one worker process holds (the server's max_connections covers the sum). */
  BATON_DB_POOL_SIZE: envInteger('connections', 1, 1000, 10),
  OPENAI_BASE_URL: z.preprocess(emptyAsUnset, z.url({ message: 'must be an http(s) URL' }).optional()),
  OPENAI_API_KEY: optionalText,
  /** A scripted-model script to answer from when OPENAI_API_KEY is unset (docker-compose.yml sets it). */
  BATON_MODEL_SCRIPT: optionalText,
  BATON_MODEL: z.string().trim().min(1).default('gpt-4o-mini'),
  /** `on`: ask every endpoint for streamed replies and assemble them; `off` (the default): whole replies. */
  BATON_MODEL_STREAM: z.preprocess(
    (value) => (typeof value === 'string' && value.trim() !== '' ? value.trim().toLowerCase() : undefined),
    z.enum(['on', 'off'], { message: 'must be on (streamed model replies) or off (whole replies)' }).default('off'),
  ),
  /** Where turns run their steps when their agent and world set none: `activity` (the default) or `local`. */
  BATON_STEPS: z.preprocess(
    (value) => (typeof value === 'string' && value.trim() !== '' ? value.trim().toLowerCase() : undefined),
    z
      .enum(STEP_MODES, {
        message:
          'must be local (steps inside the workflow task), batched (several steps per local activity) or activity (one task per step)',
      })
      .default(DEFAULT_STEP_MODE),
  ),
  /** More model endpoints, as JSON: `{"<name>": {"base_url": …, "api_key_env": …}}` (see `readProviders`). */
  BATON_PROVIDERS: optionalText,
  /** Limits on model calls every worker shares, as JSON by provider or provider/model (see `readModelLimits`). */
  BATON_MODEL_LIMITS: optionalText,
  /** Prices of model calls, as JSON by provider or provider/model (see `readModelPrices`). */
  BATON_MODEL_PRICES: optionalText,
  /** Providers whose endpoints take `response_format: json_schema`, comma-separated (see `readStructuredOutput`). */
  BATON_STRUCTURED_OUTPUT: optionalText,
  /**
   * Fault injection for tests only: the worker kills itself (SIGKILL) after a write of this env-data key commits and
   * before it signals the key's watchers, as a crash there would (the chaos test of watchers sets it).
   */
  BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL: optionalText,
  /**
   * Seconds between the worker's watch sweeps, which signal the watchers of env-data changes no signal told them
   * about (their writer's worker died between the commit and the signal, or Temporal refused it).
   */
  BATON_WATCH_SWEEP_SECONDS: envInteger('seconds', 1, 3600, 10),
  BATON_AGENTS_DIR: z.string().trim().min(1).default('agents'),
  BATON_FILES_ROOT: optionalText,
  BATON_ARC_DIR: optionalText,
  /** Users' tool modules (JavaScript or TypeScript), comma-separated, loaded at start. */
  BATON_TOOLS: optionalText,
  /** A JSON file naming the MCP servers whose tools agents may call (`{ "mcpServers": { … } }`). */
  BATON_MCP_CONFIG: optionalText,
  /** `bwrap` (the default): every shell command in a bubblewrap sandbox; `none`: unsandboxed, warned at start. */
  BATON_SHELL_SANDBOX: z.preprocess(
    (value) => (typeof value === 'string' && value.trim() !== '' ? value.trim().toLowerCase() : undefined),
    z
      .enum(['bwrap', 'none'], {
        message: 'must be bwrap (every shell command in a bubblewrap sandbox) or none (no sandbox)',
      })
      .default('bwrap'),
  ),
  /** The bubblewrap executable, when not the `bwrap` on PATH. */
  BATON_BWRAP: optionalText,
  /** The slirp4netns executable that gives shell commands egress, when not the `slirp4netns` on PATH. */
  BATON_SLIRP4NETNS: optionalText,
  // Plain decimal digits: z.coerce.number would also take '0x10', '1e4' or ' 2048 '.
  BATON_ENV_MAX_VALUE_BYTES: z
    .string()
    .regex(/^[0-9]+$/, { message: 'must be a number of bytes (decimal digits only)' })
    .transform(Number)
    .pipe(
      z
        .int({ message: 'must be a whole number of bytes' })
        .min(1024, { message: 'must be at least 1024 bytes' })
        .max(16 * 1024 * 1024, { message: 'must be at most 16 MiB' }),
    )
    .optional(),
  /** Activities (model calls, tools, writes) one worker runs at once. */
  BATON_MAX_CONCURRENT_ACTIVITIES: envInteger('activities', 1, 10_000, 100),
  /** Workflow tasks (turn steps) one worker runs at once. */
  BATON_MAX_CONCURRENT_WORKFLOW_TASKS: envInteger('workflow tasks', 2, 10_000, 40),
  /** Workflows kept in the worker's sticky cache (each costs memory; a miss replays the history). */
  BATON_MAX_CACHED_WORKFLOWS: envInteger('workflows', 0, 100_000, 1000),
  /** Serve the SDK's Prometheus metrics at http://<address>/metrics. Off when unset. */
  BATON_METRICS_ADDRESS: listenAddress,
  /** Serve GET /healthz (200 while the worker polls, 503 otherwise). Off when unset. */
  BATON_HEALTH_ADDRESS: listenAddress,
  /** The worker's identity in Temporal (Web UI, task history). */
  BATON_WORKER_IDENTITY: optionalText,
  /** A workflow bundle `baton bundle` wrote (e.g. at image build), so a starting worker skips seconds of webpack. */
  BATON_WORKFLOW_BUNDLE: optionalText,
  /**
   * Seconds a SIGTERM'd worker lets running activities finish before cancelling them (they then retry elsewhere);
   * the worker exits 0 once drained.
   */
  BATON_SHUTDOWN_GRACE_S: envInteger('seconds', 0, 3600, 30),
  /**
   * The key that signs approvals' decisions (at least 32 characters): set the same one on every worker and on
   * whatever decides (the CLI, the explorer, `baton mcp serve`). Without it, anyone who reaches Temporal can decide.
   */
  BATON_DECISION_KEY: optionalText,
  /** A file holding that key instead (a mounted secret), relative to the working directory. */
  BATON_DECISION_KEY_FILE: optionalText,
  /** OpenTelemetry's standard variables: traces exported over OTLP/HTTP when an endpoint is set (worker/tracing.ts). */
  ...tracingEnvShape,
});

export type { TemporalTlsConfig };

/** How to reach Temporal. */
export interface TemporalConnectionConfig {
  readonly address: string;
  readonly namespace: string;
  /** TLS, or `undefined` for plaintext. */
  readonly tls?: TemporalTlsConfig;
  readonly apiKey?: string;
  /** gRPC headers sent with every call (a profile's `grpc_meta`, `TEMPORAL_GRPC_META_*`). */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The `temporal.toml` profile the settings came from, when a file held one. */
  readonly profile?: { readonly name: string; readonly file: string };
  /** Lines for a person about how it was configured (a deprecated variable in use). */
  readonly notices?: readonly string[];
}

export interface WorkerConfig {
  readonly temporalAddress: string;
  readonly namespace: string;
  /** Address, namespace, TLS and API key. */
  readonly temporal: TemporalConnectionConfig;
  readonly taskQueue: string;
  readonly databaseUrl: string;
  /** @default 10 */
  readonly dbPoolSize: number;
  readonly model: ModelConfig;
  /** The endpoints besides the default one that agents name as `provider/model` (BATON_PROVIDERS). */
  readonly providers: readonly ProviderConfig[];
  /** Limits on model calls every worker of the task queue shares (BATON_MODEL_LIMITS); empty: none. */
  readonly modelLimits: ModelLimits;
  /** What model calls cost, for budgets in dollars (BATON_MODEL_PRICES); empty: none. */
  readonly modelPrices: ModelPrices;
  /** Providers whose endpoints a typed agent's calls ask for structured output (BATON_STRUCTURED_OUTPUT). */
  readonly structuredOutput: readonly string[];
  /** Model calls ask for streamed replies and assemble them (BATON_MODEL_STREAM=on). */
  readonly modelStream: boolean;
  /** Where turns run their steps when their agent and world set none (BATON_STEPS). */
  readonly steps: StepMode;
  /** Faults a test injects (BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL); none in normal use. */
  readonly watchFaults?: { killBeforeSignalForKey?: string };
  /** Seconds between watch sweeps (BATON_WATCH_SWEEP_SECONDS). @default 10 */
  readonly watchSweepSeconds: number;
  /** Answer from this scripted-model script (no API key set). */
  readonly modelScript?: string;
  readonly agentsDir: string;
  /** A pre-built workflow bundle (absolute path); the worker bundles `workflows/` itself when unset. */
  readonly workflowBundle?: string;
  readonly tools: ToolsConfig;
  readonly worker: WorkerTuning;
  /** Temporal SDK log level. @default 'WARN' */
  readonly logLevel: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** The key approvals' decisions are signed with (BATON_DECISION_KEY or BATON_DECISION_KEY_FILE); none: unsigned. */
  readonly decisionKey?: DecisionKey;
  /** Where spans go (the `OTEL_*` variables); unset: the worker traces nothing. */
  readonly tracing?: TracingSettings;
  /** Where metrics go over OTLP (the `OTEL_*` variables), when `BATON_METRICS_ADDRESS` does not serve them. */
  readonly otlpMetrics?: OtlpMetricsSettings;
}

/** The decision key, and where it was read from (for messages: the key itself is never printed). */
export interface DecisionKey {
  readonly key: string;
  /** `BATON_DECISION_KEY`, the file it was read from, or the stack's token file. */
  readonly source: string;
}

/** What a worker without a decision key prints at start. */
export const UNSIGNED_DECISIONS_WARNING =
  'approvals: decisions are not signed (no BATON_DECISION_KEY): anyone who reaches this Temporal namespace can decide them';

/**
 * The line a worker prints at start about its approvals: whence its decision key, or the warning that decisions are
 * not signed.
 */
export function describeDecisionSigning(decisionKey: DecisionKey | undefined): string {
  return decisionKey === undefined
    ? `warning: ${UNSIGNED_DECISIONS_WARNING}`
    : `approvals: decisions are signed with the key of ${decisionKey.source}; only clients holding it can decide`;
}

/**
 * A local stack's decision key: the secret token of its state directory (`.baton/token`, the explorer's too), made
 * on first use (mode 600, out of every agent's view), so a stack and the CLI beside it sign and check decisions with
 * nothing to configure.
 * @throws AccessTokenError when the file cannot be made or read.
 */
export function stackDecisionKey(stateDir: string): DecisionKey {
  const { token, source } = stackAccessToken(stateDir);
  return Object.freeze({ key: token, source });
}

/**
 * The decision key of the running local stack whose state directory is `stateDir`, if it has one: its token file,
 * read but never made (a stack makes it as it starts).
 * @throws ConfigError when the file exists and holds no usable key.
 */
export function runningStackDecisionKey(stateDir: string): DecisionKey | undefined {
  const file = path.resolve(stateDir, ACCESS_TOKEN_FILE);
  if (!fs.existsSync(file)) return undefined;
  try {
    return Object.freeze({ key: readAccessTokenFile(file), source: file });
  } catch (error) {
    if (error instanceof AccessTokenError) throw new ConfigError([error.message]);
    throw error;
  }
}

/**
 * The decision key from `BATON_DECISION_KEY` or `BATON_DECISION_KEY_FILE` (one, not both; `''` counts as unset), with
 * the explorer's token checks: at least 32 characters, the characters of a token. `undefined` when neither is set.
 * A file's path is resolved against `cwd`.
 * @throws ConfigError naming the variable and why its key cannot be used.
 */
export function readDecisionKey(
  env: Readonly<Record<string, string | undefined>>,
  cwd = process.cwd(),
): DecisionKey | undefined {
  const value = env.BATON_DECISION_KEY?.trim() || undefined;
  const file = env.BATON_DECISION_KEY_FILE?.trim() || undefined;
  if (value !== undefined && file !== undefined) {
    throw new ConfigError(['BATON_DECISION_KEY and BATON_DECISION_KEY_FILE are both set: set one of them']);
  }
  if (value !== undefined) {
    const problem = accessTokenProblem(value);
    if (problem !== undefined) throw new ConfigError([`BATON_DECISION_KEY ${problem}`]);
    return Object.freeze({ key: value, source: 'BATON_DECISION_KEY' });
  }
  if (file === undefined) return undefined;
  const resolved = path.resolve(cwd, file);
  try {
    return Object.freeze({ key: readAccessTokenFile(resolved), source: resolved });
  } catch (error) {
    if (error instanceof AccessTokenError) throw new ConfigError([`BATON_DECISION_KEY_FILE: ${error.message}`]);
    throw error;
  }
}

/** Concurrency, cache, identity and the opt-in endpoints of one worker process. */
export interface WorkerTuning {
  /** @default 100 */
  readonly maxConcurrentActivityTaskExecutions: number;
  /** @default 40 */
  readonly maxConcurrentWorkflowTaskExecutions: number;
  /** @default 1000 */
  readonly maxCachedWorkflows: number;
  /** `baton-worker <pid>@<host>` unless BATON_WORKER_IDENTITY says otherwise. */
  readonly identity: string;
  /**
   * Milliseconds running activities get to finish after SIGTERM/SIGINT before they are cancelled
   * (BATON_SHUTDOWN_GRACE_S). @default 30000
   */
  readonly shutdownGraceTime: number;
  readonly metricsAddress?: string;
  readonly healthAddress?: string;
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
  /**
   * How shell commands are isolated (BATON_SHELL_SANDBOX, BATON_BWRAP, BATON_SLIRP4NETNS); `probeShellSandbox` checks
   * it at start.
   */
  readonly sandbox: ShellSandboxSetting;
  /** Users' tool modules to load (`BATON_TOOLS`), absolute paths in order. */
  readonly toolModules: readonly string[];
  /** The MCP servers' configuration file (`BATON_MCP_CONFIG`), an absolute path. */
  readonly mcpConfig?: string;
}

/**
 * Tool settings from the environment; `cwd` is the files root when `BATON_FILES_ROOT` is unset.
 * @throws ConfigError for an invalid `BATON_ENV_MAX_VALUE_BYTES` or `BATON_SHELL_SANDBOX`.
 */
export function readToolsConfig(env: Record<string, string | undefined>, cwd: string): ToolsConfig {
  const limit = workerEnvSchema.shape.BATON_ENV_MAX_VALUE_BYTES.safeParse(
    env.BATON_ENV_MAX_VALUE_BYTES?.trim() || undefined,
  );
  const sandboxMode = workerEnvSchema.shape.BATON_SHELL_SANDBOX.safeParse(env.BATON_SHELL_SANDBOX);
  const problems = [
    ...(limit.error?.issues.map((issue) => `BATON_ENV_MAX_VALUE_BYTES ${issue.message}`) ?? []),
    ...(sandboxMode.error?.issues.map((issue) => `BATON_SHELL_SANDBOX ${issue.message}`) ?? []),
  ];
  if (!limit.success || !sandboxMode.success) throw new ConfigError(problems);
  const bwrap = env.BATON_BWRAP?.trim();
  const slirp4netns = env.BATON_SLIRP4NETNS?.trim();
  return Object.freeze({
    filesRoot: path.resolve(cwd, env.BATON_FILES_ROOT?.trim() || '.'),
    arcDataDir: path.resolve(cwd, env.BATON_ARC_DIR?.trim() || DEFAULT_ARC_DATA_DIR),
    maxEnvValueBytes: limit.data ?? DEFAULT_MAX_ENV_VALUE_BYTES,
    shellEnv: Object.freeze(toolEnvironment(env)),
    sandbox: Object.freeze({
      mode: sandboxMode.data,
      ...(bwrap ? { bwrap: path.resolve(cwd, bwrap) } : {}),
      ...(slirp4netns ? { slirp4netns: path.resolve(cwd, slirp4netns) } : {}),
    }),
    toolModules: Object.freeze(toolModulePaths(env.BATON_TOOLS, cwd)),
    ...(env.BATON_MCP_CONFIG?.trim() ? { mcpConfig: path.resolve(cwd, env.BATON_MCP_CONFIG.trim()) } : {}),
  });
}

/** `BATON_TOOLS`: comma-separated module paths, each resolved against `cwd`; empty entries are ignored. */
export function toolModulePaths(list: string | undefined, cwd: string): string[] {
  return (list ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => path.resolve(cwd, entry));
}

/**
 * `BATON_WORKFLOW_BUNDLE` (`baton worker`, `baton dev`, `baton demo`): a bundle `baton bundle` wrote, resolved against
 * `cwd`, which the worker starts from instead of bundling its workflows with webpack.
 * @returns its absolute path, or undefined when unset
 * @throws ConfigError when it names no file, or a bundle built from other sources than these workflows
 */
export function readWorkflowBundle(env: Readonly<Record<string, string | undefined>>, cwd: string): string | undefined {
  const value = env.BATON_WORKFLOW_BUNDLE?.trim();
  if (!value) return undefined;
  const workflowBundle = path.resolve(cwd, value);
  if (!fs.statSync(workflowBundle, { throwIfNoEntry: false })?.isFile()) {
    throw new ConfigError([
      `BATON_WORKFLOW_BUNDLE: ${workflowBundle} is not a file (write one with \`baton bundle <file>\`)`,
    ]);
  }
  const problem = workflowBundleProblem(workflowBundle);
  if (problem !== undefined) throw new ConfigError([`BATON_WORKFLOW_BUNDLE: ${problem}`]);
  return workflowBundle;
}

/**
 * `BATON_MODEL_STREAM`: whether model calls ask for streamed replies; `unset` when the variable is not set (off for
 * `baton worker`, on for `baton dev` and the demo, where a person watches).
 * @throws ConfigError for a value other than on or off
 */
export function readModelStream(env: Record<string, string | undefined>, unset: 'on' | 'off' = 'off'): boolean {
  if (!env.BATON_MODEL_STREAM?.trim()) return unset === 'on';
  const parsed = workerEnvSchema.shape.BATON_MODEL_STREAM.safeParse(env.BATON_MODEL_STREAM);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `BATON_MODEL_STREAM ${issue.message}`));
  }
  return parsed.data === 'on';
}

/**
 * `BATON_STEPS`: where turns run their steps when their agent and world set none.
 * @throws ConfigError for a value other than local, batched or activity
 */
export function readStepMode(env: Record<string, string | undefined>): StepMode {
  const parsed = workerEnvSchema.shape.BATON_STEPS.safeParse(env.BATON_STEPS);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((issue) => `BATON_STEPS ${issue.message}`));
  return parsed.data;
}

export interface ModelConfig {
  /** OpenAI-compatible endpoint; the `openai` client's default when unset. */
  readonly baseURL?: string | undefined;
  readonly apiKey: string;
  readonly model: string;
}

/** An OpenAI-compatible endpoint that agents name as `<name>/<model>` (one entry of BATON_PROVIDERS). */
export interface ProviderConfig {
  readonly name: string;
  readonly baseURL: string;
  /** The variable the key was read from. */
  readonly apiKeyEnv: string;
  readonly apiKey: string;
}

/** One provider in BATON_PROVIDERS. Unknown fields are refused, so a misspelt `base_url` is not ignored. */
const providerSchema = z.strictObject({
  base_url: z.url({
    protocol: /^https?$/,
    error: (issue) =>
      issue.input === undefined
        ? 'is required (an http(s) URL)'
        : `must be an http(s) URL (got ${JSON.stringify(issue.input)})`,
  }),
  api_key_env: z
    .string({
      error: (issue) =>
        issue.input === undefined
          ? 'is required (the name of the variable holding the API key; any value for an endpoint that takes none)'
          : 'must be the name of an environment variable',
    })
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'must be the name of an environment variable (letters, digits, _)' }),
});

/**
 * A variable holding a JSON object by name (BATON_PROVIDERS, BATON_MODEL_LIMITS): `undefined` when unset or empty;
 * else the object, the problems found so far (keys written twice, which JSON.parse would hide), and how to fail
 * naming the variable.
 * @throws ConfigError when the text is not JSON or not an object, with an example of `what`
 */
function readJsonObjectVariable(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  what: string,
  example: string,
): { parsed: object; problems: string[]; fail: (problems: readonly string[]) => ConfigError } | undefined {
  const text = env[name]?.trim() ?? '';
  if (text === '') return undefined;
  const fail = (problems: readonly string[]) => new ConfigError(problems.map((p) => `${name} ${p}`));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw fail([`is not valid JSON (${(error as Error).message}); write it as ${example}`]);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw fail([`must be a JSON object of ${what}, e.g. ${example}`]);
  }
  return { parsed, problems: duplicateKeys(text), fail };
}

/** One scope's limits in BATON_MODEL_LIMITS; at least one, each a whole number from 1. */
const modelLimitSchema = z
  .strictObject({
    requests_per_minute: z.int().min(1).optional(),
    tokens_per_minute: z.int().min(1).optional(),
    concurrent: z.int().min(1).optional(),
  })
  .refine((limit) => Object.keys(limit).length > 0, {
    message: 'sets no limit (requests_per_minute, tokens_per_minute, concurrent)',
  });

/** The shape of BATON_MODEL_LIMITS, for error messages. */
const MODEL_LIMITS_EXAMPLE =
  '{"default": {"requests_per_minute": 60, "concurrent": 4}, "local/llama3.1": {"concurrent": 1}}';

/**
 * Reads BATON_MODEL_LIMITS: a JSON object of limits by scope, a provider's name (`default` for the default endpoint)
 * or `<provider>/<model>`, each `{"requests_per_minute", "tokens_per_minute", "concurrent"}` (any of them). Unset (or
 * empty) means no limits.
 * @throws ConfigError naming every problem: bad JSON, a scope naming no configured provider, a bad field or value.
 */
export function readModelLimits(
  env: Readonly<Record<string, string | undefined>>,
  providers: readonly Pick<ProviderConfig, 'name'>[],
): ModelLimits {
  return readScopedTable<ModelLimit>(env, providers, {
    name: 'BATON_MODEL_LIMITS',
    what: 'limits by provider or provider/model',
    example: MODEL_LIMITS_EXAMPLE,
    read: (scope, value) => {
      const limit = modelLimitSchema.safeParse(value);
      if (!limit.success) {
        return limit.error.issues.map((issue) =>
          issue.code === 'unrecognized_keys'
            ? `'${scope}': unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')} (fields: requests_per_minute, tokens_per_minute, concurrent)`
            : issue.path.length === 0
              ? `'${scope}' ${issue.code === 'custom' ? issue.message : 'must be an object of limits'}`
              : `'${scope}': ${issue.path.join('.')} must be a whole number from 1`,
        );
      }
      return Object.freeze({
        ...(limit.data.requests_per_minute === undefined ? {} : { requestsPerMinute: limit.data.requests_per_minute }),
        ...(limit.data.tokens_per_minute === undefined ? {} : { tokensPerMinute: limit.data.tokens_per_minute }),
        ...(limit.data.concurrent === undefined ? {} : { concurrent: limit.data.concurrent }),
      });
    },
  });
}

/**
 * Reads a variable holding a JSON object by scope (BATON_MODEL_LIMITS, BATON_MODEL_PRICES), each scope checked to
 * name an endpoint and its value read by `read` (the problems with it, or what it becomes). Unset (or empty): none.
 * @throws ConfigError naming every problem
 */
function readScopedTable<T>(
  env: Readonly<Record<string, string | undefined>>,
  providers: readonly Pick<ProviderConfig, 'name'>[],
  table: { name: string; what: string; example: string; read: (scope: string, value: unknown) => T | string[] },
): Readonly<Record<string, T>> {
  const json = readJsonObjectVariable(env, table.name, table.what, table.example);
  if (json === undefined) return Object.freeze({});
  const { parsed, problems, fail } = json;
  const entries: Record<string, T> = {};
  for (const [scope, value] of Object.entries(parsed)) {
    const unknown = unknownScope(scope, providers);
    const read = unknown === undefined ? table.read(scope, value) : [unknown];
    if (Array.isArray(read)) problems.push(...read);
    else entries[scope] = read;
  }
  if (problems.length > 0) throw fail(problems);
  return Object.freeze(entries);
}

/**
 * Why a key of BATON_MODEL_LIMITS or BATON_MODEL_PRICES names no endpoint, or `undefined` when it names one: a
 * provider's name (`default` for the default endpoint) or `<provider>/<model>`.
 */
function unknownScope(scope: string, providers: readonly Pick<ProviderConfig, 'name'>[]): string | undefined {
  const known = [DEFAULT_PROVIDER, ...providers.map((provider) => provider.name)];
  const slash = scope.indexOf('/');
  const provider = slash < 0 ? scope : scope.slice(0, slash);
  if (known.includes(provider) && (slash < 0 || scope.slice(slash + 1).trim() !== '')) return undefined;
  return `'${scope}' names no configured provider: write a provider (${known.join(', ')}) or <provider>/<model>`;
}

/**
 * Reads BATON_STRUCTURED_OUTPUT: the providers (`default` for the default endpoint) whose endpoints take
 * `response_format: json_schema` (OpenAI's structured outputs), comma-separated. A typed agent's calls to them ask for
 * its output that way; to any other, through a `final_output` tool, which every endpoint that takes tools can call.
 * Unset (or empty): none.
 * @throws ConfigError naming each name that is no configured provider
 */
export function readStructuredOutput(
  env: Readonly<Record<string, string | undefined>>,
  providers: readonly Pick<ProviderConfig, 'name'>[],
): readonly string[] {
  const names = (env.BATON_STRUCTURED_OUTPUT ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const known = [DEFAULT_PROVIDER, ...providers.map((provider) => provider.name)];
  const unknown = names.filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new ConfigError(
      unknown.map(
        (name) => `BATON_STRUCTURED_OUTPUT: '${name}' is no configured provider (providers: ${known.join(', ')})`,
      ),
    );
  }
  return Object.freeze([...new Set(names)]);
}

/** One scope's price in BATON_MODEL_PRICES: dollars per million input and output tokens. */
const modelPriceSchema = z.strictObject({
  input_per_million: z.number().nonnegative().max(1_000_000),
  output_per_million: z.number().nonnegative().max(1_000_000),
});

/** The shape of BATON_MODEL_PRICES, for error messages. */
const MODEL_PRICES_EXAMPLE =
  '{"default/gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.6}, "local": {"input_per_million": 0, "output_per_million": 0}}';

/**
 * Reads BATON_MODEL_PRICES: a JSON object of prices by scope, as BATON_MODEL_LIMITS is keyed (a model's own price wins
 * over its provider's), each `{"input_per_million", "output_per_million"}` in US dollars. Unset (or empty) means no
 * prices: replies have no cost, and a dollar budget refuses every call.
 * @throws ConfigError naming every problem: bad JSON, a scope naming no configured provider, a missing or bad price.
 */
export function readModelPrices(
  env: Readonly<Record<string, string | undefined>>,
  providers: readonly Pick<ProviderConfig, 'name'>[],
): ModelPrices {
  return readScopedTable<ModelPrice>(env, providers, {
    name: 'BATON_MODEL_PRICES',
    what: 'prices by provider or provider/model',
    example: MODEL_PRICES_EXAMPLE,
    read: (scope, value) => {
      const price = modelPriceSchema.safeParse(value);
      if (!price.success) {
        const fields = price.error.issues.map((issue) =>
          issue.path.length === 0 ? issue.message : issue.path.join('.'),
        );
        return [
          `'${scope}' must be {"input_per_million": <dollars>, "output_per_million": <dollars>}, each from 0 ` +
            `(${fields.join(', ')})`,
        ];
      }
      return Object.freeze({
        inputPerMillion: price.data.input_per_million,
        outputPerMillion: price.data.output_per_million,
      });
    },
  });
}

/** The shape of BATON_PROVIDERS, for error messages. */
const PROVIDERS_EXAMPLE = '{"local": {"base_url": "http://127.0.0.1:11434/v1", "api_key_env": "LOCAL_API_KEY"}}';

/**
 * Reads BATON_PROVIDERS: a JSON object of providers by name, each `{"base_url": "<http(s) URL>", "api_key_env":
 * "<variable>"}`, the key read from that variable of the same environment. Unset (or empty) means no providers.
 * @throws ConfigError naming every problem: bad JSON, a provider defined twice, a bad name, URL or field, a key
 * variable that is not set.
 */
export function readProviders(env: Readonly<Record<string, string | undefined>>): readonly ProviderConfig[] {
  const read = readJsonObjectVariable(env, 'BATON_PROVIDERS', 'providers by name', PROVIDERS_EXAMPLE);
  if (read === undefined) return Object.freeze([]);
  const { parsed, problems, fail } = read;
  const providers: ProviderConfig[] = [];
  for (const [name, value] of Object.entries(parsed)) {
    if (name === DEFAULT_PROVIDER) {
      problems.push(`names a provider '${name}': that name is the default endpoint (OPENAI_BASE_URL)`);
      continue;
    }
    if (!PROVIDER_NAME_PATTERN.test(name)) {
      problems.push(`provider name '${name}' ${PROVIDER_NAME_RULE}`);
      continue;
    }
    const provider = providerSchema.safeParse(value);
    if (!provider.success) {
      problems.push(
        ...provider.error.issues.map((issue) =>
          issue.code === 'unrecognized_keys'
            ? `provider '${name}': unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')} (fields: base_url, api_key_env)`
            : issue.path.length === 0
              ? `provider '${name}' must be an object {"base_url": …, "api_key_env": …}`
              : `provider '${name}': ${issue.path.join('.')} ${issue.message}`,
        ),
      );
      continue;
    }
    const apiKeyEnv = provider.data.api_key_env;
    const apiKey = env[apiKeyEnv]?.trim() ?? '';
    if (apiKey === '') {
      problems.push(`provider '${name}': its API key variable ${apiKeyEnv} is not set`);
      continue;
    }
    providers.push(Object.freeze({ name, baseURL: provider.data.base_url, apiKeyEnv, apiKey }));
  }
  if (problems.length > 0) throw fail(problems);
  return Object.freeze(providers);
}

/**
 * Keys given twice in a JSON object (JSON.parse keeps the last one without a word): a provider, or a field of one.
 * JSON is YAML 1.2, whose parser reports every key as written.
 */
function duplicateKeys(jsonText: string): string[] {
  const document = YAML.parseDocument(jsonText, { uniqueKeys: false });
  const problems: string[] = [];
  const keysOf = (node: unknown): [string, unknown][] =>
    YAML.isMap(node)
      ? node.items.map((pair) => [String(YAML.isScalar(pair.key) ? pair.key.value : pair.key), pair.value])
      : [];
  const seen = new Set<string>();
  for (const [name, value] of keysOf(document.contents)) {
    if (seen.has(name)) problems.push(`defines provider '${name}' twice`);
    seen.add(name);
    const fields = new Set<string>();
    for (const [field] of keysOf(value)) {
      if (fields.has(field)) problems.push(`provider '${name}': sets ${field} twice`);
      fields.add(field);
    }
  }
  return problems;
}

/**
 * Reads the worker configuration from environment variables, once, at the edge; reads the TLS files named there.
 * @throws ConfigError naming every invalid or missing variable.
 */
export function readWorkerConfig(
  env: Record<string, string | undefined>,
  cwd = process.cwd(),
  host: { readonly hostname: string; readonly pid: number } = { hostname: os.hostname(), pid: process.pid },
): WorkerConfig {
  const { value, temporal } = parseEnvWithTemporal(workerEnvSchema, env, cwd);
  if (!value.OPENAI_API_KEY && !value.BATON_MODEL_SCRIPT) {
    throw new ConfigError([
      'OPENAI_API_KEY is required for a production worker (or BATON_MODEL_SCRIPT for the scripted model; `baton dev` runs one too)',
    ]);
  }
  const scripted = !value.OPENAI_API_KEY;
  const workflowBundle = readWorkflowBundle(env, cwd);
  const decisionKey = readDecisionKey(env, cwd);
  const providers = readProviders(env);
  let tracing: TracingSettings | undefined;
  let otlpMetrics: OtlpMetricsSettings | undefined;
  try {
    tracing = tracingSettingsFrom(value);
    // The runtime has one metrics exporter: Prometheus when asked for, else OTLP when an endpoint is set.
    otlpMetrics = value.BATON_METRICS_ADDRESS ? undefined : metricsSettingsFrom(value);
  } catch (error) {
    throw new ConfigError([(error as Error).message]);
  }
  return Object.freeze({
    temporalAddress: temporal.address,
    namespace: temporal.namespace,
    temporal,
    taskQueue: value.BATON_TASK_QUEUE,
    databaseUrl: value.DATABASE_URL,
    dbPoolSize: value.BATON_DB_POOL_SIZE,
    model: Object.freeze({
      baseURL: value.OPENAI_BASE_URL,
      apiKey: value.OPENAI_API_KEY ?? 'scripted',
      model: value.BATON_MODEL,
    }),
    providers,
    modelLimits: readModelLimits(env, providers),
    modelPrices: readModelPrices(env, providers),
    structuredOutput: readStructuredOutput(env, providers),
    modelStream: value.BATON_MODEL_STREAM === 'on',
    steps: value.BATON_STEPS,
    ...(value.BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL === undefined
      ? {}
      : { watchFaults: { killBeforeSignalForKey: value.BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL } }),
    watchSweepSeconds: value.BATON_WATCH_SWEEP_SECONDS,
    ...(scripted && value.BATON_MODEL_SCRIPT ? { modelScript: path.resolve(cwd, value.BATON_MODEL_SCRIPT) } : {}),
    agentsDir: value.BATON_AGENTS_DIR,
    ...(workflowBundle === undefined ? {} : { workflowBundle }),
    tools: readToolsConfig(env, cwd),
    worker: Object.freeze({
      maxConcurrentActivityTaskExecutions: value.BATON_MAX_CONCURRENT_ACTIVITIES,
      maxConcurrentWorkflowTaskExecutions: value.BATON_MAX_CONCURRENT_WORKFLOW_TASKS,
      maxCachedWorkflows: value.BATON_MAX_CACHED_WORKFLOWS,
      identity: value.BATON_WORKER_IDENTITY ?? `baton-worker ${host.pid}@${host.hostname}`,
      shutdownGraceTime: value.BATON_SHUTDOWN_GRACE_S * 1000,
      ...(value.BATON_METRICS_ADDRESS ? { metricsAddress: value.BATON_METRICS_ADDRESS } : {}),
      ...(value.BATON_HEALTH_ADDRESS ? { healthAddress: value.BATON_HEALTH_ADDRESS } : {}),
    }),
    logLevel: value.BATON_LOG_LEVEL,
    ...(decisionKey === undefined ? {} : { decisionKey }),
    ...(tracing === undefined ? {} : { tracing }),
    ...(otlpMetrics === undefined ? {} : { otlpMetrics }),
  });
}

/** What `baton setup` works with. */
export interface SetupConfig {
  readonly temporal: TemporalConnectionConfig;
  readonly databaseUrl: string;
  /** Retention of a namespace `baton setup` creates. @default 7 */
  readonly retentionDays: number;
  readonly logLevel: WorkerConfig['logLevel'];
}

/**
 * Reads `baton setup`'s configuration from environment variables.
 * @throws ConfigError naming every invalid or missing variable.
 */
export function readSetupConfig(env: Record<string, string | undefined>, cwd = process.cwd()): SetupConfig {
  const { value, temporal } = parseEnvWithTemporal(setupEnvSchema, env, cwd);
  return Object.freeze({
    temporal,
    databaseUrl: value.DATABASE_URL,
    retentionDays: value.BATON_NAMESPACE_RETENTION_DAYS,
    logLevel: value.BATON_LOG_LEVEL,
  });
}

/** Every variable `baton worker` and `baton setup` read, for documentation and for checking deployment files. */
export function batonEnvVariables(): string[] {
  return [...new Set([...Object.keys(workerEnvSchema.shape), ...Object.keys(setupEnvSchema.shape)])];
}

/**
 * Parses `env` with `schema` and reads how to reach Temporal (worker/temporal-settings.ts), naming every problem of
 * both at once.
 * @throws ConfigError
 */
function parseEnvWithTemporal<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
  cwd: string,
): { value: z.output<S>; temporal: TemporalConnectionConfig } {
  const parsed = schema.safeParse(env);
  const problems = parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
  let temporal: TemporalConnectionConfig | undefined;
  try {
    temporal = readTemporalConnection(env, cwd);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  if (!parsed.success || temporal === undefined || problems.length > 0) throw new ConfigError(problems);
  return { value: parsed.data, temporal };
}

/**
 * How to reach Temporal from the environment and the profile it names: the address is required and checked; TLS
 * files are read.
 * @throws ConfigError naming each problem
 */
export function readTemporalConnection(
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  options: ReadTemporalSettingsOptions = {},
): TemporalConnectionConfig {
  const required =
    'TEMPORAL_ADDRESS is required (host:port of the Temporal frontend), or a temporal.toml profile with an address ' +
    '(TEMPORAL_PROFILE)';
  let settings;
  try {
    settings = readTemporalSettings(env, cwd, options);
  } catch (error) {
    if (!(error instanceof TemporalSettingsError)) throw error;
    // Named with the rest: a missing address is known without the profile when none is named.
    const addressless = !env.TEMPORAL_ADDRESS?.trim() && profileNamed(env, options) === undefined;
    throw new ConfigError([...error.problems, ...(addressless ? [required] : [])]);
  }
  const where = settings.profile ? ` (from profile '${settings.profile.name}' in ${settings.profile.file})` : '';
  const address = temporalAddress.safeParse(settings.address ?? '');
  if (!address.success) {
    throw new ConfigError([
      settings.address
        ? `TEMPORAL_ADDRESS ${address.error.issues[0]?.message ?? 'is not host:port'}${where}`
        : required,
    ]);
  }
  return Object.freeze({
    address: address.data,
    namespace: settings.namespace ?? 'default',
    ...(settings.tls ? { tls: settings.tls } : {}),
    ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    ...(settings.metadata ? { metadata: settings.metadata } : {}),
    ...(settings.profile ? { profile: settings.profile } : {}),
    ...(settings.notices.length > 0 ? { notices: Object.freeze([...settings.notices]) } : {}),
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
