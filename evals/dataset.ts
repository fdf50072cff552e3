/**
 * A dataset (docs/guides/evals.md): the cases an experiment runs, each an input message (with its agent, world and an
 * expected answer or a reference) or a recorded root thread, and the scorers every case is scored by. A JSON file;
 * its JSON Schema is `docs/reference/eval-dataset.schema.json`.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { AGENT_NAME_PATTERN, THREAD_ID_PATTERN } from '../common/ids';

/** The case ids and scorer names a dataset may use: short, for tables and thread ids. */
const CASE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$/;

/** The most cases one dataset holds. */
export const MAX_DATASET_CASES = 1000;

const agentName = z.string().regex(AGENT_NAME_PATTERN, 'must be an agent name');

/** A scorer a dataset names: one of Baton's, with its settings. */
export const datasetScorerSchema = z.union([
  z.literal('exact').describe('1 when the reply (or the output, for a typed agent) equals the case’s `expected`.'),
  z.literal('recorded').describe('1 when the reply equals the recorded run’s (a case with `thread`).'),
  z
    .strictObject({
      tool: z.string().min(1).describe('A tool (or agent) name.'),
      at_most: z.int().min(0).optional(),
      at_least: z.int().min(0).optional(),
    })
    .describe('1 when the run called `tool` at most / at least so many times (its whole tree counted).'),
  z
    .strictObject({
      schema: z
        .record(z.string(), z.unknown())
        .describe('A JSON Schema the answer (a typed agent’s object, else the reply as JSON) must match.'),
    })
    .describe('1 when the answer matches the JSON Schema.'),
  z
    .strictObject({
      judge: agentName.describe('The agent that grades: its `output` must hold a numeric `score` (and a `reason`).'),
      scale: z
        .tuple([z.number(), z.number()])
        .refine(([low, high]) => low < high, 'must be [lowest, highest]')
        .optional()
        .describe('The judge’s lowest and highest score, mapped to 0 and 1. Default [0, 1].'),
    })
    .describe('A model-graded score: the judge agent reads the input, the answer and the expected answer.'),
]);

export type DatasetScorer = z.infer<typeof datasetScorerSchema>;

export const datasetCaseSchema = z
  .strictObject({
    id: z.string().regex(CASE_ID_PATTERN, 'must be 1-40 letters, digits, "_", "-" or "."').describe('The case’s id.'),
    message: z.string().min(1).optional().describe('The input message; a case with `thread` may leave it out.'),
    agent: agentName.optional().describe('The agent that answers; default the dataset’s `agent`.'),
    world: z.string().min(1).optional().describe('The world the case runs in; default the dataset’s.'),
    expected: z.unknown().optional().describe('The expected answer: text, or an object for a typed agent.'),
    reference: z.string().optional().describe('A reference answer a judge reads (not compared as it is).'),
    thread: z
      .string()
      .regex(THREAD_ID_PATTERN, 'must be a thread id')
      .optional()
      .describe('A recorded root thread: its first message is the input, its reply the reference.'),
  })
  .refine((c) => c.message !== undefined || c.thread !== undefined, { error: 'needs a message or a thread' });

export type DatasetCase = z.infer<typeof datasetCaseSchema>;

export const datasetSchema = z
  .strictObject({
    name: z.string().regex(CASE_ID_PATTERN, 'must be 1-40 letters, digits, "_", "-" or "."').describe('Its name.'),
    agent: agentName.optional().describe('The agent that answers each case that names none.'),
    world: z.string().min(1).optional().describe('The world each case runs in unless it names one.'),
    scorers: z.array(datasetScorerSchema).default([]).describe('The scorers every case is scored by.'),
    cases: z.array(datasetCaseSchema).min(1, 'must list at least one case').max(MAX_DATASET_CASES),
  })
  .superRefine((dataset, context) => {
    const seen = new Set<string>();
    dataset.cases.forEach((c, index) => {
      if (seen.has(c.id))
        context.addIssue({ code: 'custom', path: ['cases', index, 'id'], message: `repeats '${c.id}'` });
      seen.add(c.id);
      if (c.agent === undefined && dataset.agent === undefined && c.thread === undefined) {
        context.addIssue({ code: 'custom', path: ['cases', index], message: 'names no agent, and the dataset none' });
      }
    });
  });

export type Dataset = z.infer<typeof datasetSchema>;

/** A dataset that cannot be read, naming the file and what is wrong. */
export class DatasetError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Checks a dataset given as a value (a parsed file, or one built in code). @throws DatasetError */
export function parseDataset(value: unknown, source: string): Dataset {
  const result = datasetSchema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(dataset)'}: ${issue.message}`,
  );
  throw new DatasetError(`${source}: ${problems.join('; ')}`);
}

/** Reads a dataset file (JSON). @throws DatasetError */
export function readDataset(file: string): Dataset {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new DatasetError(`cannot read the dataset ${file}: ${(error as Error).message}`, { cause: error });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new DatasetError(`${file}: not JSON (${(error as Error).message})`, { cause: error });
  }
  return parseDataset(value, file);
}
