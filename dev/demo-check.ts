/**
 * What `baton demo` checks before it calls a run good, and the figures it prints from stored data. The scripted
 * model's replies do not depend on what the tools returned, so a run can read well while a tool failed underneath:
 * the demo looks at what was stored instead of trusting the story.
 */
import type { Queryable } from '../db/threads';
import { listMessages } from '../db/transcripts';
import type { TreeNode } from '../client';

/** Thread statuses of a turn that did not end well (`running` and `completed` are fine). */
const FAILED_STATUSES = new Set(['failed', 'max_steps', 'reclaimed', 'timeout', 'cancelled']);
const ARGS_PREVIEW_CHARS = 120;
const RESULT_PREVIEW_CHARS = 300;

/** One thing that went wrong in the run, naming the thread and, for a tool call, the call. */
export interface DemoProblem {
  /** A turn that did not complete, or a tool call whose result is an error. */
  kind: 'turn' | 'tool';
  threadId: string;
  agent: string;
  /** e.g. `turn failed: …` or `load_arc_task({"task_id":"007bbfb7"}) returned: Error: …` */
  what: string;
}

/**
 * Every failed turn in the tree and every tool call of the run whose result is an `Error:` (the example script makes
 * no call that is meant to fail, so each one is unexpected).
 */
export async function findDemoProblems(db: Queryable, tree: TreeNode): Promise<DemoProblem[]> {
  const problems: DemoProblem[] = [];
  for (const node of flatten(tree)) {
    if (FAILED_STATUSES.has(node.status)) {
      problems.push({
        kind: 'turn',
        threadId: node.threadId,
        agent: node.agent,
        what: `turn ${node.status}${node.lastError ? `: ${oneLine(node.lastError, RESULT_PREVIEW_CHARS)}` : ''}`,
      });
    }
    const messages = await listMessages(db, node.threadId);
    const calls = new Map(
      messages.flatMap((message) => message.toolCalls ?? []).map((call) => [call.id, call] as const),
    );
    for (const message of messages) {
      if (message.role !== 'tool' || !message.content?.startsWith('Error:')) continue;
      const call = message.toolCallId ? calls.get(message.toolCallId) : undefined;
      const name = call ? `${call.name}(${oneLine(call.arguments, ARGS_PREVIEW_CHARS)})` : 'a tool call';
      problems.push({
        kind: 'tool',
        threadId: node.threadId,
        agent: node.agent,
        what: `${name} returned: ${oneLine(message.content, RESULT_PREVIEW_CHARS)}`,
      });
    }
  }
  return problems;
}

/** `thread arc-1/solver-1 (solver): load_arc_task({…}) returned: Error: …` */
export function formatDemoProblem(problem: DemoProblem): string {
  return `thread ${problem.threadId} (${problem.agent}): ${problem.what}`;
}

/**
 * A line about the stored ARC task computed from its value, e.g. `task 007bbfb7: 5 training pairs (3x3 → 9x9),
 * 1 test input (3x3)`; `undefined` when the value is not an ARC task.
 */
export function summarizeArcTask(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const task = value as { task_id?: unknown; train?: unknown; test?: unknown };
  if (!Array.isArray(task.train) || !Array.isArray(task.test)) return undefined;
  const pairs = task.train as { input?: unknown; output?: unknown }[];
  const tests = task.test as { input?: unknown }[];
  const sizes = (grids: unknown[]) => [...new Set(grids.map(gridSize))].join(' or ');
  const id = typeof task.task_id === 'string' ? `task ${task.task_id}` : 'an ARC task';
  return (
    `${id}: ${pairs.length} training pair${pairs.length === 1 ? '' : 's'} ` +
    `(${sizes(pairs.map((pair) => pair.input))} → ${sizes(pairs.map((pair) => pair.output))}), ` +
    `${tests.length} test input${tests.length === 1 ? '' : 's'} (${sizes(tests.map((test) => test.input))})`
  );
}

/** `9x9` (rows x columns), or `?` for something that is not a grid. */
function gridSize(grid: unknown): string {
  if (!Array.isArray(grid) || grid.length === 0 || !Array.isArray(grid[0])) return '?';
  return `${grid.length}x${(grid[0] as unknown[]).length}`;
}

function flatten(node: TreeNode): TreeNode[] {
  return [node, ...node.children.flatMap(flatten)];
}

function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
