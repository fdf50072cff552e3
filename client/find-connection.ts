/**
 * Where a client connects when nobody says: `connect()` with no options and every CLI command. The environment
 * first (`TEMPORAL_ADDRESS`, with `TEMPORAL_NAMESPACE`, `BATON_TASK_QUEUE` and `DATABASE_URL`), else the `baton dev`
 * running from the state directory (`.baton` of the working directory unless told), found through its stack file.
 * Decisions are signed with `BATON_DECISION_KEY` (or `BATON_DECISION_KEY_FILE`), else with the token of that
 * `baton dev` when it is where the client goes.
 */
import path from 'node:path';
import { DEFAULT_STATE_DIR, readStackFile, type StackFile } from '../stack/stack-file';
import { checkConnectionVariables, readDecisionKey, runningStackDecisionKey } from '../worker/config';
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
}

/** The settings {@link findConnection} found, and where. */
export interface FoundConnection {
  readonly address: string;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly databaseUrl?: string;
  readonly decisionKey?: string;
  /** Where they came from, for a person: `TEMPORAL_ADDRESS=…` or `the baton dev in <dir> (pid …)`. */
  readonly source: string;
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
  const address = env.TEMPORAL_ADDRESS?.trim();
  if (address) {
    if (options.needsDatabase && !env.DATABASE_URL) {
      throw new BatonClientError("this reads Baton's database: set DATABASE_URL as well as TEMPORAL_ADDRESS");
    }
    const namespace = env.TEMPORAL_NAMESPACE || 'default';
    const key = configuredKey ?? localStackKey(stateDirPath, address, namespace);
    return {
      address,
      namespace,
      taskQueue: env.BATON_TASK_QUEUE || 'baton',
      ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
      ...(key === undefined ? {} : { decisionKey: key.key }),
      source: `TEMPORAL_ADDRESS=${address}`,
    };
  }
  const stack = readStackFile(stateDirPath);
  if (!stack) {
    throw new BatonClientError(
      `no Baton stack is running (no live ${path.join(stateDir, 'stack.json')}): start one with \`baton dev\`, or set TEMPORAL_ADDRESS`,
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
