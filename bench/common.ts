/**
 * What every benchmark shares, so each `*.bench.ts` holds only its cases: the common flags, the stack (started the
 * way `npm test` starts it, so a fresh clone runs it with no set-up), interleaved rounds, concurrent runs, medians and
 * spreads, ratios, and the report (a table, or with `--json` one object whose `comparisons` each carry their figures
 * and a `ratio`). Benchmarks print; nothing here asserts a timing.
 */
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { LATENCY_DYNAMIC_CONFIG } from '../stack/temporal-server';
import { startTestStack, type TestStack } from '../testing/test-stack';
import { DefaultLogger, Runtime } from '@temporalio/worker';

/** The project root (state goes under `.baton/test/`). */
export const ROOT = path.resolve(__dirname, '..');

/** Progress goes to stderr; stdout is the report. */
export const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** Flags every benchmark takes. */
export interface CommonOptions {
  readonly json: boolean;
  /** A smaller run (fewer rounds, fewer items): minutes, for a first look. */
  readonly quick: boolean;
  readonly rounds: number;
  /** The dev server with `LATENCY_DYNAMIC_CONFIG` (unset by `--default-dynamic-config`). */
  readonly latencyDynamicConfig: boolean;
  /** `--dynamic-config KEY=VALUE` settings to try on top. */
  readonly extraDynamicConfig: readonly string[];
}

type OptionSpec = NonNullable<ParseArgsConfig['options']>;

/**
 * Parses the common flags and the bench's own (`extra`); an unknown flag is an error naming it.
 * @param defaultRounds rounds without `--rounds`, `[full, quick]`.
 */
export function parseBenchArgs<T extends OptionSpec>(
  argv: readonly string[],
  defaultRounds: readonly [number, number],
  extra: T,
): { common: CommonOptions; values: Record<keyof T, string | boolean | string[] | undefined> } {
  const parsed = parseArgs({
    args: [...argv],
    options: {
      json: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      'default-dynamic-config': { type: 'boolean', default: false },
      'dynamic-config': { type: 'string', multiple: true, default: [] },
      ...extra,
    },
    allowPositionals: true,
  });
  // The generic option type defeats parseArgs' inference; the values are what the spec above says.
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const quick = values.quick === true;
  return {
    common: {
      json: values.json === true,
      quick,
      rounds: typeof values.rounds === 'string' ? wholeNumber('rounds', values.rounds) : defaultRounds[quick ? 1 : 0],
      latencyDynamicConfig: values['default-dynamic-config'] !== true,
      extraDynamicConfig: (values['dynamic-config'] as string[] | undefined) ?? [],
    },
    values: values as Record<keyof T, string | boolean | string[] | undefined>,
  };
}

/** A flag's value as a whole number ≥ 1. @throws Error naming the flag. */
export function wholeNumber(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a whole number ≥ 1, not '${text}'`);
  return value;
}

/** A comma-separated list of whole numbers (`--threads 1,10`). */
export function wholeNumbers(name: string, text: string): number[] {
  return text.split(',').map((part) => wholeNumber(name, part.trim()));
}

/** A started benchmark: its stack, and what to close at the end (last opened, first closed). */
export interface BenchContext {
  readonly stack: TestStack;
  readonly dynamicConfig: readonly string[];
  /** Registers a cleanup, run in reverse order when the bench ends (also on failure). */
  defer(cleanup: () => Promise<unknown>): void;
}

/**
 * Runs a benchmark on a fresh test stack (embedded Postgres or `DATABASE_URL`, a Temporal dev server with the dynamic
 * config the flags ask for), closing everything it deferred at the end; a failure sets exit code 1.
 */
export function runBench(options: CommonOptions, body: (context: BenchContext) => Promise<void>): void {
  const cleanups: (() => Promise<unknown>)[] = [];
  const main = async () => {
    // Workers log state changes at INFO; the bench's output is its report. Core's own lines (by default printed
    // to stdout) are forwarded to the logger, which writes to stderr, so `--json` output stays one object.
    Runtime.install({
      logger: new DefaultLogger('WARN'),
      telemetryOptions: { logging: { forward: { level: 'WARN' } } },
    });
    const dynamicConfig = [
      ...(options.latencyDynamicConfig ? LATENCY_DYNAMIC_CONFIG : []),
      ...options.extraDynamicConfig,
    ];
    try {
      const stack = await startTestStack(ROOT, process.env, log, {
        latencyDynamicConfig: options.latencyDynamicConfig,
        temporalExtraArgs: options.extraDynamicConfig.flatMap((value) => ['--dynamic-config-value', value]),
      });
      cleanups.push(() => stack.stop());
      log(`dynamic config: ${describeDynamicConfig(dynamicConfig)}`);
      await body({ stack, dynamicConfig, defer: (cleanup) => cleanups.push(cleanup) });
    } finally {
      for (const cleanup of cleanups.splice(0).reverse()) {
        await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`));
      }
    }
  };
  main()
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    })
    // Everything is closed by now; a handle left behind must not keep `npm run bench` waiting (the memory bench
    // once hung after its report, with nothing but a socket pair of its own left open). Exit once stdout is flushed.
    .finally(() => process.stdout.write('', () => process.exit()));
}

