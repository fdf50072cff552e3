/**
 * `load_arc_task`: hands an agent one ARC task (demonstration pairs and test inputs) from a directory of ARC JSON
 * files, one `<task_id>.json` per task. `check_arc_candidate`: checks a candidate rule stored in env data (its
 * predicted output for every training input) against the real training outputs of the same task files.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { envKeyArgument } from './env-data';
import { defineTool, ToolError, type ToolDefinition } from './types';

export interface ArcToolOptions {
  /** Directory of ARC task files named `<task_id>.json` (e.g. the ARC-AGI `data/training` folder). */
  dataDir: string;
}

/** Eight lowercase hex digits; the pattern also keeps the id from naming any other file. */
export const ARC_TASK_ID_PATTERN = /^[0-9a-f]{8}$/;

const arcGridSchema = z
  .array(z.array(z.number().int().min(0).max(9)).min(1).max(30))
  .min(1)
  .max(30)
  .refine((rows) => rows.every((row) => row.length === rows[0]?.length), 'grid rows must all have the same length');

const arcTaskFileSchema = z.object({
  train: z.array(z.object({ input: arcGridSchema, output: arcGridSchema })).min(1),
  // Hidden evaluation sets leave test outputs out.
  test: z.array(z.object({ input: arcGridSchema, output: arcGridSchema.optional() })).min(1),
});

/** A cell is a colour 0-9; a grid is 1-30 rows of 1-30 cells. */
export type ArcGrid = z.infer<typeof arcGridSchema>;
export type ArcTask = z.infer<typeof arcTaskFileSchema> & { task_id: string };

const loadArcTaskParameters = z.strictObject({
  task_id: z
    .string()
    .regex(ARC_TASK_ID_PATTERN, 'must be an ARC task id: 8 lowercase hex digits, e.g. "007bbfb7"')
    .describe('The ARC task id: 8 lowercase hex digits, e.g. "007bbfb7".'),
});

/**
 * Builds `load_arc_task`, which returns `{ task_id, train, test }` for one task of `options.dataDir`.
 * @throws ToolError (from `run`) for an unknown task, a missing data directory or a malformed task file.
 */
export function createArcTool(options: ArcToolOptions): ToolDefinition {
  const dataDir = path.resolve(options.dataDir);

  return defineTool({
    name: 'load_arc_task',
    description:
      'Load an ARC (Abstraction and Reasoning Corpus) task by id. Returns { task_id, train, test }: train is a ' +
      'list of { input, output } demonstration pairs, test a list of { input } grids to solve; grids ' +
      'are rows of integers 0-9 (colours).',
    parameters: loadArcTaskParameters,
    handledBy: 'activity',
    async run({ task_id }, context) {
      const parsed = await readArcTaskFile(dataDir, task_id, context.signal);
      // The test outputs are the answers: an agent solving the task must not see them.
      const task: ArcTask = { task_id, train: parsed.train, test: parsed.test.map(({ input }) => ({ input })) };
      return task;
    },
  });
}

/** A task file as stored: the training pairs and the test pairs (with their outputs when the set has them). */
export type ArcTaskFile = z.infer<typeof arcTaskFileSchema>;

/**
 * Reads and checks the task file `<taskId>.json` of `dataDir` (`taskId` must match ARC_TASK_ID_PATTERN): what
 * `load_arc_task` returns (less the test outputs) and what `check_arc_candidate` compares with.
 * @throws ToolError for an unknown task, a missing data directory or a malformed task file.
 */
