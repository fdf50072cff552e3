/**
 * `runSteps` (`steps: batched`) with its model call and tool runs stubbed: it goes on while the workflow would carry
 * a reply's calls into the next model call, gives each step the operation ids the workflow would, and stops at an
 * answer, at a call the workflow carries out, at the turn's `max_steps` and at its time budget; and `beginTurn` asked
 * for a turn's first batch. The batch against a real stack is in test/integration/batched-steps.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BATCH_BUDGET_MS, createTurnActivities, type TurnActivityParts } from '../../activities/turns';
import { operationId } from '../../common/ids';
import { modelCallOperationId } from '../../common/turn-step-calls';
import type {
  CallModelInput,
  CallModelResult,
  ExecuteToolCallInput,
  PlannedActivityToolCall,
  PlannedToolCall,
} from '../../common/types';
import type { TranscriptMessage } from '../../db/transcripts';
import type { StoredReply } from '../../activities/model';
import type { RanToolCall } from '../../activities/tool-calls';

const OPERATION_BASE = 'run-1:turn:1';
const scope = { rootThreadId: 'root', threadId: 'root', agent: 'batcher', epoch: 0 };
const think = (id: string): PlannedActivityToolCall => ({ id, name: 'think', kind: 'tool' });

/** A batch whose model replies come from `replies` in turn (each step's model call and tool runs recorded). */
function batcher(
  replies: PlannedToolCall[][],
  onModelCall: () => void = () => undefined,
  options: { reusedAt?: number } = {},
) {
  const modelCalls: CallModelInput[] = [];
  const toolRuns: ExecuteToolCallInput[] = [];
  /** For each tool run, the seq of the stored reply it was handed (`undefined`: none, so it reads the reply back). */
  const handedReplies: (number | undefined)[] = [];
  /** For each model call, the operation ids of the results it stored beside its read (in the order stored). */
  const storedFirst: string[][] = [];
  /** Every result written, by operation id, in the order the writes ended. */
  const stored: string[] = [];
  const parts = {
    callModelStoring: async (
      input: CallModelInput,
      storeFirst?: () => Promise<readonly TranscriptMessage[]>,
    ): Promise<{ result: CallModelResult; stored?: StoredReply }> => {
      modelCalls.push(input);
      storedFirst.push(((await storeFirst?.()) ?? []).map((message) => message.operationId));
      onModelCall();
      const toolCalls = replies[modelCalls.length - 1] ?? [];
      const seq = modelCalls.length * 10;
      // The model call at `reusedAt` found its reply stored (a retry's): it hands back no reply of its own.
      const reused = options.reusedAt === modelCalls.length - 1;
      const result = {
        seq,
        content: toolCalls.length === 0 ? 'Done.' : null,
        toolCalls,
        usage: { promptTokens: 10, completionTokens: 1, totalTokens: 11 },
        reused,
        ...(modelCalls.length === 1 ? { mcpToolList: 'list-1' } : {}),
      };
      const requests = toolCalls.map((call) => ({ id: call.id, name: call.name, arguments: '{}' }));
      return Promise.resolve(
        reused ? { result } : { result, stored: { seq, toolCalls: requests, worldVariables: undefined } },
      );
    },
    executeToolCall: (input: ExecuteToolCallInput) => {
      toolRuns.push(input);
      handedReplies.push(undefined);
      return Promise.resolve({ seq: 0, ok: true });
    },
    runToolCallForNextStep: async (input: ExecuteToolCallInput, reply: StoredReply): Promise<RanToolCall> => {
      toolRuns.push(input);
      handedReplies.push(reply.seq);
      // A call with the id `fails` throws once the others have finished.
      if (input.toolCallId === 'fails') {
        await new Promise((resolve) => setTimeout(resolve, 5));
        throw new Error('the tool failed');
      }
      // The result's write starts as the call finishes, and takes longer than the failing call.
      const write = new Promise<TranscriptMessage>((resolve) =>
        setTimeout(() => {
          stored.push(input.operationId);
          resolve({ operationId: input.operationId } as TranscriptMessage);
        }, 10),
      );
      return { stored: write };
    },
  } as unknown as TurnActivityParts;
  const { runSteps } = createTurnActivities(parts);
  const run = (maxSteps = 25) =>
    runSteps({
      toolCalls: [],
      toolNames: [],
      model: {
        scope,
        world: 'default',
        agentVersion: 'v1',
        operationId: modelCallOperationId({ operationBase: OPERATION_BASE }, 0),
        step: 0,
        finishTurnOnAnswer: true,
      },
      operationBase: OPERATION_BASE,
      maxSteps,
    });
  return { run, modelCalls, toolRuns, handedReplies, storedFirst, stored, parts };
}