export function describeDynamicConfig(settings: readonly string[]): string {
  return settings.length === 0 ? '(server defaults)' : settings.join(' ');
}

/** What one timed run of a case measured. */
export interface RunResult {
  /** Each item's latency (a turn, a fork), ms. */
  readonly latenciesMs: readonly number[];
  /** From the first start to the last end, ms. */
  readonly wallMs: number;
}

/**
 * What an item's timed part may hand back: work its run must see finished before the next run starts, but not time
 * (ending the thread it started: left running, that thread's end would fall into whatever case runs next).
 */
export type Untimed = () => Promise<void>;

/**
 * Prepares `count` items (not timed), then starts them all at once and times each, and the whole; then waits, untimed,
 * for what their timed parts handed back.
 * @param prepare sets one item up and returns its timed part.
 */
export async function runConcurrently(
  count: number,
  prepare: () => Promise<() => Promise<void | Untimed>>,
): Promise<RunResult> {
  const runs = await Promise.all(Array.from({ length: count }, () => prepare()));
  const afterwards: Untimed[] = [];
  const start = performance.now();
  const latenciesMs = await Promise.all(
    runs.map(async (run) => {
      const itemStart = performance.now();
      const after = await run();
      const latencyMs = performance.now() - itemStart;
      if (after !== undefined) afterwards.push(after);
      return latencyMs;
    }),
  );
  const wallMs = performance.now() - start;
  await Promise.all(afterwards.map((after) => after()));
  return { latenciesMs, wallMs };
}

/** A case of a benchmark: one timed run at a time. */
export interface BenchCase {
  readonly name: string;
  /** One timed run; `round` counts from 0 (-1 for the untimed warm-up), for a case that notes more than its times. */
  readonly run: (round: number) => Promise<RunResult>;
  /** Runs per round, when not the one `interleave` was given. */
  readonly repeats?: number;
}

/** Everything a case measured over the rounds. */
export interface Measured {
  readonly name: string;
  /** Every item's latency, ms. */
  readonly latenciesMs: number[];
  /** Per round: the median latency and the items per second (items over the wall time of its runs). */
  readonly rounds: { medianMs: number; perSecond: number }[];
}

/**
 * Runs every case once untimed (bundles loaded, connections open, caches warm), then `rounds` rounds of `repeats`
 * runs per case. Rounds rotate the order of the cases, and every other round reverses it, so no case always runs
 * first or right after another: drift of a shared machine falls on all of them alike.
 */