export async function readArcTaskFile(dataDir: string, taskId: string, signal?: AbortSignal): Promise<ArcTaskFile> {
  if (!ARC_TASK_ID_PATTERN.test(taskId)) {
    throw new ToolError(`'${taskId}' is not an ARC task id: 8 lowercase hex digits, e.g. "007bbfb7"`);
  }
  let text: string;
  try {
    text = await fs.readFile(path.join(dataDir, `${taskId}.json`), {
      encoding: 'utf8',
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (error) {
    if (!isCode(error, 'ENOENT', 'ENOTDIR')) throw error;
    const count = await countTasks(dataDir);
    if (count === undefined) {
      throw new ToolError('The ARC data directory is missing on this worker (it is configured with BATON_ARC_DIR).', {
        cause: error,
      });
    }
    throw new ToolError(
      `Unknown ARC task '${taskId}'. The data directory holds ${count} task${count === 1 ? '' : 's'}.`,
    );
  }
  try {
    return arcTaskFileSchema.parse(JSON.parse(text));
  } catch (error) {
    throw new ToolError(`ARC task '${taskId}' has a malformed data file: ${describeParseError(error)}`, {
      cause: error,
    });
  }
}

/**
 * A candidate rule for an ARC task, as an agent stores it in env data: the task, the rule in words, and the output
 * grid the rule predicts for each training input, in the order of the task's training pairs.
 */
export const arcCandidateSchema = z.object({
  task_id: z.string().regex(ARC_TASK_ID_PATTERN, 'must be an ARC task id: 8 lowercase hex digits, e.g. "007bbfb7"'),
  rule: z.string().trim().min(1, 'must say the rule in words'),
  train_outputs: z.array(arcGridSchema).min(1, 'must hold one predicted output grid per training input'),
});
export type ArcCandidate = z.infer<typeof arcCandidateSchema>;

/** What `check_arc_candidate` returns: which training pairs the candidate's predictions get right. */
export type ArcCandidateCheck = {
  task_id: string;
  /** The env-data key the candidate was read from. */
  key: string;
  rule: string;
  /** Training pairs compared: all of the task's. */
  pairs: number;
  /** Indices (0-based) of the pairs whose predicted output equals the real one. */
  matched: number[];
  /** The other pairs, each with why: `size 9x9 expected, got 3x3` or `3 cells differ (…)`. */
  mismatched: { index: number; reason: string }[];
  /** `holds` when every training pair matched, else `fails`. */
  verdict: 'holds' | 'fails';
};

/**
 * Compares a candidate's predicted training outputs with the task's real ones, pair by pair. Pure: the caller has
 * read both.
 * @throws ToolError when the candidate predicts a different number of outputs than the task has training pairs.
 */
export function checkArcCandidate(
  task: Pick<ArcTaskFile, 'train'>,
  candidate: ArcCandidate,
  key: string,
): ArcCandidateCheck {
  const pairs = task.train.length;
  if (candidate.train_outputs.length !== pairs) {
    throw new ToolError(
      `'${key}' predicts ${candidate.train_outputs.length} training output${candidate.train_outputs.length === 1 ? '' : 's'}, ` +
        `but task ${candidate.task_id} has ${pairs} training pair${pairs === 1 ? '' : 's'}: train_outputs needs one ` +
        'predicted output grid per training input, in order.',
    );
  }
  const matched: number[] = [];
  const mismatched: { index: number; reason: string }[] = [];
  task.train.forEach((pair, index) => {
    const reason = gridDifference(pair.output, candidate.train_outputs[index] as ArcGrid);
    if (reason === undefined) matched.push(index);
    else mismatched.push({ index, reason });
  });
  return {
    task_id: candidate.task_id,
    key,
    rule: candidate.rule,
    pairs,
    matched,
    mismatched,
    verdict: mismatched.length === 0 ? 'holds' : 'fails',
  };
}

/** Why `actual` is not `expected` (`size 9x9 expected, got 3x3`, `3 cells differ (…)`), or `undefined` when equal. */
function gridDifference(expected: ArcGrid, actual: ArcGrid): string | undefined {
  const size = (grid: ArcGrid) => `${grid.length}x${grid[0]?.length ?? 0}`;
  if (size(expected) !== size(actual)) return `size ${size(expected)} expected, got ${size(actual)}`;
  let count = 0;
  let first = '';
  expected.forEach((row, r) =>
    row.forEach((cell, c) => {
      const got = actual[r]?.[c];
      if (got === cell) return;
      if (count === 0) first = `row ${r}, column ${c}: ${cell} expected, got ${got}`;
      count += 1;
    }),
  );
  if (count === 0) return undefined;
  return `${count} cell${count === 1 ? ' differs' : 's differ'} (the first at ${first})`;
}

const checkArcCandidateParameters = z.strictObject({
  key: envKeyArgument.describe("The env-data key of the candidate, e.g. 'arc/candidates/fractal'."),
});

/**
 * Builds `check_arc_candidate`: reads the candidate `{ task_id, rule, train_outputs }` stored under `key` in the
 * caller's view of env data, loads its task from `options.dataDir` as `load_arc_task` does, and compares each
 * predicted training output with the real one (`ArcCandidateCheck`). Reads only: it writes nothing.
 * @throws ToolError (from `run`) for a missing entry, a value that is not a candidate, an unknown task or a
 * prediction count that is not the task's number of training pairs.
 */
export function createArcCandidateTool(options: ArcToolOptions): ToolDefinition {
  const dataDir = path.resolve(options.dataDir);

  return defineTool({
    name: 'check_arc_candidate',
    description:
      'Check a candidate rule for an ARC task against its training pairs. The candidate is the env-data entry under ' +
      'key: { task_id, rule, train_outputs }, train_outputs being the output grid the rule predicts for each ' +
      'training input, in order. Returns { task_id, key, rule, pairs, matched, mismatched: [{ index, reason }], ' +
      "verdict }: verdict is 'holds' when every predicted output equals the real one, else 'fails'.",
    parameters: checkArcCandidateParameters,
    handledBy: 'activity',
    async run({ key }, context) {
      const entry = await context.env.get(key);
      if (entry === undefined) {
        throw new ToolError(`No environment data under '${key}'. Call list_env_data() to see what exists.`);
      }
      const parsed = arcCandidateSchema.safeParse(entry.value);
      if (!parsed.success) {
        throw new ToolError(
          `'${key}' is not an ARC candidate (${describeParseError(parsed.error)}): a candidate is { task_id, rule, ` +
            'train_outputs } with one predicted output grid (rows of integers 0-9) per training input, in order.',
        );
      }
      const task = await readArcTaskFile(dataDir, parsed.data.task_id, context.signal);
      return checkArcCandidate(task, parsed.data, key);
    },
  });
}

/** How many task files the directory holds, or `undefined` when it does not exist. */
async function countTasks(dataDir: string): Promise<number | undefined> {
  try {
    const names = await fs.readdir(dataDir);
    return names.filter((name) => name.endsWith('.json') && ARC_TASK_ID_PATTERN.test(name.slice(0, -5))).length;
  } catch (error) {
    if (isCode(error, 'ENOENT', 'ENOTDIR')) return undefined;
    throw error;
  }
}

function describeParseError(error: unknown): string {
  if (error instanceof z.ZodError) {
    const issue = error.issues[0];
    if (issue) return `${issue.path.length > 0 ? issue.path.join('.') : '(top level)'}: ${issue.message}`;
  }
  return error instanceof Error ? error.message : String(error);
}

function isCode(error: unknown, ...codes: string[]): boolean {
  return error instanceof Error && 'code' in error && codes.includes(String(error.code));
}
