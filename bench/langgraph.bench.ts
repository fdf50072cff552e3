/**
 * `npm run bench -- langgraph`: Baton against LangGraph.js checkpointed in Postgres, the same turn on both. A 10-step
 * turn (9 `think` calls, then an answer; the scripted model answers at once), at 1 thread and with 10 threads at once:
 *
 * - Baton, its steps as activities (an activity task each, the default), as local activities inside the turn's
 *   workflow task (`steps: local`, one per step), and batched (`steps: batched`: the turn's consecutive steps in one
 *   local activity): three agents of one Baton worker, differing only in that line of their frontmatter;
 * - LangGraph.js: a `StateGraph` with a model node (`ChatOpenAI`) and a `ToolNode`, checkpointed by `PostgresSaver`
 *   (bench/langgraph-baseline.ts), on a fresh `thread_id` per turn,
 * - and, to tell Baton's cost from Temporal's, the hand-written Temporal loop doing the same I/O with its steps as
 *   local activities (`hand-local`), a hand-written durable conversation started with its first message
 *   (`hand-start`: Update-with-Start, its record and message stored in one write before the first model call; and
 *   `hand-start-send`, the same started, then sent its message in a call of its own; `hand-batched-start` and
 *   `hand-batched-start-send`, the same two with each turn's steps in one local activity, as Baton's batched), and
 *   10 no-op local activities in one workflow (`floor-local`; also one, `floor-one-local`, so that the report can say
 *   what one local activity's round trip costs and how soon a plain workflow's code runs),
 *
 * all calling the same scripted model server with the same system prompt and tools, on one stack and one database
 * (bench/common.ts). Rounds rotate the order of all cases. It prints ms per step at 1 thread and steps per second
 * with 10 threads, and the ratios; it asserts nothing.
 *
 * Flags (and those of bench/common.ts: `--rounds`, `--quick`, `--json`, `--default-dynamic-config`,
 * `--dynamic-config`): `--turns N` turns per 1-thread case per round (default 3; each many-thread case runs once per
 * round, as many turns as threads), `--threads LIST` (default `1,10`), `--langgraph-durability async|sync|exit`
 * (default `async`, LangGraph's own).
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import type { google, temporal } from '@temporalio/proto';
import { rootTurnWorkflowId, threadWorkflowId } from '../common/ids';
import type { BatonClient } from '../client';
import type { SendMessageResult } from '../common/types';
import type { ModelLogEntry } from '../testing/harness';
import { uniqueThreadId } from '../testing/test-env';
import { turnDispatches } from '../testing/turn-dispatches';
import {
  batonTurn,
  benchAgentFile,
  benchAgents,
  benchScript,
  endThread,
  floorTurn,
  handWrittenStart,
  handWrittenTurn,
  modelLogFile,
  recordedRequest,
  startBaton,
  startBaselines,
  stepsScript,
  TURN_MESSAGE,
  type BaselineSide,
  type BatonSide,
} from './baselines';
import {
  compare,
  compareCases,
  interleave,
  latencySummary,
  log,
  median,
  parseBenchArgs,
  printReport,
  round1,
  runBench,
  runConcurrently,
  throughputSummary,
  wholeNumber,
  wholeNumbers,
  type BenchCase,
  type Comparison,
  type Measured,
  type Untimed,
} from './common';
import { LANGGRAPH_DURABILITIES, startLangGraph, type LangGraphDurability } from './langgraph-baseline';

/** Model calls per turn: 9 `think` calls, then the answer. */
const STEPS = 10;
const ACTIVITY_AGENT = 'stepper';
const LOCAL_AGENT = 'stepper-local';
const BATCHED_AGENT = 'stepper-batched';
/** A batched agent whose script answers two turns: a standing thread's first (untimed) and its next. */
const STANDING_AGENT = 'stepper-standing';
/** The script LangGraph's model node is answered from (its `x-baton-agent`). */
const LANGGRAPH_AGENT = 'langgraph';
/** LangGraph's standing threads' script: two turns. */
const LANGGRAPH_STANDING_AGENT = 'langgraph-standing';
/** The script the hand-written local-activity loop is answered from. */
const HAND_AGENT = 'hand-local';
/**
 * One no-op local activity in a workflow, started and awaited: at 1 thread, `floor-local` less it is nine local
 * activities' round trips; at any, the least a Temporal workflow takes to run code on a worker.
 */
const FLOOR_ONE_CASE = 'floor-one-local';
/**
 * A hand-written durable conversation's start (bench/baseline-workflows.ts `handWrittenThreadWorkflow`): started with
 * its first message by Update-with-Start, the conversation and its message stored in one write, then the model call.
 */
