/**
 * `npm run bench -- long-thread`: a 1,000-turn conversation on one thread (the agent answers each message at once; the
 * thread continues as new every `continueAsNewAfterTurns`, default 100), turn after turn. It prints the median turn of
 * the last 100 against the first 100, the events of each workflow run of the thread and of its first and last turn,
 * and the largest payload in those histories (fetched with the Temporal client after the conversation).
 *
 * The baseline is the same thread's first turns, so drift of a shared machine between the start and the end would
 * fall on one side only: every 10th turn the bench also times a one-turn conversation on a fresh thread, and prints
 * the ratio corrected by how those reference turns moved between the two windows.
 *
 * The agent has a context limit, as a long conversation needs (`context: { max_messages: 40 }` unless
 * `--max-messages N` says otherwise): each request carries the system prompt, the first message and the newest 39.
 * `--no-context-limit` sends the whole transcript every turn instead, so the last turns' requests are the largest.
 * The request's size per turn is the prompt-token estimate the scripted model reports as usage (characters / 4).
 *
 * Flags (and those of bench/common.ts): `--turns N` (default 1000; 200 with `--quick`), `--continue-as-new-after N`
 * (default: the thread's own, 100), `--window N` (default 100, at most half the turns), `--max-messages N` (default
 * 40), `--no-context-limit`.
 */
import type { temporal } from '@temporalio/proto';
import { performance } from 'node:perf_hooks';
import { rootTurnWorkflowId, threadWorkflowId } from '../common/ids';
import { uniqueThreadId } from '../testing/test-env';
import { DEFAULT_CONTINUE_AS_NEW_AFTER_TURNS } from '../workflows/thread';
import { benchAgentFile, benchAgents, benchScript, startBaton } from './baselines';
import {
  compare,
  log,
  median,
  parseBenchArgs,
  percentile,
  printReport,
  round1,
  round2,
  runBench,
  wholeNumber,
} from './common';

const AGENT = 'talker';
/** A fresh-thread reference turn after every this many turns. */
const REFERENCE_EVERY = 10;
/** The agent's `context.max_messages` unless `--max-messages` or `--no-context-limit` says otherwise. */
const DEFAULT_MAX_MESSAGES = 40;

