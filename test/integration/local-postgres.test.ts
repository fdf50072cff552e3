import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { execFile } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { MIGRATIONS_DIR, MigrationError, migrate } from '../../db/migrate';
import { createPool } from '../../db/pool';
import type { LocalPostgres } from '../../stack/local-postgres';
import {
  LocalPostgresStartError,
  TestDatabaseError,
  createDatabase,
  dropDatabase,
  removeLocalPostgresData,
  resolveDatabase,
  startLocalPostgres,
} from '../../stack/local-postgres';
import { isCi, skipUnlessCi } from '../../testing/ci';

// The shared server of the project's machines; CI may point elsewhere. Tests that need it skip when it is absent.
const ADMIN_URL = process.env.BATON_TEST_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const AS_ROOT = process.getuid?.() === 0;
const FIRST_MIGRATION = '001_threads-and-transcripts.sql';
/** Every migration the project ships, in order: a fresh database gets all of them. */
const ALL_MIGRATIONS = readdirSync(MIGRATIONS_DIR)
  .filter((file) => file.endsWith('.sql'))
  .sort();
const TEST_TIMEOUT_MS = 60_000;
const RUN_ID = `${process.pid}_${Date.now()}`;
const execFileAsync = promisify(execFile);

let scratch: string;
let dataDir: string;
// test-isolation: the restart tests stop this server and start it again on the same data directory, leaving a
// running one behind; each writes the data it checks, and no test needs a particular start of it.
let server: LocalPostgres | undefined;
let adminReachable = false;
const serverLog: string[] = [];
let firstStartMs = 0;

async function makeScratchDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-local-pg-'));
  // mkdtemp makes it 0700; as root the server runs as another user, which must be able to enter it.
  if (AS_ROOT) await fs.chmod(dir, 0o711);
  return dir;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Gives the server's database the thread tables (a no-op once the first test has migrated it) and one thread row: the
 * data a restart must keep. Each restart test writes its own row, so it does not lean on an earlier test's.
 */
async function writeThread(databaseUrl: string, threadId: string): Promise<void> {
  await migrate(databaseUrl);
  await withClient(databaseUrl, (client) =>
    client.query(`INSERT INTO threads (thread_id, root_thread_id, agent) VALUES ($1, $1, 'solver')`, [threadId]),
  );
}

/** The thread ids of `threadId`'s row, as found after a restart: `[threadId]` when the data was kept. */
async function threadIds(databaseUrl: string, threadId: string): Promise<string[]> {
  const { rows } = await withClient(databaseUrl, (client) =>
    client.query<{ thread_id: string }>('SELECT thread_id FROM threads WHERE thread_id = $1', [threadId]),
  );
  return rows.map((row) => row.thread_id);
}

function currentServer(): LocalPostgres {
  assert.ok(server, 'the embedded server should be running');
  return server;
}

before(
  async () => {
    scratch = await makeScratchDir();
    dataDir = path.join(scratch, 'pg');
    const started = Date.now();
    server = await startLocalPostgres({ dataDir, log: (line) => serverLog.push(line) });
    firstStartMs = Date.now() - started;
    adminReachable = await withClient(ADMIN_URL, () => Promise.resolve(true)).catch(() => false);
  },
  { timeout: 120_000 },
);

after(async () => {
  await server?.stop();
  if (scratch === undefined) return;
  // As root, clusters may have moved out of the scratch directory (when this checkout sits where 'postgres' cannot
  // enter): remove those too.
  for (const used of [dataDir, ...['explicit-port', 'resolved', 'non-root'].map((name) => path.join(scratch, name))]) {
    await removeLocalPostgresData(used);
  }
  await fs.rm(scratch, { recursive: true, force: true });
});

