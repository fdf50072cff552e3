/**
 * Prepares a Temporal server and Baton's database for Baton (`baton setup`): the namespace, Baton's search
 * attributes (docs/architecture.md §5) and the migrations. Every step looks before it acts, so running it again
 * changes nothing and says so. The dev server gets the same search attributes at start (`temporal-server.ts`), and
 * `baton worker` refuses to start on a namespace that lacks them ({@link assertSearchAttributes}).
 */
import type { OperatorService, WorkflowService } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { msToTs } from '@temporalio/common/lib/time';
import { setTimeout as sleep } from 'node:timers/promises';
import { batonSearchAttributeKeys } from '../common/search-attributes';
import { migrate } from '../db/migrate';
import { TemporalSetupError } from './temporal-build';

/** The part of a client or worker connection setup uses: `Connection` and `NativeConnection` both fit. */
export interface SetupConnection {
  readonly workflowService: WorkflowService;
  readonly operatorService: OperatorService;
}

/** A search attribute Baton needs is already registered with another type. */
export class SearchAttributeConflictError extends TemporalSetupError {
  constructor(
    readonly attribute: string,
    readonly expectedType: SearchAttributeType,
    readonly registeredType: string,
  ) {
    super(`Search attribute ${attribute} is registered as ${registeredType}, but Baton needs ${expectedType}.`);
  }
}

/** The namespace lacks what Baton needs; the message says to run `baton setup`. */
export class SetupRequiredError extends TemporalSetupError {
  constructor(
    readonly namespace: string,
    /** The search attributes the namespace lacks; empty when the namespace itself is missing. */
    readonly missing: readonly string[],
  ) {
    super(
      missing.length === 0
        ? `Temporal namespace '${namespace}' does not exist: run \`baton setup\` against this server first`
        : `Temporal namespace '${namespace}' lacks Baton's search attributes ${missing.join(', ')}: ` +
            'run `baton setup` against this server first',
    );
  }
}

/** What {@link setupBaton} found and changed. */
export interface SetupResult {
  readonly namespace: { readonly name: string; readonly created: boolean; readonly retentionDays?: number };
  readonly searchAttributes: { readonly added: readonly string[]; readonly present: readonly string[] };
  readonly migrations: { readonly applied: readonly string[] };
  /** Whether anything changed. */
  readonly changed: boolean;
}

/** Inputs of {@link setupBaton}. */
export interface SetupBatonOptions {
  readonly connection: SetupConnection;
  readonly namespace: string;
  /** Retention of the namespace when it is created (an existing one keeps its own). */
  readonly retentionDays: number;
  /** Baton's database. */
  readonly databaseUrl: string;
  /** How long to wait for a new namespace to be usable (servers load namespaces every few seconds). @default 60_000 */
  readonly timeoutMs?: number;
}

/**
 * Creates the namespace when missing, registers the search attributes it lacks and applies pending migrations.
 *
 * @throws {SearchAttributeConflictError} when a Baton attribute exists with another type.
 * @throws {MigrationError} when a migration fails.
 */
export async function setupBaton(options: SetupBatonOptions): Promise<SetupResult> {
  const { connection, namespace } = options;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const created = await ensureNamespace(connection, namespace, options.retentionDays);
  // A namespace just registered is unknown to the other services until they reload namespaces; retry until then.
  const attributes = await retryWhileNotFound(deadline, () =>
    ensureSearchAttributes(connection, namespace, batonSearchAttributeKeys),
  );
  const { applied } = await migrate(options.databaseUrl);
  return {
    namespace: { name: namespace, created, ...(created ? { retentionDays: options.retentionDays } : {}) },
    searchAttributes: attributes,
    migrations: { applied },
    changed: created || attributes.added.length > 0 || applied.length > 0,
  };
}