const HAND_START_CASE = 'hand-start';
/** The same conversation started without its message, then sent it: a durable start in two calls, by hand. */
const HAND_START_SEND_CASE = 'hand-start-send';
/**
 * The same two starts, each turn's writes, reads and model calls in one local activity, as a Baton turn with
 * `steps: batched`: the floors under the whole turn of Baton's `run` and of its `startThread` then `send`.
 */
const HAND_BATCHED_START_CASE = 'hand-batched-start';
const HAND_BATCHED_START_SEND_CASE = 'hand-batched-start-send';
/**
 * Targets: at 1 thread a Baton step (local) at most as long as a LangGraph step; with many threads Baton
 * (local) at least as many steps per second as LangGraph (LangGraph's steps/s over Baton's at most 1).
 */
const TARGET_RATIO = 1;
/** Targets on the time to a turn's first model call, Baton (batched) / LangGraph: at 1 thread, and with more. */
const FIRST_CALL_TARGET = { alone: 2, concurrent: 1.5 };

const { common, values } = parseBenchArgs(process.argv.slice(2), [5, 3], {
  turns: { type: 'string' },
  threads: { type: 'string', default: '1,10' },
  'langgraph-durability': { type: 'string', default: 'async' },
});
const turns = typeof values.turns === 'string' ? wholeNumber('turns', values.turns) : common.quick ? 2 : 3;
const threadCounts = wholeNumbers('threads', String(values.threads));
const durability = String(values['langgraph-durability']);
if (!(LANGGRAPH_DURABILITIES as readonly string[]).includes(durability)) {
  throw new Error(`--langgraph-durability takes ${LANGGRAPH_DURABILITIES.join(', ')}, not '${durability}'`);
}

