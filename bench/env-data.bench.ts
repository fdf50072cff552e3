/**
 * `npm run bench`: store and get throughput of shared environment data through `EnvStore` against raw `pg` statements
 * doing the same work, measured in the same run on one connection each. Rounds alternate between the cases (in a
 * rotating order) so that drift (caches warming, tables and the event log growing, the machine's other load) falls on
 * every case alike. Prints ops/s and the API/raw ratio (target ≥ 0.8×); it asserts nothing.
 *
 * Postgres: `DATABASE_URL` if set, else an embedded server in a temporary directory. Either way the bench works in a
 * fresh database it creates, migrates and drops.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { ENV_EVENTS_CHANNEL } from '../common/env-data';
import type { ThreadScope } from '../common/types';
import { EnvStore } from '../db/env-data';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { ensureThread } from '../db/threads';
import { createDatabase, dropDatabase, resolveDatabase } from '../stack/local-postgres';

/** Timed rounds per case; each case gets ROUNDS × ROUND_MS of measurement. */
const ROUNDS = 6;
const ROUND_MS = 500;
const WARMUP_MS = 300;
/** Writes cycle over this many keys, so most stores replace an existing entry, as agents do. */
const KEYS = 64;
const TARGET_RATIO = 0.8;

const VALUE = {
  task_id: '007bbfb7',
  input_grid: [
    [0, 7, 7],
    [7, 7, 7],
    [0, 7, 7],
  ],
  notes: 'Each cell of the input becomes a 3x3 block: a copy of the input where the cell is coloured, else blank.',
};
const DESCRIPTION = 'The current ARC task: 007bbfb7, a 3x3 input grid and what was observed about it.';

// The statements EnvStore runs, spelled out for the raw baseline.
const FENCE = 'SELECT epoch FROM threads WHERE thread_id = $1 FOR SHARE';
const ROOT_LOCK = 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))';
const PRIOR = `SELECT action, key, version, reason, refusal_type AS "refusalType" FROM env_events
            WHERE root_thread_id = $1 AND operation_id = $2`;
const UPSERT = `INSERT INTO env_data (root_thread_id, key, short_description, value, type, tags, stored_by_agent,
                               stored_by_thread, version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 (SELECT COALESCE(MAX(version), 0) + 1 FROM env_events
                   WHERE root_thread_id = $1 AND key = $2 AND action <> 'rejected'))
         ON CONFLICT (root_thread_id, scope, key) DO UPDATE SET
           short_description = EXCLUDED.short_description, value = EXCLUDED.value, type = EXCLUDED.type,
           tags = EXCLUDED.tags, stored_by_agent = EXCLUDED.stored_by_agent,
           stored_by_thread = EXCLUDED.stored_by_thread, version = env_data.version + 1, updated_at = now()
         RETURNING version`;
const EVENT = `INSERT INTO env_events (root_thread_id, key, action, actor_agent, actor_thread, operation_id, version, value_size,
                             value, short_description, reason, refusal_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (root_thread_id, operation_id) DO NOTHING
     RETURNING seq`;
const NOTIFY = 'SELECT pg_notify($1, $2)';
const GET = `SELECT key, short_description AS "shortDescription", type, tags,
  json_build_object('agent', stored_by_agent, 'thread', stored_by_thread) AS "storedBy", version,
  created_at AS "createdAt", updated_at AS "updatedAt", value FROM env_data WHERE root_thread_id = $1 AND key = $2`;
/** Context only: one statement, without fence, idempotency, event log or notification. */
const NAIVE_UPSERT = `INSERT INTO env_data (root_thread_id, key, short_description, value, stored_by_agent, stored_by_thread,
                               version)
     VALUES ($1, $2, $3, $4, $5, $6, 1)
     ON CONFLICT (root_thread_id, scope, key) DO UPDATE SET
       short_description = EXCLUDED.short_description, value = EXCLUDED.value, version = env_data.version + 1,
       updated_at = now()`;