test(
  'local postgres: a first start initialises a loopback-only cluster, and migrate creates the thread tables',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    t.diagnostic(`first start (initdb + start): ${firstStartMs} ms`);
    const { databaseUrl, clusterDir } = currentServer();
    assert.equal(new URL(databaseUrl).hostname, '127.0.0.1');
    assert.ok(serverLog.some((line) => line.includes('initialising a new cluster')));
    await fs.access(path.join(clusterDir, 'PG_VERSION'));
    if (AS_ROOT) assert.notEqual((await fs.stat(clusterDir)).uid, 0, 'the cluster must not belong to root');

    const pool = createPool({ connectionString: databaseUrl, max: 2 });
    try {
      assert.deepEqual(await migrate(pool), { applied: ALL_MIGRATIONS });
      const { rows } = await pool.query<{ setting: string; threads: string | null; transcripts: string | null }>(
        `SELECT current_setting('listen_addresses') AS setting,
                to_regclass('public.threads')::text AS threads,
                to_regclass('public.transcript_messages')::text AS transcripts`,
      );
      assert.deepEqual(rows, [{ setting: '127.0.0.1', threads: 'threads', transcripts: 'transcript_messages' }]);
      assert.deepEqual(await migrate(pool), { applied: [] });
    } finally {
      await pool.end();
    }
  },
);

test('migrate: concurrent runs both succeed and apply each file once', { timeout: TEST_TIMEOUT_MS }, async () => {
  const adminUrl = currentServer().databaseUrl;
  const name = `concurrent_${RUN_ID}`;
  const url = await createDatabase(adminUrl, name);
  const pool = createPool({ connectionString: url, max: 2 });
  try {
    // One run takes the advisory lock; the others poll it (once a second) and then find nothing left to apply.
    const results = await Promise.all([migrate(url), migrate(url), migrate(pool)]);
    assert.deepEqual(results.flatMap((result) => result.applied).sort(), ALL_MIGRATIONS);
    const { rows } = await pool.query<{ count: string }>('SELECT count(*) FROM migrations WHERE id > 0');
    assert.equal(rows[0]?.count, String(ALL_MIGRATIONS.length));
  } finally {
    await pool.end();
    await dropDatabase(adminUrl, name);
  }
});

test(
  'migrate: a failing migration is rolled back and its file is named in the error',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const adminUrl = currentServer().databaseUrl;
    const name = `failing_${RUN_ID}`;
    const url = await createDatabase(adminUrl, name);
    const migrationsDir = path.join(scratch, 'broken-migrations');
    await fs.mkdir(migrationsDir);
    await fs.copyFile(path.join(MIGRATIONS_DIR, FIRST_MIGRATION), path.join(migrationsDir, FIRST_MIGRATION));
    await fs.writeFile(path.join(migrationsDir, '002_broken.sql'), 'CREATE TABLE half_done (id int);\nSELEC 1;\n');
    try {
      await assert.rejects(migrate(url, { migrationsDir }), (error: unknown) => {
        assert.ok(error instanceof MigrationError);
        assert.equal(error.name, 'MigrationError');
        assert.equal(error.migrationFile, '002_broken.sql');
        assert.match(error.message, /002_broken\.sql.*SELEC/s);
        return true;
      });
      const tables = await withClient(url, (client) =>
        client.query<{ threads: string | null; half: string | null }>(
          `SELECT to_regclass('public.threads')::text AS threads, to_regclass('public.half_done')::text AS half`,
        ),
      );
      assert.deepEqual(tables.rows, [{ threads: 'threads', half: null }]);
    } finally {
      await dropDatabase(adminUrl, name);
    }
  },
);

test(
  'local postgres: a restart reuses the data directory, its port and its data without re-initialising',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const first = currentServer();
    await writeThread(first.databaseUrl, 't-1');
    await first.stop();
    await first.stop(); // idempotent
    server = undefined;

    const log: string[] = [];
    const started = Date.now();
    server = await startLocalPostgres({ dataDir, log: (line) => log.push(line) });
    t.diagnostic(`restart on an initialised data directory: ${Date.now() - started} ms`);
    assert.ok(log.some((line) => line.includes('reusing the cluster')));
    assert.ok(!log.some((line) => line.includes('initialising')), 'initdb must not run again');
    assert.equal(server.port, first.port);
    assert.equal(server.databaseUrl, first.databaseUrl);

    const { rows } = await withClient(server.databaseUrl, (client) => client.query('SELECT thread_id FROM threads'));
    assert.deepEqual(rows, [{ thread_id: 't-1' }]);
    assert.deepEqual(await migrate(server.databaseUrl), { applied: [] });
  },
);