runBench(common, async (context) => {
  const baton = await startBaton(context, {
    name: 'langgraph',
    agents: benchAgents({
      [ACTIVITY_AGENT]: benchAgentFile(ACTIVITY_AGENT),
      [LOCAL_AGENT]: benchAgentFile(LOCAL_AGENT, [], { steps: 'local' }),
      [BATCHED_AGENT]: benchAgentFile(BATCHED_AGENT, [], { steps: 'batched' }),
      [STANDING_AGENT]: benchAgentFile(STANDING_AGENT, [], { steps: 'batched' }),
    }),
    script: benchScript(
      [
        ...[ACTIVITY_AGENT, LOCAL_AGENT, BATCHED_AGENT, LANGGRAPH_AGENT, HAND_AGENT].map((agent) =>
          stepsScript(agent, STEPS),
        ),
        ...[STANDING_AGENT, LANGGRAPH_STANDING_AGENT].map((agent) => stepsScript(agent, STEPS, 2)),
      ],
      'langgraph-bench',
    ),
    modelLogFile: modelLogFile(context, 'langgraph'),
  });
  // One turn of each Baton agent first, untimed: it records the request LangGraph will send, and shows each agent's
  // steps ran where its mode says (a misread frontmatter would compare a mode with itself).
  const activityDispatches = await dispatchedSteps(baton, ACTIVITY_AGENT);
  const localDispatches = await dispatchedSteps(baton, LOCAL_AGENT);
  const batchedDispatches = await dispatchedSteps(baton, BATCHED_AGENT);
  if (
    activityDispatches.activities < STEPS ||
    localDispatches.local < STEPS ||
    localDispatches.activities > 0 ||
    // The turn's start with its 10 steps in one batch (its first, run by `beginTurn`).
    batchedDispatches.local !== 1 ||
    batchedDispatches.activities > 0
  ) {
    throw new Error(
      `step modes not as configured: ${ACTIVITY_AGENT} ${JSON.stringify(activityDispatches)}, ` +
        `${LOCAL_AGENT} ${JSON.stringify(localDispatches)}, ${BATCHED_AGENT} ${JSON.stringify(batchedDispatches)}`,
    );
  }
  const langGraph = await startLangGraph(context, {
    pool: baton.harness.pool,
    modelBaseURL: baton.harness.model.baseURL,
    agent: LANGGRAPH_AGENT,
    standingAgent: LANGGRAPH_STANDING_AGENT,
    steps: STEPS,
    request: recordedRequest(baton.harness, ACTIVITY_AGENT),
    durability: durability as LangGraphDurability,
  });
  const baseline = await startBaselines(context, {
    name: 'langgraph',
    pool: baton.harness.pool,
    modelBaseURL: baton.harness.model.baseURL,
    request: { ...recordedRequest(baton.harness, LOCAL_AGENT), agent: HAND_AGENT },
  });
  const checkpointRows = await langGraph.countCheckpointRows();
  const requests = compareLastRequests(baton, ACTIVITY_AGENT, LANGGRAPH_AGENT);

  const starts = new TurnStarts();
  const cases: BenchCase[] = threadCounts.flatMap((threads) => {
    const repeats = threads === 1 ? turns : 1;
    /** A case whose turns' first model calls are timed too: its runs note each thread as its timed part begins. */
    const timingFirstCall = (
      name: string,
      prepare: (started: (threadId: string) => void) => () => Promise<() => Promise<void | Untimed>>,
    ): BenchCase => ({
      name,
      repeats,
      run: (round) =>
        runConcurrently(
          threads,
          prepare((threadId) => starts.note(name, round, threadId)),
        ),
    });
    return [
      {
        name: `baton-activity@${threads}`,
        repeats,
        run: () => runConcurrently(threads, batonTurn(baton.client, ACTIVITY_AGENT, STEPS)),
      },
      {
        name: `baton-local@${threads}`,
        repeats,
        run: () => runConcurrently(threads, batonTurn(baton.client, LOCAL_AGENT, STEPS)),
      },
      // Batched: a new thread started with its message in one call (`run`), then in two (`startThread`, `send`), and
      // a standing thread's next message; LangGraph: a new `thread_id`, and a standing one's next message.
      timingFirstCall(`baton-batched@${threads}`, (started) =>
        batonTurn(baton.client, BATCHED_AGENT, STEPS, { started }),
      ),
      timingFirstCall(`baton-batched-start-send@${threads}`, (started) =>
        batonStartThenSend(baton.client, BATCHED_AGENT, started),
      ),
      timingFirstCall(`baton-batched-standing@${threads}`, (started) =>
        batonStandingTurn(baton.client, STANDING_AGENT, started),
      ),
      timingFirstCall(`langgraph@${threads}`, (started) => langGraph.prepareTurn(started)),
      timingFirstCall(`langgraph-standing@${threads}`, (started) => langGraph.prepareStandingTurn(started)),
      {
        name: `hand-local@${threads}`,
        repeats,
        run: () => runConcurrently(threads, handWrittenTurn(baseline, HAND_AGENT, STEPS, { local: true })),
      },
      // A durable conversation started as anyone would with Temporal alone: the floor under Baton's new thread.
      timingFirstCall(`${HAND_START_CASE}@${threads}`, (started) => handWrittenStart(baseline, STEPS, started)),
      // The same by a start then the message in a call of its own: the floor under `startThread` then `send`.
      timingFirstCall(`${HAND_START_SEND_CASE}@${threads}`, (started) =>
        handWrittenStart(baseline, STEPS, started, { messageApart: true }),
      ),
      // Both with each turn in one local activity: the floors under the whole turn of Baton's two ways.
      timingFirstCall(`${HAND_BATCHED_START_CASE}@${threads}`, (started) =>
        handWrittenStart(baseline, STEPS, started, { batched: true }),
      ),
      timingFirstCall(`${HAND_BATCHED_START_SEND_CASE}@${threads}`, (started) =>
        handWrittenStart(baseline, STEPS, started, { messageApart: true, batched: true }),
      ),
      {
        name: `floor-local@${threads}`,
        repeats,
        run: () => runConcurrently(threads, floorTurn(baseline, STEPS, { local: true })),
      },
      // One no-op local activity in a workflow started and awaited: with `floor-local`, what one more local activity
      // costs; and what Temporal alone takes to start a workflow and run its code, the floor of a turn's first call.
      timingFirstCall(`${FLOOR_ONE_CASE}@${threads}`, (started) => floorTurn(baseline, 1, { local: true, started })),
    ];
  });
  log(
    `measuring: ${common.rounds} rounds; threads ${threadCounts.join(', ')}; ${turns} turns per 1-thread case; ` +
      `LangGraph durability ${durability}`,
  );
  const measured = await interleave(cases, common.rounds, 1);
  const get = (name: string) => measured.get(name) as Measured;
  // The first model call of each timed turn, from the scripted model's log (both sides' requests reach it); the floor's
  // first code, from its no-op's start.
  const firstCalls = starts.firstMoments(requestTimes(baton.harness.modelRequests()), baseline.noopStarts);
  const firstCall = (name: string) => firstCalls.get(name) as Measured;
  const breakdowns: string[] = [];
  for (const threads of threadCounts) {
    breakdowns.push(await startBreakdown(threads, starts, baton, baseline, firstCalls));
  }

  const comparisons: Comparison[] = threadCounts.flatMap((threads) => {
    const activity = get(`baton-activity@${threads}`);
    const local = get(`baton-local@${threads}`);
    const batched = get(`baton-batched@${threads}`);
    const graph = get(`langgraph@${threads}`);
    const hand = get(`hand-local@${threads}`);
    const floor = get(`floor-local@${threads}`);
    const msPerStep = {
      batonLocal: perStep(local),
      batonBatched: perStep(batched),
      batonActivity: perStep(activity),
      langgraph: perStep(graph),
      handWrittenLocal: perStep(hand),
      floorLocal: perStep(floor),
    };
    return [
      compareCases(`per step, ${threads} thread(s): Baton-local / LangGraph`, local, graph, {
        ...(threads === 1 ? { target: TARGET_RATIO } : {}),
        figures: { msPerStep },
      }),
      compareCases(`per step, ${threads} thread(s): Baton-batched / LangGraph`, batched, graph, {
        target: TARGET_RATIO,
      }),
      compareCases(`per step, ${threads} thread(s): Baton-activity / LangGraph`, activity, graph),
      compareCases(`per step, ${threads} thread(s): Baton-local / Baton-activity`, local, activity),
      compareCases(`per step, ${threads} thread(s): Baton-batched / Baton-local`, batched, local),
      compareCases(`per step, ${threads} thread(s): Baton-local / hand-written local`, local, hand),
      compareCases(`per step, ${threads} thread(s): hand-written local / LangGraph`, hand, graph),
      compareCases(`per step, ${threads} thread(s): floor-local / LangGraph`, floor, graph),
      ...startComparisons(threads, get, firstCall),
      ...(threads > 1
        ? [
            compareStepsPerSecond(`steps/s, ${threads} threads: LangGraph / Baton-local`, graph, local, TARGET_RATIO),
            compareStepsPerSecond(
              `steps/s, ${threads} threads: LangGraph / Baton-batched`,
              graph,
              batched,
              TARGET_RATIO,
            ),
            compareStepsPerSecond(`steps/s, ${threads} threads: Baton-local / Baton-activity`, local, activity),
            compareStepsPerSecond(`steps/s, ${threads} threads: LangGraph / hand-written local`, graph, hand),
          ]
        : []),
    ];
  });
  printReport(
    {
      bench: 'langgraph',
      description:
        `${STEPS}-step turn (9 think calls, then an answer): Baton (steps as activities, as local activities, and ` +
        'batched in one local activity) vs ' +
        'LangGraph.js (StateGraph, ChatOpenAI, ToolNode) checkpointed by PostgresSaver, and a hand-written Temporal ' +
        'loop with local activities',
      settings: {
        steps: STEPS,
        rounds: common.rounds,
        turnsPerRound: turns,
        threads: threadCounts.join(','),
        langgraphDurability: durability,
      },
      dynamicConfig: context.dynamicConfig,
      cases: cases.map((c) => {
        const m = get(c.name);
        const { perSecond } = throughputSummary(m);
        const first = firstCalls.get(c.name);
        return {
          name: c.name,
          msPerStep: perStep(m),
          stepsPerSecond: round1(perSecond * STEPS),
          ...latencySummary(m),
          ...(first === undefined ? {} : { firstCallMs: latencySummary(first).medianMs }),
        };
      }),
      comparisons,
      notes: [
        ...breakdowns,
        ...(measured.has(`${FLOOR_ONE_CASE}@1`) && measured.has('floor-local@1') ? [localRoundTrips(get)] : []),
        `a LangGraph turn stored ${checkpointRows.checkpoints} checkpoints, ${checkpointRows.blobs} blobs and ` +
          `${checkpointRows.writes} pending writes (durability ${durability})`,
        `the last request of a turn: ${requests.messages} messages and ${requests.tools} tools on both sides, ` +
          `${requests.batonChars} characters of messages and tools from Baton, ${requests.langGraphChars} from LangGraph`,
        `one Baton turn dispatched: ${ACTIVITY_AGENT} ${activityDispatches.activities} activities and ` +
          `${activityDispatches.local} local; ${LOCAL_AGENT} ${localDispatches.activities} and ${localDispatches.local}; ` +
          `${BATCHED_AGENT} ${batchedDispatches.activities} and ${batchedDispatches.local}`,
      ],
    },
    common.json,
  );
});

