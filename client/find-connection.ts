/**
 * Where a client connects when nobody says: `connect()` with no options and every CLI command. The environment
 * first (`TEMPORAL_ADDRESS`, or a `temporal.toml` profile named by `TEMPORAL_PROFILE` or `--profile`, with the TLS
 * and API key settings Temporal's tools read, and `BATON_TASK_QUEUE` and `DATABASE_URL`), else the `baton dev`
 * running from the state directory (`.baton` of the working directory unless told), found through its stack file,
 * else the default profile of `temporal.toml` when it names an address. Decisions are signed with
 * `BATON_DECISION_KEY` (or `BATON_DECISION_KEY_FILE`), else with the token of that `baton dev` when it is where the
 * client goes.
 */
import path from 'node:path';
import { DEFAULT_STATE_DIR, readStackFile, type StackFile } from '../stack/stack-file';
import {
  checkConnectionVariables,
  ConfigError,
  readDecisionKey,
  readTemporalConnection,
  runningStackDecisionKey,
  type TemporalConnectionConfig,
  type TemporalTlsConfig,
} from '../worker/config';
import { profileNamed, readTemporalSettings, TemporalSettingsError } from '../worker/temporal-settings';
import { BatonClientError } from './errors';

/** What {@link findConnection} reads. */
export interface FindConnectionOptions {
  /** @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** What relative paths (the state directory, `BATON_DECISION_KEY_FILE`) are resolved against. @default process.cwd() */
  readonly cwd?: string;
  /** The local stack's state directory, as the user gave it. @default '.baton' */
  readonly stateDir?: string;
  /** Fail unless Baton's database is known too (with `TEMPORAL_ADDRESS`, `DATABASE_URL` must be set). */
  readonly needsDatabase?: boolean;
  /** The `temporal.toml` profile to connect with (the CLI's `--profile`). @default `TEMPORAL_PROFILE` */
  readonly profile?: string;
}

/** The settings {@link findConnection} found, and where. */
export interface FoundConnection {
  readonly address: string;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly databaseUrl?: string;
  readonly decisionKey?: string;
  /** TLS (files already read), when the settings turn it on. */
  readonly tls?: TemporalTlsConfig;
  readonly apiKey?: string;
  /** gRPC headers of the profile or `TEMPORAL_GRPC_META_*`. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Where they came from, for a person: `TEMPORAL_ADDRESS=…`, a profile, or `the baton dev in <dir> (pid …)`. */
  readonly source: string;
  /** Lines for a person about the settings (a deprecated variable in use). */
  readonly notices?: readonly string[];
}

/**
 * The connection the environment or the running `baton dev` describes.
 * @throws BatonClientError when neither does (naming both ways), or the database is needed and unknown
 * @throws ConfigError for a malformed `TEMPORAL_ADDRESS`, `DATABASE_URL` or decision key
 */
export function findConnection(options: FindConnectionOptions = {}): FoundConnection {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const stateDir = options.stateDir ?? DEFAULT_STATE_DIR;
  const stateDirPath = path.resolve(cwd, stateDir);
  checkConnectionVariables(env);
  const configuredKey = readDecisionKey(env, cwd);
  const profile = profileNamed(env, options);
  const configured = (): FoundConnection => {
    const temporal = readTemporalConnection(env, cwd, profile === undefined ? {} : { profile });
    if (options.needsDatabase && !env.DATABASE_URL) {
      throw new BatonClientError(
        `this reads Baton's database: set DATABASE_URL as well as ${profile === undefined ? 'TEMPORAL_ADDRESS' : 'the profile'}`,
      );
    }
    const key = configuredKey ?? localStackKey(stateDirPath, temporal.address, temporal.namespace);
    return {
      ...temporalOptions(temporal),
      taskQueue: env.BATON_TASK_QUEUE || 'baton',
      ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
      ...(key === undefined ? {} : { decisionKey: key.key }),
      source: env.TEMPORAL_ADDRESS?.trim()
        ? `TEMPORAL_ADDRESS=${temporal.address}`
        : `profile '${temporal.profile?.name ?? 'default'}' of ${temporal.profile?.file ?? 'temporal.toml'} (${temporal.address})`,
    };
  };
  if (env.TEMPORAL_ADDRESS?.trim() || profile !== undefined) return configured();
  const stack = readStackFile(stateDirPath);
  if (!stack) {
    // Last, the default profile of the Temporal CLI's configuration file, when it says where Temporal is.
    if (defaultProfileAddress(env, cwd) !== undefined) return configured();
    throw new BatonClientError(
      `no Baton stack is running (no live ${path.join(stateDir, 'stack.json')}): start one with \`baton dev\`, or set ` +
        'TEMPORAL_ADDRESS (or TEMPORAL_PROFILE, a profile of temporal.toml)',
    );
  }
  const key = configuredKey ?? runningStackDecisionKey(stateDirPath);
  return {
    address: stack.temporalAddress,
    namespace: stack.namespace,
    taskQueue: stack.taskQueue,
    databaseUrl: stack.databaseUrl,
    ...(key === undefined ? {} : { decisionKey: key.key }),
    source: describeStack(stateDirPath, stack),
  };
}

/** The address the default profile of `temporal.toml` names, if any. @throws ConfigError for a file it cannot use */
function defaultProfileAddress(env: Readonly<Record<string, string | undefined>>, cwd: string): string | undefined {
  try {
    return readTemporalSettings(env, cwd).address;
  } catch (error) {
    if (error instanceof TemporalSettingsError) throw new ConfigError([...error.problems]);
    throw error;
  }
}

/** The connection settings of `temporal` as {@link FoundConnection} carries them. */
function temporalOptions(
  temporal: TemporalConnectionConfig,
): Pick<FoundConnection, 'address' | 'namespace' | 'tls' | 'apiKey' | 'metadata' | 'notices'> {
  return {
    address: temporal.address,
    namespace: temporal.namespace,
    ...(temporal.tls === undefined ? {} : { tls: temporal.tls }),
    ...(temporal.apiKey === undefined ? {} : { apiKey: temporal.apiKey }),
    ...(temporal.metadata === undefined ? {} : { metadata: temporal.metadata }),
    ...(temporal.notices === undefined ? {} : { notices: temporal.notices }),
  };
}

function describeStack(stateDirPath: string, stack: StackFile): string {
  return `the baton dev in ${stateDirPath} (pid ${stack.pid}, Temporal at ${stack.temporalAddress})`;
}

/**
 * The decision key of the `baton dev` of the state directory when it runs on `address` and `namespace` (a stack
 * started with `TEMPORAL_ADDRESS`, and a client in the same shell): its worker checks decisions with it.
 */
function localStackKey(stateDirPath: string, address: string, namespace: string): { key: string } | undefined {
  let stack: StackFile | undefined;
  try {
    stack = readStackFile(stateDirPath);
  } catch {
    return undefined; // a stack file that cannot be read is no stack here; the client goes where the variables say
  }
  if (stack?.temporalAddress !== address || stack.namespace !== namespace) return undefined;
  return runningStackDecisionKey(stateDirPath);
}