/** The same work as `EnvStore.store` for a first-time operation id, statement for statement. */
async function rawStore(client: pg.Client, scope: ThreadScope, operationId: string, key: string): Promise<number> {
  const json = JSON.stringify(VALUE);
  await client.query('BEGIN');
  try {
    await client.query(ROOT_LOCK, [`env:${scope.rootThreadId}`]);
    const { rows: threads } = await client.query<{ epoch: number }>(FENCE, [scope.threadId]);
    if (threads[0]?.epoch !== scope.epoch) throw new Error(`thread ${scope.threadId} is not at epoch ${scope.epoch}`);
    const prior = await client.query(PRIOR, [scope.rootThreadId, operationId]);
    if (prior.rows.length > 0) throw new Error(`operation ${operationId} ran before`);
    const { rows } = await client.query<{ version: number }>(UPSERT, [
      scope.rootThreadId,
      key,
      DESCRIPTION,
      json,
      null,
      [],
      scope.agent,
      scope.threadId,
    ]);
    const version = rows[0]?.version ?? 1;
    const { rows: events } = await client.query<{ seq: string }>(EVENT, [
      scope.rootThreadId,
      key,
      'stored',
      scope.agent,
      scope.threadId,
      operationId,
      version,
      Buffer.byteLength(json, 'utf8'),
      json,
      DESCRIPTION,
      null,
      null,
    ]);
    const seq = events[0]?.seq;
    if (seq !== undefined) {
      await client.query(NOTIFY, [
        ENV_EVENTS_CHANNEL,
        JSON.stringify({ rootThreadId: scope.rootThreadId, seq: Number(seq), key, action: 'stored' }),
      ]);
    }
    await client.query('COMMIT');
    return version;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

interface BenchCase {
  readonly name: string;
  /** Runs operation number `i`. */
  readonly run: (i: number) => Promise<unknown>;
  next: number;
  ops: number;
  ms: number;
  roundRates: number[];
}

function benchCase(name: string, run: (i: number) => Promise<unknown>): BenchCase {
  return { name, run, next: 0, ops: 0, ms: 0, roundRates: [] };
}

/** Runs `bench` one operation at a time for about `ms`; returns how many it ran and how long that took. */
async function runFor(bench: BenchCase, ms: number): Promise<{ ops: number; ms: number }> {
  const start = performance.now();
  let ops = 0;
  let elapsed = 0;
  while (elapsed < ms) {
    await bench.run(bench.next);
    bench.next += 1;
    ops += 1;
    elapsed = performance.now() - start;
  }
  return { ops, ms: elapsed };
}

async function measure(cases: BenchCase[]): Promise<void> {
  for (const bench of cases) await runFor(bench, WARMUP_MS);
  for (let round = 0; round < ROUNDS; round += 1) {
    // Rotate, and reverse every other round, so no case always runs first or right after another.
    const rotated = cases.map((_, i) => cases[(i + round) % cases.length] as BenchCase);
    for (const bench of round % 2 === 0 ? rotated : rotated.reverse()) {
      const { ops, ms } = await runFor(bench, ROUND_MS);
      bench.ops += ops;
      bench.ms += ms;
      bench.roundRates.push((ops * 1000) / ms);
    }
  }
}

function rate(bench: BenchCase): number {
  return (bench.ops * 1000) / bench.ms;
}

function row(bench: BenchCase, note = ''): string {
  const spread = `${Math.round(Math.min(...bench.roundRates))}–${Math.round(Math.max(...bench.roundRates))}`;
  return `  ${bench.name.padEnd(28)} ${Math.round(rate(bench)).toString().padStart(8)} ops/s   rounds ${spread.padEnd(13)} ${note}`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

/** The overall ratio, and the median of the ratios within each round (neighbours in time, so least disturbed). */
function ratioLine(label: string, api: BenchCase, raw: BenchCase): string {
  const ratio = rate(api) / rate(raw);
  const perRound = median(api.roundRates.map((value, round) => value / (raw.roundRates[round] ?? Number.NaN)));
  const verdict = ratio >= TARGET_RATIO ? 'meets' : 'BELOW';
  return (
    `  ${label.padEnd(28)} ${ratio.toFixed(2).padStart(8)}×        ` +
    `(median per round ${perRound.toFixed(2)}×; ${verdict} the ≥ ${TARGET_RATIO}× target)`
  );
}

async function main(): Promise<void> {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const dataDir = path.join(os.tmpdir(), `baton-bench-${process.pid}-${Date.now().toString(36)}`);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
    const database = await resolveDatabase({
      ...(process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : {}),
      dataDir,
    });
    cleanups.push(() => database.stop());
    const dbName = `baton_bench_${process.pid}_${Date.now().toString(36)}`;
    const databaseUrl = await createDatabase(database.databaseUrl, dbName);
    cleanups.push(() => dropDatabase(database.databaseUrl, dbName));
    await migrate(databaseUrl);

    // One connection each: the API through its pool (checkout included), the baseline on a bare client.
    const pool = createPool({ connectionString: databaseUrl, max: 1, applicationName: 'baton-bench-api' });
    cleanups.push(() => pool.end());
    const raw = new pg.Client({ connectionString: databaseUrl, application_name: 'baton-bench-raw' });
    await raw.connect();
    cleanups.push(() => raw.end());
    const { rows } = await raw.query<{ server_version: string }>('SHOW server_version');
    log(
      `baton bench: env data (Postgres ${rows[0]?.server_version ?? '?'}, ${database.embedded ? 'embedded' : 'DATABASE_URL'}; ` +
        `${ROUNDS} rounds × ${ROUND_MS} ms per case, alternating; one connection each)`,
    );

    const scopeFor = async (name: string): Promise<ThreadScope> => {
      const threadId = `bench-${name}-${process.pid}`;
      const { epoch } = await ensureThread(pool, { threadId, rootThreadId: threadId, agent: 'bench' });
      return { rootThreadId: threadId, threadId, agent: 'bench', epoch };
    };
    const store = new EnvStore(pool);
    const apiScope = await scopeFor('api');
    const rawScope = await scopeFor('raw');
    const naiveScope = await scopeFor('naive');
    const readScope = await scopeFor('read');
    for (let k = 0; k < KEYS; k += 1) {
      await store.store(readScope, `seed:${k}`, { key: `key-${k}`, shortDescription: DESCRIPTION, value: VALUE });
    }

    const storeApi = benchCase('store  EnvStore.store', (i) =>
      store.store(apiScope, `api:${i}`, { key: `key-${i % KEYS}`, shortDescription: DESCRIPTION, value: VALUE }),
    );
    const storeRaw = benchCase('store  raw pg (same work)', (i) =>
      rawStore(raw, rawScope, `raw:${i}`, `key-${i % KEYS}`),
    );
    const storeNaive = benchCase('store  naive single upsert', (i) =>
      raw.query(NAIVE_UPSERT, [
        naiveScope.rootThreadId,
        `key-${i % KEYS}`,
        DESCRIPTION,
        JSON.stringify(VALUE),
        naiveScope.agent,
        naiveScope.threadId,
      ]),
    );
    const getApi = benchCase('get    EnvStore.get', (i) => store.get(readScope.rootThreadId, `key-${i % KEYS}`));
    const getRaw = benchCase('get    raw pg (same SELECT)', (i) =>
      raw.query(GET, [readScope.rootThreadId, `key-${i % KEYS}`]),
    );
    await measure([storeApi, storeRaw, storeNaive, getApi, getRaw]);

    log('');
    log(row(storeApi));
    log(row(storeRaw));
    log(row(storeNaive, '(context: no fence, op id, event log or NOTIFY)'));
    log(row(getApi));
    log(row(getRaw));
    log('');
    log(ratioLine('store API / raw', storeApi, storeRaw));
    log(ratioLine('get   API / raw', getApi, getRaw));
    log(`  ${'store naive / raw'.padEnd(28)} ${(rate(storeNaive) / rate(storeRaw)).toFixed(2).padStart(8)}×`);
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error: unknown) => process.stderr.write(`bench cleanup failed: ${String(error)}\n`));
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