/**
 * How soon a turn starts, at `threads` threads: the time from the call that sends its message to its first model call
 * (Baton batched: a new thread by `run`, by `startThread` then `send`, a standing thread's next message; LangGraph: a
 * new `thread_id`, a standing one's next message), against LangGraph's, with the targets; and the whole turn of each
 * Baton way against LangGraph's. The floors: how soon a plain Temporal workflow started and awaited runs its first
 * local activity, against LangGraph's first call (what no Temporal-based start can go below), and how soon a
 * hand-written durable start makes its first model call (what a start that keeps the message first costs with
 * Temporal alone), against LangGraph's and Baton's; and the whole turn of the same starts with each turn in one local
 * activity (the least a durable turn of these steps takes with Temporal alone), against LangGraph's and Baton's.
 */
function startComparisons(
  threads: number,
  get: (name: string) => Measured,
  firstCall: (name: string) => Measured,
): Comparison[] {
  const target = threads === 1 ? FIRST_CALL_TARGET.alone : FIRST_CALL_TARGET.concurrent;
  const at = (name: string) => `${name}@${threads}`;
  const title = (what: string) => `${what}, ${threads} thread(s)`;
  /**
   * A floor by hand (`floor`: its case, its label and how it starts) against LangGraph's new thread, then the Baton way
   * it lies under against it, both on `measure` (`what` is measured).
   */
  const underFloor = (
    what: string,
    measure: (name: string) => Measured,
    floor: { name: string; label: string; how: string },
    baton: { name: string; label: string },
  ): Comparison[] => [
    compareCases(
      title(`${what}: ${floor.label} (${floor.how}) / LangGraph`),
      measure(at(floor.name)),
      measure(at('langgraph')),
    ),
    compareCases(title(`${what}: ${baton.label} / ${floor.label}`), measure(at(baton.name)), measure(at(floor.name))),
  ];
  return [
    compareCases(
      title('first model call: Baton-batched run / LangGraph'),
      firstCall(at('baton-batched')),
      firstCall(at('langgraph')),
      { target },
    ),
    compareCases(
      title('first model call: Baton-batched startThread+send / LangGraph'),
      firstCall(at('baton-batched-start-send')),
      firstCall(at('langgraph')),
      { target },
    ),
    compareCases(
      title('first model call: Baton-batched standing thread / LangGraph standing thread'),
      firstCall(at('baton-batched-standing')),
      firstCall(at('langgraph-standing')),
      { target },
    ),
    compareCases(
      title(
        'first code run: Temporal floor (a workflow started, its first local activity) / LangGraph first model call',
      ),
      firstCall(at(FLOOR_ONE_CASE)),
      firstCall(at('langgraph')),
    ),
    ...underFloor(
      'first model call',
      firstCall,
      {
        name: HAND_START_CASE,
        label: 'hand-written durable start',
        how: 'Update-with-Start, record and message in one write',
      },
      { name: 'baton-batched', label: 'Baton-batched run' },
    ),
    ...underFloor(
      'first model call',
      firstCall,
      { name: HAND_START_SEND_CASE, label: 'hand-written durable start then send', how: 'a start, then an Update' },
      { name: 'baton-batched-start-send', label: 'Baton-batched startThread+send' },
    ),
    compareCases(
      title('whole turn: Baton-batched startThread+send / LangGraph'),
      get(at('baton-batched-start-send')),
      get(at('langgraph')),
      { target: TARGET_RATIO },
    ),
    ...underFloor(
      'whole turn',
      get,
      {
        name: HAND_BATCHED_START_CASE,
        label: 'hand-written batched durable start',
        how: 'Update-with-Start, one local activity',
      },
      { name: 'baton-batched', label: 'Baton-batched run' },
    ),
    ...underFloor(
      'whole turn',
      get,
      {
        name: HAND_BATCHED_START_SEND_CASE,
        label: 'hand-written batched durable start then send',
        how: 'a start, then an Update',
      },
      { name: 'baton-batched-start-send', label: 'Baton-batched startThread+send' },
    ),
    compareCases(
      title('whole turn: Baton-batched standing thread / LangGraph standing thread'),
      get(at('baton-batched-standing')),
      get(at('langgraph-standing')),
      { target: TARGET_RATIO },
    ),
  ];
}