test('runSteps: goes on through carried tool calls to the answer, each step with the ids the workflow gives it', async () => {
  const { run, modelCalls, toolRuns } = batcher([[think('a')], [think('b'), think('c')], []]);
  const result = await run();
  assert.equal(result.step, 2);
  assert.equal(result.content, 'Done.');
  assert.deepEqual(
    result.steps.map(({ step, ranTools }) => ({ step, ranTools })),
    [
      { step: 0, ranTools: [] },
      { step: 1, ranTools: ['think'] },
      { step: 2, ranTools: ['think', 'think'] },
    ],
  );
  assert.deepEqual(
    modelCalls.map((call) => [call.step, call.operationId, call.mcpToolList, call.finishTurnOnAnswer]),
    [
      [0, `${OPERATION_BASE}:model:0`, undefined, true],
      [1, `${OPERATION_BASE}:model:1`, 'list-1', true],
      [2, `${OPERATION_BASE}:model:2`, 'list-1', true],
    ],
    'later calls keep the MCP tool list the first one offered',
  );
  assert.deepEqual(
    toolRuns.map((call) => [call.operationId, call.messageSeq, call.toolCallId]),
    [
      [operationId(OPERATION_BASE, 'tool', 0, 0), 10, 'a'],
      [operationId(OPERATION_BASE, 'tool', 1, 0), 20, 'b'],
      [operationId(OPERATION_BASE, 'tool', 1, 1), 20, 'c'],
    ],
  );
  assert.deepEqual(result.usage, { promptTokens: 30, completionTokens: 3, totalTokens: 33 }, 'usage of every step');
});

test('runSteps: a step runs the calls of the reply the batch stored without reading them back; a reply it found stored, they read', async () => {
  const fresh = batcher([[think('a')], [think('b'), think('c')], []]);
  await fresh.run();
  assert.deepEqual(fresh.handedReplies, [10, 20, 20], 'each call handed the reply its model call stored');
  // The second model call found its reply stored (a retried batch): its calls get no reply handed, so they read theirs.
  const retried = batcher([[think('a')], [think('b'), think('c')], []], undefined, { reusedAt: 1 });
  await retried.run();
  assert.deepEqual(retried.handedReplies, [10, undefined, undefined]);
});

test('runSteps: the next model call awaits the writes of the results of calls run from the reply the batch stored', async () => {
  const fresh = batcher([[think('a')], [think('b'), think('c')], []]);
  await fresh.run();
  const ids = fresh.toolRuns.map((run) => run.operationId);
  assert.equal(ids.length, 3);
  // The first model call awaits no write; each later one awaits those of its step's results.
  assert.deepEqual(fresh.storedFirst, [[], [ids[0]], [ids[1], ids[2]]]);
  // A reply found stored: its calls store their results themselves (they were stored before, or are now).
  const retried = batcher([[think('a')], [think('b'), think('c')], []], undefined, { reusedAt: 1 });
  await retried.run();
  assert.deepEqual(
    retried.storedFirst.map((first) => first.length),
    [0, 1, 0],
  );
});

test('runSteps: a call that fails fails the batch, the results of the calls that finished stored all the same', async () => {
  const failing = batcher([[think('a')], [think('b'), think('fails'), think('c')], []]);
  await assert.rejects(failing.run(), /the tool failed/);
  const ids = failing.toolRuns.map((run) => run.operationId);
  // Step 1's result went with the second model call; step 2's finished calls were stored, with no model call after.
  assert.equal(failing.modelCalls.length, 2);
  assert.deepEqual(failing.stored, [ids[0], ids[1], ids[3]]);
});

