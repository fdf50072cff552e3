/**
 * `load_arc_task`: hands an agent one ARC task (demonstration pairs and test inputs) from a directory of ARC JSON
 * files, one `<task_id>.json` per task.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
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
      let text: string;
      try {
        text = await fs.readFile(path.join(dataDir, `${task_id}.json`), { encoding: 'utf8', signal: context.signal });
      } catch (error) {
        if (!isCode(error, 'ENOENT', 'ENOTDIR')) throw error;
        const count = await countTasks(dataDir);
        if (count === undefined) {
          throw new ToolError(
            'The ARC data directory is missing on this worker (it is configured with BATON_ARC_DIR).',
            { cause: error },
          );
        }
        throw new ToolError(
          `Unknown ARC task '${task_id}'. The data directory holds ${count} task${count === 1 ? '' : 's'}.`,
        );
      }

      let parsed: z.infer<typeof arcTaskFileSchema>;
      try {
        parsed = arcTaskFileSchema.parse(JSON.parse(text));
      } catch (error) {
        throw new ToolError(`ARC task '${task_id}' has a malformed data file: ${describeParseError(error)}`, {
          cause: error,
        });
      }
      // The test outputs are the answers: an agent solving the task must not see them.
      const task: ArcTask = { task_id, train: parsed.train, test: parsed.test.map(({ input }) => ({ input })) };
      return task;
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