/**
 * A new thread of `agent` started by `startThread`, then sent the turn's message by `send`, both timed (as a chat app
 * that creates a conversation, then posts to it); ended after, untimed.
 */
function batonStartThenSend(
  client: BatonClient,
  agent: string,
  started: (threadId: string) => void,
): () => Promise<() => Promise<Untimed>> {
  return () => {
    const threadId = uniqueThreadId(`bench-${agent}`);
    return Promise.resolve(async () => {
      started(threadId);
      const thread = await client.startThread({ agent, threadId });
      checkTurn(agent, await thread.send(TURN_MESSAGE));
      return () => endThread(thread);
    });
  };
}

/**
 * A standing thread's next message: the thread started and its first turn answered untimed; the timed part is `send`
 * of the second message (the agent's script answers two turns); ended after, untimed.
 */
function batonStandingTurn(
  client: BatonClient,
  agent: string,
  started: (threadId: string) => void,
): () => Promise<() => Promise<Untimed>> {
  return async () => {
    const threadId = uniqueThreadId(`bench-${agent}`);
    const { thread, result } = await client.run({ agent, threadId, message: TURN_MESSAGE });
    checkTurn(agent, result);
    return async () => {
      started(threadId);
      checkTurn(agent, await thread.send(TURN_MESSAGE));
      return () => endThread(thread);
    };
  };
}

