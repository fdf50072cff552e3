/**
 * `npm run bench -- env-data`: the env store (`EnvStore`) against raw `pg` doing the least work with the same
 * guarantees, measured in the same run, at 1 and 8 clients: put (replacing an entry), put-new (every put a new key,
 * the root growing), get, and a contended compare-and-set increment of one key; then store latency in a fresh root
 * against one whose log holds 50,000 events. At 1 client the two sides' operations take turns one by one; at 8, their
 * rounds alternate (in a rotating order): either way drift (caches, a growing log, the machine's other load) falls on
 * both alike. Prints medians, spreads and ratios with their targets; asserts nothing.
 *
 * The raw baseline works on Baton's own tables (so it pays for the same indexes) and does per operation exactly:
 * put: one statement, a versioned upsert of the entry and an insert of its event with a unique operation id (for a
 * new key the upsert inserts the entry at version 1);
 * get: one primary-key SELECT; increment: SELECT the value and version, then one statement updating the entry only if
 * it is still at that version and inserting its event, retried from the SELECT when it was not (the store's loop
 * retries from the entry its conflict names, migration 019, which a plain statement cannot give). No lock beyond the
 * rows. What the store adds is its guarantees beyond those: the epoch fence (the thread's epoch lock in shared mode,
 * migration 009), the root's lock in shared mode (for readers of the log), the change-feed announcement, for a new key
 * the look-up of its past versions (a key created again after a delete continues its numbers), and its API (pool
 * checkout, input checks).
 *
 * Flags: `--rounds N` (default 5), `--json` (one object). Postgres: `DATABASE_URL` if set, else an embedded server
 * in a temporary directory; either way a fresh database that is created, migrated and dropped.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { ThreadScope } from '../common/types';
import { EnvDataError, EnvDataErrorType, EnvStore } from '../db/env-data';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { ensureThread } from '../db/threads';
import { createDatabase, dropDatabase, resolveDatabase } from '../stack/local-postgres';

/** Each side of a comparison runs this long per round. */
const ROUND_MS = 1000;
const WARMUP_MS = 300;
const CLIENTS = [1, 8] as const;
/** Each client's puts cycle over this many keys of its own: entries are replaced, as agents mostly do. */
const KEYS_PER_CLIENT = 8;
const HISTORY_EVENTS = 50_000;
/** Latency rounds: this many timed puts per root per round. */
const LATENCY_PUTS = 100;

/** Targets (reported, never asserted); a put of a new key is held to the put's. */
const TARGETS = { put: 0.8, putNew: 0.8, get: 0.8, increment: 1.0, historyLatency: 1.2 } as const;

const VALUE = {
  task_id: '007bbfb7',
  input_grid: [
    [0, 7, 7],
    [7, 7, 7],
    [0, 7, 7],
  ],
  notes: 'Each cell of the input becomes a 3x3 block: a copy of the input where the cell is coloured, else blank.',
};
const VALUE_JSON = JSON.stringify(VALUE);
const DESCRIPTION = 'The current ARC task: 007bbfb7, a 3x3 input grid and what was observed about it.';

// The raw baseline's statements, prepared once per connection (as the store's are).
const RAW_PUT_TEXT = `WITH entry AS (
    INSERT INTO env_data (root_thread_id, scope, key, short_description, value, stored_by_agent, stored_by_thread,
                          version)
    VALUES ($1, '', $2, $3, $4, $5, $6, 1)
    ON CONFLICT (root_thread_id, scope, key) DO UPDATE SET
      short_description = EXCLUDED.short_description, value = EXCLUDED.value,
      stored_by_agent = EXCLUDED.stored_by_agent, stored_by_thread = EXCLUDED.stored_by_thread,
      version = env_data.version + 1, updated_at = now()
    RETURNING version)
  INSERT INTO env_events (root_thread_id, scope, key, action, actor_agent, actor_thread, operation_id, version,
                          value_size, value, short_description)
  SELECT $1, '', $2, 'stored', $5, $6, $7, version, $8, $4, $3 FROM entry`;
const RAW_PUT = (values: unknown[]) => ({ name: 'raw-put', text: RAW_PUT_TEXT, values });
const RAW_GET_TEXT = `SELECT key, short_description, value, type, tags, stored_by_agent, stored_by_thread, version,
    created_at, updated_at FROM env_data WHERE root_thread_id = $1 AND scope = '' AND key = $2`;