test('runSteps: stops at a call the workflow carries out, and at max_steps, handing that reply back', async () => {
  const delegation: PlannedToolCall = {
    id: 'd',
    name: 'helper',
    kind: 'agent',
    message: 'Help.',
    contextKeys: [],
    thread: 'new',
  };
  const delegating = batcher([[think('a')], [delegation], []]);
  const stopped = await delegating.run();
  assert.equal(stopped.step, 1);
  assert.deepEqual(stopped.toolCalls, [delegation]);
  assert.equal(delegating.toolRuns.length, 1, 'the delegation was not run here');
  const approval = batcher([[{ ...think('a'), approval: {} }], []]);
  assert.equal((await approval.run()).step, 0, 'a call waiting for approval is the workflow’s');
  const capped = batcher([[think('a')], [think('b')], [think('c')], []]);
  const last = await capped.run(2);
  assert.equal(last.step, 1, 'no step at or past max_steps');
  assert.deepEqual(last.toolCalls, [think('b')]);
  assert.equal(capped.modelCalls.length, 2);
});

test('runSteps: starts no further step once it has run for its budget', async (t) => {
  t.mock.timers.enable({ apis: ['Date'] });
  // Every model call takes 45 s: the steps start at 0, 45 and 90 s, and the one after 135 s is left to the next batch.
  const { run, modelCalls } = batcher(
    Array.from({ length: 10 }, (_, i) => [think(`t${i}`)]),
    () => t.mock.timers.tick(45_000),
  );
  assert.equal(BATCH_BUDGET_MS, 120_000, 'the budget this test is laid out for');
  const result = await run();
  assert.equal(modelCalls.length, 3);
  assert.equal(result.step, 2);
  assert.deepEqual(result.toolCalls, [think('t2')], 'the reply whose calls the next batch runs first');
});

/** `beginTurn` of an agent whose steps are `mode`, over `batcher`'s model (its Postgres parts stubbed). */
function beginner(mode: 'batched' | 'local', replies: PlannedToolCall[][], onModelCall?: () => void) {
  const batch = batcher(replies, onModelCall);
  const recorded: string[] = [];
  const parts = {
    ...batch.parts,
    resolveAgent: () => Promise.resolve({ name: 'batcher', version: 'v1', maxSteps: 25 }),
    stepModeOf: () => Promise.resolve(mode),
    registerWatchersOf: () => Promise.resolve(),
    finishTurn: () => Promise.resolve(),
    recordMessage: (input: { operationId: string }) => {
      recorded.push(input.operationId);
      return Promise.resolve({ seq: 1 });
    },
  } as unknown as TurnActivityParts;
  const { beginTurn } = createTurnActivities(parts);
  const begin = (firstBatch = true) =>
    beginTurn({
      scope,
      operationId: operationId(OPERATION_BASE, 'in'),
      message: { role: 'user', content: 'Go.' },
      ...(firstBatch ? { firstBatch: { operationBase: OPERATION_BASE } } : {}),
    });
  return { begin, recorded, modelCalls: batch.modelCalls };
}

test('beginTurn: asked for a first batch, a batched turn begins, then runs its steps as runSteps from step 0 would', async () => {
  const { begin, recorded, modelCalls } = beginner('batched', [[think('a')], []]);
  const begun = await begin();
  assert.deepEqual(recorded, [operationId(OPERATION_BASE, 'in')], 'the message recorded first');
  assert.equal(begun.steps, 'batched');
  assert.equal(begun.firstBatch?.step, 1);
  assert.equal(begun.firstBatch?.content, 'Done.');
  assert.deepEqual(
    modelCalls.map((call) => [call.step, call.operationId, call.finishTurnOnAnswer]),
    [
      [0, modelCallOperationId({ operationBase: OPERATION_BASE }, 0), true],
      [1, modelCallOperationId({ operationBase: OPERATION_BASE }, 1), true],
    ],
  );
});

test('beginTurn: no first batch unless asked for and the steps are batched', async () => {
  const local = beginner('local', [[]]);
  assert.equal((await local.begin()).firstBatch, undefined);
  assert.equal(local.modelCalls.length, 0, 'a local-step turn calls no model in its beginning');
  const unasked = beginner('batched', [[]]);
  assert.equal((await unasked.begin(false)).firstBatch, undefined);
  assert.equal(unasked.modelCalls.length, 0);
});

test('beginTurn: a first batch that fails leaves the turn begun, without it, for the turn’s own runSteps', async () => {
  const { begin, modelCalls } = beginner('batched', [[think('a')], []], () => {
    if (modelCalls.length === 2) throw new Error('model endpoint answered 503');
  });
  const begun = await begin();
  assert.equal(begun.steps, 'batched');
  assert.equal(begun.firstBatch, undefined);
  assert.equal(modelCalls.length, 2, 'the batch stopped at the step that failed');
});

