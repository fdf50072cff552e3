/**
 * The report of an experiment as `baton eval run --json`, `baton eval replay --json` and `runExperiment` give it: its
 * JSON Schema is `docs/reference/eval-report.schema.json`, generated from this schema, which the tests check every
 * printed report against.
 */
import { z } from 'zod';

const score = z.number().min(0).max(1);

const callSchema = z.strictObject({ name: z.string(), arguments: z.string() });

export const divergenceSchema = z
  .strictObject({
    step: z.int().min(1).describe('The model step (from 1) whose reply made the call.'),
    agent: z.string(),
    call: z.int().min(1).describe('The call’s place (from 1) among the thread’s calls.'),
    recorded: callSchema.nullable().describe('The call the record has there, if any.'),
    made: callSchema.describe('The call the replay made.'),
  })
  .describe('The first call of a replay that did not match the record.');

export const evalCaseSchema = z.strictObject({
  caseId: z.string(),
  position: z.int().min(0),
  threadId: z.string().describe('The root thread the case ran as.'),
  agent: z.string(),
  input: z.string(),
  status: z.enum(['completed', 'max_steps', 'failed', 'diverged']),
  reply: z.string().nullable(),
  output: z.unknown().optional().describe('A typed agent’s object.'),
  error: z.string().nullable(),
  usage: z.looseObject({ promptTokens: z.number(), completionTokens: z.number(), totalTokens: z.number() }).nullable(),
  durationMs: z.int().min(0),
  scores: z.record(z.string(), z.strictObject({ score, reason: z.string().optional() })),
  divergence: divergenceSchema.nullable(),
  liveCalls: z.int().min(0).describe('Calls a replay ran live (under live-read-only).'),
  recordedScores: z
    .record(z.string(), z.strictObject({ score, reason: z.string().optional() }))
    .nullable()
    .describe('A replay’s recorded run, scored by the same scorers; null outside replays.'),
});

export const scorerSummarySchema = z.strictObject({
  mean: score,
  count: z.int().min(0),
  passed: z.int().min(0).describe('Cases scored at least 0.5.'),
  ci95: z.tuple([score, score]).optional().describe('A 95% confidence interval of the mean, from two cases.'),
});

export const experimentReportSchema = z.strictObject({
  experimentId: z.string(),
  kind: z.enum(['run', 'replay']),
  dataset: z.string(),
  agents: z.record(z.string(), z.string()).describe('Each agent’s version (its content hash).'),
  model: z.strictObject({ model: z.string(), providers: z.array(z.string()) }),
  cases: z.array(evalCaseSchema),
  summary: z.strictObject({
    cases: z.int().min(0),
    statuses: z.record(z.string(), z.int()),
    scorers: z.record(z.string(), scorerSummarySchema),
    score: score.optional().describe('The mean of the scorers’ means.'),
    totalTokens: z.number(),
  }),
  gate: z
    .strictObject({ minScore: score, passed: z.boolean() })
    .optional()
    .describe('With --min-score: whether the score reached it.'),
});
