import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { AgentTurnInput, BegunTurn, ThreadWorkflowInput } from '../../common/types';
import { WORKFLOW_BUNDLER_OPTIONS, WORKFLOWS_PATH } from '../../worker/workflow-bundle';
import { bundleBatonWorkflows } from '../../worker/create-worker';
import { tracedWorkerParts } from '../../worker/tracing';
import * as workflows from '../../workflows';
import {
  DECISIONS_AFTER_ACCEPTANCE_PATCH,
  FEWER_DISPATCHES_PATCH,
  FINISH_WITH_ANSWER_PATCH,
  LOCAL_STEPS_PATCH,
  USER_TOOLS_PATCH,
} from '../../workflows/agent-turn';
import { FENCE_FAILED_TURNS_PATCH, FORK_ACTIVITY_STEPS_IN_FORK_PATCH } from '../../workflows/fork-join';
import {
  BATCHED_STEPS_PATCH,
  BUDGET_ASK_PATCH,
  CODE_ERRORS_FAIL_TURN_PATCH,
  FIRST_BATCH_IN_BEGIN_PATCH,
  TYPED_OUTPUT_PATCH,
} from '../../workflows/turn-steps';
import {
  DELIVERIES_ACROSS_RUNS_PATCH,
  FIRST_TURN_OPENS_THREAD_PATCH,
  LIMITS_IN_TURN_PATCH,
  STOP_WATCHERS_PATCH,
  THREAD_OPENS_IN_ITS_TASK_PATCH,
  TURNS_BEGIN_IN_THREAD_PATCH,
} from '../../workflows/thread';
import { eventSummary, localActivityResults, patchesOf } from '../../testing/turn-dispatches';
import { WATCH_SIGNALS_BOUND_PATCH } from '../../workflows/watcher';

const HISTORIES_DIR = path.join(__dirname, 'histories');
const histories = fs
  .readdirSync(HISTORIES_DIR)
  .filter((file) => file.endsWith('.json'))
  .sort()
  .map((file) => ({
    file,
    workflowId: `replay:${file}`,
    history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8'))),
  }));

