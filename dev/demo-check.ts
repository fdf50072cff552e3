/**
 * What `baton demo` checks before it calls a run good, and the figures it prints from stored data. The scripted
 * model's replies do not depend on what the tools returned, so a run can read well while a tool failed underneath:
 * the demo looks at what was stored instead of trusting the story.
 */
import { arcCandidateSchema, checkArcCandidate, readArcTaskFile } from '../activities/tools/arc';
import { isToolError } from '../activities/tools/types';
import type { EnvEntry, EnvListFilters, EnvManifestEntry } from '../db/env-data';
import type { Queryable } from '../db/threads';
import { listMessages } from '../db/transcripts';
import type { TreeNode } from '../client';

/** Thread statuses of a turn that did not end well (`running` and `completed` are fine). */
const FAILED_STATUSES = new Set(['failed', 'max_steps', 'reclaimed', 'timeout', 'cancelled']);
const ARGS_PREVIEW_CHARS = 120;
const RESULT_PREVIEW_CHARS = 300;

/** One thing that went wrong in the run, naming the thread and, for a tool call, the call. */
export interface DemoProblem {
  /**
   * A turn that did not complete, a tool call whose result is an error, or (`baton demo --reactive`) a candidate
   * rule whose verdict is missing or wrong.
   */
  kind: 'turn' | 'tool' | 'verdict';
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

/** Where the reactive ARC team (`baton demo --reactive`) stores candidate rules and the verifier its verdicts. */
export const CANDIDATES_PREFIX = 'arc/candidates/';
export const VERDICTS_PREFIX = 'arc/verdicts/';

/** What the demo reads a root's env data through (a `ThreadHandle`). */
export interface EnvReader {
  envData(filters?: EnvListFilters): Promise<EnvManifestEntry[]>;
  envGet(key: string): Promise<EnvEntry | undefined>;
}

/** One candidate rule of the reactive demo, with the verdict the verifier stored and the one the demo computed. */
export interface CandidateReview {
  /** `<name>` of `arc/candidates/<name>`. */
  name: string;
  /** The `verdict` field of `arc/verdicts/<name>`, or `undefined` when no verdict (or none with that field) is stored. */
  stored?: string;
  /** What the stored verdict says, in a line: `5 of 5 training pairs match` or the first mismatch. */
  storedSummary?: string;
  /** The verdict the demo's own check gives, or why the candidate cannot be checked. */
  expected: 'holds' | 'fails' | { error: string };
}

/**
 * Checks every candidate under `arc/candidates/` against the verdict under `arc/verdicts/<same name>`: the verdict
 * must be stored and say what the demo's own check of the candidate says (the same comparison as
 * check_arc_candidate, with the task read from `arcDataDir`), so a verdict the model wrote without the tool, or
 * wrongly, is caught. `expect` names candidates that must exist with the given verdict (the scripted run's).
 */
export async function reviewVerdicts(
  env: EnvReader,
  options: { arcDataDir: string; threadId: string; expect?: Readonly<Record<string, 'holds' | 'fails'>> },
): Promise<{ reviews: CandidateReview[]; problems: DemoProblem[] }> {
  const reviews: CandidateReview[] = [];
  const problems: DemoProblem[] = [];
  const problem = (what: string) =>
    problems.push({ kind: 'verdict', threadId: options.threadId, agent: 'verifier', what });
  for (const { key } of await env.envData({ prefix: CANDIDATES_PREFIX })) {
    const name = key.slice(CANDIDATES_PREFIX.length);
    const expected = await expectedVerdict(key, (await env.envGet(key))?.value, options.arcDataDir);
    const verdict = (await env.envGet(`${VERDICTS_PREFIX}${name}`))?.value as
      { verdict?: unknown; pairs?: unknown; matched?: unknown; mismatched?: unknown } | undefined;
    const stored = typeof verdict?.verdict === 'string' ? verdict.verdict : undefined;
    const review: CandidateReview = { name, expected, ...(stored === undefined ? {} : { stored }) };
    if (verdict !== undefined) review.storedSummary = summarizeVerdict(verdict);
    reviews.push(review);
    if (stored === undefined) {
      problem(`no verdict for ${key}: nothing with a 'verdict' field is stored under ${VERDICTS_PREFIX}${name}`);
    } else if (typeof expected !== 'string') {
      problem(`${key} cannot be checked (${expected.error}), yet ${VERDICTS_PREFIX}${name} says '${stored}'`);
    } else if (stored !== expected) {
      problem(`${VERDICTS_PREFIX}${name} says '${stored}', but checked against the training pairs ${key} ${expected}`);
    }
  }
  if (reviews.length === 0) problem(`no candidate rule was stored under ${CANDIDATES_PREFIX}`);
  for (const [name, verdict] of Object.entries(options.expect ?? {})) {
    const review = reviews.find((candidate) => candidate.name === name);
    if (review === undefined) problem(`the candidate ${CANDIDATES_PREFIX}${name} was not stored`);
    else if (review.expected !== verdict) {
      problem(`${CANDIDATES_PREFIX}${name} should ${verdict === 'holds' ? 'hold' : 'fail'}, and it does not`);
    }
  }
  return { reviews, problems };
}

/** `fractal: holds (5 of 5 training pairs match)`, for the demo's output. */
export function formatCandidateReview(review: CandidateReview): string {
  const expected =
    typeof review.expected === 'string' ? review.expected : `cannot be checked: ${review.expected.error}`;
  if (review.stored === undefined) return `${review.name}: no verdict stored (the demo's check: ${expected})`;
  const agrees = review.stored === review.expected ? '' : ` — but the demo's check says: ${expected}`;
  return `${review.name}: ${review.stored}${review.storedSummary ? ` (${review.storedSummary})` : ''}${agrees}`;
}

async function expectedVerdict(key: string, value: unknown, arcDataDir: string): Promise<CandidateReview['expected']> {
  const candidate = arcCandidateSchema.safeParse(value);
  if (!candidate.success) return { error: 'not a { task_id, rule, train_outputs } candidate' };
  try {
    const task = await readArcTaskFile(arcDataDir, candidate.data.task_id);
    return checkArcCandidate(task, candidate.data, key).verdict;
  } catch (error) {
    if (isToolError(error)) return { error: error.message };
    throw error;
  }
}

function summarizeVerdict(verdict: { pairs?: unknown; matched?: unknown; mismatched?: unknown }): string | undefined {
  if (typeof verdict.pairs !== 'number' || !Array.isArray(verdict.matched)) return undefined;
  const summary = `${verdict.matched.length} of ${verdict.pairs} training pairs match`;
  const first = Array.isArray(verdict.mismatched)
    ? (verdict.mismatched[0] as { index?: unknown; reason?: unknown } | undefined)
    : undefined;
  return first !== undefined && typeof first.reason === 'string'
    ? `${summary}; pair ${String(first.index)}: ${first.reason}`
    : summary;
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
