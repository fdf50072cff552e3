/**
 * Scorers (docs/guides/evals.md): each gives one case of an experiment a score from 0 to 1 and a reason. Baton's own
 * (`exact`, `recorded`, a tool-call count, a judge agent) are named in a dataset; a program defines its own with
 * `defineScorer` (a check over the run's shared data, say).
 */
import { isDeepStrictEqual } from 'node:util';
import { checkOutput } from '../activities/output';
import type { BatonClient } from '../client';
import type { DatasetCase, DatasetScorer } from './dataset';

/** What a scorer reads of one case's run. */
export interface ScoreContext {
  /** The case as the dataset gives it. */
  case: DatasetCase;
  /** The message the case sent. */
  input: string;
  /** How its turn ended. */
  result: {
    status: 'completed' | 'max_steps' | 'failed' | 'diverged';
    reply: string | null;
    /** A typed agent's object. */
    output?: unknown;
    error?: string;
  };
  /** The root thread the case ran as: read its transcript, tree or shared data with `client`. */
  threadId: string;
  /** The recorded run's answer, for a case with `thread`. */
  recorded?: { reply: string | null };
  /** A client of the experiment's task queue. */
  client: BatonClient;
  /** The calls the run's whole tree made (delegations and fork tasks included), in order; only `name`'s when given. */
  toolCalls: (name?: string) => Promise<{ name: string; arguments: string }[]>;
  /** Sends `message` to `agent` in a root thread of its own on the experiment's task queue (a judge's turn). */
  ask: (agent: string, message: string) => Promise<{ reply: string; output?: unknown }>;
}

/** A score: from 0 (worst) to 1 (best), and why. */
export interface Score {
  score: number;
  reason?: string;
}

export interface Scorer {
  /** Its name in reports: letters, digits, `_`, `-`, `.` and `:` (at most 40). */
  name: string;
  run(context: ScoreContext): Score | Promise<Score>;
}

const SCORER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:<>=-]{0,39}$/;

/** A scorer of your own. @throws Error for a name reports cannot show or a missing `run` */
export function defineScorer(scorer: Scorer): Scorer {
  if (!SCORER_NAME_PATTERN.test(scorer.name)) {
    throw new Error(`scorer name '${scorer.name}' must be 1-40 letters, digits, '_', '-', '.' or ':'`);
  }
  if (typeof scorer.run !== 'function') throw new Error(`scorer '${scorer.name}' needs a run function`);
  return scorer;
}

/** A score clamped into [0, 1]; anything that is not a finite number is 0. */
export function clampScore(score: number): number {
  return Number.isFinite(score) ? Math.min(1, Math.max(0, score)) : 0;
}

/** `exact`: the reply (or a typed agent's object) equals the case's `expected`. */
const exact = defineScorer({
  name: 'exact',
  run({ case: c, result }) {
    if (c.expected === undefined) return { score: 0, reason: 'the case has no expected answer' };
    const equal =
      typeof c.expected === 'string'
        ? (result.reply ?? '').trim() === c.expected.trim()
        : isDeepStrictEqual(result.output, c.expected);
    return equal ? { score: 1 } : { score: 0, reason: 'differs from the expected answer' };
  },
});

/** `recorded`: the reply equals the recorded run's. */
const recorded = defineScorer({
  name: 'recorded',
  run({ recorded: before, result }) {
    if (before === undefined) return { score: 0, reason: 'the case has no recorded run' };
    return (result.reply ?? '').trim() === (before.reply ?? '').trim()
      ? { score: 1 }
      : { score: 0, reason: 'differs from the recorded reply' };
  },
});

/** `{ tool, at_most, at_least }`: the run's tree called `tool` within those bounds. */
function toolCount(settings: { tool: string; at_most?: number | undefined; at_least?: number | undefined }): Scorer {
  const bounds = [
    settings.at_least === undefined ? '' : `>=${settings.at_least}`,
    settings.at_most === undefined ? '' : `<=${settings.at_most}`,
  ].join('');
  return defineScorer({
    name: `tool:${settings.tool}${bounds}`.slice(0, 40),
    async run(context) {
      const made = (await context.toolCalls(settings.tool)).length;
      const within =
        (settings.at_most === undefined || made <= settings.at_most) &&
        (settings.at_least === undefined || made >= settings.at_least);
      return { score: within ? 1 : 0, reason: `${settings.tool} called ${made} time${made === 1 ? '' : 's'}` };
    },
  });
}

/** `{ schema }`: the answer (a typed agent's object, else the reply read as JSON) matches a JSON Schema. */
function schemaMatch(schema: Readonly<Record<string, unknown>>): Scorer {
  return defineScorer({
    name: 'schema',
    run({ result }) {
      const checked = checkOutput(schema, result.output === undefined ? result.reply : JSON.stringify(result.output));
      return checked.ok ? { score: 1 } : { score: 0, reason: checked.problem };
    },
  });
}

/** What a judge agent reads: the input, the answer, and what was expected. */
export function judgeMessage(context: Pick<ScoreContext, 'input' | 'result' | 'case' | 'recorded'>): string {
  const answer =
    context.result.output === undefined ? (context.result.reply ?? '') : JSON.stringify(context.result.output);
  const parts = [
    `Input:\n${context.input}`,
    `Answer (${context.result.status}):\n${answer || context.result.error || '(none)'}`,
  ];
  if (context.case.expected !== undefined) {
    const expected = context.case.expected;
    parts.push(`Expected:\n${typeof expected === 'string' ? expected : JSON.stringify(expected)}`);
  }
  const reference = context.case.reference ?? context.recorded?.reply ?? undefined;
  if (reference) parts.push(`Reference:\n${reference}`);
  return `${parts.join('\n\n')}\n\nGrade the answer.`;
}

/** `{ judge, scale }`: a judge agent's `score` (its typed output), from its scale to [0, 1]. */
function judge(settings: { judge: string; scale?: [number, number] | undefined }): Scorer {
  const [low, high] = settings.scale ?? [0, 1];
  return defineScorer({
    name: `judge:${settings.judge}`.slice(0, 40),
    async run(context) {
      const { output, reply } = await context.ask(settings.judge, judgeMessage(context));
      const graded = (output ?? {}) as { score?: unknown; reason?: unknown };
      if (typeof graded.score !== 'number') {
        return { score: 0, reason: `the judge gave no numeric score (its answer: ${reply.slice(0, 200)})` };
      }
      return {
        score: clampScore((graded.score - low) / (high - low)),
        ...(typeof graded.reason === 'string' ? { reason: graded.reason } : {}),
      };
    },
  });
}

/** The scorers a dataset names. */
export function datasetScorers(scorers: readonly DatasetScorer[]): Scorer[] {
  return scorers.map((scorer) => {
    if (scorer === 'exact') return exact;
    if (scorer === 'recorded') return recorded;
    if ('tool' in scorer) return toolCount(scorer);
    if ('schema' in scorer) return schemaMatch(scorer.schema);
    return judge(scorer);
  });
}
