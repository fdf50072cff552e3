/**
 * `npm run bench -- step`: what one agent step costs. A 10-step turn (9 `think` calls, then an answer; the scripted
 * model answers at once; 1 thread at a time) through the real Baton worker, against
 *
 * - a hand-written Temporal workflow doing the same I/O (bench/step-workflows.ts: the same chat-completions request
 *   to the same scripted model, the transcript read and the message inserts, as plain activities), and
 * - the engine floor: a workflow running 10 no-op activities.
 *
 * The stack is started the way `npm test` starts it (testing/test-stack.ts: embedded Postgres or `DATABASE_URL`, a
 * Temporal dev server from the CLI), so it runs from a fresh clone. Rounds rotate the order of the cases so drift
 * falls on all of them alike. It prints medians, spreads, ms per step and the ratios; it asserts nothing.
 *
 * Flags: `--rounds N` (default 5), `--turns N` turns per case per round (default 3), `--json` (one object on
 * stdout), `--default-dynamic-config` (the dev server without `LATENCY_DYNAMIC_CONFIG`, to measure what it buys),
 * `--dynamic-config KEY=VALUE` (repeatable: one more dev-server setting to try).
 */
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { NativeConnection, Worker } from '@temporalio/worker';
import type OpenAI from 'openai';
import type { Pool } from 'pg';
import { ensureThread } from '../db/threads';
import { listMessages } from '../db/transcripts';
import { LATENCY_DYNAMIC_CONFIG } from '../stack/temporal-server';
import { startAgentHarness, type AgentHarness } from '../testing/harness';
import { parseScript } from '../testing/scripted-model';
import { startTestStack } from '../testing/test-stack';
import { uniqueTaskQueue, uniqueThreadId } from '../testing/test-env';
import { parseAgentFile } from '../worker/agents';
import { createModelClient } from '../worker/model-client';
import { installRuntime } from '../worker/runtime';
import type { floorTurnWorkflow, handWrittenTurnWorkflow, StepBenchActivities } from './step-workflows';

/** Model calls per turn: 9 `think` calls, then the answer. */
const STEPS = 10;
const AGENT = 'stepper';
/** Per-step target of issue 14 at 1 thread on the dev stack. */
const TARGET_MS_PER_STEP = 25;
/** Target of issue 14: at most this many times the same-I/O hand-written workflow. */
const TARGET_RATIO = 1.5;

const SCRIPT = parseScript(
  `agents:\n  ${AGENT}:\n` +
    Array.from(
      { length: STEPS - 1 },
      (_, i) => `    - call: think\n      args: { thought: "Step ${i + 1}: checking the next part of the task." }\n`,
    ).join('') +
    '    - say: "Done: every part checked."\n',
  'step-bench',
);
const AGENT_FILE = `---\nname: ${AGENT}\ndescription: Thinks nine times, then answers.\n---\nYou think step by step, then answer.\n`;

