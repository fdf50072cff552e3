/**
 * What the workflow sandbox's deadlock guard costs (seen as the worker process creating short-lived OS threads
 * at about 140 a second during the step bench). The Temporal SDK runs every call into a workflow's sandbox
 * with `script.runInContext(context, { timeout: isolateExecutionTimeoutMs })` (5 s, `reusable-vm.js`/`vm.js` in
 * `@temporalio/worker`), and Node starts a watchdog thread for each such call to stop code that runs past it: that is
 * the thread a `clone3` creates again and again. This bench makes the same call with and without the timeout, in
 * interleaved rounds, and prints the time per call and the threads created per call (Linux: the advance of
 * `/proc/sys/kernel/ns_last_pid`, which every new thread or process on the machine moves, so a busy machine adds to
 * it). No stack is started.
 */
import fs from 'node:fs';
import vm from 'node:vm';
import { compare, log, median, parseBenchArgs, printReport, round2, wholeNumber } from './common';

const { common, values } = parseBenchArgs(process.argv.slice(2), [7, 3], { calls: { type: 'string' } });
const calls = typeof values.calls === 'string' ? wholeNumber('calls', values.calls) : common.quick ? 20_000 : 100_000;
/** The SDK's `isolateExecutionTimeout` default. */
const SDK_TIMEOUT_MS = 5_000;

const LAST_PID = '/proc/sys/kernel/ns_last_pid';
const PID_MAX = '/proc/sys/kernel/pid_max';
const lastPid = (): number | undefined =>
  fs.existsSync(LAST_PID) ? Number(fs.readFileSync(LAST_PID, 'utf8')) : undefined;
const pidMax = fs.existsSync(PID_MAX) ? Number(fs.readFileSync(PID_MAX, 'utf8')) : undefined;
/** Calls over which threads are counted: far fewer than `pid_max`, so the counter's wrap-around is told apart. */
const COUNTED_CALLS = 1_000;

// A small activation's worth of work, in a context of its own, as the SDK's calls into a workflow are.
const context = vm.createContext({ state: { n: 0 } });
const script = new vm.Script('state.n = (state.n + 1) % 1000; state.n');

function measure(timeout: boolean): { usPerCall: number; threadsPerCall: number | undefined } {
  const options = timeout ? { timeout: SDK_TIMEOUT_MS } : {};
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) script.runInContext(context, options);
  const elapsedNs = Number(process.hrtime.bigint() - started);
  const pidBefore = lastPid();
  for (let i = 0; i < COUNTED_CALLS; i++) script.runInContext(context, options);
  const pidAfter = lastPid();
  const created =
    pidBefore === undefined || pidAfter === undefined || pidMax === undefined
      ? undefined
      : (pidAfter - pidBefore + pidMax) % pidMax;
  return {
    usPerCall: elapsedNs / 1000 / calls,
    threadsPerCall: created === undefined ? undefined : created / COUNTED_CALLS,
  };
}

const cases = { 'with timeout': [] as ReturnType<typeof measure>[], 'no timeout': [] as ReturnType<typeof measure>[] };
measure(true);
measure(false);
for (let round = 0; round < common.rounds; round++) {
  log(`round ${round + 1} of ${common.rounds}`);
  const order = round % 2 === 0 ? ([true, false] as const) : ([false, true] as const);
  for (const timeout of order) cases[timeout ? 'with timeout' : 'no timeout'].push(measure(timeout));
}

const summary = (runs: ReturnType<typeof measure>[]) => {
  const threads = runs.map((run) => run.threadsPerCall).filter((value): value is number => value !== undefined);
  return {
    usPerCall: round2(median(runs.map((run) => run.usPerCall))),
    threadsPerCall: threads.length === 0 ? 'n/a (no /proc)' : round2(median(threads)),
  };
};
const withTimeout = summary(cases['with timeout']);
const noTimeout = summary(cases['no timeout']);
printReport(
  {
    bench: 'vm-watchdog',
    description: "a call into a vm context with the SDK's 5 s execution timeout (its deadlock guard) and without",
    settings: { calls, rounds: common.rounds, timeoutMs: SDK_TIMEOUT_MS },
    dynamicConfig: [],
    cases: [
      { name: 'with timeout', ...withTimeout },
      { name: 'no timeout', ...noTimeout },
    ],
    comparisons: [
      compare('time per call', 'median µs', 'with timeout', withTimeout.usPerCall, 'no timeout', noTimeout.usPerCall, {
        medianPerRound: median(
          cases['with timeout'].map((run, i) => run.usPerCall / (cases['no timeout'][i]?.usPerCall ?? Number.NaN)),
        ),
      }),
    ],
    notes: [
      'Threads per call counts every thread and process the machine created meanwhile; on a quiet machine it is ' +
        "the watchdog's: one per call with the timeout, none without.",
    ],
  },
  common.json,
);