test('replay: recorded histories cover the thread, turn and scheduled-run workflows', () => {
  const types = new Set(
    histories.map((h) => h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name),
  );
  // Every workflow type the worker registers (the functions workflows/index.ts exports) has recorded histories.
  const registered = Object.entries(workflows)
    .filter(([, exported]) => typeof exported === 'function')
    .map(([name]) => name)
    .sort();
  assert.ok(registered.length >= 3, `workflows/index.ts exports the workflow functions (${registered.join(', ')})`);
  assert.deepEqual([...types].sort(), registered);
  assert.ok(histories.length >= 14, `expected the recorded scenarios, found ${histories.length} files`);
  const activities = new Set(
    histories.flatMap((h) =>
      (h.history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []),
    ),
  );
  for (const name of [
    'callModel',
    'executeToolCall',
    'openQuestion',
    'closeQuestion',
    'resolveAgent',
    'openFork',
    'reclaimForkTasks',
    'finishFork',
    'deliverScheduledMessage',
    'runToolsThenCallModel',
  ]) {
    assert.ok(activities.has(name), `a recorded history exercises ${name}`);
  }
  // Histories from before and after fewer dispatches per step: the patch marker, and the local activities after it.
  const markers = histories.flatMap((h) =>
    (h.history.events ?? []).flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? []),
  );
  assert.ok(markers.includes('core_patch'), 'a recorded history has the fewer-dispatches patch marker');
  assert.ok(markers.includes('core_local_activity'), 'a recorded history ran local activities');
  assert.ok(
    histories.some(
      (h) => !(h.history.events ?? []).some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'),
    ),
    'a recorded history is from before the patch',
  );
  const continued = histories.filter((h) =>
    h.history.events?.some((e) => e.workflowExecutionContinuedAsNewEventAttributes),
  );
  assert.ok(continued.length > 0, 'a recorded thread continued as new');
  const events = histories.flatMap((h) => h.history.events ?? []);
  // `wait`: a timer that fired, timers cancelled by a wake and by a human message, and the thread's wake Update.
  assert.ok(
    events.some((e) => e.timerFiredEventAttributes),
    'a recorded wait ended on its timer',
  );
  assert.ok(events.filter((e) => e.timerCanceledEventAttributes).length >= 2, 'recorded waits ended early');
  // A watcher's signal that names a traced writer's span (what a wake-up's span links to).
  assert.ok(
    events.some((e) =>
      (e.workflowExecutionSignaledEventAttributes?.input?.payloads ?? []).some((payload) =>
        Buffer.from(payload.data ?? [])
          .toString('utf8')
          .includes('"traceparent"'),
      ),
    ),
    "a recorded watcher signal names its writer's span",
  );
  assert.ok(
    events.some((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'wake'),
    'a recorded thread was woken',
  );
  // Since fewer dispatches per step: a wait ended by its timer, by a wake and by a message, ask_human mixed with
  // tools, a scheduled run and a thread that continued as new, each recorded with the patch's marker.
  const patchedHistories = histories.filter((h) =>
    (h.history.events ?? []).some((e) =>
      (e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads ?? []).some((payload) =>
        Buffer.from(payload.data ?? [])
          .toString('utf8')
          .includes(FEWER_DISPATCHES_PATCH),
      ),
    ),
  );
  const patchedEvents = patchedHistories.flatMap((h) => h.history.events ?? []);
  assert.ok(
    patchedEvents.some((e) => e.timerFiredEventAttributes),
    'a patched wait ended on its timer',
  );
  assert.ok(
    patchedEvents.some(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'wake',
    ),
    'a patched wait was woken',
  );
  assert.ok(patchedEvents.filter((e) => e.timerCanceledEventAttributes).length >= 2, 'patched waits ended early');
  // A scheduled run's own workflow takes no patch; the thread and turn it started do.
  assert.ok(
    patchedHistories.some((h) => h.file.startsWith('scheduled-run')),
    'a scheduled run recorded since the patch',
  );
  assert.ok(
    patchedEvents.some(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'answerQuestion',
    ),
    'a patched turn had a question answered (ask_human mixed with tools: stepper-fewer-dispatches)',
  );
  assert.ok(
    histories.some(
      (h) =>
        h.file.includes('fewer-dispatches') &&
        h.history.events?.some((e) => e.workflowExecutionContinuedAsNewEventAttributes),
    ),
    'a thread recorded since the patch continued as new',
  );
  // Approvals: the patch behind them, a decision Update, and a user tool run as an activity of its own.
  const patches = patchesOf(events);
  assert.ok(patches.includes(FEWER_DISPATCHES_PATCH), 'a recorded history has the fewer-dispatches patch');
  assert.ok(patches.includes(USER_TOOLS_PATCH), 'a recorded history has the user-tools and approvals patch');
  // Failed children fenced by their caller: a delegation and a fork task stopped by their own timeout_s, after the
  // patch (a fork task that failed before it is in the fork-join histories).
  assert.ok(patches.includes(FENCE_FAILED_TURNS_PATCH), 'a recorded turn fenced the children it saw fail');
  assert.ok(
    events.filter((e) => e.childWorkflowExecutionTimedOutEventAttributes).length >= 2,
    'recorded children ran past their own timeout_s',
  );
  // A message sent again under its id after continue-as-new, and a turn whose own code threw.
  assert.ok(patches.includes(DELIVERIES_ACROSS_RUNS_PATCH), 'a recorded thread answered a repeated message id');
  assert.ok(patches.includes(CODE_ERRORS_FAIL_TURN_PATCH), 'a recorded turn failed on a throw of its own code');
  /** Whether a recorded run continued as new with `text` in its successor's input. */
  const continuedWith = (text: string) =>
    events.some((e) =>
      e.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads?.some((payload) =>
        Buffer.from(payload.data ?? [])
          .toString('utf8')
          .includes(text),
      ),
    );
  assert.ok(
    continuedWith('"deliveries":[{"id":"hi-1","turn":1}'),
    'a recorded thread carried its message ids into its next run',
  );
  const decisionsIn = (name: string) =>
    histories
      .filter((h) => h.file.startsWith(`${name}.`))
      .flatMap((h) => h.history.events ?? [])
      .filter(
        (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'decideApproval',
      ).length;
  assert.equal(
    decisionsIn('approvals') + decisionsIn('approvals-after-acceptance'),
    4,
    'two recorded turns (before and after decisions were written after their acceptance) each had one call approved and one rejected',
  );
  // A turn whose budget was spent asked for more (an approval of its own), was approved, and went on.
  assert.ok(patches.includes(BUDGET_ASK_PATCH), 'a recorded turn asked for more budget');
  assert.equal(decisionsIn('budget-ask'), 1, 'the budget-ask turn had its request approved');
  // A typed agent's first answer did not match its schema: it was asked to fix it, and its turn ended with the object.
  assert.ok(patches.includes(TYPED_OUTPUT_PATCH), 'a recorded turn asked its model to fix a typed answer');
  const typedTurn = histories.find((h) => h.file.startsWith('typed-output.turn-'));
  const typedEvents = typedTurn?.history.events ?? [];
  assert.equal(
    typedEvents.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel').length,
    2,
    'the typed turn called its model twice: the answer that was refused, and the one that matched',
  );
  const typedResult = typedEvents.at(-1)?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0]?.data;
  assert.deepEqual(
    (JSON.parse(Buffer.from(typedResult ?? []).toString('utf8')) as { output?: unknown }).output,
    { total: 3 },
    'the typed turn ended with its object',
  );
  // Threads started with their message (`run`): the first turn's beginTurn opened the thread's record, which the
  // thread did not open in a local activity of its own, and handed its epoch on (to a turn workflow too).
  assert.ok(patches.includes(FIRST_TURN_OPENS_THREAD_PATCH), 'a recorded first turn opened its thread');
  for (const name of ['first-turn-opens-thread', 'first-turn-opens-thread-activity']) {
    const threadEvents = histories.find((h) => h.file === `${name}.thread.0.json`)?.history.events ?? [];
    assert.equal(localActivityResults(threadEvents, 'ensureThread').length, 0, `${name}: no ensureThread of its own`);
    const begun = localActivityResults(threadEvents, 'beginTurn') as BegunTurn[];
    assert.equal(typeof begun[0]?.epoch, 'number', `${name}: its first beginTurn handed back the thread's epoch`);
    assert.equal(begun[1]?.epoch, undefined, `${name}: a later turn opened nothing`);
  }
  // A thread whose starter opened its record: its first task runs nothing, and its first turn takes the epoch.
  const starterOpened = histories.find((h) => h.file === 'starter-opens-thread.thread.0.json')?.history.events ?? [];
  const startInput = starterOpened[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
  assert.equal(
    (JSON.parse(Buffer.from(startInput ?? []).toString('utf8')) as ThreadWorkflowInput).recordOpenedByStarter,
    true,
    'a recorded thread was started with its record opened by its starter',
  );
  assert.equal(localActivityResults(starterOpened, 'ensureThread').length, 0, 'that thread opened nothing itself');
  const starterBegun = localActivityResults(starterOpened, 'beginTurn') as BegunTurn[];
  assert.equal(typeof starterBegun[0]?.epoch, 'number', "its first beginTurn handed back the record's epoch");
  assert.equal(starterBegun[1]?.epoch, undefined, 'its second turn opened nothing');
  // Since the decisions-after-acceptance patch the decision is written by an activity, not a local one in the task.
  assert.ok(patches.includes(DECISIONS_AFTER_ACCEPTANCE_PATCH), 'a recorded turn wrote its decisions after acceptance');
  assert.ok(activities.has('closeApproval'), 'a recorded decision was written by an activity of its own');
  // Local steps: model calls and combined steps as local activity markers, one of them retried, around a delegation.
  assert.ok(patches.includes(LOCAL_STEPS_PATCH), 'a recorded turn ran its steps as local activities');
  const localTypes = events.flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_local_activity') return [];
    const data = marker.details?.data?.payloads?.[0]?.data;
    return [(JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { activity_type?: string }).activity_type];
  });
  assert.ok(localTypes.includes('callModel'), 'a recorded model call ran as a local activity');
  assert.ok(localTypes.includes('runToolsThenCallModel'), 'recorded tool calls ran with the next local model call');
  // Batched steps: consecutive steps (a model error retried among them) in one local activity, before and after a
  // delegation.
  assert.ok(patches.includes(BATCHED_STEPS_PATCH), 'a recorded turn ran its steps in batches');
  assert.ok(
    localTypes.filter((type) => type === 'runSteps').length >= 2,
    'recorded batches of steps ran as local activities, on both sides of a delegation',
  );
  assert.ok(patches.includes(FIRST_BATCH_IN_BEGIN_PATCH), 'a recorded turn ran its first batch in its beginTurn');
  /** The workflow types whose recorded `beginTurn` ran the turn's first batch. */
  const firstBatchTypes = histories
    .filter((h) =>
      localActivityResults(h.history.events ?? [], 'beginTurn').some(
        (begun) => (begun as BegunTurn).firstBatch !== undefined,
      ),
    )
    .map((h) => h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name);
  assert.ok(
    firstBatchTypes.includes('threadWorkflow') && firstBatchTypes.includes('agentTurnWorkflow'),
    `a recorded thread and a delegated turn ran their first batch in their beginTurn (${firstBatchTypes.join(', ')})`,
  );
  // Turns that read their limits as they begin and end with their answer, and the turns recorded before, which ran a
  // local activity for each.
  assert.ok(patches.includes(LIMITS_IN_TURN_PATCH), "a recorded thread left its turns' limits to them");
  assert.ok(patches.includes(FINISH_WITH_ANSWER_PATCH), 'a recorded turn ended with its answer');
  assert.ok(localTypes.includes('resolveLimits') && localTypes.includes('finishTurn'), 'and older ones did not');
  // A watcher: its workflow looked at the log, opened one wake-up and ran its turn as a child; the thread that ended
  // stopped it (older threads ended without that step).
  assert.ok(localTypes.includes('lookForWatchChanges'), 'a recorded watcher looked at the env log');
  assert.ok(localTypes.includes('openWatchWakeup'), 'a recorded watcher woke');
  assert.ok(patches.includes(STOP_WATCHERS_PATCH), 'a recorded thread stopped its watchers as it ended');
  assert.ok(localTypes.includes('stopWatchers'), "a recorded thread's end ran stopWatchers");
  const watcherRuns = histories.filter(
    (h) => h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name === 'envWatcherWorkflow',
  );
  assert.ok(
    watcherRuns.some((h) =>
      (h.history.events ?? []).some((e) => e.startChildWorkflowExecutionInitiatedEventAttributes),
    ),
    "a recorded watcher ran its wake-up's turn as a child workflow",
  );
  // Under the signal bound: a watcher run that continued as new during its wake-up's turn, left running (abandoned
  // by its parent), and a next run that waited for that turn.
  assert.ok(patches.includes(WATCH_SIGNALS_BOUND_PATCH), 'a recorded watcher bounded the signals of its runs');
  assert.ok(
    watcherRuns.some(
      (h) =>
        (h.history.events ?? []).some(
          (e) =>
            e.startChildWorkflowExecutionInitiatedEventAttributes?.parentClosePolicy ===
            temporal.api.enums.v1.ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON,
        ) && (h.history.events ?? []).some((e) => e.workflowExecutionContinuedAsNewEventAttributes),
    ),
    "a recorded watcher continued as new during its wake-up's turn, leaving it running",
  );
  assert.ok(activities.has('awaitWatchWakeup'), "a recorded watcher's next run waited for that turn");
  // MCP tools (`<server>__<tool>`): a model reply calling a read-only one and one with side effects, whose calls ran
  // with the next model call.
  const plannedMcpCalls = events
    .flatMap((e) => e.activityTaskCompletedEventAttributes?.result?.payloads ?? [])
    .flatMap((payload) => {
      const text = Buffer.from(payload.data ?? []).toString('utf8');
      // Results that are JSON objects (an activity returning nothing leaves an empty payload).
      const calls = text.startsWith('{') ? (JSON.parse(text) as { toolCalls?: unknown }).toolCalls : undefined;
      return Array.isArray(calls) ? (calls as { name: string; sideEffects?: boolean }[]) : [];
    })
    .filter((call) => call.name.startsWith('everything__'));
  assert.deepEqual(
    plannedMcpCalls.map((call) => [call.name, call.sideEffects === true]),
    [
      ['everything__echo', false],
      ['everything__toggle-simulated-logging', true],
    ],
    'a recorded turn called MCP tools, a read-only one and one with side effects',
  );
  assert.ok(
    events.some(
      (e) =>
        e.activityTaskScheduledEventAttributes?.activityType?.name === 'runToolsThenCallModel' &&
        Buffer.from(e.userMetadata?.summary?.data ?? [])
          .toString('utf8')
          .includes('everything__echo'),
    ),
    'the recorded MCP calls ran with the next model call',
  );
  // Turns begun in their thread's workflow: a thread whose history holds a turn's local model steps, one that handed
  // a turn on to its own workflow (begun, mid-way), and one that answered a message sent again from what it carried.
  assert.ok(patches.includes(TURNS_BEGIN_IN_THREAD_PATCH), 'a recorded thread began its turns itself');
  const threadRuns = histories.filter(
    (h) => h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name === 'threadWorkflow',
  );
  const threadLocalTypes = threadRuns.flatMap((h) =>
    (h.history.events ?? []).flatMap((e) => {
      const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
      return data ? [(JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type] : [];
    }),
  );
  assert.ok(patches.includes(THREAD_OPENS_IN_ITS_TASK_PATCH), 'a recorded thread opened itself in its first task');
  for (const type of ['ensureThread', 'beginTurn', 'callModel', 'runToolsThenCallModel', 'deliveredTurnResult']) {
    assert.ok(threadLocalTypes.includes(type), `a recorded thread ran ${type} as a local activity`);
  }
  const childInputs = threadRuns.flatMap((h) =>
    (h.history.events ?? []).flatMap(
      (e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.input?.payloads ?? [],
    ),
  );
  const begunChildren = childInputs
    .map((payload) => JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as AgentTurnInput)
    .filter((input) => input.begun !== undefined);
  assert.ok(
    begunChildren.some((input) => input.begun?.progress !== undefined),
    'a recorded thread handed a turn it had stepped on to its own workflow',
  );
  assert.ok(
    begunChildren.some((input) => input.begun?.progress === undefined),
    'a recorded thread began a turn with steps as activities and started its workflow',
  );
  assert.ok(
    continuedWith('"deliveries":[{"id":"quick-1","turn":1,"ended":{"answerOperationId"'),
    'a recorded thread carried how a turn that ended in it ended',
  );
  // Fork tasks with activity steps stepping in their fork's workflow: model calls and combined steps as activities of
  // the caller's turn, named after their task, one of them cancelled by the fork's deadline.
  assert.ok(patches.includes(FORK_ACTIVITY_STEPS_IN_FORK_PATCH), "a recorded fork's tasks stepped in it as activities");
  const taskStepTypes = events.flatMap((e) => {
    const type = e.activityTaskScheduledEventAttributes?.activityType?.name ?? '';
    return MODEL_STEP_TYPES.includes(type) && FORK_TASK_STEP.test(eventSummary(e) ?? '') ? [type] : [];
  });
  for (const type of MODEL_STEP_TYPES) {
    assert.ok(taskStepTypes.includes(type), `a fork task's ${type} was an activity of its fork's workflow`);
  }
  assert.ok(
    histories.some((h) =>
      (h.history.events ?? []).some((e) => {
        const scheduled = Number(e.activityTaskCancelRequestedEventAttributes?.scheduledEventId);
        const step = (h.history.events ?? []).find((s) => Number(s.eventId) === scheduled);
        return step !== undefined && FORK_TASK_STEP.test(eventSummary(step) ?? '');
      }),
    ),
    "a fork's deadline cancelled a task's step running as an activity of its workflow",
  );
});

/** The activities a turn's model steps run as. */
const MODEL_STEP_TYPES = ['callModel', 'runToolsThenCallModel'];
/** A step summary that names a fork task (`model: digger (fork 1 task 1) step 1`). */
const FORK_TASK_STEP = /\(fork \d+ task \d+\) /;

test('history size: every payload in the recorded histories stays far below Temporal limits (invariant 6)', () => {
  let largest = { size: 0, where: '' };
  const sizes: number[] = [];
  for (const { file, history } of histories) {
    for (const event of history.events ?? []) {
      // Every payload of the event: inputs, results, update arguments, search attributes, summaries.
      const payloadSizes = collectPayloadSizes(event);
      for (const size of payloadSizes) {
        sizes.push(size);
        if (size > largest.size) largest = { size, where: `${file} event ${String(event.eventId)}` };
      }
    }
  }
  assert.ok(sizes.length > 100, 'payloads were found');
  assert.ok(largest.size < 64 * 1024, `largest payload ${largest.size} bytes at ${largest.where}`);
  sizes.sort((a, b) => a - b);
  const p95 = sizes[Math.floor(sizes.length * 0.95)] ?? 0;
  assert.ok(p95 < 4 * 1024, `95th percentile payload ${p95} bytes`);
});

function collectPayloadSizes(value: unknown, sizes: number[] = []): number[] {
  if (value === null || typeof value !== 'object') return sizes;
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && 'metadata' in record) {
    sizes.push(record.data.length);
    return sizes;
  }
  for (const child of Object.values(record)) collectPayloadSizes(child, sizes);
  return sizes;
}

