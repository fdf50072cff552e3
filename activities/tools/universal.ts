import { z } from 'zod';
import { UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
import { MAX_WAIT_SECONDS_ARGUMENT } from '../../common/types';
import { defineTool, type ToolDefinition } from './types';

/** The longest question an agent may put to a human. */
export const MAX_QUESTION_LENGTH = 2000;

/** `think`: a scratchpad. The thought is already in the transcript as the call's arguments; nothing else happens. */
export const thinkTool = defineTool({
  name: 'think',
  description:
    'Think out loud: record reasoning, a plan or a note to yourself. It has no side effects and nobody else sees it.',
  parameters: z.strictObject({ thought: z.string().min(1).describe('Your reasoning, plan or note.') }),
  handledBy: 'activity',
  run: () => Promise.resolve('Thought recorded.'),
});

/** `ask_human`: the workflow stores the question and waits, durably, for an answer. */
export const askHumanTool = defineTool({
  name: 'ask_human',
  description:
    'Ask the human a question and wait for the answer. Use it when you need information or a decision only a person can give.',
  parameters: z.strictObject({
    question: z.string().trim().min(1).max(MAX_QUESTION_LENGTH).describe('The question, self-contained.'),
    timeout_s: z
      .int()
      .min(1)
      .max(30 * 24 * 3600)
      .optional()
      .describe('Give up waiting after this many seconds (default: wait as long as it takes).'),
  }),
  handledBy: 'workflow',
});

/** The longest reason a `wait` may give (it travels through workflow history and shows in statuses). */
export const MAX_WAIT_REASON_LENGTH = 500;

export const waitParameters = z
  .strictObject({
    seconds: z
      .int({ error: (issue) => (issue.input === undefined ? undefined : 'must be a whole number of seconds') })
      .min(1, { error: 'must be at least 1' })
      .max(MAX_WAIT_SECONDS_ARGUMENT, {
        error: `must be at most ${MAX_WAIT_SECONDS_ARGUMENT} (about 31 years; the world's BATON_MAX_WAIT_SECONDS sets the real limit)`,
      })
      .optional()
      .describe('How long to wait, in seconds. Give this or `until`.'),
    until: z.iso
      .datetime({ offset: true, error: 'must be an ISO 8601 time with a time zone, e.g. 2030-01-31T09:00:00Z' })
      .optional()
      .describe('Wait until this time (ISO 8601 with a time zone, e.g. 2030-01-31T09:00:00Z). Give this or `seconds`.'),
    reason: z
      .string({
        error: (issue) => (issue.input === undefined ? 'is required: say what you are waiting for' : undefined),
      })
      .trim()
      .min(1, { error: 'must not be empty: say what you are waiting for' })
      .max(MAX_WAIT_REASON_LENGTH)
      .describe('What you are waiting for; people see it in the thread status while you wait.'),
  })
  .refine((args) => (args.seconds === undefined) !== (args.until === undefined), {
    error: "give exactly one of 'seconds' and 'until'",
  });

export type WaitArguments = z.infer<typeof waitParameters>;

/**
 * `wait`: the workflow sleeps on a durable timer (no process stays busy) and resumes the turn with how long it
 * waited. A human message to the thread or `baton wake` ends it early. The world's `BATON_MAX_WAIT_SECONDS`
 * bounds it; the workflow checks the bound and the clock, so the check replays the same way.
 */
export const waitTool = defineTool({
  name: 'wait',
  description:
    'Pause this turn for a while (e.g. "check again in two hours"), durably: nothing runs meanwhile, and the wait ' +
    'survives restarts. The result says how long you waited, and whether a new human message or a wake-up ended ' +
    'the wait early. The world sets the longest wait allowed (7 days unless changed).',
  parameters: waitParameters,
  handledBy: 'workflow',
});

/**
 * `list_capabilities`: what the calling agent can call, with descriptions; `offered` spells out what a declared
 * capability grants in the caller's world (an MCP server's `mcp:<server>` grants each of its tools).
 */
export function listCapabilitiesTool(
  describe: (name: string) => string | undefined,
  offered: (declared: readonly string[], worldVariables: Readonly<Record<string, string>>) => readonly string[],
): ToolDefinition {
  return defineTool({
    name: 'list_capabilities',
    description: 'List the tools and agents you can call, with what each one does.',
    parameters: z.strictObject({}),
    handledBy: 'activity',
    run: (_args, context) => {
      const line = (name: string) => `- ${name}: ${describe(name) ?? '(no description)'}`;
      const declared = offered(context.agent.capabilities, context.world.variables);
      return Promise.resolve(
        [
          'Declared capabilities:',
          ...(declared.length > 0 ? declared.map(line) : ['(none)']),
          'Universal capabilities (always available):',
          ...UNIVERSAL_CAPABILITIES.map(line),
        ].join('\n'),
      );
    },
  });
}