async function occupy(port: number): Promise<net.Server> {
  const blocker = net.createServer();
  await new Promise<void>((resolve, reject) => {
    blocker.once('error', reject);
    blocker.listen({ host: '127.0.0.1', port }, resolve);
  });
  return blocker;
}

test(
  'local postgres: a stored port that is now taken is replaced by a free one',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const previous = currentServer();
    await writeThread(previous.databaseUrl, 't-port-taken');
    await previous.stop();
    server = undefined;
    const blocker = await occupy(previous.port);
    // The credentials file holds the superuser password: rewritten with the new port, it is owner-only again even
    // when someone had opened it up.
    const stateFile = path.join(previous.home, 'local-postgres.json');
    await fs.chmod(stateFile, 0o644);
    try {
      server = await startLocalPostgres({ dataDir });
      assert.notEqual(server.port, previous.port);
      assert.deepEqual(await threadIds(server.databaseUrl, 't-port-taken'), ['t-port-taken'], 'the data was kept');
      assert.equal((await fs.stat(stateFile)).mode & 0o777, 0o600);
    } finally {
      blocker.close();
    }
  },
);

test(
  'local postgres: a port grabbed between the free-port check and the server bind is retried on another',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const previous = currentServer();
    await writeThread(previous.databaseUrl, 't-port-grabbed');
    await previous.stop();
    server = undefined;
    const blocker = net.createServer();
    try {
      server = await startLocalPostgres({
        dataDir,
        log: (line) => {
          // Emitted after the stored port was found free and before the server binds it. Listening on the wildcard
          // address binds synchronously, so the server's own bind is sure to lose.
          if (line.includes('reusing the cluster')) blocker.listen(previous.port);
        },
      });
      assert.ok(blocker.listening, 'the blocker must have taken the port');
      assert.notEqual(server.port, previous.port);
      assert.deepEqual(await threadIds(server.databaseUrl, 't-port-grabbed'), ['t-port-grabbed'], 'the data was kept');
    } finally {
      blocker.close();
    }
  },
);

test(
  'local postgres: an explicitly requested port that is taken is refused',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const blocker = await occupy(0);
    const address = blocker.address();
    assert.ok(address !== null && typeof address === 'object');
    try {
      await assert.rejects(
        startLocalPostgres({ dataDir: path.join(scratch, 'explicit-port'), port: address.port }),
        (error: unknown) => error instanceof LocalPostgresStartError && error.message.includes(`Port ${address.port}`),
      );
    } finally {
      blocker.close();
    }
  },
);

test(
  'local postgres: as root in a directory other users can enter, the cluster stays in the data directory',
  { timeout: TEST_TIMEOUT_MS, skip: !AS_ROOT && 'only applies when running as root' },
  async (t) => {
    // The server runs the binaries in this checkout's node_modules; where 'postgres' cannot reach them (a checkout
    // in a mode-700 directory), every cluster moves, as the next test shows.
    const nodeModules = path.resolve(__dirname, '..', '..', 'node_modules');
    const reachable = await execFileAsync('runuser', ['-u', 'postgres', '--', 'test', '-x', nodeModules]).then(
      () => true,
      () => false,
    );
    if (!reachable)
      return t.skip(`'postgres' may not enter ${nodeModules}, so every cluster moves out of its data directory`);
    // makeScratchDir left the scratch directory enterable (0711), like a project under /srv or /opt.
    const { clusterDir, home, relocated } = currentServer();
    assert.equal(relocated, false);
    assert.equal(home, dataDir);
    assert.equal(clusterDir, path.join(dataDir, 'cluster'));
  },
);