export async function interleave(
  cases: readonly BenchCase[],
  rounds: number,
  repeats: number,
): Promise<Map<string, Measured>> {
  const measured = new Map<string, Measured>(cases.map((c) => [c.name, { name: c.name, latenciesMs: [], rounds: [] }]));
  for (const bench of cases) {
    log(`warm-up: ${bench.name}`);
    await bench.run(-1);
  }
  for (let round = 0; round < rounds; round++) {
    log(`round ${round + 1} of ${rounds}`);
    const rotated = cases.map((_, i) => cases[(i + round) % cases.length] as BenchCase);
    for (const bench of round % 2 === 0 ? rotated : rotated.reverse()) {
      const latencies: number[] = [];
      let wallMs = 0;
      for (let repeat = 0; repeat < (bench.repeats ?? repeats); repeat++) {
        const result = await bench.run(round);
        latencies.push(...result.latenciesMs);
        wallMs += result.wallMs;
      }
      const entry = measured.get(bench.name) as Measured;
      entry.latenciesMs.push(...latencies);
      entry.rounds.push({ medianMs: median(latencies), perSecond: (latencies.length / wallMs) * 1000 });
    }
  }
  return measured;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

/** The nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

export function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

export function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/** Latency figures of a case: items, median, p10–p90 spread, p99, and the round medians. */
export function latencySummary(measured: Measured) {
  return {
    items: measured.latenciesMs.length,
    medianMs: round1(median(measured.latenciesMs)),
    p10Ms: round1(percentile(measured.latenciesMs, 10)),
    p90Ms: round1(percentile(measured.latenciesMs, 90)),
    p99Ms: round1(percentile(measured.latenciesMs, 99)),
    roundMediansMs: measured.rounds.map((r) => round1(r.medianMs)),
  };
}

/** Throughput figures of a case: items per second (median over rounds, and its min–max), p50 and p99 latency. */
export function throughputSummary(measured: Measured) {
  const perSecond = measured.rounds.map((r) => r.perSecond);
  return {
    items: measured.latenciesMs.length,
    perSecond: round1(median(perSecond)),
    perSecondMin: round1(Math.min(...perSecond)),
    perSecondMax: round1(Math.max(...perSecond)),
    p50Ms: round1(percentile(measured.latenciesMs, 50)),
    p99Ms: round1(percentile(measured.latenciesMs, 99)),
  };
}

/**
 * A comparison as the report prints it: what is compared, both figures, `ratio` = subject / baseline (for times,
 * above 1 is slower than the baseline; for rates, below 1 is), and optionally the median of per-round ratios (cases
 * measured next to each other in time, least disturbed by drift) and the target Baton aims to stay within.
 */
export interface Comparison {
  readonly name: string;
  readonly metric: string;
  readonly subject: { readonly name: string; readonly value: number };
  readonly baseline: { readonly name: string; readonly value: number };
  readonly ratio: number;
  readonly medianPerRound?: number;
  /** The target on `ratio` (or on `subject.value` when `on` says so), and whether this run met it. */
  readonly target?: { readonly on: 'ratio' | 'subject'; readonly atMost: number; readonly met: boolean };
  /** Anything else worth carrying (spreads, counts). */
  readonly figures?: Record<string, unknown>;
}

/** Compares two measured cases by median latency (or by items per second with `metric: 'perSecond'`). */
export function compareCases(
  name: string,
  subject: Measured,
  baseline: Measured,
  options: { metric?: 'medianMs' | 'perSecond'; target?: number; figures?: Record<string, unknown> } = {},
): Comparison {
  const metric = options.metric ?? 'medianMs';
  const value = (m: Measured) =>
    metric === 'medianMs' ? median(m.latenciesMs) : median(m.rounds.map((r) => r.perSecond));
  const perRound = (m: Measured) => m.rounds.map((r) => (metric === 'medianMs' ? r.medianMs : r.perSecond));
  const baselineRounds = perRound(baseline);
  return compare(
    name,
    metric === 'medianMs' ? 'median ms' : 'per second',
    subject.name,
    value(subject),
    baseline.name,
    value(baseline),
    {
      medianPerRound: median(perRound(subject).map((v, i) => v / (baselineRounds[i] ?? Number.NaN))),
      ...(options.target === undefined ? {} : { target: options.target }),
      ...(options.figures ? { figures: options.figures } : {}),
    },
  );
}

/** A comparison of two figures. */
export function compare(
  name: string,
  metric: string,
  subjectName: string,
  subjectValue: number,
  baselineName: string,
  baselineValue: number,
  options: {
    medianPerRound?: number;
    target?: number;
    targetOn?: 'ratio' | 'subject';
    figures?: Record<string, unknown>;
  } = {},
): Comparison {
  const ratio = round2(subjectValue / baselineValue);
  const on = options.targetOn ?? 'ratio';
  return {
    name,
    metric,
    subject: { name: subjectName, value: round1(subjectValue) },
    baseline: { name: baselineName, value: round1(baselineValue) },
    ratio,
    ...(options.medianPerRound === undefined ? {} : { medianPerRound: round2(options.medianPerRound) }),
    ...(options.target === undefined
      ? {}
      : {
          target: {
            on,
            atMost: options.target,
            met: (on === 'ratio' ? ratio : subjectValue) <= options.target,
          },
        }),
    ...(options.figures ? { figures: options.figures } : {}),
  };
}

/** The machine the figures came from: cores and load (the machine may be shared). */
export function machine() {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: round1(os.totalmem() / 2 ** 30),
    loadAverage1m: round1(os.loadavg()[0] ?? 0),
  };
}

