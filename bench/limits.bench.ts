/**
 * `npm run bench -- limits`: what a provider limit and a budget cost a step. The 10-step turn of step.bench.ts (9
 * `think` calls, then an answer; the scripted model answers at once) on a worker whose default endpoint has limits
 * every worker shares (`BATON_MODEL_LIMITS`: requests and tokens per minute and calls at once, set far above what the
 * bench sends, so the figure is the bookkeeping in Postgres, never a wait), then the same with each thread under a
 * budget in tokens and dollars (priced by `BATON_MODEL_PRICES`, far above what a turn spends: the figure is the
 * ledger, never a refusal), against the same turn with neither, at 1 thread and 10 at once, in interleaved rounds.
 * It prints medians, spreads and the ratios, and checks each budgeted thread's ledger against its stored replies; it
 * asserts nothing else.
 *
 * Flags (and those of bench/common.ts): `--threads LIST` (default `1,10`), `--turns N` (turns per 1-thread case per
 * round, default 3; `--quick`: 2).
 */
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
/** Target: a step under a provider limit (and a budget) costs at most this many times one without. */
const TARGET_RATIO = 1.1;
/** A budget no bench turn comes near, in both units. */
const BUDGET = { tokens: 100_000_000, usd: 1_000 };
const PRICES = { default: { inputPerMillion: 0.15, outputPerMillion: 0.6 } };
/** Limits no bench round comes near: every call takes and returns its places, none waits. */
const LIMITS = {
  default: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000, concurrent: 10_000 },
};

const { common, values } = parseBenchArgs(process.argv.slice(2), [5, 3], {
  turns: { type: 'string' },
  threads: { type: 'string', default: '1,10' },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 2 : 3;
const threadCounts = wholeNumbers('threads', String(values.threads));

runBench(common, async (context) => {
  const agents = benchAgents({ [AGENT]: benchAgentFile(AGENT) });
  const script = benchScript([stepsScript(AGENT, STEPS)], 'limits-bench');
  const off = await startBaton(context, { name: 'limits-off', agents, script });
  const on = await startBaton(context, { name: 'limits-on', agents, script, modelLimits: LIMITS, modelPrices: PRICES });
  const offTurn = batonTurn(off.client, AGENT, STEPS);
  const onTurn = batonTurn(on.client, AGENT, STEPS);
  const budgeted: string[] = [];
  const budgetTurn = batonTurn(on.client, AGENT, STEPS, {
    thread: { limits: { budget: BUDGET } },
    check: (threadId) => Promise.resolve(void budgeted.push(threadId)),
  });
  // One turn each first: bundles loaded, connections warm.
  for (const turn of [offTurn, onTurn, budgetTurn]) {
    await (
      await turn()
    )();
  }

  const cases: BenchCase[] = threadCounts.flatMap((threads) => {
    const repeats = threads === 1 ? turns : 1;
    return [
      { name: `off@${threads}`, repeats, run: () => runConcurrently(threads, offTurn) },
      { name: `on@${threads}`, repeats, run: () => runConcurrently(threads, onTurn) },
      { name: `budget@${threads}`, repeats, run: () => runConcurrently(threads, budgetTurn) },
    ];
  });
  log(`measuring: ${common.rounds} rounds; threads ${threadCounts.join(', ')}; ${turns} turns per 1-thread case`);
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  const perStep = (m: Measured) => round1(latencySummary(m).medianMs / STEPS);
  const { rows } = await on.harness.pool.query<{ count: string }>(
    `SELECT count(*) FROM model_limit_requests WHERE scope = 'default'`,
  );
  // Every budgeted thread's ledger: charged exactly its stored replies' tokens and cost.
  const { rows: ledgers } = await on.harness.pool.query<{ off: string }>(
    `SELECT count(*) FILTER (WHERE g.spent_tokens <> s.tokens OR g.spent_usd <> s.usd) AS off
       FROM budget_grants g,
            LATERAL (SELECT COALESCE(SUM((m.usage->>'totalTokens')::bigint), 0) AS tokens,
                            COALESCE(SUM((m.usage->>'costUsd')::numeric), 0) AS usd
                       FROM transcript_messages m WHERE m.root_thread_id = g.root_thread_id AND m.role = 'assistant') s
      WHERE g.root_thread_id = ANY($1) AND g.grant_id = ''`,
    [budgeted],
  );
  printReport(
    {
      bench: 'limits',
      description: `${STEPS}-step turn under a provider limit every worker shares, and under it and a budget, vs neither`,
      settings: { steps: STEPS, rounds: common.rounds, turnsPerRound: turns, threads: threadCounts.join(',') },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => ({ name: c.name, msPerStep: perStep(get(c.name)), ...latencySummary(get(c.name)) })),
      comparisons: threadCounts.flatMap((threads) =>
        (
          [
            ['on', 'limited / unlimited'],
            ['budget', 'limited and budgeted / neither'],
          ] as const
        ).map(([variant, label]) =>
          compareCases(
            `per step, ${threads} thread(s): ${label}`,
            get(`${variant}@${threads}`),
            get(`off@${threads}`),
            {
              target: TARGET_RATIO,
              figures: {
                msPerStep: { [variant]: perStep(get(`${variant}@${threads}`)), off: perStep(get(`off@${threads}`)) },
              },
            },
          ),
        ),
      ),
      notes: [
        `the limited worker logged ${rows[0]?.count ?? 0} requests of the last minute in Postgres`,
        `${budgeted.length} budgeted threads, ${ledgers[0]?.off ?? '?'} of them with a ledger that differs from their stored replies`,
      ],
    },
    common.json,
  );
});