test(
  'local postgres: as root in a mode-700 directory, the cluster moves to a per-project directory the server user owns, reused across restarts',
  { timeout: 120_000, skip: !AS_ROOT && 'only applies when running as root' },
  async () => {
    const locked = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-locked-'));
    const lockedDataDir = path.join(locked, 'project', '.baton', 'pg');
    let home: string | undefined;
    let relocatedServer: LocalPostgres | undefined;
    try {
      assert.equal((await fs.stat(locked)).mode & 0o777, 0o700);
      const log: string[] = [];
      relocatedServer = await startLocalPostgres({ dataDir: lockedDataDir, log: (line) => log.push(line) });
      home = relocatedServer.home;
      assert.equal(relocatedServer.relocated, true);
      assert.ok(!home.startsWith(locked), `the cluster is outside the unreachable directory: ${home}`);
      assert.equal(relocatedServer.clusterDir, path.join(home, 'cluster'));
      const where = log.filter((line) => line.startsWith('[baton]') && line.includes(`lives in ${home}`));
      assert.equal(where.length, 1, `one line says where the cluster lives: ${log.join('\n')}`);
      // The first directory 'postgres' may not enter: `locked`, or above it when this checkout is unreachable too.
      assert.match(where[0] ?? '', new RegExp(`may not enter /\\S*: the cluster of ${lockedDataDir} lives in`));
      const stat = await fs.stat(home);
      assert.equal(stat.mode & 0o777, 0o700);
      const serverUid = (await fs.stat(relocatedServer.clusterDir)).uid;
      assert.notEqual(serverUid, 0);
      assert.equal(stat.uid, serverUid, 'the per-project directory belongs to the server user');
      assert.equal((await fs.readFile(path.join(home, 'project'), 'utf8')).trim(), lockedDataDir);

      await withClient(relocatedServer.databaseUrl, (client) =>
        client.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)'),
      );
      await relocatedServer.stop();
      relocatedServer = undefined;

      const again: string[] = [];
      relocatedServer = await startLocalPostgres({ dataDir: lockedDataDir, log: (line) => again.push(line) });
      assert.equal(relocatedServer.home, home, 'the same project finds the same directory');
      assert.ok(again.some((line) => line.includes('reusing the cluster')));
      const { rows } = await withClient(relocatedServer.databaseUrl, (client) => client.query('SELECT n FROM kept'));
      assert.deepEqual(rows, [{ n: 7 }]);
    } finally {
      await relocatedServer?.stop();
      await fs.rm(locked, { recursive: true, force: true });
      if (home !== undefined) await fs.rm(home, { recursive: true, force: true });
    }
  },
);

