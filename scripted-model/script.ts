import { readFileSync } from 'node:fs';
import { isMap, isScalar, LineCounter, parseDocument, visit } from 'yaml';
import { z } from 'zod';

/** Keys that say what kind a step is; a step has exactly one of them. */
const STEP_KINDS = ['say', 'call', 'calls', 'fail'] as const;

type StepKind = (typeof STEP_KINDS)[number];

const FIELDS_BY_KIND: Record<StepKind, readonly string[]> = {
  say: ['say', 'delay_ms', 'hold', 'hold_end', 'chunk_delay_ms'],
  call: ['call', 'args', 'id', 'delay_ms', 'hold', 'hold_end', 'chunk_delay_ms'],
  calls: ['calls', 'delay_ms', 'hold', 'hold_end', 'chunk_delay_ms'],
  fail: ['fail', 'times', 'retry_after_s', 'message'],
};

function unknownFieldsError(kind: StepKind) {
  return (issue: z.core.$ZodRawIssue): string | undefined => {
    if (issue.code !== 'unrecognized_keys') return undefined;
    const keys = issue.keys.map((key) => `'${key}'`).join(', ');
    return `unknown field ${keys} in a ${kind} step (it takes: ${FIELDS_BY_KIND[kind].join(', ')})`;
  };
}

const delayMs = z
  .int({ error: 'delay_ms must be a whole number of milliseconds' })
  .nonnegative({ error: 'delay_ms must not be negative' })
  .optional();

/** Milliseconds between two chunks of a streamed reply (`stream: true`), so a test can watch it arrive. */
const chunkDelayMs = z
  .int({ error: 'chunk_delay_ms must be a whole number of milliseconds' })
  .nonnegative({ error: 'chunk_delay_ms must not be negative' })
  .optional();

/**
 * A name the reply waits on: the server answers this step only once its test calls `release(name)`. A test then
 * orders a reply after an event it causes, instead of hoping a `delay_ms` is long enough.
 */
const hold = z.string({ error: 'hold must be a name' }).min(1, { error: 'hold must be a name' }).optional();

/**
 * A name the end of a streamed reply waits on: the text and tool calls go out, the finish (finish reason, usage,
 * `[DONE]`) only once the test calls `release(name)`. A test then sees a reply half streamed for as long as it needs,
 * without a timing guess. A reply not streamed waits whole, as with `hold`.
 */
const holdEnd = z.string({ error: 'hold_end must be a name' }).min(1, { error: 'hold_end must be a name' }).optional();

/**
 * Tool arguments: an object is sent as its JSON text; a string is sent verbatim, so a script can hand the
 * agent malformed arguments on purpose.
 */
const toolArgs = z
  .union([z.record(z.string(), z.unknown()), z.string()], {
    error: 'args must be an object (sent as JSON) or a string (sent verbatim)',
  })
  .default({});

/**
 * The call's id in the reply; by default `call_<agent>_<step>_<index>`. A script sets one to send a reply whose calls
 * share an id, as some endpoints (or a hostile model) do.
 */
const toolCallId = z.string({ error: 'id must be text' }).min(1, { error: 'id must not be empty' }).optional();

