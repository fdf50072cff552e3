/**
 * `npm run bench -- fork-join`: a fork/join of 8, 32 and 128 zero-latency children against a plain child-workflow
 * fan-out of the same width.
 *
 * - Baton: a lead agent whose scripted model calls `fork_join` with N tasks for a child agent that answers at once
 *   (`max_parallel` N, so all start together; the default isolated stores, nothing to merge), then answers. Timed:
 *   the lead's whole turn, so it includes the lead's own two model calls besides the fork. Forks above the default
 *   `BATON_MAX_FORK_TASKS` (32) need a higher limit: the bench starts each lead thread with `limits.maxForkTasks`
 *   set to the width (the per-conversation override of the world variable).
 * - Baseline (bench/baseline-workflows.ts `fanOutWorkflow`): a workflow starting N child workflows at once, each
 *   running one no-op activity, and awaiting them all.
 * - Second baseline, to tell the engine's cost from the children's I/O (`fanOutTurnsWorkflow`): the same fan-out
 *   whose children each do a fork task's I/O by hand: record the task message, then one model call (transcript read,
 *   the same request Baton's child sent, reply insert), as two activities on a thread row of its own.
 *
 * Baton runs three times per width: with its steps as activities (the default), with local steps (`steps: local` on
 * the lead and the child agents: model calls inside each turn's workflow task) and with batched steps (`steps:
 * batched`: each child's turn, its start and its answer, one local activity).
 *
 * Interleaved rounds (bench/common.ts); it prints the median fork time per width and the ratio; it asserts nothing.
 * Flags (and those of bench/common.ts): `--widths LIST` (default `8,32,128`; `8,32` with `--quick`).
 */
import {
  batonTurn,
  benchAgentFile,
  benchAgents,
  benchScript,
  fanOut,
  fanOutTurns,
  modelLogFile,
  recordedRequest,
  startBaselines,
  startBaton,
} from './baselines';
import {
  compareCases,
  interleave,
  latencySummary,
  log,
  parseBenchArgs,
  printReport,
  runBench,
  runConcurrently,
  wholeNumbers,
  type BenchCase,
  type Measured,
} from './common';

/** Target: fork/join at most this many times the plain fan-out, at every width. */
const TARGET_RATIO = 1.3;
const CHILD = 'kid';
const LOCAL_CHILD = 'kid_local';
const BATCHED_CHILD = 'kid_batched';
/** The lead's turn: the fork_join call, then the answer. */
const LEAD_STEPS = 2;

const { common, values } = parseBenchArgs(process.argv.slice(2), [3, 2], { widths: { type: 'string' } });
const widths = wholeNumbers(
  'widths',
  typeof values.widths === 'string' ? values.widths : common.quick ? '8,32' : '8,32,128',
);

const lead = (width: number) => `lead_${width}`;
const localLead = (width: number) => `lead_local_${width}`;
const batchedLead = (width: number) => `lead_batched_${width}`;
/** A lead's script: the fork of `width` tasks for `child`, then the answer. */
const leadScript = (name: string, child: string, width: number) =>
  `  ${name}:\n    - call: fork_join\n      args:\n        max_parallel: ${width}\n        tasks:\n` +
  Array.from({ length: width }, (_, i) => `          - { agent: ${child}, message: "Task ${i + 1}." }\n`).join('') +
  '    - say: "joined"\n';