/** A Baton turn of the bench must complete after its `STEPS` model calls. */
function checkTurn(agent: string, result: SendMessageResult): void {
  if (result.status !== 'completed' || result.steps !== STEPS) {
    throw new Error(`${agent}'s turn ended ${result.status} after ${result.steps} steps, not completed after ${STEPS}`);
  }
}

/** The times the scripted model received each thread's requests (`receivedMs`), by thread, in order. */
function requestTimes(requests: readonly ModelLogEntry[]): Map<string, number[]> {
  const times = new Map<string, number[]>();
  for (const request of requests) {
    if (request.thread === null || request.thread === undefined) continue;
    const list = times.get(request.thread) ?? [];
    list.push(request.receivedMs);
    times.set(request.thread, list);
  }
  return times;
}

/**
 * When each timed turn began, by case and round (`note`, as its timed part starts), so that its first model call can
 * be timed afterwards from what the scripted model logged (read once, after the rounds: nothing is read while timing).
 * Marks and the log's `receivedMs` share the process's clock.
 */
class TurnStarts {
  private readonly marks: { caseName: string; round: number; id: string; startedMs: number }[] = [];

  note(caseName: string, round: number, id: string): void {
    this.marks.push({ caseName, round, id, startedMs: performance.timeOrigin + performance.now() });
  }

  /** The timed turns of `caseName` (not its warm-up runs): each one's id and when its timed part began. */
  timed(caseName: string): { id: string; startedMs: number }[] {
    return this.marks.filter((mark) => mark.caseName === caseName && mark.round >= 0);
  }

  /**
   * Per case, the time from each timed turn's start to the first moment after it among `moments` of its thread (the
   * scripted model's requests) or `firstMoments` (one per workflow id: a floor's first activity), over the rounds.
   * @throws when a timed turn has no such moment (its first call was not logged)
   */
  firstMoments(
    moments: ReadonlyMap<string, readonly number[]>,
    firstMoments: ReadonlyMap<string, number>,
  ): Map<string, Measured> {
    const byCase = new Map<string, { latenciesMs: number[]; byRound: Map<number, number[]> }>();
    for (const mark of this.marks) {
      if (mark.round < 0) continue;
      const found =
        (moments.get(mark.id) ?? []).find((moment) => moment >= mark.startedMs) ?? firstMoments.get(mark.id);
      if (found === undefined) throw new Error(`no first model call was logged for ${mark.id} (${mark.caseName})`);
      const entry = byCase.get(mark.caseName) ?? { latenciesMs: [], byRound: new Map<number, number[]>() };
      entry.latenciesMs.push(found - mark.startedMs);
      entry.byRound.set(mark.round, [...(entry.byRound.get(mark.round) ?? []), found - mark.startedMs]);
      byCase.set(mark.caseName, entry);
    }
    return new Map(
      [...byCase].map(([name, entry]) => [
        name,
        {
          name,
          latenciesMs: entry.latenciesMs,
          rounds: [...entry.byRound.keys()]
            .sort((a, b) => a - b)
            .map((round) => ({ medianMs: median(entry.byRound.get(round) ?? []), perSecond: Number.NaN })),
        },
      ]),
    );
  }
}

/**
 * Where a new thread's first model call went, at `threads` threads (the `baton-batched` case, started by `run`), beside
 * where a hand-written durable start's went (`hand-start`) and where a plain Temporal workflow's first code went
 * (`floor-one-local`), read after the rounds: from the call's start to the server's start of the workflow and to its
 * first workflow task starting (the history's event times), to the first write of the turn's first local activity
 * (Baton and `hand-start`: the thread's record, which that activity opens; the floor: its no-op's start), and on to
 * the model call (the scripted model's log). The median of each part over the timed
 * turns (so the parts need not add up to the median whole). All on this machine's one clock.
 */