const toolCall = z.strictObject(
  { call: z.string().min(1, { error: 'call must name a tool or an agent' }), args: toolArgs, id: toolCallId },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((key) => `'${key}'`).join(', ')} in a tool call (it takes: call, args, id)`
        : 'each entry of calls must be { call, args, id? }',
  },
);

const sayStepSchema = z.strictObject(
  {
    kind: z.literal('say'),
    say: z.string({ error: 'say must be a string' }),
    delay_ms: delayMs,
    hold,
    hold_end: holdEnd,
    chunk_delay_ms: chunkDelayMs,
  },
  { error: unknownFieldsError('say') },
);

const callStepSchema = z.strictObject(
  {
    kind: z.literal('call'),
    ...toolCall.shape,
    delay_ms: delayMs,
    hold,
    hold_end: holdEnd,
    chunk_delay_ms: chunkDelayMs,
  },
  { error: unknownFieldsError('call') },
);

const callsStepSchema = z.strictObject(
  {
    kind: z.literal('calls'),
    calls: z.array(toolCall, { error: 'calls must be a list of { call, args }' }).min(1, {
      error: 'calls must list at least one tool call',
    }),
    delay_ms: delayMs,
    hold,
    hold_end: holdEnd,
    chunk_delay_ms: chunkDelayMs,
  },
  { error: unknownFieldsError('calls') },
);

const failStepSchema = z.strictObject(
  {
    kind: z.literal('fail'),
    fail: z
      .int({ error: 'fail must be an HTTP error status such as 503' })
      .min(400, { error: 'fail must be an HTTP error status (400-599)' })
      .max(599, { error: 'fail must be an HTTP error status (400-599)' }),
    times: z.int({ error: 'times must be a whole number' }).min(1, { error: 'times must be at least 1' }).default(1),
    retry_after_s: z.number({ error: 'retry_after_s must be a number of seconds' }).nonnegative().optional(),
    message: z.string({ error: 'message must be a string' }).optional(),
  },
  { error: unknownFieldsError('fail') },
);

function describeBadStep(input: unknown): string {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    return `a step must be a mapping with one of ${STEP_KINDS.join(', ')}`;
  }
  const present = STEP_KINDS.filter((kind) => kind in input);
  if (present.length > 1)
    return `a step has exactly one of ${STEP_KINDS.join(', ')}, this one has ${present.join(' and ')}`;
  const keys = Object.keys(input).filter((key) => key !== 'kind');
  const got = keys.length === 0 ? 'an empty step' : `fields ${keys.map((key) => `'${key}'`).join(', ')}`;
  return `a step needs one of ${STEP_KINDS.join(', ')}; got ${got}`;
}

/** Tags each step with its `kind` so the union below reports errors for the kind the author meant. */
function tagStep(raw: unknown): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const present = STEP_KINDS.filter((kind) => kind in raw);
  return { ...raw, kind: present.length === 1 ? present[0] : undefined };
}

const stepSchema = z.preprocess(
  tagStep,
  z.discriminatedUnion('kind', [sayStepSchema, callStepSchema, callsStepSchema, failStepSchema], {
    error: (issue) => describeBadStep(issue.input),
  }),
);

const agentStepsSchema = z
  .array(stepSchema, { error: 'an agent maps to a list of steps' })
  .min(1, { error: 'an agent needs at least one step' })
  .superRefine((steps, ctx) => {
    const last = steps[steps.length - 1];
    if (last?.kind === 'fail') {
      ctx.addIssue({
        code: 'custom',
        path: [steps.length - 1],
        message: 'a fail entry fails requests for the answering step after it, but no say, call or calls follows',
      });
    }
  });

/**
 * The script schema (docs/architecture.md §7): for each agent, an ordered list of answering steps (`say`, `call`,
 * `calls`) with `fail` entries placed before the step whose requests they fail.
 */
export const scriptSchema = z.strictObject(
  {
    agents: z.record(z.string().min(1, { error: 'agent names must not be empty' }), agentStepsSchema, {
      error: "the script needs an 'agents' mapping of agent name to a list of steps",
    }),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown top-level field ${issue.keys.map((key) => `'${key}'`).join(', ')} (a script has only 'agents')`
        : "a script is a mapping with an 'agents' field",
  },
);

/** A validated script. */
export type Script = z.infer<typeof scriptSchema>;
/** One entry of an agent's list. */
export type ScriptStep = z.infer<typeof stepSchema>;
/** A final answer. */
export type SayStep = z.infer<typeof sayStepSchema>;
/** One tool call. */
export type CallStep = z.infer<typeof callStepSchema>;
/** Several tool calls in one reply. */
export type CallsStep = z.infer<typeof callsStepSchema>;
/** A scripted HTTP failure of the requests for the next answering step. */
export type FailStep = z.infer<typeof failStepSchema>;
/** A step that answers a request (every kind except `fail`). */
export type AnsweringStep = SayStep | CallStep | CallsStep;

