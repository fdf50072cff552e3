import { z } from 'zod';
import { UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
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

/** `list_capabilities`: what the calling agent can call, with descriptions. */
export function listCapabilitiesTool(describe: (name: string) => string | undefined): ToolDefinition {
  return defineTool({
    name: 'list_capabilities',
    description: 'List the tools and agents you can call, with what each one does.',
    parameters: z.strictObject({}),
    handledBy: 'activity',
    run: (_args, context) => {
      const line = (name: string) => `- ${name}: ${describe(name) ?? '(no description)'}`;
      const declared = context.agent.capabilities;
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