const RAW_GET = (values: unknown[]) => ({ name: 'raw-get', text: RAW_GET_TEXT, values });
const RAW_READ_VERSION = (values: unknown[]) => ({
  name: 'raw-read-version',
  text: `SELECT value, version FROM env_data WHERE root_thread_id = $1 AND scope = '' AND key = $2`,
  values,
});
const RAW_CAS_TEXT = `WITH entry AS (
    UPDATE env_data SET value = $3, stored_by_agent = $4, stored_by_thread = $5, version = version + 1,
                        updated_at = now()
     WHERE root_thread_id = $1 AND scope = '' AND key = $2 AND version = $6
    RETURNING version, short_description)
  INSERT INTO env_events (root_thread_id, scope, key, action, actor_agent, actor_thread, operation_id, version,
                          value_size, value, short_description)
  SELECT $1, '', $2, 'updated', $4, $5, $7, version, octet_length($3::text), $3, short_description FROM entry
  RETURNING version`;
const RAW_CAS = (values: unknown[]) => ({ name: 'raw-cas', text: RAW_CAS_TEXT, values });

interface Options {
  readonly rounds: number;
  readonly json: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  // Not strict: `npm run bench` passes every benchmark the same flags.
  const { values } = parseArgs({
    args: [...argv],
    options: { rounds: { type: 'string', default: '5' }, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: false,
  });
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    throw new Error(`--rounds takes a whole number ≥ 1, not '${String(values.rounds)}'`);
  }
  return { rounds, json: values.json === true };
}

/** One side of a comparison: an operation run by `clients` concurrent loops. */
interface Side {
  readonly name: string;
  /** Runs one operation of loop `client`; resolves to the conflicts it met (increments retry on them). */
  readonly run: (client: number) => Promise<number>;
  /** Operations per second, per round. */
  readonly roundRates: number[];
  ops: number;
  conflicts: number;
}

function side(name: string, run: (client: number) => Promise<unknown>): Side {
  return {
    name,
    run: async (client) => {
      const conflicts = await run(client);
      return typeof conflicts === 'number' ? conflicts : 0;
    },
    roundRates: [],
    ops: 0,
    conflicts: 0,
  };
}

/** Runs `clients` loops of `bench` for about `ms`; returns operations per second. */
async function runFor(bench: Side, clients: number, ms: number, record: boolean): Promise<void> {
  const start = performance.now();
  let ops = 0;
  let conflicts = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (performance.now() - start < ms) {
        conflicts += await bench.run(client);
        ops += 1;
      }
    }),
  );
  const elapsed = performance.now() - start;
  if (!record) return;
  bench.roundRates.push((ops * 1000) / elapsed);
  bench.ops += ops;
  bench.conflicts += conflicts;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

/**
 * One client, one operation at a time, the two sides taking turns operation by operation (which goes first swapping
 * every pair) for about `ms` per side: each side's rate is its operations over the time they took. A round of each
 * side in turn (`runFor`) measures them a second apart, and on a shared machine the cost of a commit's flush alone
 * moves by a third from one second to the next; taken in pairs, both sides meet the same disk and the same load. The
 * store's announcements, sent on a timer after its writes (one statement per 20 ms at most), can fall in either side's
 * time.
 */