runBench(common, async (context) => {
  const agents = benchAgents({
    [CHILD]: benchAgentFile(CHILD),
    [LOCAL_CHILD]: benchAgentFile(LOCAL_CHILD, [], { steps: 'local' }),
    [BATCHED_CHILD]: benchAgentFile(BATCHED_CHILD, [], { steps: 'batched' }),
    ...Object.fromEntries(widths.map((w) => [lead(w), benchAgentFile(lead(w), ['fork_join', CHILD])])),
    ...Object.fromEntries(
      widths.map((w) => [localLead(w), benchAgentFile(localLead(w), ['fork_join', LOCAL_CHILD], { steps: 'local' })]),
    ),
    ...Object.fromEntries(
      widths.map((w) => [
        batchedLead(w),
        benchAgentFile(batchedLead(w), ['fork_join', BATCHED_CHILD], { steps: 'batched' }),
      ]),
    ),
  });
  const script = benchScript(
    [
      `  ${CHILD}:\n    - say: "done"\n`,
      `  ${LOCAL_CHILD}:\n    - say: "done"\n`,
      `  ${BATCHED_CHILD}:\n    - say: "done"\n`,
      ...widths.map((w) => leadScript(lead(w), CHILD, w)),
      ...widths.map((w) => leadScript(localLead(w), LOCAL_CHILD, w)),
      ...widths.map((w) => leadScript(batchedLead(w), BATCHED_CHILD, w)),
    ],
    'fork-join-bench',
  );
  const baton = await startBaton(context, {
    name: 'fork-join',
    agents,
    script,
    modelLogFile: modelLogFile(context, 'fork-join'),
  });
  const batonFork = (w: number, leadOf = lead) =>
    batonTurn(baton.client, leadOf(w), LEAD_STEPS, {
      thread: { limits: { maxForkTasks: w } },
      // A refused fork also ends the turn after two steps: count the children it ran.
      check: async (root) => {
        const { rows } = await baton.harness.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM threads WHERE root_thread_id = $1 AND thread_id <> $1',
          [root],
        );
        if (rows[0]?.n !== w) throw new Error(`the fork of ${w} ran ${rows[0]?.n ?? 0} children`);
      },
    });
  // One fork first, to record the request a child sends, for the second baseline's children to send the same.
  await (
    await batonFork(Math.min(...widths))()
  )();
  const baseline = await startBaselines(context, {
    name: 'fork-join',
    pool: baton.harness.pool,
    modelBaseURL: baton.harness.model.baseURL,
    request: recordedRequest(baton.harness, CHILD),
  });

  const cases: BenchCase[] = widths.flatMap((w) => [
    { name: `baton fork_join ×${w}`, run: () => runConcurrently(1, batonFork(w)) },
    { name: `baton local steps ×${w}`, run: () => runConcurrently(1, batonFork(w, localLead)) },
    { name: `baton batched steps ×${w}`, run: () => runConcurrently(1, batonFork(w, batchedLead)) },
    { name: `plain fan-out ×${w}`, run: () => runConcurrently(1, fanOut(baseline, w)) },
    { name: `same-I/O fan-out ×${w}`, run: () => runConcurrently(1, fanOutTurns(baseline, CHILD, w)) },
  ]);
  log(`measuring: ${common.rounds} rounds; widths ${widths.join(', ')}`);
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  printReport(
    {
      bench: 'fork-join',
      description:
        'fork/join of N zero-latency children (the lead turn, two model calls included) vs a plain child-workflow ' +
        'fan-out, and vs the same fan-out whose children do the same I/O by hand',
      settings: { widths: widths.join(','), rounds: common.rounds, maxForkTasks: 'the width (limits.maxForkTasks)' },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => ({ name: c.name, ...latencySummary(get(c.name)) })),
      comparisons: widths.flatMap((w) => [
        compareCases(
          `fork/join ×${w}: Baton / plain fan-out`,
          get(`baton fork_join ×${w}`),
          get(`plain fan-out ×${w}`),
          {
            target: TARGET_RATIO,
          },
        ),
        compareCases(
          `fork/join ×${w}: Baton / same-I/O fan-out`,
          get(`baton fork_join ×${w}`),
          get(`same-I/O fan-out ×${w}`),
        ),
        compareCases(
          `fork/join ×${w}: Baton with local steps / plain fan-out`,
          get(`baton local steps ×${w}`),
          get(`plain fan-out ×${w}`),
          { target: TARGET_RATIO },
        ),
        compareCases(
          `fork/join ×${w}: Baton with batched steps / plain fan-out`,
          get(`baton batched steps ×${w}`),
          get(`plain fan-out ×${w}`),
          { target: TARGET_RATIO },
        ),
      ]),
    },
    common.json,
  );
});