/** A benchmark's report: the header lines, a table of its cases, and its comparisons. */
export interface Report {
  readonly bench: string;
  readonly description: string;
  readonly settings: Record<string, unknown>;
  readonly dynamicConfig: readonly string[];
  /** One row per case: a name and named figures. */
  readonly cases: readonly ({ name: string } & Record<string, unknown>)[];
  readonly comparisons: readonly Comparison[];
  /** Anything else (observations that are not ratios). */
  readonly notes?: readonly string[];
}

/** Prints the report: one JSON object with `--json`, else a table. */
export function printReport(report: Report, json: boolean): void {
  const full = { ...report, machine: machine() };
  if (json) {
    process.stdout.write(`${JSON.stringify(full)}\n`);
    return;
  }
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`${report.bench}: ${report.description}`);
  out(
    `  settings: ${Object.entries(report.settings)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(' ')}`,
  );
  out(`  dynamic config: ${describeDynamicConfig(report.dynamicConfig)}`);
  const columns = [...new Set(report.cases.flatMap((row) => Object.keys(row).filter((k) => k !== 'name')))];
  const cell = (value: unknown): string =>
    Array.isArray(value)
      ? value.map(cell).join(' ')
      : typeof value === 'object' && value !== null
        ? JSON.stringify(value)
        : String((value as string | number | boolean | undefined) ?? '');
  const width = Math.max(4, ...report.cases.map((row) => row.name.length));
  const widths = columns.map((c) => Math.max(c.length, ...report.cases.map((row) => cell(row[c]).length)));
  out(`  ${'case'.padEnd(width)}  ${columns.map((c, i) => c.padStart(widths[i] ?? 0)).join('  ')}`);
  for (const row of report.cases) {
    out(`  ${row.name.padEnd(width)}  ${columns.map((c, i) => cell(row[c]).padStart(widths[i] ?? 0)).join('  ')}`);
  }
  for (const c of report.comparisons) {
    const perRound = c.medianPerRound === undefined ? '' : ` (median per round ${c.medianPerRound}×)`;
    const target = c.target
      ? `; target ${c.target.on === 'ratio' ? '' : `${c.subject.name} `}≤ ${c.target.atMost}${c.target.on === 'ratio' ? '×' : ''}: ${c.target.met ? 'meets' : 'MISSED'}`
      : '';
    out(
      `  ${c.name}: ${c.subject.name} ${c.subject.value} / ${c.baseline.name} ${c.baseline.value} ${c.metric} = ${c.ratio}×${perRound}${target}`,
    );
  }
  for (const note of report.notes ?? []) out(`  ${note}`);
  const m = full.machine;
  out(`  machine: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, 1-minute load average ${m.loadAverage1m}`);
}
