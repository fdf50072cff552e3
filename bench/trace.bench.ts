/**
 * `npm run bench -- trace`: what tracing costs a step. The 10-step turn of step.bench.ts (9 `think` calls, then an
 * answer; the scripted model answers at once) through a worker exporting every span to a real Jaeger (built from its
 * Go module, testing/jaeger.ts) against the same turn on a worker with tracing off, at 1 thread and 10 at once, in
 * interleaved rounds. After the rounds it counts the spans Jaeger received, so the figure is of a worker that exported.
 * It prints medians, spreads and the ratio; it asserts nothing.
 *
 * Flags (and those of bench/common.ts): `--threads LIST` (default `1,10`), `--turns N` (turns per 1-thread case per
 * round, default 3; `--quick`: 2).
 */
import fs from 'node:fs';
import path from 'node:path';
import { startJaeger } from '../testing/jaeger';
import { bundleBatonWorkflows } from '../worker/create-worker';
import { readTracingSettings, startTracing } from '../worker/tracing';
import { batonTurn, benchAgentFile, benchAgents, benchScript, startBaton, stepsScript } from './baselines';
import {
  compareCases,
  interleave,
  latencySummary,
  log,
  parseBenchArgs,
  printReport,
  round1,
  runBench,
  runConcurrently,
  wholeNumber,
  wholeNumbers,
  type BenchCase,
  type Measured,
} from './common';

const STEPS = 10;
const AGENT = 'stepper';
/** Target: a step with every span exported costs at most this many times one with tracing off. */
const TARGET_RATIO = 1.1;

const { common, values } = parseBenchArgs(process.argv.slice(2), [5, 3], {
  turns: { type: 'string' },
  threads: { type: 'string', default: '1,10' },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 2 : 3;
const threadCounts = wholeNumbers('threads', String(values.threads));

runBench(common, async (context) => {
  const dir = path.join(context.stack.stateDir, 'trace-bench');
  fs.mkdirSync(dir, { recursive: true });
  log('starting Jaeger (built from its Go module on first use)');
  const jaeger = await startJaeger(path.join(dir, 'jaeger'));
  context.defer(() => jaeger.stop());
  const service = 'baton-trace-bench';
  const settings = readTracingSettings({
    OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
    OTEL_SERVICE_NAME: service,
  });
  if (settings === undefined) throw new Error('an endpoint turns tracing on');
  const tracing = startTracing(settings);
  context.defer(() => tracing.shutdown());
  const bundlePath = path.join(dir, 'traced-bundle.js');
  fs.writeFileSync(bundlePath, (await bundleBatonWorkflows({ tracing: true })).code);

  const agents = benchAgents({ [AGENT]: benchAgentFile(AGENT) });
  const script = benchScript([stepsScript(AGENT, STEPS)], 'trace-bench');
  const off = await startBaton(context, { name: 'trace-off', agents, script });
  const on = await startBaton(context, { name: 'trace-on', agents, script, tracing: { tracing, bundlePath } });
  const offTurn = batonTurn(off.client, AGENT, STEPS);
  const onTurn = batonTurn(on.client, AGENT, STEPS);
  // One turn each first: bundles loaded, connections warm.
  await (
    await offTurn()
  )();
  await (
    await onTurn()
  )();

  const cases: BenchCase[] = threadCounts.flatMap((threads) => {
    const repeats = threads === 1 ? turns : 1;
    return [
      { name: `off@${threads}`, repeats, run: () => runConcurrently(threads, offTurn) },
      { name: `on@${threads}`, repeats, run: () => runConcurrently(threads, onTurn) },
    ];
  });
  log(`measuring: ${common.rounds} rounds; threads ${threadCounts.join(', ')}; ${turns} turns per 1-thread case`);
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  const perStep = (m: Measured) => round1(latencySummary(m).medianMs / STEPS);

  await tracing.tracerProvider.forceFlush();
  const spans = await jaeger.spans(service);
  const chats = spans.filter((span) => span.name.startsWith('chat ')).length;
  printReport(
    {
      bench: 'trace',
      description: `${STEPS}-step turn with every span exported to Jaeger vs tracing off`,
      settings: { steps: STEPS, rounds: common.rounds, turnsPerRound: turns, threads: threadCounts.join(',') },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => ({ name: c.name, msPerStep: perStep(get(c.name)), ...latencySummary(get(c.name)) })),
      comparisons: threadCounts.map((threads) =>
        compareCases(`per step, ${threads} thread(s): tracing on / off`, get(`on@${threads}`), get(`off@${threads}`), {
          target: TARGET_RATIO,
          figures: { msPerStep: { on: perStep(get(`on@${threads}`)), off: perStep(get(`off@${threads}`)) } },
        }),
      ),
      notes: [
        `Jaeger received ${spans.length} spans of the traced worker, ${chats} of them model calls ` +
          `(the last traces may still be in its batch: it is read once after a flush)`,
      ],
    },
    common.json,
  );
});