const { common, values } = parseBenchArgs(process.argv.slice(2), [1, 1], {
  turns: { type: 'string' },
  'continue-as-new-after': { type: 'string' },
  window: { type: 'string' },
  'max-messages': { type: 'string' },
  'no-context-limit': { type: 'boolean', default: false },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 200 : 1000;
const continueAsNewAfter =
  typeof values['continue-as-new-after'] === 'string'
    ? wholeNumber('continue-as-new-after', values['continue-as-new-after'])
    : DEFAULT_CONTINUE_AS_NEW_AFTER_TURNS;
const window = Math.min(
  typeof values.window === 'string' ? wholeNumber('window', values.window) : 100,
  Math.floor(turns / 2),
);
if (window < 1) throw new Error('--turns must be at least 2');
if (values['no-context-limit'] === true && typeof values['max-messages'] === 'string') {
  throw new Error('--max-messages and --no-context-limit contradict each other: give one');
}
/** The agent's context limit in messages; undefined: none, every request carries the whole transcript. */
const maxMessages =
  values['no-context-limit'] === true
    ? undefined
    : typeof values['max-messages'] === 'string'
      ? wholeNumber('max-messages', values['max-messages'])
      : DEFAULT_MAX_MESSAGES;
const contextLimit = maxMessages === undefined ? 'none' : `max_messages ${maxMessages}`;

/** One answer per turn: the scripted model picks the step by the assistant messages already in the request. */
function script() {
  return benchScript(
    [`  ${AGENT}:\n` + Array.from({ length: turns }, (_, i) => `    - say: "Answer ${i + 1}."\n`).join('')],
    'long-thread-bench',
  );
}

runBench(common, async (context) => {
  const baton = await startBaton(context, {
    name: 'long-thread',
    agents: benchAgents({ [AGENT]: benchAgentFile(AGENT, [], { maxMessages }) }),
    script: script(),
  });
  const threadId = uniqueThreadId('bench-long');
  const thread = await baton.client.startThread({
    agent: AGENT,
    threadId,
    continueAsNewAfterTurns: continueAsNewAfter,
  });
  const timed = async (run: () => Promise<unknown>) => {
    const start = performance.now();
    await run();
    return performance.now() - start;
  };
  const referenceTurn = async () => {
    const fresh = await baton.client.startThread({ agent: AGENT, threadId: uniqueThreadId('bench-long-ref') });
    const ms = await timed(() => fresh.send('Hello.'));
    void fresh.end().catch(() => undefined);
    return ms;
  };
  const turnMs: number[] = [];
  /** Estimated prompt tokens of each turn's one request (the scripted model's usage). */
  const promptTokens: number[] = [];
  /** [turn index it followed, ms]. */
  const referenceMs: [number, number][] = [];
  log(
    `measuring: ${turns} turns on one thread, continue-as-new after ${continueAsNewAfter}, context limit: ${contextLimit}`,
  );
  for (let turn = 1; turn <= turns; turn++) {
    turnMs.push(
      await timed(async () => {
        const result = await thread.send(`Message ${turn}.`);
        if (result.status !== 'completed' || result.reply !== `Answer ${turn}.`) {
          throw new Error(`turn ${turn} ended ${result.status} with '${result.reply}'`);
        }
        promptTokens.push(result.usage.promptTokens);
      }),
    );
    if (turn % REFERENCE_EVERY === 0) referenceMs.push([turn, await referenceTurn()]);
    if (turn % 100 === 0) log(`  ${turn} turns, last one ${round1(turnMs[turn - 1] ?? 0)} ms`);
  }
  await thread.end();

  const first = turnMs.slice(0, window);
  const last = turnMs.slice(-window);
  const firstTokens = promptTokens.slice(0, window);
  const lastTokens = promptTokens.slice(-window);
  const refFirst = referenceMs.filter(([t]) => t <= window).map(([, ms]) => ms);
  const refLast = referenceMs.filter(([t]) => t > turns - window).map(([, ms]) => ms);
  const drift = refFirst.length > 0 && refLast.length > 0 ? median(refLast) / median(refFirst) : Number.NaN;

  // Histories: every run of the thread (newest first, following each run's predecessor), its first and last turn.
  const workflow = baton.client.temporal.workflow;
  const runs: { runId: string; events: number; largest: Largest }[] = [];
  let runId: string | undefined = (await workflow.getHandle(threadWorkflowId(threadId)).describe()).runId;
  while (runId) {
    const history: temporal.api.history.v1.IHistory = await workflow
      .getHandle(threadWorkflowId(threadId), runId)
      .fetchHistory();
    const events: temporal.api.history.v1.IHistoryEvent[] = history.events ?? [];
    runs.unshift({ runId, events: events.length, largest: largestPayload(events) });
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  const turnHistory = async (turn: number) => {
    const events = (await workflow.getHandle(rootTurnWorkflowId(threadId, turn)).fetchHistory()).events ?? [];
    return { turn, events: events.length, largest: largestPayload(events) };
  };
  const turnHistories = [await turnHistory(1), await turnHistory(turns)];
  const largest = [...runs.map((r) => r.largest), ...turnHistories.map((t) => t.largest)].reduce((a, b) =>
    b.bytes > a.bytes ? b : a,
  );

  printReport(
    {
      bench: 'long-thread',
      description: `one conversation of ${turns} turns (an answer each, context limit: ${contextLimit}), continue-as-new after ${continueAsNewAfter}`,
      settings: { turns, continueAsNewAfter, window, referenceEvery: REFERENCE_EVERY, contextLimit },
      dynamicConfig: context.dynamicConfig,
      cases: [
        { name: `first ${window} turns`, ...latencyFigures(first), ...requestFigures(firstTokens) },
        { name: `last ${window} turns`, ...latencyFigures(last), ...requestFigures(lastTokens) },
        { name: `fresh-thread ref. (first)`, ...latencyFigures(refFirst) },
        { name: `fresh-thread ref. (last)`, ...latencyFigures(refLast) },
        ...runs.map((r, i) => ({
          name: `thread run ${i + 1}`,
          events: r.events,
          largestPayloadBytes: r.largest.bytes,
          largestIn: r.largest.eventType,
        })),
        ...turnHistories.map((t) => ({
          name: `turn ${t.turn} workflow`,
          events: t.events,
          largestPayloadBytes: t.largest.bytes,
          largestIn: t.largest.eventType,
        })),
      ],
      comparisons: [
        compare(
          'turn latency: last / first',
          'median ms',
          `last ${window}`,
          median(last),
          `first ${window}`,
          median(first),
          {
            target: 1.2,
            figures: {
              driftOfFreshThreadTurns: round2(drift),
              correctedRatio: round2(median(last) / median(first) / drift),
              contextLimit,
              requestTokensFirstTurn: promptTokens[0],
              requestTokensLastTurn: promptTokens.at(-1),
            },
          },
        ),
      ],
      notes: [
        `runs of the thread: ${runs.length}; events per run ${runs.map((r) => r.events).join(', ')}`,
        `largest payload: ${largest.bytes} bytes in ${largest.eventType}`,
        `request size (estimated prompt tokens, characters / 4): turn 1 ${promptTokens[0]}, turn ${turns} ` +
          `${promptTokens.at(-1)}; medians ${median(firstTokens)} (first ${window}) and ${median(lastTokens)} (last ${window})`,
        maxMessages === undefined
          ? 'no context limit (--no-context-limit): every request carried the whole transcript; the target ≤ 1.2× is meant with one'
          : `context limit: the agent's context.max_messages ${maxMessages} (--no-context-limit to send the whole transcript)`,
      ],
    },
    common.json,
  );
});

function latencyFigures(values: readonly number[]) {
  return {
    items: values.length,
    medianMs: round1(median(values)),
    p10Ms: round1(percentile(values, 10)),
    p90Ms: round1(percentile(values, 90)),
  };
}

/** The size of the requests of a window of turns: estimated prompt tokens. */
function requestFigures(tokens: readonly number[]) {
  return { medianRequestTokens: median(tokens), maxRequestTokens: Math.max(...tokens) };
}

interface Largest {
  bytes: number;
  eventType: string;
}

/** The largest payload (`data` bytes of any Payload) in a history, and the event it is in. */
function largestPayload(events: readonly temporal.api.history.v1.IHistoryEvent[]): Largest {
  let best: Largest = { bytes: 0, eventType: 'none' };
  const visit = (value: unknown, eventType: string, depth: number): void => {
    if (depth > 12 || value === null || typeof value !== 'object') return;
    if (value instanceof Uint8Array) return;
    const record = value as Record<string, unknown>;
    if (record.data instanceof Uint8Array && 'metadata' in record && record.data.length > best.bytes) {
      best = { bytes: record.data.length, eventType };
    }
    for (const child of Object.values(record)) visit(child, eventType, depth + 1);
  };
  for (const event of events) {
    const type = Object.keys(event).find((k) => k.endsWith('EventAttributes')) ?? 'unknown';
    visit(event, type.replace(/EventAttributes$/, ''), 0);
  }
  return best;
}
