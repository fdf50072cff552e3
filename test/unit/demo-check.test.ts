import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TreeNode } from '../../client';
import { findDemoProblems, formatDemoProblem, summarizeArcTask } from '../../dev/demo-check';
import type { Queryable } from '../../db/threads';
import type { TranscriptMessage } from '../../db/transcripts';

function node(threadId: string, agent: string, status: string, children: TreeNode[] = []): TreeNode {
  return {
    threadId,
    parentThreadId: null,
    agent,
    caller: null,
    status,
    lastError: status === 'failed' ? 'Model.ScriptExhausted: no step 3' : null,
    createdAt: new Date(0),
    finishedAt: null,
    modelCalls: 1,
    totalTokens: 1,
    providers: [{ provider: 'default', modelCalls: 1, promptTokens: 1, completionTokens: 0, totalTokens: 1 }],
    children,
  };
}

function message(threadId: string, seq: number, fields: Partial<TranscriptMessage>): TranscriptMessage {
  return {
    threadId,
    seq,
    role: 'assistant',
    agent: 'solver',
    content: null,
    toolCalls: null,
    toolCallId: null,
    usage: null,
    provider: 'default',
    model: 'baton-scripted',
    operationId: `op-${seq}`,
    createdAt: new Date(0),
    ...fields,
  };
}

/** Answers listMessages' query from a fixed transcript per thread. */
function fakeDb(transcripts: Record<string, TranscriptMessage[]>): Queryable {
  return {
    query: (_text: string, values: unknown[]) => Promise.resolve({ rows: transcripts[String(values[0])] ?? [] }),
  } as unknown as Queryable;
}

test('demo check: a tool call returning Error: is named with its thread and arguments; a good run has none', async () => {
  const tree = node('r', 'coordinator', 'completed', [node('r/solver-1', 'solver', 'completed')]);
  const good = fakeDb({
    'r/solver-1': [
      message('r/solver-1', 1, {
        toolCalls: [{ id: 'c1', name: 'load_arc_task', arguments: '{"task_id":"007bbfb7"}' }],
      }),
      message('r/solver-1', 2, { role: 'tool', toolCallId: 'c1', content: '{"task_id":"007bbfb7"}' }),
    ],
  });
  assert.deepEqual(await findDemoProblems(good, tree), []);

  const bad = fakeDb({
    'r/solver-1': [
      message('r/solver-1', 1, {
        toolCalls: [{ id: 'c1', name: 'load_arc_task', arguments: '{"task_id":"007bbfb7"}' }],
      }),
      message('r/solver-1', 2, { role: 'tool', toolCallId: 'c1', content: 'Error: The ARC data directory is missing' }),
    ],
  });
  const problems = await findDemoProblems(bad, tree);
  assert.deepEqual(problems.map(formatDemoProblem), [
    'thread r/solver-1 (solver): load_arc_task({"task_id":"007bbfb7"}) returned: Error: The ARC data directory is missing',
  ]);
  assert.equal(problems[0]?.kind, 'tool');
});

test('demo check: a failed turn anywhere in the tree is a problem, with its last error', async () => {
  const tree = node('r', 'coordinator', 'completed', [node('r/solver-1', 'solver', 'failed')]);
  const problems = await findDemoProblems(fakeDb({}), tree);
  assert.deepEqual(problems.map(formatDemoProblem), [
    'thread r/solver-1 (solver): turn failed: Model.ScriptExhausted: no step 3',
  ]);
});

test('demo check: the ARC summary is computed from the stored value', () => {
  const grid = (rows: number, columns: number) => Array.from({ length: rows }, () => Array<number>(columns).fill(0));
  const task = {
    task_id: '007bbfb7',
    train: Array.from({ length: 5 }, () => ({ input: grid(3, 3), output: grid(9, 9) })),
    test: [{ input: grid(3, 3) }],
  };
  assert.equal(summarizeArcTask(task), 'task 007bbfb7: 5 training pairs (3x3 → 9x9), 1 test input (3x3)');
  const mixed = {
    ...task,
    train: [
      { input: grid(2, 4), output: grid(4, 2) },
      { input: grid(3, 3), output: grid(3, 3) },
    ],
  };
  assert.equal(
    summarizeArcTask(mixed),
    'task 007bbfb7: 2 training pairs (2x4 or 3x3 → 4x2 or 3x3), 1 test input (3x3)',
  );
  assert.equal(summarizeArcTask('not a task'), undefined);
  assert.equal(summarizeArcTask({ train: 'x', test: [] }), undefined);
});
