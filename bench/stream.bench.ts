/**
 * `npm run bench -- stream`: what live runs cost. Two parts, on one stack (bench/common.ts):
 *
 * 1. Step cost, streaming on against off: the 10-step turn of step.bench.ts (9 `think` calls, then an answer; the
 *    scripted model answers at once, `chunk_delay_ms` 0, each reply long enough to come in several chunks) through
 *    a Baton worker with `modelStream: true` and through one with `modelStream: false`, at 1 thread and 10 at once,
 *    in interleaved rounds. Two more cases on the streaming worker show what a watcher adds: a reader iterating
 *    `thread.events()` while the turn runs (in a process of its own, bench/stream-readers.ts, as a watcher runs in
 *    production; connected before the turn, untimed), and `thread.send(…, { onEvent })` (in the bench's process, as
 *    a program calls it: it connects its reader inside the timed call).
 * 2. Feed throughput: 50 threads at once on the streaming worker, each one 5-step turn whose replies stream in
 *    chunks `--chunk-delay-ms` apart, with one reader per thread (each thread is a root) iterating
 *    `thread.events()` in the readers' process (one `BatonClient` for all), against the same batch with no reader.
 *    It prints the stored events per second delivered to the readers, the deltas per second they received, and the
 *    lag from each event's `at` (its write's transaction start) to its delivery; after each batch every reader's
 *    events are compared with a fresh read of its feed from `since: 0`, so a figure never counts a reader that
 *    missed or repeated an event.
 *
 * Every turn is checked afterwards (untimed): completed after its steps, with as many `model_call_started` events as
 * steps, each streaming or not as its worker was asked. It prints medians, spreads and ratios; it asserts nothing.
 *
 * Flags (and those of bench/common.ts): `--threads LIST` (part 1, default `1,10`), `--turns N` (turns per 1-thread
 * case per round, default 3; `--quick`: 2), `--feed-threads N` (part 2, default 50; 0 skips it),
 * `--chunk-delay-ms N` (part 2, default 20).
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'pg';
import { runEventsOf, type RunEvent } from '../common/run-events';
import { readRunFeed } from '../db/run-events';
import { uniqueThreadId } from '../testing/test-env';
import type { FromReaders, ToReaders } from './stream-readers';
import { tallyEvent, type Tally } from './stream-tally';
import {
  benchAgentFile,
  benchAgents,
  benchScript,
  endThread,
  startBaton,
  TURN_MESSAGE,
  type BatonSide,
} from './baselines';
import {
  compareCases,
  interleave,
  latencySummary,
  log,
  median,
  parseBenchArgs,
  percentile,
  printReport,
  round1,
  runBench,
  throughputSummary,
  wholeNumber,
  wholeNumbers,
  type BenchCase,
  type BenchContext,
  type Comparison,
  type Measured,
  type RunResult,
} from './common';

/** Model calls per turn of part 1: 9 `think` calls, then the answer (as step.bench.ts). */
const STEPS = 10;
/** Model calls per turn of part 2 (as throughput.bench.ts). */
const FEED_STEPS = 5;
const STEP_AGENT = 'streamer';
const FEED_AGENT = 'narrator';
/** Target: a step with streaming on costs at most this many times one with it off. */
const TARGET_RATIO = 1.1;
/** How long a reader may take to see its turn end after the turn returned, before the batch fails. */
const DELIVERY_TIMEOUT_MS = 60_000;

/** A thought of about 120 characters: tool-call arguments stream 16 characters a chunk (9 chunks here). */
const THOUGHT =
  'checking the next part of the task against what the earlier steps found, and noting what is left to do next';
/** An answer of 55 words: the scripted model streams text a word a chunk. */
const ANSWER = Array.from({ length: 5 }, (_, i) => `Part ${i + 1} is checked and it holds as the task asked.`).join(
  ' ',
);