async function startBreakdown(
  threads: number,
  starts: TurnStarts,
  baton: BatonSide,
  floor: BaselineSide,
  firstCalls: ReadonlyMap<string, Measured>,
): Promise<string> {
  const batonCase = `baton-batched@${threads}`;
  const floorCase = `${FLOOR_ONE_CASE}@${threads}`;
  const handCase = `${HAND_START_CASE}@${threads}`;
  const batonTurns = starts.timed(batonCase);
  const handTurns = starts.timed(handCase);
  // Both open their thread's record in their first local activity's first write.
  const recorded = await baton.harness.pool.query<{ thread_id: string; ms: number }>(
    'SELECT thread_id, extract(epoch FROM created_at) * 1000 AS ms FROM threads WHERE thread_id = ANY($1)',
    [[...batonTurns, ...handTurns].map((turn) => turn.id)],
  );
  const opened = new Map(recorded.rows.map((row) => [row.thread_id, Number(row.ms)]));
  const firstCallMs = requestTimes(baton.harness.modelRequests());
  const parts = async (
    turns: readonly { id: string; startedMs: number }[],
    client: Client,
    workflowIdOf: (id: string) => string,
    codeAt: (id: string) => number | undefined,
    callAt?: (id: string, after: number) => number | undefined,
  ) => {
    const spans: number[][] = [];
    for (const turn of turns) {
      const moments = await startMoments(client, workflowIdOf(turn.id));
      const code = codeAt(turn.id);
      if (code === undefined) throw new Error(`no first local activity was seen for ${turn.id}`);
      const call = callAt?.(turn.id, turn.startedMs);
      spans.push([
        moments.startedMs - turn.startedMs,
        moments.firstTaskMs - moments.startedMs,
        code - moments.firstTaskMs,
        ...(call === undefined ? [] : [call - code]),
      ]);
    }
    return (spans[0] ?? []).map((_, index) => round1(median(spans.map((span) => span[index] ?? Number.NaN))));
  };
  const [toStarted, toTask, toCode, toCall] = await parts(
    batonTurns,
    baton.client.temporal,
    threadWorkflowId,
    (id) => opened.get(id),
    (id, after) => (firstCallMs.get(id) ?? []).find((moment) => moment >= after),
  );
  const [handToStarted, handToTask, handToCode, handToCall] = await parts(
    handTurns,
    floor.client,
    (id) => id,
    (id) => opened.get(id),
    (id, after) => (firstCallMs.get(id) ?? []).find((moment) => moment >= after),
  );
  const [floorToStarted, floorToTask, floorToCode] = await parts(
    starts.timed(floorCase),
    floor.client,
    (id) => id,
    (id) => floor.noopStarts.get(id),
  );
  const whole = (name: string) => {
    const measured = firstCalls.get(name);
    return measured === undefined ? Number.NaN : round1(latencySummary(measured).medianMs);
  };
  return (
    `where a new thread's first model call went, ${threads} thread(s), median ms of each part: Baton-batched run: ` +
    `${toStarted} until the server started its workflow, ${toTask} until its first workflow task started, ${toCode} ` +
    `until its first local activity wrote the thread's record, ${toCall} until the model call (whole: ` +
    `${whole(batonCase)}); a hand-written durable start (${HAND_START_CASE}): ${handToStarted}, ${handToTask}, ` +
    `${handToCode}, ${handToCall} (whole: ${whole(handCase)}); a plain Temporal workflow (${FLOOR_ONE_CASE}): ` +
    `${floorToStarted}, ${floorToTask}, ` +
    `${floorToCode} until its no-op local activity started (whole: ${whole(floorCase)}); the message in a call of ` +
    `its own after the start: Baton's startThread+send ` +
    `${round1(whole(`baton-batched-start-send@${threads}`) - whole(batonCase))} ms after run, a hand-written start ` +
    `then send (${HAND_START_SEND_CASE}) ` +
    `${round1(whole(`${HAND_START_SEND_CASE}@${threads}`) - whole(handCase))} ms after ${HAND_START_CASE}`
  );
}

/** When the server started a workflow, and when its first workflow task started (its history's event times, in ms). */
async function startMoments(client: Client, workflowId: string): Promise<{ startedMs: number; firstTaskMs: number }> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const started = events.find((event) => event.workflowExecutionStartedEventAttributes);
  const firstTask = events.find((event) => event.workflowTaskStartedEventAttributes);
  if (started?.eventTime == null || firstTask?.eventTime == null) {
    throw new Error(`the history of ${workflowId} has no start or no started workflow task`);
  }
  return { startedMs: eventMs(started.eventTime), firstTaskMs: eventMs(firstTask.eventTime) };
}

/** An event time in ms since the epoch, with the fraction its nanoseconds give. */
function eventMs(time: google.protobuf.ITimestamp): number {
  return tsToMs(time) + ((time.nanos ?? 0) % 1e6) / 1e6;
}

/**
 * What one more local activity costs at 1 thread, against what a local step may cost for `steps: local` to be no
 * slower than LangGraph. A local-step turn runs the same steps as a batched one (the same I/O, in the same
 * activities' code), plus a local activity's round trip through the workflow per step: so it can take no longer than
 * LangGraph's turn only if that round trip costs at most (LangGraph − batched) / steps.
 */