/** Registers `namespace` unless it exists. @returns whether it was created by this call. */
export async function ensureNamespace(
  connection: SetupConnection,
  namespace: string,
  retentionDays: number,
): Promise<boolean> {
  if (await namespaceExists(connection, namespace)) return false;
  try {
    await connection.workflowService.registerNamespace({
      namespace,
      description: 'Baton agents (created by baton setup)',
      workflowExecutionRetentionPeriod: msToTs(retentionDays * 24 * 60 * 60 * 1000),
    });
    return true;
  } catch (error) {
    // Another `baton setup` created it in between.
    if (grpcCode(error) === GRPC_ALREADY_EXISTS) return false;
    throw error;
  }
}

async function namespaceExists(connection: SetupConnection, namespace: string): Promise<boolean> {
  try {
    await connection.workflowService.describeNamespace({ namespace });
    return true;
  } catch (error) {
    if (grpcCode(error) === GRPC_NOT_FOUND) return false;
    throw error;
  }
}

/**
 * Adds whichever of `keys` the namespace lacks; idempotent.
 *
 * @throws {SearchAttributeConflictError} when one exists with a different type.
 */
export async function ensureSearchAttributes(
  connection: Pick<SetupConnection, 'operatorService'>,
  namespace: string,
  keys: readonly SearchAttributeKey<SearchAttributeType>[],
): Promise<{ added: string[]; present: string[] }> {
  const { missing, present } = await compareSearchAttributes(connection, namespace, keys);
  const added = Object.keys(missing);
  if (added.length > 0) {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  }
  return { added, present };
}

/**
 * Checks at worker start that the namespace exists and carries Baton's search attributes (workflow starts would
 * otherwise fail one by one, far from the cause).
 *
 * @throws {SetupRequiredError} saying to run `baton setup`.
 * @throws {SearchAttributeConflictError} when one exists with a different type.
 */
export async function assertSearchAttributes(connection: SetupConnection, namespace: string): Promise<void> {
  if (!(await namespaceExists(connection, namespace))) throw new SetupRequiredError(namespace, []);
  const { missing } = await compareSearchAttributes(connection, namespace, batonSearchAttributeKeys);
  const names = Object.keys(missing);
  if (names.length > 0) throw new SetupRequiredError(namespace, names);
}

async function compareSearchAttributes(
  connection: Pick<SetupConnection, 'operatorService'>,
  namespace: string,
  keys: readonly SearchAttributeKey<SearchAttributeType>[],
): Promise<{ missing: Record<string, number>; present: string[] }> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const custom = existing.customAttributes ?? {};
  const missing: Record<string, number> = {};
  const present: string[] = [];
  for (const key of keys) {
    const wanted = encodeSearchAttributeIndexedValueType(key.type);
    if (wanted === undefined) throw new TemporalSetupError(`Unknown search attribute type ${key.type}`);
    const registered = custom[key.name];
    if (registered === undefined) missing[key.name] = wanted;
    else if (registered !== wanted) throw new SearchAttributeConflictError(key.name, key.type, String(registered));
    else present.push(key.name);
  }
  return { missing, present };
}

const GRPC_NOT_FOUND = 5;
const GRPC_ALREADY_EXISTS = 6;

function grpcCode(error: unknown): number | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'number' ? code : undefined;
}

async function retryWhileNotFound<T>(deadline: number, attempt: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (grpcCode(error) !== GRPC_NOT_FOUND || Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}

/** One line per change, or that nothing changed, for `baton setup`'s output. */
export function describeSetup(result: SetupResult): string {
  const lines: string[] = [];
  const ns = result.namespace;
  lines.push(
    ns.created
      ? `namespace ${ns.name}: created (retention ${ns.retentionDays} days)`
      : `namespace ${ns.name}: exists, unchanged`,
  );
  const { added, present } = result.searchAttributes;
  if (added.length > 0) lines.push(`search attributes: registered ${added.join(', ')}`);
  if (present.length > 0) lines.push(`search attributes: already registered ${present.join(', ')}`);
  const applied = result.migrations.applied;
  lines.push(applied.length > 0 ? `migrations: applied ${applied.join(', ')}` : 'migrations: up to date');
  lines.push(result.changed ? 'Baton is set up.' : 'Nothing to change: Baton was already set up.');
  return lines.join('\n');
}