async function runPaired(store: Side, raw: Side, ms: number, record: boolean): Promise<void> {
  const busy = new Map<Side, { ms: number; ops: number; conflicts: number }>([
    [store, { ms: 0, ops: 0, conflicts: 0 }],
    [raw, { ms: 0, ops: 0, conflicts: 0 }],
  ]);
  const start = performance.now();
  for (let pair = 0; performance.now() - start < 2 * ms; pair++) {
    for (const bench of pair % 2 === 0 ? [store, raw] : [raw, store]) {
      const opStart = performance.now();
      const conflicts = await bench.run(0);
      const tally = busy.get(bench) as { ms: number; ops: number; conflicts: number };
      tally.ms += performance.now() - opStart;
      tally.ops += 1;
      tally.conflicts += conflicts;
    }
  }
  if (!record) return;
  for (const [bench, tally] of busy) {
    bench.roundRates.push((tally.ops * 1000) / tally.ms);
    bench.ops += tally.ops;
    bench.conflicts += tally.conflicts;
  }
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/**
 * One comparison: the store and the raw baseline at one client count. At 1 client their operations take turns
 * (`runPaired`); at more, their rounds alternate (`runFor`), each side's clients running together, since how writes
 * overlap is part of what is measured there.
 */
async function compare(store: Side, raw: Side, clients: number, rounds: number) {
  if (clients === 1) {
    await runPaired(store, raw, WARMUP_MS, false);
    for (let round = 0; round < rounds; round++) await runPaired(store, raw, ROUND_MS, true);
  } else {
    await runFor(store, clients, WARMUP_MS, false);
    await runFor(raw, clients, WARMUP_MS, false);
    for (let round = 0; round < rounds; round++) {
      for (const bench of round % 2 === 0 ? [store, raw] : [raw, store]) await runFor(bench, clients, ROUND_MS, true);
    }
  }
  const figures = (bench: Side) => ({
    opsPerSec: Math.round(median(bench.roundRates)),
    minOpsPerSec: Math.round(Math.min(...bench.roundRates)),
    maxOpsPerSec: Math.round(Math.max(...bench.roundRates)),
    roundOpsPerSec: bench.roundRates.map(Math.round),
    ...(bench.conflicts > 0 ? { conflictsPerOp: round2(bench.conflicts / bench.ops) } : {}),
  });
  return {
    store: figures(store),
    raw: figures(raw),
    ratio: round2(median(store.roundRates) / median(raw.roundRates)),
    medianPerRoundRatio: round2(median(store.roundRates.map((rate, i) => rate / (raw.roundRates[i] ?? Number.NaN)))),
  };
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`${line}\n`);
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

    // A connection per client on each side: the store through its pool (checkout counted), the baseline bare.
    const pool = createPool({ connectionString: databaseUrl, max: 8, applicationName: 'baton-bench-store' });
    cleanups.push(() => pool.end());
    const raws: pg.Client[] = [];
    for (let i = 0; i < 8; i++) {
      const client = new pg.Client({ connectionString: databaseUrl, application_name: 'baton-bench-raw' });
      await client.connect();
      cleanups.push(() => client.end());
      raws.push(client);
    }
    const rawClient = (client: number) => raws[client] as pg.Client;
    const { rows } = await pool.query<{ server_version: string }>('SHOW server_version');
    const postgres = `${rows[0]?.server_version ?? '?'} (${database.embedded ? 'embedded' : 'DATABASE_URL'})`;
    log(
      `baton bench: env data (Postgres ${postgres}; ${options.rounds} rounds × ${ROUND_MS} ms per side, alternating; ` +
        `a connection per client on each side)`,
    );

    let unique = 0;
    const opId = (prefix: string) => `${prefix}:${(unique++).toString(36)}`;
    const openRoot = async (name: string): Promise<ThreadScope> => {
      const threadId = `bench-${name}-${process.pid}-${(unique++).toString(36)}`;
      const { epoch } = await ensureThread(pool, { threadId, rootThreadId: threadId, agent: 'bench' });
      return { rootThreadId: threadId, threadId, agent: 'bench', epoch };
    };
    /** The client threads of a root: each concurrent client writes as a thread of its own, as parallel agents do. */
    const openClients = (root: ThreadScope) =>
      Promise.all(
        Array.from({ length: 8 }, async (_, i): Promise<ThreadScope> => {
          const threadId = `${root.rootThreadId}/client-${i}`;
          const { epoch } = await ensureThread(pool, {
            threadId,
            rootThreadId: root.rootThreadId,
            parentThreadId: root.threadId,
            agent: `client-${i}`,
          });
          return { rootThreadId: root.rootThreadId, threadId, agent: `client-${i}`, epoch };
        }),
      );

    const store = new EnvStore(pool);
    const storeRoot = await openRoot('store');
    const storeClients = await openClients(storeRoot);
    const rawRoot = await openRoot('raw');
    const scopeOf = (client: number) => storeClients[client] as ThreadScope;
    const keyOf = (client: number, i: number) => `client-${client}/key-${i % KEYS_PER_CLIENT}`;
    // Seeded on both sides: every put replaces an entry, every get finds one.
    for (let client = 0; client < 8; client++) {
      for (let k = 0; k < KEYS_PER_CLIENT; k++) {
        const key = keyOf(client, k);
        await store.store(scopeOf(client), opId('seed'), { key, shortDescription: DESCRIPTION, value: VALUE });
        await rawClient(0).query(
          RAW_PUT([
            rawRoot.rootThreadId,
            key,
            DESCRIPTION,
            VALUE_JSON,
            'bench',
            rawRoot.threadId,
            opId('seed'),
            Buffer.byteLength(VALUE_JSON, 'utf8'),
          ]),
        );
      }
    }
    const next = Array<number>(8).fill(0);
    const tick = (client: number) => (next[client] = (next[client] ?? 0) + 1);

    /** A put through the store as thread `scopes(client)` of its root. */
    const storePut = (scopes: (client: number) => ThreadScope, key: (client: number) => string) => (client: number) =>
      store.store(scopes(client), opId('put'), { key: key(client), shortDescription: DESCRIPTION, value: VALUE });
    /** The baseline's put into `root`. */
    const rawPut = (root: ThreadScope, key: (client: number) => string) => (client: number) =>
      rawClient(client).query(
        RAW_PUT([
          root.rootThreadId,
          key(client),
          DESCRIPTION,
          VALUE_JSON,
          'bench',
          root.threadId,
          opId('put'),
          Buffer.byteLength(VALUE_JSON, 'utf8'),
        ]),
      );
    const seededKey = (client: number) => keyOf(client, tick(client));
    const putStore = side('put    EnvStore.store', storePut(scopeOf, seededKey));
    const putRaw = side('put    raw upsert + event', rawPut(rawRoot, seededKey));
    // Every put a key never stored before, into a root of its own on each side that grows through the run (from
    // the warm-up on): the entry is created, not replaced.
    const growingStoreClients = await openClients(await openRoot('store-growing'));
    const growingRawRoot = await openRoot('raw-growing');
    const newKey = (client: number) => `client-${client}/new-${(unique++).toString(36)}`;
    const putNewStore = side(
      'put-new  EnvStore.store',
      storePut((client) => growingStoreClients[client] as ThreadScope, newKey),
    );
    const putNewRaw = side('put-new  raw insert + event', rawPut(growingRawRoot, newKey));
    const getStore = side('get    EnvStore.get', (client) =>
      store.get(storeRoot.rootThreadId, keyOf(client, tick(client))),
    );
    const getRaw = side('get    raw SELECT', (client) =>
      rawClient(client).query(RAW_GET([rawRoot.rootThreadId, keyOf(client, tick(client))])),
    );

    // The increment: read the value and version, write value + 1 expecting that version, retry on a conflict.
    const counter = 'counter';
    await store.store(storeRoot, opId('seed'), { key: counter, shortDescription: 'A shared counter.', value: 0 });
    await rawClient(0).query(
      RAW_PUT([rawRoot.rootThreadId, counter, 'A shared counter.', '0', 'bench', rawRoot.threadId, opId('seed'), 1]),
    );
    // The store answers a conflict with the entry's version and value, so its loop retries from them; a plain
    // statement cannot (its snapshot is older than the write it lost to), so the raw loop reads again.
    const incrementStore = side('increment  EnvStore get + update', async (client) => {
      const read = await store.get(storeRoot.rootThreadId, counter);
      if (!read) throw new Error('the counter is gone');
      let entry = { value: read.value as number, version: read.version };
      for (let conflicts = 0; ; conflicts++) {
        try {
          await store.update(scopeOf(client), opId('increment'), {
            key: counter,
            value: entry.value + 1,
            expectedVersion: entry.version,
          });
          return conflicts;
        } catch (error) {
          if (!(error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict)) throw error;
          const current = error.conflict?.current;
          if (!current) throw new Error('a version conflict came without the entry', { cause: error });
          entry = { value: current.value as number, version: current.version };
        }
      }
    });
    const incrementRaw = side('increment  raw SELECT + CAS', async (client) => {
      const db = rawClient(client);
      for (let conflicts = 0; ; conflicts++) {
        const { rows: read } = await db.query<{ value: number; version: number }>(
          RAW_READ_VERSION([rawRoot.rootThreadId, counter]),
        );
        const entry = read[0];
        if (!entry) throw new Error('the counter is gone');
        const { rows: written } = await db.query(
          RAW_CAS([
            rawRoot.rootThreadId,
            counter,
            JSON.stringify(entry.value + 1),
            'bench',
            rawRoot.threadId,
            entry.version,
            opId('increment'),
          ]),
        );
        if (written.length > 0) return conflicts;
      }
    });

    const comparisons: Comparison[] = [];
    const cases = [
      { name: 'put', target: TARGETS.put, store: putStore, raw: putRaw },
      { name: 'put-new', target: TARGETS.putNew, store: putNewStore, raw: putNewRaw },
      { name: 'get', target: TARGETS.get, store: getStore, raw: getRaw },
      { name: 'increment', target: TARGETS.increment, store: incrementStore, raw: incrementRaw },
    ];
    for (const clients of CLIENTS) {
      for (const bench of cases) {
        const fresh = (from: Side): Side => side(from.name, from.run);
        const result = await compare(fresh(bench.store), fresh(bench.raw), clients, options.rounds);
        // The increment target is set at 8 clients (contention); at 1 it is shown for context.
        const target = bench.name === 'increment' && clients === 1 ? undefined : bench.target;
        comparisons.push({
          case: bench.name,
          clients,
          ...result,
          ...(target === undefined ? {} : { target, meets: result.ratio >= target }),
        });
        log(`  measured ${bench.name} at ${clients} client${clients === 1 ? '' : 's'}`);
      }
    }

    // Latency of a put (one client, one at a time) in a fresh root against one whose log holds 50,000 events of the
    // same keys: a store must not cost more as history grows.
    const history = await openRoot('history');
    const historyKeys = Array.from({ length: KEYS_PER_CLIENT }, (_, k) => `key-${k}`);
    const perKey = HISTORY_EVENTS / historyKeys.length;
    await pool.query(
      `INSERT INTO env_events (root_thread_id, scope, key, action, actor_agent, actor_thread, operation_id, version,
                               value_size, value, short_description, reason, refusal_type)
       SELECT $1, '', k.key, CASE WHEN v % 10 = 0 THEN 'rejected' ELSE 'updated' END, 'bench', $1,
              'history:' || k.key || ':' || v, v, octet_length($2), $2::jsonb, $3,
              CASE WHEN v % 10 = 0 THEN 'a refused attempt' END, CASE WHEN v % 10 = 0 THEN 'EnvData.VersionConflict' END
         FROM unnest($4::text[]) AS k(key), generate_series(1, $5::int) AS v`,
      [history.rootThreadId, VALUE_JSON, DESCRIPTION, historyKeys, perKey],
    );
    await pool.query(
      `INSERT INTO env_data (root_thread_id, scope, key, short_description, value, stored_by_agent, stored_by_thread,
                             version)
       SELECT $1, '', key, $3, $2::jsonb, 'bench', $1, $4 FROM unnest($5::text[]) AS key`,
      [history.rootThreadId, VALUE_JSON, DESCRIPTION, perKey, historyKeys],
    );
    await pool.query('ANALYZE env_events');
    const latencies = { fresh: [] as number[], history: [] as number[] };
    const timedPuts = async (scope: ThreadScope, into: number[] | undefined) => {
      for (let i = 0; i < LATENCY_PUTS; i++) {
        const start = performance.now();
        await store.store(scope, opId('latency'), {
          key: historyKeys[i % historyKeys.length] as string,
          shortDescription: DESCRIPTION,
          value: VALUE,
        });
        into?.push(performance.now() - start);
      }
    };
    const freshRoot = async () => {
      // A new root each round, its keys created untimed: the timed puts replace entries, as in the other root.
      const root = await openRoot('fresh');
      for (const key of historyKeys) {
        await store.store(root, opId('seed'), { key, shortDescription: DESCRIPTION, value: VALUE });
      }
      return root;
    };
    await timedPuts(history, undefined);
    await timedPuts(await freshRoot(), undefined);
    const roundMedians = { fresh: [] as number[], history: [] as number[] };
    for (let round = 0; round < options.rounds; round++) {
      const fresh = await freshRoot();
      for (const which of round % 2 === 0 ? (['fresh', 'history'] as const) : (['history', 'fresh'] as const)) {
        const times: number[] = [];
        await timedPuts(which === 'fresh' ? fresh : history, times);
        latencies[which].push(...times);
        roundMedians[which].push(median(times));
      }
    }
    const latencyFigures = (times: number[], medians: number[]) => ({
      medianMs: round2(median(times)),
      p10Ms: round2(percentile(times, 10)),
      p90Ms: round2(percentile(times, 90)),
      roundMediansMs: medians.map(round2),
    });
    const historyRatio = round2(median(latencies.history) / median(latencies.fresh));
    const latency = {
      historyEvents: HISTORY_EVENTS,
      fresh: latencyFigures(latencies.fresh, roundMedians.fresh),
      history: latencyFigures(latencies.history, roundMedians.history),
      ratio: historyRatio,
      medianPerRoundRatio: round2(
        median(roundMedians.history.map((value, i) => value / (roundMedians.fresh[i] ?? Number.NaN))),
      ),
      target: TARGETS.historyLatency,
      meets: historyRatio <= TARGETS.historyLatency,
    };
    const [load1] = os.loadavg();
    const result = {
      postgres,
      rounds: options.rounds,
      roundMs: ROUND_MS,
      cpus: os.cpus().length,
      loadAverage1m: round2(load1 ?? 0),
      comparisons,
      latency,
    };
    if (options.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    printTable(result);
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error: unknown) => process.stderr.write(`bench cleanup failed: ${String(error)}\n`));
    }
  }
}