test('beginTurn: asked to open the thread, it opens it with the message in one call, then registers watchers, and goes on under its epoch', async () => {
  const batch = batcher([[think('a')], []]);
  const calls: string[] = [];
  const parts = {
    ...batch.parts,
    resolveAgent: () => Promise.resolve({ name: 'batcher', version: 'v1', maxSteps: 25 }),
    stepModeOf: () => Promise.resolve('batched'),
    registerWatchersOf: () => {
      calls.push('watchers');
      return Promise.resolve();
    },
    openThreadWithMessage: async (thread: { threadId: string }, input: { operationId: string }) => {
      // A slow open: the watchers still wait for the row.
      await new Promise((resolve) => setTimeout(resolve, 20));
      calls.push(`open ${thread.threadId} with ${input.operationId}`);
      return { epoch: 4 };
    },
    finishTurn: (input: { status: string }) => {
      calls.push(`mark ${input.status}`);
      return Promise.resolve();
    },
    recordMessage: () => {
      calls.push('record');
      return Promise.resolve({ seq: 1 });
    },
  } as unknown as TurnActivityParts;
  const { beginTurn } = createTurnActivities(parts);
  const begun = await beginTurn({
    scope,
    operationId: operationId(OPERATION_BASE, 'in'),
    message: { role: 'user', content: 'Go.' },
    firstBatch: { operationBase: OPERATION_BASE },
    openThread: { threadId: 'root', rootThreadId: 'root', agent: 'batcher', world: 'default' },
  });
  assert.deepEqual(
    calls,
    [`open root with ${operationId(OPERATION_BASE, 'in')}`, 'watchers'],
    'no separate mark or message: the opening call marks the thread running and records the message',
  );
  assert.equal(begun.epoch, 4, 'the epoch the workflow goes on with');
  assert.deepEqual(
    batch.modelCalls.map((call) => call.scope.epoch),
    [4, 4],
    'the first batch writes under the opened epoch',
  );
  const { begin } = beginner('batched', [[]]);
  assert.equal((await begin()).epoch, undefined, 'a turn that opens nothing hands back no epoch');
});

test('beginTurn: the world is read once, for the step mode and the limits both, and by the opening call when it opens the thread', async () => {
  /** A root turn's beginning of an agent that sets no `steps`; what it read and opened. */
  const begin = async (openThread: boolean) => {
    const reads: string[] = [];
    const batch = batcher([[]]);
    const parts = {
      ...batch.parts,
      resolveAgent: () => Promise.resolve({ name: 'batcher', version: 'v1', maxSteps: 25 }),
      // As the worker's: the agent sets no steps, so the world's are asked for.
      stepModeOf: async (_agent: unknown, worldVariables: () => Promise<Record<string, string>>) =>
        (await worldVariables()).BATON_STEPS,
      loadWorldVariables: (world: string) => {
        reads.push(`read ${world}`);
        return Promise.resolve({ BATON_STEPS: 'batched', BATON_MAX_DELEGATION_DEPTH: '2' });
      },
      openThreadWithMessage: (_thread: unknown, _input: unknown, world: string) => {
        reads.push(`open, reading ${world}`);
        return Promise.resolve({
          epoch: 1,
          worldVariables: { BATON_STEPS: 'batched', BATON_MAX_DELEGATION_DEPTH: '2' },
        });
      },
      registerWatchersOf: () => Promise.resolve(),
      finishTurn: () => Promise.resolve(),
      recordMessage: () => Promise.resolve({ seq: 1 }),
    } as unknown as TurnActivityParts;
    const begun = await createTurnActivities(parts).beginTurn({
      scope,
      operationId: operationId(OPERATION_BASE, 'in'),
      message: { role: 'user', content: 'Go.' },
      world: 'w1',
      limits: { overrides: { maxForkTasks: 3 } },
      ...(openThread ? { openThread: { threadId: 'root', rootThreadId: 'root', agent: 'batcher', world: 'w1' } } : {}),
    });
    return { reads, begun };
  };
  for (const openThread of [false, true]) {
    const { reads, begun } = await begin(openThread);
    assert.deepEqual(reads, [openThread ? 'open, reading w1' : 'read w1'], 'one read of the turn’s world');
    assert.equal(begun.steps, 'batched', 'the world’s step mode');
    assert.equal(begun.limits?.maxDepth, 2, 'the world’s limit');
    assert.equal(begun.limits?.maxForkTasks, 3, 'the conversation’s own over the world’s');
  }
});
