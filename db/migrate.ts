import path from 'node:path';
import pg from 'pg';
import { loadMigrationFiles, migrate as runMigrations } from 'postgres-migrations';
import { BatonDbError } from './errors';

/**
 * The versioned SQL files, next to this module. Files are named `NNN_description.sql` with consecutive numbers from
 * 001; postgres-migrations stores a hash of each file's name and contents, so an applied file is never edited or
 * renamed: a change is a new file.
 */
export const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /**
   * Directory holding the migration files.
   * @default MIGRATIONS_DIR
   */
  readonly migrationsDir?: string;
  /**
   * Receives postgres-migrations' progress lines.
   * @default discards them
   */
  readonly log?: (line: string) => void;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** File names of the migrations this call applied, in order; empty when the database was up to date. */
  readonly applied: string[];
}

/**
 * Migrations could not be applied: a file failed (it was rolled back and nothing after it ran), an applied file was
 * changed, the files are misnumbered, or the database was unreachable.
 */
export class MigrationError extends BatonDbError {
  constructor(
    message: string,
    /** The file that failed, when the failure happened inside one. */
    readonly migrationFile: string | undefined,
    /** The migrations directory in use. */
    readonly migrationsDir: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

// postgres-migrations' own bookkeeping migration (creates its `migrations` table); not one of ours to report.
const INTERNAL_MIGRATION_ID = 0;
// The library reports which file it is in only through its log lines.
const STARTING_MIGRATION = /^Starting migration: (-?\d+) /;
const FINISHED_MIGRATION = /^Finished migration: /;

/**
 * Applies every migration in `migrationsDir` that the database has not seen yet.
 *
 * Safe to call from many processes at once (workers starting together): postgres-migrations holds a session-level
 * advisory lock for the whole run, so one caller applies the files and the others wait, then find nothing to do.
 * That lock is only meaningful on a single session, so a pool is never handed to the library directly (each
 * `pool.query` may pick a different connection, which would also split a migration's transaction); one client is
 * checked out for the whole run instead.
 *
 * @param target a pool to borrow one connection from, or a connection string to open (and close) a client with.
 * @throws {MigrationError} when a file fails to apply, an applied file was changed, or the database is unreachable;
 *   `migrationFile` names the failing file when there is one.
 */
export async function migrate(target: pg.Pool | string, options: MigrateOptions = {}): Promise<MigrateResult> {
  const migrationsDir = options.migrationsDir ?? MIGRATIONS_DIR;
  const log = options.log ?? (() => undefined);

  let files: Map<number, string>;
  try {
    files = new Map((await loadMigrationFiles(migrationsDir)).map((m) => [m.id, m.fileName]));
  } catch (error) {
    throw new MigrationError(
      `Cannot read the migrations in ${migrationsDir}: ${errorMessage(error)}`,
      undefined,
      migrationsDir,
      { cause: error },
    );
  }

  let client: pg.Client | pg.PoolClient;
  let release: (failed: boolean) => Promise<void>;
  try {
    if (typeof target === 'string') {
      const ownClient = new pg.Client({ connectionString: target, application_name: 'baton-migrate' });
      // A connection dropped mid-run surfaces as a failed query; the listener only keeps it from crashing the process.
      ownClient.on('error', (error) => log(`migration connection failed: ${error.message}`));
      await ownClient.connect();
      client = ownClient;
      release = () => ownClient.end().catch(() => undefined);
    } else {
      const pooled = await target.connect();
      client = pooled;
      // After a failure the session may still hold an aborted transaction or the lock; destroy it rather than
      // hand it to the next query.
      release = (failed) => {
        pooled.release(failed);
        return Promise.resolve();
      };
    }
  } catch (error) {
    throw new MigrationError(
      `Cannot connect to Postgres to run migrations: ${errorMessage(error)}`,
      undefined,
      migrationsDir,
      { cause: error },
    );
  }

  let current: number | undefined;
  let failed = false;
  try {
    const done = await runMigrations({ client }, migrationsDir, {
      logger: (line) => {
        const started = STARTING_MIGRATION.exec(line);
        if (started?.[1] !== undefined) current = Number(started[1]);
        else if (FINISHED_MIGRATION.test(line)) current = undefined;
        log(line);
      },
    });
    return { applied: done.filter((m) => m.id !== INTERNAL_MIGRATION_ID).map((m) => m.fileName) };
  } catch (error) {
    failed = true;
    const file = current === undefined ? undefined : files.get(current);
    const where = file === undefined ? `in ${migrationsDir}` : `${file} (in ${migrationsDir})`;
    throw new MigrationError(`Migration failed: ${where}: ${errorMessage(error)}`, file, migrationsDir, {
      cause: error,
    });
  } finally {
    await release(failed);
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