interface Figures {
  opsPerSec: number;
  minOpsPerSec: number;
  maxOpsPerSec: number;
  conflictsPerOp?: number;
}

interface Comparison {
  case: string;
  clients: number;
  store: Figures;
  raw: Figures;
  ratio: number;
  medianPerRoundRatio: number;
  target?: number;
  meets?: boolean;
}

function printTable(result: {
  postgres: string;
  rounds: number;
  loadAverage1m: number;
  comparisons: Comparison[];
  latency: {
    fresh: { medianMs: number; p10Ms: number; p90Ms: number };
    history: { medianMs: number; p10Ms: number; p90Ms: number };
    ratio: number;
    medianPerRoundRatio: number;
    target: number;
    meets: boolean;
  };
}): void {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const cell = (figures: Figures) =>
    `${String(figures.opsPerSec).padStart(6)}/s (${figures.minOpsPerSec}–${figures.maxOpsPerSec})`.padEnd(24) +
    (figures.conflictsPerOp === undefined ? '' : ` ${figures.conflictsPerOp} conflicts/op`).padEnd(20);
  out(`env store vs raw pg (Postgres ${result.postgres}; medians of ${result.rounds} rounds, min–max in brackets)`);
  out('');
  out(`  ${'case'.padEnd(10)} ${'clients'.padStart(7)}   ${'EnvStore'.padEnd(44)} ${'raw pg'.padEnd(44)} ratio`);
  for (const row of result.comparisons) {
    const target =
      row.target === undefined
        ? '(context)'
        : `${row.meets ? 'meets' : 'BELOW'} ≥ ${row.target}× (per round ${row.medianPerRoundRatio}×)`;
    out(
      `  ${row.case.padEnd(10)} ${String(row.clients).padStart(7)}   ${cell(row.store)} ${cell(row.raw)} ` +
        `${row.ratio.toFixed(2)}×  ${target}`,
    );
  }
  const { latency } = result;
  const ms = (f: { medianMs: number; p10Ms: number; p90Ms: number }) =>
    `${f.medianMs} ms (p10–p90 ${f.p10Ms}–${f.p90Ms})`;
  out('');
  out(
    `  put latency, 1 client: fresh root ${ms(latency.fresh)}; root with ${HISTORY_EVENTS} events ${ms(latency.history)}`,
  );
  out(
    `  ${HISTORY_EVENTS} events / fresh: ${latency.ratio.toFixed(2)}× (per round ${latency.medianPerRoundRatio}×; ` +
      `${latency.meets ? 'meets' : 'ABOVE'} the ≤ ${latency.target}× target)`,
  );
  out(`  load average (1 min) at the end: ${result.loadAverage1m}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