test('replay: every recorded history replays against the current workflow code', async () => {
  // Bundled as a worker bundles it (its webpack settings too), so what replays is the code that runs.
  const results = Worker.runReplayHistories(
    { workflowsPath: WORKFLOWS_PATH, bundlerOptions: WORKFLOW_BUNDLER_OPTIONS },
    histories,
  );
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of results) {
    replayed += 1;
    if (result.error) failures.push(`${result.workflowId}: ${String(result.error)}`);
  }
  assert.equal(replayed, histories.length);
  assert.deepEqual(failures, []);
});

test('replay: every recorded history replays against the traced workflow code too, and exports no span', async () => {
  // A deployment turns tracing on while its workflows run: their histories, recorded untraced, must replay under
  // Temporal's tracing interceptors, and a replayed task sends none of its spans again.
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const { sinks } = tracedWorkerParts({ tracerProvider });
  const workflowBundle = await bundleBatonWorkflows({ tracing: true });
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowBundle, sinks }, histories)) {
    replayed += 1;
    if (result.error) failures.push(`${result.workflowId}: ${String(result.error)}`);
  }
  assert.equal(replayed, histories.length);
  assert.deepEqual(failures, []);
  await tracerProvider.forceFlush();
  assert.deepEqual(
    exporter.getFinishedSpans().map((span) => span.name),
    [],
    'a replay exports no span',
  );
  await tracerProvider.shutdown();
});

test('replay: a reordered turn workflow is caught as a determinism violation', async () => {
  const turn = histories.find((h) => h.file === 'greeter-two-turns.turn-1.1.json');
  assert.ok(turn, 'the greeter turn history is recorded');
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('./fixtures/reordered-turn'),
    logger: new DefaultLogger('WARN'),
  });
  await assert.rejects(
    Worker.runReplayHistory({ workflowBundle }, turn.history, turn.workflowId),
    (error: unknown) => error instanceof DeterminismViolationError,
  );
});