/** Base of the scripted model's errors. */
export class ScriptedModelError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A script file that cannot be read, parsed or validated. The message names the file and each problem. */
export class ScriptError extends ScriptedModelError {
  constructor(
    /** The file name (or other label) the script came from. */
    readonly source: string,
    /** One line per problem, each `source:line:col: path: what is wrong` where the position is known. */
    readonly problems: readonly string[],
    options?: ErrorOptions,
  ) {
    super(
      `Scripted model: invalid script ${source}:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
      options,
    );
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? String(segment) : `.${String(segment)}`;
  }
  return text === '' ? '(top level)' : text;
}

/** Drops the `kind` tag that {@link tagStep} adds: authors never write it. */
function authorPath(path: readonly PropertyKey[]): PropertyKey[] {
  return path[path.length - 1] === 'kind' ? path.slice(0, -1) : [...path];
}

type Locate = (path: readonly PropertyKey[]) => string | undefined;

function validate(value: unknown, sourceName: string, locate: Locate): Script {
  const result = scriptSchema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const path = authorPath(issue.path);
    const position = locate(path);
    return `${position === undefined ? '' : `${position}: `}${formatPath(path)}: ${issue.message}`;
  });
  throw new ScriptError(sourceName, problems);
}

/**
 * Validates a script given as a plain object (for scripts built in code).
 *
 * @throws {@link ScriptError} naming `sourceName` and every problem.
 */
export function validateScript(value: unknown, sourceName = '<inline script>'): Script {
  return validate(value, sourceName, () => undefined);
}

/**
 * Parses script text. JSON is read as YAML (it is a subset), so one parser serves both and every problem
 * carries a line and column.
 *
 * @param sourceName - the file name shown in errors.
 * @throws {@link ScriptError} for a syntax error or a script that does not match {@link scriptSchema}.
 */
export function parseScript(text: string, sourceName: string): Script {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new ScriptError(
      sourceName,
      doc.errors.map((error) => {
        const { line, col } = lineCounter.linePos(error.pos[0]);
        return `${sourceName}:${line}:${col}: ${error.message}`;
      }),
    );
  }
  const locate: Locate = (path) => {
    // A missing field has no node: point at the nearest enclosing one instead.
    for (let depth = path.length; depth >= 0; depth--) {
      const node: unknown = doc.getIn(path.slice(0, depth), true);
      const range = (node as { range?: readonly number[] } | undefined)?.range;
      if (range?.[0] !== undefined) {
        const { line, col } = lineCounter.linePos(range[0]);
        return `${sourceName}:${line}:${col}`;
      }
    }
    return undefined;
  };
  const at = (offset: number | undefined) => {
    if (offset === undefined) return `${sourceName}`;
    const { line, col } = lineCounter.linePos(offset);
    return `${sourceName}:${line}:${col}`;
  };
  // An object key '__proto__' would set the prototype of the agents record instead of naming an agent.
  const agents = doc.get('agents', true);
  if (isMap(agents)) {
    for (const pair of agents.items) {
      if (isScalar(pair.key) && pair.key.value === '__proto__') {
        throw new ScriptError(sourceName, [
          `${at(pair.key.range?.[0])}: agents.__proto__: '__proto__' cannot be an agent name`,
        ]);
      }
    }
  }
  let value: unknown;
  try {
    value = doc.toJS();
  } catch (error) {
    // The yaml library refuses alias expansion past its limit ("billion laughs"); say where the aliases start.
    let first: number | undefined;
    visit(doc, {
      Alias(_key, node) {
        first = node.range?.[0];
        return visit.BREAK;
      },
    });
    const reason = error instanceof Error ? error.message : String(error);
    throw new ScriptError(
      sourceName,
      [`${at(first)}: too many YAML aliases to expand (${reason}); write the steps out instead`],
      { cause: error },
    );
  }
  return validate(value, sourceName, locate);
}

/**
 * Reads and parses a script file (YAML or JSON).
 *
 * @throws {@link ScriptError} naming `path` if the file cannot be read or is not a valid script.
 */
export function loadScript(path: string): Script {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ScriptError(path, [`cannot read the file: ${error instanceof Error ? error.message : String(error)}`], {
      cause: error,
    });
  }
  return parseScript(text, path);
}

/** What a request for one agent's step gets, decided by {@link selectStep}. */
export type StepSelection =
  | {
      readonly kind: 'answer';
      readonly agent: string;
      /** 1-based number of the answering step. */
      readonly stepNumber: number;
      readonly step: AnsweringStep;
    }
  | {
      readonly kind: 'fail';
      readonly agent: string;
      readonly stepNumber: number;
      readonly status: number;
      readonly retryAfterS: number | undefined;
      readonly message: string;
      /** Which of this fail entry's `times` failures this is (1-based). */
      readonly attempt: number;
      readonly times: number;
    }
  | {
      readonly kind: 'exhausted';
      readonly agent: string;
      readonly stepNumber: number;
      readonly answeringSteps: number;
      readonly message: string;
    }
  | {
      readonly kind: 'unknown_agent';
      readonly agent: string;
      readonly agents: readonly string[];
      readonly message: string;
    };

/** Names the agents a script has, for errors about agents it does not have. */
export function describeAgents(script: Script): string {
  const names = Object.keys(script.agents);
  return names.length === 0 ? 'it has no agents' : `it has: ${names.map((name) => `'${name}'`).join(', ')}`;
}

/**
 * Decides what a request gets. Pure, so concurrent and retried threads replay the same way: the answering
 * step is the one at index `assistantCount` (assistant messages already in the request), and the `fail`
 * entries placed before it fail its first requests — `failuresSoFar` counts the failures already served
 * for this (agent, thread, step).
 */
export function selectStep(
  script: Script,
  agent: string,
  assistantCount: number,
  failuresSoFar: number,
): StepSelection {
  const stepNumber = assistantCount + 1;
  const steps = Object.hasOwn(script.agents, agent) ? script.agents[agent] : undefined;
  if (steps === undefined) {
    return {
      kind: 'unknown_agent',
      agent,
      agents: Object.keys(script.agents),
      message: `Scripted model: the script has no agent '${agent}' (${describeAgents(script)}).`,
    };
  }
  let answerIndex = 0;
  let failuresLeft = failuresSoFar;
  for (const step of steps) {
    if (step.kind !== 'fail') {
      if (answerIndex === assistantCount) return { kind: 'answer', agent, stepNumber, step };
      answerIndex++;
    } else if (answerIndex === assistantCount) {
      if (failuresLeft < step.times) {
        const attempt = failuresLeft + 1;
        return {
          kind: 'fail',
          agent,
          stepNumber,
          status: step.fail,
          retryAfterS: step.retry_after_s,
          message:
            step.message ??
            `Scripted model: scripted failure ${step.fail} for agent '${agent}' at step ${stepNumber} (${attempt} of ${step.times}).`,
          attempt,
          times: step.times,
        };
      }
      failuresLeft -= step.times;
    }
  }
  const plural = answerIndex === 1 ? 'step' : 'steps';
  return {
    kind: 'exhausted',
    agent,
    stepNumber,
    answeringSteps: answerIndex,
    message: `Scripted model: the script for agent '${agent}' has no step ${stepNumber} (it has ${answerIndex} answering ${plural}).`,
  };
}
