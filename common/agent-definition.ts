import { z } from 'zod';
import { AGENT_NAME_PATTERN } from './ids';

/**
 * Frontmatter of a prompt object (an agent markdown file). Unknown keys are refused so a typo in an option
 * stops start-up instead of being silently ignored.
 */
export const agentFrontmatterSchema = z.strictObject({
  name: z.string().regex(AGENT_NAME_PATTERN, 'must be lowercase letters, digits, "_" or "-" (at most 64)'),
  description: z.string().trim().min(1, 'must not be empty').max(500),
});

export type AgentFrontmatter = z.infer<typeof agentFrontmatterSchema>;

/** A loaded agent: its frontmatter, its system-prompt body and where it came from. */
export interface AgentDefinition extends AgentFrontmatter {
  /** The markdown body after the frontmatter: the system-prompt template. */
  body: string;
  /** Path of the file it was loaded from, for error messages. */
  source: string;
}
