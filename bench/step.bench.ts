/**
 * `npm run bench -- step`: what one agent step costs. A 10-step turn (9 `think` calls, then an answer; the scripted
 * model answers at once) through the real Baton worker, at 1 thread and with 10 threads at once, against
 *
 * - a hand-written Temporal workflow doing the same I/O (bench/baseline-workflows.ts: the same chat-completions
 *   request to the same scripted model, the transcript read and the message inserts, as plain activities), and
 * - the engine floor: a workflow running 10 no-op activities,
 *
 * at the same concurrency, on one stack (bench/common.ts). Rounds rotate the order of all cases. It prints medians,
 * spreads, ms per step and the ratios; it asserts nothing.
 *
 * Flags (and those of bench/common.ts: `--rounds`, `--quick`, `--json`, `--default-dynamic-config`,
 * `--dynamic-config`): `--turns N` turns per 1-thread case per round (default 3; each many-thread case runs once per
 * round, as many turns as threads), `--threads LIST` (default `1,10`).
 */
import {
  batonTurn,
  benchAgentFile,
  benchAgents,
  benchScript,
  floorTurn,
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
  type Comparison,
  type Measured,
} from './common';

/** Model calls per turn: 9 `think` calls, then the answer. */
const STEPS = 10;
const AGENT = 'stepper';
/** Per-step target at 1 thread on the dev stack. */
const TARGET_MS_PER_STEP = 25;
/** Target: at most this many times the same-I/O hand-written workflow. */
const TARGET_RATIO = 1.5;

const { common, values } = parseBenchArgs(process.argv.slice(2), [5, 3], {
  turns: { type: 'string' },
  threads: { type: 'string', default: '1,10' },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 2 : 3;
const threadCounts = wholeNumbers('threads', String(values.threads));

runBench(common, async (context) => {
  const logFile = modelLogFile(context, 'step');
  const baton = await startBaton(context, {
    name: 'step',
    agents: benchAgents({ [AGENT]: benchAgentFile(AGENT) }),
    script: benchScript([stepsScript(AGENT, STEPS)], 'step-bench'),
    modelLogFile: logFile,
  });
  const prepareBaton = batonTurn(baton.client, AGENT, STEPS);
  // One Baton turn first, to record the request it sends, for the baseline to send the same.
  await (
    await prepareBaton()
  )();
  const baseline = await startBaselines(context, {
    name: 'step',
    pool: baton.harness.pool,
    modelBaseURL: baton.harness.model.baseURL,
    request: recordedRequest(baton.harness),
  });

  const cases: BenchCase[] = threadCounts.flatMap((threads) => {
    const repeats = threads === 1 ? turns : 1;
    return [
      { name: `baton@${threads}`, repeats, run: () => runConcurrently(threads, prepareBaton) },
      {
        name: `hand-written@${threads}`,
        repeats,
        run: () => runConcurrently(threads, handWrittenTurn(baseline, AGENT, STEPS)),
      },
      { name: `floor@${threads}`, repeats, run: () => runConcurrently(threads, floorTurn(baseline, STEPS)) },
    ];
  });
  log(`measuring: ${common.rounds} rounds; threads ${threadCounts.join(', ')}; ${turns} turns per 1-thread case`);
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;

  const comparisons: Comparison[] = threadCounts.flatMap((threads) => {
    const b = get(`baton@${threads}`);
    const h = get(`hand-written@${threads}`);
    const f = get(`floor@${threads}`);
    return [
      compareCases(`per step, ${threads} thread(s): Baton / hand-written`, b, h, {
        ...(threads === 1 ? { target: TARGET_RATIO } : {}),
        figures: { msPerStep: { baton: perStep(b), handWritten: perStep(h), floor: perStep(f) } },
      }),
      compareCases(`per step, ${threads} thread(s): Baton / floor`, b, f),
    ];
  });
  const one = measured.get('baton@1');
  printReport(
    {
      bench: 'step',
      description: `${STEPS}-step turn (9 think calls, then an answer) vs same-I/O hand-written workflow vs ${STEPS} no-op activities`,
      settings: { steps: STEPS, rounds: common.rounds, turnsPerRound: turns, threads: threadCounts.join(',') },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => {
        const m = get(c.name);
        return { name: c.name, msPerStep: perStep(m), ...latencySummary(m) };
      }),
      comparisons,
      notes: one
        ? [
            `target ≤ ${TARGET_MS_PER_STEP} ms/step at 1 thread: ${perStep(one) <= TARGET_MS_PER_STEP ? 'meets' : 'MISSED'} (${perStep(one)} ms)`,
          ]
        : [],
    },
    common.json,
  );
});

/** Median turn over the steps of a turn. */
function perStep(m: Measured): number {
  return round1(latencySummary(m).medianMs / STEPS);
}