test('local postgres: a non-root user keeps the cluster in its data directory', { timeout: 120_000 }, async (t) => {
  if (!AS_ROOT) {
    const own = await startLocalPostgres({ dataDir: path.join(scratch, 'non-root') });
    try {
      assert.deepEqual([own.relocated, own.home], [false, path.join(scratch, 'non-root')]);
    } finally {
      await own.stop();
    }
    return;
  }
  // As root, run the server start as an unprivileged user that is not the server user.
  const user = 'nobody';
  const root = path.resolve(__dirname, '..', '..');
  const runuser = await execFileAsync('runuser', [
    '-u',
    user,
    '--',
    'test',
    '-r',
    path.join(root, 'node_modules', 'tsx', 'package.json'),
  ]).then(
    () => undefined,
    (error: unknown) =>
      `runuser -u ${user} cannot reach ${root}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
  );
  if (runuser !== undefined) return skipUnlessCi(t, `${runuser}; the non-root case is not exercised here`);
  const own = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-non-root-'));
  try {
    const { uid, gid } = await lookupUser(user);
    await fs.chown(own, uid, gid);
    const ownDataDir = path.join(own, '.baton', 'pg');
    const { stdout } = await execFileAsync(
      'runuser',
      [
        '-u',
        user,
        '--',
        process.execPath,
        '--import',
        'tsx',
        path.join(__dirname, 'local-postgres-child.ts'),
        ownDataDir,
      ],
      { cwd: root, env: { ...process.env, HOME: own, TMPDIR: own }, timeout: 100_000 },
    );
    const report = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    assert.deepEqual(report, {
      uid,
      home: ownDataDir,
      relocated: false,
      clusterDir: path.join(ownDataDir, 'cluster'),
      owner: uid,
    });
  } finally {
    await fs.rm(own, { recursive: true, force: true });
  }
});

async function lookupUser(user: string): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', user]), execFileAsync('id', ['-g', user])]);
  return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
}

test('resolveDatabase: a given URL is used as is and no server is started', { timeout: TEST_TIMEOUT_MS }, async () => {
  const unused = path.join(scratch, 'never-created');
  // The embedded server of this file stands in for a given server: always there, so nothing here ever skips.
  const given = currentServer().databaseUrl;
  const resolved = await resolveDatabase({ databaseUrl: given, dataDir: unused });
  assert.deepEqual({ url: resolved.databaseUrl, embedded: resolved.embedded }, { url: given, embedded: false });
  await resolved.stop();
  await assert.rejects(fs.access(unused), { code: 'ENOENT' });
  const { rows } = await withClient(resolved.databaseUrl, (client) => client.query('SELECT 1 AS one'));
  assert.deepEqual(rows, [{ one: 1 }]);
});

test(
  'resolveDatabase: without a URL (or with an empty one) it starts the embedded server and stops it',
  { timeout: TEST_TIMEOUT_MS },
  async () => {
    const resolved = await resolveDatabase({ databaseUrl: '', dataDir: path.join(scratch, 'resolved') });
    try {
      assert.equal(resolved.embedded, true);
      const { rows } = await withClient(resolved.databaseUrl, (client) => client.query('SELECT 1 AS one'));
      assert.deepEqual(rows, [{ one: 1 }]);
    } finally {
      await resolved.stop();
    }
    await assert.rejects(
      withClient(resolved.databaseUrl, () => Promise.resolve()),
      { code: 'ECONNREFUSED' },
    );
  },
);

test(
  'local postgres: createDatabase and dropDatabase quote awkward names and drop despite open sessions',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const targets: [string, string][] = [['embedded', currentServer().databaseUrl]];
    if (adminReachable) targets.push(['shared', ADMIN_URL]);
    // A server CI was told to use (BATON_TEST_ADMIN_URL) must be there; the default one is optional.
    else if (isCi() && process.env.BATON_TEST_ADMIN_URL)
      assert.fail(`no Postgres at ${ADMIN_URL} (BATON_TEST_ADMIN_URL)`);
    else t.diagnostic(`no Postgres at ${ADMIN_URL}: only the embedded server is used`);

    for (const [label, adminUrl] of targets) {
      const name = `baton test "${RUN_ID}"; drop-é`;
      const url = await createDatabase(adminUrl, name);
      const lingering = new pg.Client({ connectionString: url });
      lingering.on('error', () => undefined); // terminated by the drop, as intended
      await lingering.connect();
      try {
        const { rows } = await lingering.query<{ db: string }>('SELECT current_database() AS db');
        assert.deepEqual(rows, [{ db: name }], label);
        await assert.rejects(createDatabase(adminUrl, name), TestDatabaseError, 'creating it twice fails');

        await dropDatabase(adminUrl, name);
        const remaining = await withClient(adminUrl, (client) =>
          client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]),
        );
        assert.equal(remaining.rowCount, 0, label);
        await dropDatabase(adminUrl, name); // already gone: nothing to do
      } finally {
        await lingering.end().catch(() => undefined);
      }
    }
    await assert.rejects(createDatabase(ADMIN_URL, 'x'.repeat(64)), TestDatabaseError);
    await assert.rejects(dropDatabase(ADMIN_URL, 'what?'), TestDatabaseError);
  },
);
