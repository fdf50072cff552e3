import { z } from 'zod';

/** The longest message one agent may send another. */
export const MAX_DELEGATION_MESSAGE_LENGTH = 20_000;

/**
 * Parameters of every agent an agent can call: calling an agent looks like calling a tool. The workflow carries the
 * call out as a child turn.
 */
export const delegationParameters = z.strictObject({
  message: z
    .string()
    .trim()
    .min(1)
    .max(MAX_DELEGATION_MESSAGE_LENGTH)
    .describe('What you ask of this agent, self-contained: it does not see your conversation.'),
  context_keys: z
    .array(z.string().min(1))
    .max(50)
    .optional()
    .describe('Keys of shared environment data the agent should read; they are listed with their descriptions.'),
  thread: z
    .enum(['new', 'reuse', 'clone'])
    .optional()
    .describe(
      "'new' (default): a fresh conversation; 'reuse': continue this agent's last conversation with you, so it remembers; " +
        "'clone': a conversation seeded with a copy of yours.",
    ),
});

export type DelegationArguments = z.infer<typeof delegationParameters>;

/** What the model reads about an agent it can call. */
export function delegationDescription(agentDescription: string): string {
  return `Delegate to this agent (a prompt object): ${agentDescription}`;
}