const { common, values } = parseBenchArgs(process.argv.slice(2), [5, 3], {
  turns: { type: 'string' },
  threads: { type: 'string', default: '1,10' },
  'feed-threads': { type: 'string' },
  'chunk-delay-ms': { type: 'string' },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 2 : 3;
const threadCounts = wholeNumbers('threads', String(values.threads));
const feedThreads =
  values['feed-threads'] === '0'
    ? 0
    : typeof values['feed-threads'] === 'string'
      ? wholeNumber('feed-threads', values['feed-threads'])
      : 50;
const chunkDelayMs =
  values['chunk-delay-ms'] === '0'
    ? 0
    : typeof values['chunk-delay-ms'] === 'string'
      ? wholeNumber('chunk-delay-ms', values['chunk-delay-ms'])
      : 20;

/** Script lines of an agent thinking `steps - 1` times, then answering, every reply `chunkDelay` ms a chunk. */
function streamedStepsScript(agent: string, steps: number, chunkDelay: number): string {
  return (
    `  ${agent}:\n` +
    Array.from(
      { length: steps - 1 },
      (_, i) =>
        `    - call: think\n      args: { thought: "Step ${i + 1}: ${THOUGHT}." }\n      chunk_delay_ms: ${chunkDelay}\n`,
    ).join('') +
    `    - say: "${ANSWER}"\n      chunk_delay_ms: ${chunkDelay}\n`
  );
}

/** How a turn of a case is watched. */
type Watch = 'none' | 'reader' | 'onEvent';

/** What the readers of one batch saw. */
interface Delivery {
  /** Stored events delivered, over all readers. */
  events: number;
  deltas: number;
  /** Per event: delivery time − its `at`, ms. */
  lagsMs: number[];
  /** From the first send to the last reader seeing its turn end, ms. */
  wallMs: number;
  /** Readers whose events were exactly their feed's, in order, each once. */
  complete: number;
  readers: number;
  /** The first difference found, for the report. */
  mismatch?: string;
}

/** The clock readers' times are on, comparable across this process and the readers' one (ms). */
const clock = (): number => performance.timeOrigin + performance.now();

/** What one reader of a root's feed received (a `thread.events()` iteration, or `send`'s `onEvent`). */
interface Reader extends Tally {
  /** When it saw the root's `turn_ended` (`clock()`), once it has. */
  endedAt: number | undefined;
  readonly ended: Promise<void>;
  /** Ends the reading and fills in what it received (a no-op for `onEvent`, which ends with its `send`). */
  finish(): Promise<void>;
}

/** A reader for `send`'s `onEvent` in this process; `ended` resolves at the root thread's `turn_ended`. */
function onEventReader(rootThreadId: string): Reader & { take: (event: RunEvent) => void } {
  let markEnded!: () => void;
  const reader = {
    ids: [] as string[],
    deltas: 0,
    lagsMs: [] as number[],
    endedAt: undefined as number | undefined,
    ended: new Promise<void>((resolve) => (markEnded = resolve)),
    finish: () => Promise.resolve(),
    take: (event: RunEvent) => {
      if (tallyEvent(reader, event, rootThreadId)) {
        reader.endedAt = clock();
        markEnded();
      }
    },
  };
  return reader;
}

/** The readers' process (bench/stream-readers.ts): `watch` starts a `thread.events()` iteration there. */
interface ReaderProcess {
  watch(threadId: string): Reader;
}

/**
 * Forks bench/stream-readers.ts with a client of `side`'s stack: the readers run beside the worker, as a watcher
 * does in production, so their work is not on the worker's event loop (they still share the machine's cores).
 */
async function startReaderProcess(context: BenchContext, side: BatonSide): Promise<ReaderProcess> {
  const child = fork(
    path.join(__dirname, 'stream-readers.ts'),
    [context.stack.temporalAddress, side.taskQueue, context.stack.databaseUrl],
    {
      // Its stdout goes to stderr: this process's stdout is the report.
      stdio: ['ignore', 2, 2, 'ipc'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  context.defer(async () => {
    if (child.connected) child.send({ type: 'close' } satisfies ToReaders);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
    clearTimeout(timer);
    if (child.exitCode === null) child.kill();
  });
  const readers = new Map<string, { reader: Reader; markEnded: () => void; finished?: () => void }>();
  let failure: Error | undefined;
  child.on('message', (message: FromReaders) => {
    if (message.type === 'ready') return;
    const entry = readers.get(message.threadId);
    if (!entry) return;
    if (message.type === 'ended') {
      entry.reader.endedAt = message.at;
      entry.markEnded();
      return;
    }
    readers.delete(message.threadId);
    if (message.error !== undefined) failure ??= new Error(`reader of ${message.threadId}: ${message.error}`);
    Object.assign(entry.reader, { ids: message.ids, deltas: message.deltas, lagsMs: message.lagsMs });
    entry.finished?.();
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) =>
      reject(new Error(`the readers' process exited with ${String(code)} before it was ready`)),
    );
  });
  return {
    watch: (threadId) => {
      let markEnded!: () => void;
      const reader: Reader = {
        ids: [],
        deltas: 0,
        lagsMs: [],
        endedAt: undefined,
        ended: new Promise<void>((resolve) => (markEnded = resolve)),
        finish: async () => {
          const entry = readers.get(threadId);
          if (entry) {
            await new Promise<void>((resolve) => {
              entry.finished = resolve;
              child.send({ type: 'finish', threadId } satisfies ToReaders);
            });
          }
          if (failure) throw failure;
        },
      };
      readers.set(threadId, { reader, markEnded });
      child.send({ type: 'watch', threadId } satisfies ToReaders);
      return reader;
    },
  };
}

/**
 * Waits until `count` watch connections opened since `since` (Postgres time) have LISTENed to their last channel
 * (`thread.events()` has no "connected" signal; its connection names itself `baton-client-watch`), so a reader
 * started before a timed turn misses none of its deltas and does not connect inside the timing.
 */
async function waitForListeners(pool: Pool, since: Date, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'baton-client-watch'
          AND backend_start >= $1 AND state = 'idle' AND query LIKE 'LISTEN %baton_delta_%'`,
      [since],
    );
    if (Number(rows[0]?.n ?? 0) >= count) return;
    if (Date.now() > deadline) throw new Error(`only ${rows[0]?.n ?? 0} of ${count} readers connected in 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Checks a finished turn against its stored feed: `steps` model calls, each streaming as `streaming` says, and (for a
 * reader) the events it got were the feed's, in order, each once. Returns the first difference, or undefined.
 */
async function checkTurn(
  pool: Pool,
  rootThreadId: string,
  steps: number,
  streaming: boolean,
  reader: Reader | undefined,
): Promise<string | undefined> {
  const stored = (await readRunFeed(pool, rootThreadId, { since: 0, limit: 100_000 })).flatMap(runEventsOf);
  const started = stored.filter((e) => e.type === 'model_call_started');
  if (started.length !== steps || started.some((e) => e.streaming !== streaming)) {
    throw new Error(
      `${rootThreadId}: ${started.length} model calls recorded (streaming: ${started.map((e) => e.streaming).join(',')}), not ${steps} with streaming ${streaming}`,
    );
  }
  if (!reader) return undefined;
  const expected = stored.map((e) => e.id);
  if (expected.length === reader.ids.length && expected.every((id, i) => id === reader.ids[i])) return undefined;
  const differs = expected.findIndex((id, i) => id !== reader.ids[i]);
  const at = differs === -1 ? expected.length : differs;
  return `${rootThreadId}: the reader got ${reader.ids.length} events, the feed holds ${expected.length}; first difference at ${at}: ${reader.ids[at] ?? 'none'} for ${expected[at] ?? 'none'}`;
}

/**
 * One batch: `threads` fresh threads (and their readers, connected) prepared untimed, then one turn each, started
 * at once and timed; the readers' figures go to `deliveries`. Every turn is checked after the timing.
 */
async function batch(
  side: BatonSide,
  options: { threads: number; agent: string; steps: number; streaming: boolean; watch: Watch },
  readerProcess: ReaderProcess,
  deliveries: Delivery[],
): Promise<RunResult> {
  const pool = side.harness.pool;
  const { rows } = await pool.query<{ now: Date }>('SELECT now()');
  const since = (rows[0] as { now: Date }).now;
  const items = await Promise.all(
    Array.from({ length: options.threads }, async () => {
      const thread = await side.client.startThread({
        agent: options.agent,
        threadId: uniqueThreadId(`bench-${options.agent}`),
      });
      const onEvent = options.watch === 'onEvent' ? onEventReader(thread.threadId) : undefined;
      const reader = options.watch === 'reader' ? readerProcess.watch(thread.threadId) : onEvent;
      return { thread, reader, onEvent };
    }),
  );
  if (options.watch === 'reader') await waitForListeners(pool, since, options.threads);

  const start = clock();
  const latenciesMs = await Promise.all(
    items.map(async ({ thread, onEvent }) => {
      const itemStart = clock();
      const result = onEvent
        ? await thread.send(TURN_MESSAGE, { onEvent: onEvent.take })
        : await thread.send(TURN_MESSAGE);
      const latency = clock() - itemStart;
      if (result.status !== 'completed' || result.steps !== options.steps) {
        throw new Error(
          `turn ended ${result.status} after ${result.steps} steps, not completed after ${options.steps}`,
        );
      }
      return latency;
    }),
  );
  const wallMs = clock() - start;

  // Untimed from here: the readers see their turns end, then each is compared with its stored feed.
  const readers = items.flatMap(({ reader }) => (reader === undefined ? [] : [reader]));
  if (options.watch === 'reader') {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(readers.map((r) => r.ended)),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`readers did not see their turns end ${DELIVERY_TIMEOUT_MS} ms after the last one`)),
          DELIVERY_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }
  const deliveredBy = Math.max(start, ...readers.map((r) => r.endedAt ?? start));
  await Promise.all(readers.map((r) => r.finish()));
  let complete = 0;
  let mismatch: string | undefined;
  await Promise.all(
    items.map(async ({ thread, reader }) => {
      const difference = await checkTurn(pool, thread.threadId, options.steps, options.streaming, reader);
      if (reader && difference === undefined) complete++;
      mismatch ??= difference;
      await endThread(thread);
    }),
  );
  if (readers.length > 0) {
    deliveries.push({
      events: readers.reduce((n, r) => n + r.ids.length, 0),
      deltas: readers.reduce((n, r) => n + r.deltas, 0),
      lagsMs: readers.flatMap((r) => r.lagsMs),
      wallMs: deliveredBy - start,
      complete,
      readers: readers.length,
      ...(mismatch === undefined ? {} : { mismatch }),
    });
  }
  return { latenciesMs, wallMs };
}

/** What the readers of a case saw over its timed runs (the first run, the warm-up, left out). */
function deliverySummary(all: readonly Delivery[]) {
  const runs = all.slice(1);
  const lags = runs.flatMap((d) => d.lagsMs);
  const events = runs.reduce((n, d) => n + d.events, 0);
  const readers = runs.reduce((n, d) => n + d.readers, 0);
  return {
    eventsPerSecond: round1(median(runs.map((d) => (d.events / d.wallMs) * 1000))),
    deltasPerSecond: round1(median(runs.map((d) => (d.deltas / d.wallMs) * 1000))),
    eventsPerReader: round1(events / Math.max(1, readers)),
    deltasPerReader: round1(runs.reduce((n, d) => n + d.deltas, 0) / Math.max(1, readers)),
    lagP50Ms: round1(percentile(lags, 50)),
    lagP99Ms: round1(percentile(lags, 99)),
    lagMaxMs: round1(Math.max(0, ...lags)),
    completeReaders: runs.reduce((n, d) => n + d.complete, 0),
    readers,
    mismatch: runs.find((d) => d.mismatch !== undefined)?.mismatch,
  };
}

runBench(common, async (context) => {
  const agents = benchAgents({ [STEP_AGENT]: benchAgentFile(STEP_AGENT), [FEED_AGENT]: benchAgentFile(FEED_AGENT) });
  const script = benchScript(
    [streamedStepsScript(STEP_AGENT, STEPS, 0), streamedStepsScript(FEED_AGENT, FEED_STEPS, chunkDelayMs)],
    'stream-bench',
  );
  // Two workers in this process, on task queues of their own, alike but for streaming.
  const on = await startBaton(context, { name: 'stream-on', agents, script, modelStream: true });
  const off = await startBaton(context, { name: 'stream-off', agents, script, modelStream: false });
  const readerProcess = await startReaderProcess(context, on);

  const deliveries = new Map<string, Delivery[]>();
  const stepCase = (name: string, side: BatonSide, threads: number, streaming: boolean, watch: Watch): BenchCase => {
    const seen: Delivery[] = [];
    deliveries.set(name, seen);
    return {
      name,
      repeats: threads === 1 ? turns : 1,
      run: () => batch(side, { threads, agent: STEP_AGENT, steps: STEPS, streaming, watch }, readerProcess, seen),
    };
  };
  const stepCases: BenchCase[] = threadCounts.flatMap((threads) => [
    stepCase(`off@${threads}`, off, threads, false, 'none'),
    stepCase(`on@${threads}`, on, threads, true, 'none'),
    stepCase(`on+reader@${threads}`, on, threads, true, 'reader'),
    stepCase(`on+onEvent@${threads}`, on, threads, true, 'onEvent'),
  ]);
  log(
    `part 1, step cost: ${common.rounds} rounds; threads ${threadCounts.join(', ')}; ${turns} turns per 1-thread case`,
  );
  const measured = await interleave(stepCases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  const perStep = (m: Measured) => round1(latencySummary(m).medianMs / STEPS);

  const comparisons: Comparison[] = threadCounts.flatMap((threads) => {
    const offCase = get(`off@${threads}`);
    const msPerStep = {
      off: perStep(offCase),
      on: perStep(get(`on@${threads}`)),
      onReader: perStep(get(`on+reader@${threads}`)),
      onEvent: perStep(get(`on+onEvent@${threads}`)),
    };
    return [
      compareCases(`per step, ${threads} thread(s): streaming on / off`, get(`on@${threads}`), offCase, {
        target: TARGET_RATIO,
        figures: { msPerStep },
      }),
      compareCases(
        `per step, ${threads} thread(s): streaming on with a reader / off`,
        get(`on+reader@${threads}`),
        offCase,
      ),
      compareCases(
        `per step, ${threads} thread(s): streaming on with send({ onEvent }) / off`,
        get(`on+onEvent@${threads}`),
        offCase,
      ),
    ];
  });
  const rows: ({ name: string } & Record<string, unknown>)[] = stepCases.map((c) => {
    const seen = deliveries.get(c.name) ?? [];
    return {
      name: c.name,
      msPerStep: perStep(get(c.name)),
      ...latencySummary(get(c.name)),
      ...(seen.length > 1 ? feedColumns(deliverySummary(seen)) : {}),
    };
  });
  const notes: string[] = [];

  if (feedThreads > 0) {
    const withReaders: Delivery[] = [];
    const feedCases: BenchCase[] = [
      {
        name: `feed ${feedThreads} threads, readers`,
        run: () =>
          batch(
            on,
            { threads: feedThreads, agent: FEED_AGENT, steps: FEED_STEPS, streaming: true, watch: 'reader' },
            readerProcess,
            withReaders,
          ),
      },
      {
        name: `feed ${feedThreads} threads, no reader`,
        run: () =>
          batch(
            on,
            { threads: feedThreads, agent: FEED_AGENT, steps: FEED_STEPS, streaming: true, watch: 'none' },
            readerProcess,
            [],
          ),
      },
    ];
    log(
      `part 2, feed: ${common.rounds} rounds of ${feedThreads} threads × ${FEED_STEPS} steps, chunks ${chunkDelayMs} ms apart`,
    );
    const feed = await interleave(feedCases, common.rounds, 1);
    const [readersCase, bareCase] = feedCases.map((c) => feed.get(c.name) as Measured) as [Measured, Measured];
    const summary = deliverySummary(withReaders);
    rows.push(
      { name: readersCase.name, ...throughputSummary(readersCase), ...feedColumns(summary) },
      { name: bareCase.name, ...throughputSummary(bareCase) },
    );
    comparisons.push(
      compareCases(`feed, ${feedThreads} threads: turns/s with a reader per thread / without`, readersCase, bareCase, {
        metric: 'perSecond',
      }),
    );
    notes.push(
      `feed: ${summary.eventsPerSecond} stored events/s and ${summary.deltasPerSecond} deltas/s delivered to ${feedThreads} readers; ` +
        `lag from commit (at) p50 ${summary.lagP50Ms} ms, p99 ${summary.lagP99Ms} ms; ` +
        `readers that got exactly their feed (checked against a since: 0 read): ${summary.completeReaders} of ${summary.readers}` +
        (summary.mismatch === undefined ? '' : ` (first difference: ${summary.mismatch})`),
    );
  }
  for (const [name, seen] of deliveries) {
    const summary = seen.length > 1 ? deliverySummary(seen) : undefined;
    if (summary && summary.completeReaders < summary.readers) {
      notes.push(
        `${name}: only ${summary.completeReaders} of ${summary.readers} readers got exactly their feed (first difference: ${summary.mismatch ?? '?'})`,
      );
    }
  }

  printReport(
    {
      bench: 'stream',
      description:
        `streaming on vs off per step (${STEPS}-step turn, replies in chunks at once)` +
        (feedThreads > 0 ? `, and the run feed with ${feedThreads} threads streaming and a reader each` : ''),
      settings: {
        steps: STEPS,
        rounds: common.rounds,
        turnsPerRound: turns,
        threads: threadCounts.join(','),
        feedThreads,
        feedSteps: FEED_STEPS,
        chunkDelayMs,
      },
      dynamicConfig: context.dynamicConfig,
      cases: rows,
      comparisons,
      notes,
    },
    common.json,
  );
});

/** The readers' figures as table columns. */
function feedColumns(summary: ReturnType<typeof deliverySummary>) {
  return {
    eventsPerTurn: summary.eventsPerReader,
    deltasPerTurn: summary.deltasPerReader,
    eventsPerS: summary.eventsPerSecond,
    deltasPerS: summary.deltasPerSecond,
    lagP50Ms: summary.lagP50Ms,
    lagP99Ms: summary.lagP99Ms,
    completeReaders: `${summary.completeReaders}/${summary.readers}`,
  };
}