interface Options {
  readonly rounds: number;
  readonly turns: number;
  readonly json: boolean;
  readonly latencyDynamicConfig: boolean;
  readonly extraDynamicConfig: readonly string[];
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      rounds: { type: 'string', default: '5' },
      turns: { type: 'string', default: '3' },
      json: { type: 'boolean', default: false },
      'default-dynamic-config': { type: 'boolean', default: false },
      'dynamic-config': { type: 'string', multiple: true, default: [] },
    },
    allowPositionals: true,
  });
  const count = (name: string, text: string): number => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a whole number ≥ 1, not '${text}'`);
    return value;
  };
  return {
    rounds: count('rounds', values.rounds),
    turns: count('turns', values.turns),
    json: values.json,
    latencyDynamicConfig: !values['default-dynamic-config'],
    extraDynamicConfig: values['dynamic-config'],
  };
}

interface BenchCase {
  readonly name: string;
  /** Prepares one turn (not timed), returns the timed part. */
  readonly prepare: () => Promise<() => Promise<unknown>>;
  /** Every timed turn, in ms. */
  readonly turnsMs: number[];
  /** The median of each round. */
  readonly roundMedians: number[];
}

/** Activities of the hand-written baseline: the same reads, request and inserts as Baton's, nothing more. */
function createBaselineActivities(pool: Pool, openai: OpenAI, request: RecordedRequest): StepBenchActivities {
  const insert = async (
    scope: { threadId: string; rootThreadId: string },
    message: { role: string; content: string | null; toolCalls?: unknown; toolCallId?: string },
  ): Promise<void> => {
    const info = Context.current().info;
    await pool.query(
      `INSERT INTO transcript_messages
         (root_thread_id, thread_id, seq, role, agent, content, tool_calls, tool_call_id, operation_id)
       SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $8
         FROM transcript_messages WHERE thread_id = $2
       ON CONFLICT (root_thread_id, operation_id) DO NOTHING`,
      [
        scope.rootThreadId,
        scope.threadId,
        message.role,
        AGENT,
        message.content,
        message.toolCalls === undefined ? null : JSON.stringify(message.toolCalls),
        message.toolCallId ?? null,
        `${info.workflowExecution?.runId ?? 'none'}:${info.activityId}`,
      ],
    );
  };
  return {
    recordHuman: async (input) => insert(input, { role: 'user', content: input.text }),
    callModel: async (input) => {
      const transcript = await listMessages(pool, input.threadId);
      const completion = await openai.chat.completions.create(
        {
          model: 'baton-scripted',
          messages: [
            { role: 'system', content: request.system },
            ...transcript.map((m): OpenAI.Chat.Completions.ChatCompletionMessageParam => {
              if (m.role === 'tool')
                return { role: 'tool', content: m.content ?? '', tool_call_id: m.toolCallId ?? '' };
              if (m.role === 'user') return { role: 'user', content: m.content ?? '' };
              return {
                role: 'assistant',
                content: m.content,
                ...(m.toolCalls
                  ? {
                      tool_calls: m.toolCalls.map((call) => ({
                        id: call.id,
                        type: 'function' as const,
                        function: { name: call.name, arguments: call.arguments },
                      })),
                    }
                  : {}),
              };
            }),
          ],
          tools: request.tools,
        },
        {
          headers: {
            'x-baton-agent': AGENT,
            'x-baton-thread': input.threadId,
            'x-baton-root-thread': input.rootThreadId,
          },
        },
      );
      const message = completion.choices[0]?.message;
      const toolCalls = (message?.tool_calls ?? []).flatMap((call) =>
        call.type === 'function' ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments }] : [],
      );
      await insert(input, {
        role: 'assistant',
        content: message?.content ?? null,
        ...(toolCalls.length > 0 ? { toolCalls } : {}),
      });
      return { toolCalls: toolCalls.map(({ id, name }) => ({ id, name })), text: message?.content ?? '' };
    },
    runTool: async (input) => insert(input, { role: 'tool', content: 'Thought recorded.', toolCallId: input.call.id }),
    noop: () => Promise.resolve(),
  };
}

/** The system prompt and tools Baton's worker sent, so the baseline's request is the same size. */
interface RecordedRequest {
  readonly system: string;
  readonly tools: OpenAI.Chat.Completions.ChatCompletionTool[];
}

function recordedRequest(harness: AgentHarness): RecordedRequest {
  const first = harness.modelRequests()[0];
  const system = first?.messages.find((m) => m.role === 'system')?.content;
  if (!first || typeof system !== 'string') throw new Error('the warm-up turn logged no model request');
  return { system, tools: (first.tools ?? []) as OpenAI.Chat.Completions.ChatCompletionTool[] };
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

async function measure(cases: BenchCase[], options: Options): Promise<void> {
  // One untimed turn each: bundles loaded, connections open, caches warm.
  for (const bench of cases) await (await bench.prepare())();
  for (let round = 0; round < options.rounds; round++) {
    // Rotate, and reverse every other round, so no case always runs first or right after another.
    const rotated = cases.map((_, i) => cases[(i + round) % cases.length] as BenchCase);
    for (const bench of round % 2 === 0 ? rotated : rotated.reverse()) {
      const times: number[] = [];
      for (let turn = 0; turn < options.turns; turn++) {
        const run = await bench.prepare();
        const start = performance.now();
        await run();
        times.push(performance.now() - start);
      }
      bench.turnsMs.push(...times);
      bench.roundMedians.push(median(times));
    }
  }
}

function summary(bench: BenchCase) {
  const turnMs = median(bench.turnsMs);
  return {
    name: bench.name,
    turns: bench.turnsMs.length,
    medianTurnMs: round1(turnMs),
    msPerStep: round1(turnMs / STEPS),
    p10TurnMs: round1(percentile(bench.turnsMs, 10)),
    p90TurnMs: round1(percentile(bench.turnsMs, 90)),
    roundMediansMs: bench.roundMedians.map(round1),
  };
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

/** The overall ratio of medians, and the median of the per-round ratios (neighbours in time, least disturbed). */
function ratio(a: BenchCase, b: BenchCase) {
  return {
    of: `${a.name} / ${b.name}`,
    ratio: Math.round((median(a.turnsMs) / median(b.turnsMs)) * 100) / 100,
    medianPerRound:
      Math.round(median(a.roundMedians.map((value, i) => value / (b.roundMedians[i] ?? Number.NaN))) * 100) / 100,
  };
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  // Workers log state changes at INFO; the bench's output is its table.
  installRuntime('WARN');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const cleanups: (() => Promise<unknown>)[] = [];
  const root = path.resolve(__dirname, '..');
  const dynamicConfig = [
    ...(options.latencyDynamicConfig ? LATENCY_DYNAMIC_CONFIG : []),
    ...options.extraDynamicConfig,
  ];
  try {
    const stack = await startTestStack(root, process.env, log, {
      latencyDynamicConfig: options.latencyDynamicConfig,
      temporalExtraArgs: options.extraDynamicConfig.flatMap((value) => ['--dynamic-config-value', value]),
    });
    cleanups.push(() => stack.stop());
    log(`dynamic config: ${dynamicConfig.length === 0 ? '(server defaults)' : dynamicConfig.join(' ')}`);

    const modelLogFile = path.join(stack.stateDir, 'step-bench-model.jsonl');
    const agent = parseAgentFile(AGENT_FILE, `${AGENT}.md`);
    const harness = await startAgentHarness({
      temporalAddress: stack.temporalAddress,
      databaseUrl: stack.databaseUrl,
      taskQueue: uniqueTaskQueue('step-bench-baton'),
      agents: new Map([[agent.name, agent]]),
      script: SCRIPT,
      modelLogFile,
      workflowBundle: { codePath: stack.workflowBundlePath },
    });
    cleanups.push(() => harness.close());

    const batonTurn = async () => {
      const thread = await harness.client.startThread({ agent: AGENT, threadId: uniqueThreadId('step-bench') });
      return async () => {
        const result = await thread.send('Check every part of the task.');
        if (result.status !== 'completed' || result.steps !== STEPS) {
          throw new Error(
            `Baton turn ended ${result.status} after ${result.steps} steps, not completed after ${STEPS}`,
          );
        }
        // Not timed: the next prepare() runs before the clock starts again.
        void thread.end().catch(() => undefined);
      };
    };
    // The warm-up turn also records the request Baton sends, for the baseline to send the same.
    await (
      await batonTurn()
    )();
    const request = recordedRequest(harness);

    const baselineQueue = uniqueTaskQueue('step-bench-baseline');
    const workerConnection = await NativeConnection.connect({ address: stack.temporalAddress });
    cleanups.push(() => workerConnection.close());
    const openai = createModelClient({ baseURL: harness.model.baseURL, apiKey: 'scripted', model: 'baton-scripted' });
    const worker = await Worker.create({
      connection: workerConnection,
      taskQueue: baselineQueue,
      workflowsPath: require.resolve('./step-workflows'),
      activities: createBaselineActivities(harness.pool, openai, request),
    });
    const running = worker.run();
    cleanups.push(async () => {
      worker.shutdown();
      await running;
    });
    const connection = await Connection.connect({ address: stack.temporalAddress });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });

    const handWrittenTurn = async () => {
      const threadId = uniqueThreadId('step-bench-hand');
      await ensureThread(harness.pool, { threadId, rootThreadId: threadId, agent: AGENT });
      return async () => {
        const steps = await client.workflow.execute<typeof handWrittenTurnWorkflow>('handWrittenTurnWorkflow', {
          taskQueue: baselineQueue,
          workflowId: threadId,
          args: [{ threadId, rootThreadId: threadId, text: 'Check every part of the task.', maxSteps: STEPS + 5 }],
        });
        if (steps !== STEPS) throw new Error(`hand-written turn took ${String(steps)} steps, not ${STEPS}`);
      };
    };
    const floorTurn = () =>
      Promise.resolve(async () => {
        await client.workflow.execute<typeof floorTurnWorkflow>('floorTurnWorkflow', {
          taskQueue: baselineQueue,
          workflowId: uniqueThreadId('step-bench-floor'),
          args: [STEPS],
        });
      });

    const baton: BenchCase = { name: 'baton', prepare: batonTurn, turnsMs: [], roundMedians: [] };
    const hand: BenchCase = { name: 'hand-written', prepare: handWrittenTurn, turnsMs: [], roundMedians: [] };
    const floor: BenchCase = { name: 'floor', prepare: floorTurn, turnsMs: [], roundMedians: [] };
    log(`measuring: ${options.rounds} rounds × ${options.turns} turns per case`);
    await measure([baton, hand, floor], options);

    const result = {
      bench: 'step',
      steps: STEPS,
      threads: 1,
      rounds: options.rounds,
      turnsPerRound: options.turns,
      dynamicConfig,
      machine: { cpus: os.cpus().length, loadAverage1m: round1(os.loadavg()[0] ?? 0) },
      cases: [baton, hand, floor].map(summary),
      comparisons: [ratio(baton, hand), ratio(baton, floor)],
      targets: {
        msPerStep: { target: TARGET_MS_PER_STEP, measured: round1(median(baton.turnsMs) / STEPS) },
        batonOverHandWritten: { target: TARGET_RATIO, measured: ratio(baton, hand).ratio },
      },
    };
    if (options.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    const out = (line: string) => process.stdout.write(`${line}\n`);
    out(`step: ${STEPS}-step turn, 1 thread, ${options.rounds} rounds × ${options.turns} turns per case`);
    out(`  dynamic config: ${dynamicConfig.length === 0 ? '(server defaults)' : dynamicConfig.join(' ')}`);
    out(`  ${'case'.padEnd(14)} ${'turn ms'.padStart(9)} ${'ms/step'.padStart(8)}   p10–p90 turn ms`);
    for (const row of result.cases) {
      out(
        `  ${row.name.padEnd(14)} ${row.medianTurnMs.toFixed(1).padStart(9)} ${row.msPerStep.toFixed(1).padStart(8)}   ` +
          `${row.p10TurnMs.toFixed(0)}–${row.p90TurnMs.toFixed(0)}`,
      );
    }
    for (const comparison of result.comparisons) {
      out(
        `  ${comparison.of.padEnd(24)} ${comparison.ratio.toFixed(2)}× (median per round ${comparison.medianPerRound.toFixed(2)}×)`,
      );
    }
    const perStep = result.targets.msPerStep.measured;
    const overHand = result.targets.batonOverHandWritten.measured;
    out(`  target ≤ ${TARGET_MS_PER_STEP} ms/step: ${perStep <= TARGET_MS_PER_STEP ? 'meets' : 'MISSED'} (${perStep})`);
    out(`  target ≤ ${TARGET_RATIO}× hand-written: ${overHand <= TARGET_RATIO ? 'meets' : 'MISSED'} (${overHand}×)`);
    out(`  machine: ${result.machine.cpus} CPUs, 1-minute load average ${result.machine.loadAverage1m}`);
  } finally {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`));
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