function localRoundTrips(get: (name: string) => Measured): string {
  const median1 = (name: string) => latencySummary(get(name)).medianMs;
  const temporalRoundTrip = (median1('floor-local@1') - median1(`${FLOOR_ONE_CASE}@1`)) / (STEPS - 1);
  const batonRoundTrip = (median1('baton-local@1') - median1('baton-batched@1')) / STEPS;
  const budget = (median1('langgraph@1') - median1('baton-batched@1')) / STEPS;
  return (
    `a local activity's round trip at 1 thread: ${round1(temporalRoundTrip)} ms with Temporal alone ` +
    `((floor-local − ${FLOOR_ONE_CASE}@1) / ${STEPS - 1}), ${round1(batonRoundTrip)} ms per step in Baton ` +
    `((baton-local − baton-batched) / ${STEPS}); for baton-local ≤ LangGraph it may cost ${round1(budget)} ms ` +
    `((langgraph − baton-batched) / ${STEPS})`
  );
}

/** Median turn over the steps of a turn. */
function perStep(m: Measured): number {
  return round1(latencySummary(m).medianMs / STEPS);
}

/** Compares steps per second (turns per second over each round's wall time, times the steps of a turn). */
function compareStepsPerSecond(name: string, subject: Measured, baseline: Measured, target?: number): Comparison {
  const rates = (m: Measured) => m.rounds.map((r) => r.perSecond * STEPS);
  const baselineRates = rates(baseline);
  return compare(name, 'steps/s', subject.name, median(rates(subject)), baseline.name, median(baselineRates), {
    medianPerRound: median(rates(subject).map((rate, i) => rate / (baselineRates[i] ?? Number.NaN))),
    ...(target === undefined ? {} : { target }),
  });
}

/**
 * Runs one turn of `agent` on a fresh thread (untimed) and counts what the turn dispatched, in its thread's workflow
 * (where a turn begins, and a local-step turn runs its steps) and in its own workflow if it ran one: activity tasks
 * scheduled, and local activities (their markers in the history). The thread's own opening is not counted.
 */
async function dispatchedSteps(baton: BatonSide, agent: string): Promise<{ activities: number; local: number }> {
  const threadId = uniqueThreadId(`bench-${agent}`);
  const thread = await baton.client.startThread({ agent, threadId });
  checkTurn(agent, await thread.send(TURN_MESSAGE));
  await thread.end();
  const workflow = baton.client.temporal.workflow;
  const events: temporal.api.history.v1.IHistoryEvent[] =
    (await workflow.getHandle(thread.workflowId).fetchHistory()).events ?? [];
  const turn = workflow.getHandle(rootTurnWorkflowId(threadId, 1));
  const ranTurnWorkflow = await turn.describe().then(
    () => true,
    (error: unknown) => {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    },
  );
  if (ranTurnWorkflow) events.push(...((await turn.fetchHistory()).events ?? []));
  // What the turn dispatched: the thread's opening (an activity, or a local one) is not the turn's.
  const dispatched = turnDispatches(events).filter((dispatch) => !/^(local:)?ensureThread\b/.test(dispatch));
  return {
    activities: dispatched.filter((dispatch) => !/^(local|child):/.test(dispatch)).length,
    local: dispatched.filter((dispatch) => dispatch.startsWith('local:')).length,
  };
}

/**
 * The last requests the scripted model received from a Baton turn and a LangGraph turn (each a turn's last step), which
 * must carry the same messages (by role) and the same tools: the sides' I/O is the same but for how each serializes.
 * @returns their counts, and the size of each side's messages and tools as JSON
 */
function compareLastRequests(baton: BatonSide, batonAgent: string, langGraphAgent: string) {
  const requests = baton.harness.modelRequests();
  const last = (agent: string) => {
    const request = requests.filter((entry) => entry.agent === agent).at(-1);
    if (!request) throw new Error(`the scripted model logged no request of ${agent}`);
    return request;
  };
  const fromBaton = last(batonAgent);
  const fromLangGraph = last(langGraphAgent);
  const roles = (request: ModelLogEntry) => request.messages.map((message) => message.role).join(' ');
  const toolNames = (request: ModelLogEntry) =>
    (request.tools ?? [])
      .map((definition) => (definition as { function?: { name?: string } }).function?.name)
      .join(' ');
  if (roles(fromBaton) !== roles(fromLangGraph) || toolNames(fromBaton) !== toolNames(fromLangGraph)) {
    throw new Error(
      `LangGraph's request differs from Baton's: roles ${roles(fromLangGraph)} against ${roles(fromBaton)}, ` +
        `tools ${toolNames(fromLangGraph)} against ${toolNames(fromBaton)}`,
    );
  }
  const size = (request: ModelLogEntry) => JSON.stringify([request.messages, request.tools ?? []]).length;
  return {
    messages: fromBaton.messages.length,
    tools: fromBaton.tools?.length ?? 0,
    batonChars: size(fromBaton),
    langGraphChars: size(fromLangGraph),
  };
}
