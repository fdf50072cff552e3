/**
 * `npm run bench -- throughput`: 50 threads at once, each running one 5-step turn (4 `think` calls, then an answer;
 * the scripted model answers at once), with one Baton worker and with two, against the hand-written workflow doing
 * the same I/O (bench/baseline-workflows.ts) at the same concurrency with one and two workers. "Two workers" are two
 * `Worker` instances on one task queue in the bench's process (each Baton one with its own pool and scripted model
 * server): they share this process's event loop, so they show what a second poller and a second set of slots buy,
 * not what a second CPU-bound process would. It prints turns per second (over the wall time of each batch) and the
 * p50/p99 turn latency; it asserts nothing.
 *
 * Flags (and those of bench/common.ts): `--threads N` (default 50; 20 with `--quick`).
 */
import {
  batonTurn,
  benchAgentFile,
  benchAgents,
  benchScript,
  handWrittenTurn,
  modelLogFile,
  recordedRequest,
  startBaselines,
  startBaton,
  stepsScript,
} from './baselines';
import {
  compareCases,
  interleave,
  log,
  parseBenchArgs,
  printReport,
  runBench,
  runConcurrently,
  throughputSummary,
  wholeNumber,
  type BenchCase,
  type Measured,
} from './common';

const STEPS = 5;
const AGENT = 'worker_bee';

const { common, values } = parseBenchArgs(process.argv.slice(2), [3, 2], { threads: { type: 'string' } });
const threads = typeof values.threads === 'string' ? wholeNumber('threads', values.threads) : common.quick ? 20 : 50;

runBench(common, async (context) => {
  const agents = benchAgents({ [AGENT]: benchAgentFile(AGENT) });
  const script = benchScript([stepsScript(AGENT, STEPS)], 'throughput-bench');
  const one = await startBaton(context, {
    name: 'throughput-1',
    agents,
    script,
    modelLogFile: modelLogFile(context, 'throughput'),
  });
  const two = await startBaton(context, { name: 'throughput-2', agents, script, workers: 2 });
  await (
    await batonTurn(one.client, AGENT, STEPS)()
  )();
  const request = recordedRequest(one.harness);
  const baseline = (workers: number) =>
    startBaselines(context, {
      name: `throughput-${workers}`,
      pool: one.harness.pool,
      modelBaseURL: one.harness.model.baseURL,
      request,
      workers,
    });
  const handOne = await baseline(1);
  const handTwo = await baseline(2);

  const cases: BenchCase[] = [
    { name: 'baton 1 worker', run: () => runConcurrently(threads, batonTurn(one.client, AGENT, STEPS)) },
    { name: 'baton 2 workers', run: () => runConcurrently(threads, batonTurn(two.client, AGENT, STEPS)) },
    { name: 'hand-written 1 worker', run: () => runConcurrently(threads, handWrittenTurn(handOne, AGENT, STEPS)) },
    { name: 'hand-written 2 workers', run: () => runConcurrently(threads, handWrittenTurn(handTwo, AGENT, STEPS)) },
  ];
  log(`measuring: ${common.rounds} rounds of ${threads} threads × ${STEPS} steps per case`);
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  const latency = (subject: string, baselineName: string, name: string) =>
    compareCases(`${name}: p50 turn latency`, get(subject), get(baselineName), {
      figures: {
        p99Ms: {
          [subject]: throughputSummary(get(subject)).p99Ms,
          [baselineName]: throughputSummary(get(baselineName)).p99Ms,
        },
      },
    });
  printReport(
    {
      bench: 'throughput',
      description: `${threads} threads at once × one ${STEPS}-step turn, one and two workers, vs the same-I/O hand-written workflow`,
      settings: {
        threads,
        steps: STEPS,
        rounds: common.rounds,
        twoWorkers: 'two Worker instances, one process, one task queue',
      },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => ({ name: c.name, ...throughputSummary(get(c.name)) })),
      comparisons: [
        compareCases('1 worker: Baton / hand-written turns/s', get('baton 1 worker'), get('hand-written 1 worker'), {
          metric: 'perSecond',
        }),
        compareCases('2 workers: Baton / hand-written turns/s', get('baton 2 workers'), get('hand-written 2 workers'), {
          metric: 'perSecond',
        }),
        compareCases('Baton: 2 workers / 1 worker turns/s', get('baton 2 workers'), get('baton 1 worker'), {
          metric: 'perSecond',
        }),
        latency('baton 1 worker', 'hand-written 1 worker', '1 worker'),
        latency('baton 2 workers', 'hand-written 2 workers', '2 workers'),
      ],
    },
    common.json,
  );
});
