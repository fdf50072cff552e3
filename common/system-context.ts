/**
 * The system context block appended to every agent's prompt: what the agent is, how it gets called, and what it
 * can call. It is sent with every model call, so it stays short.
 */

export interface SystemContextInput {
  name: string;
  /** Capabilities declared in the agent's frontmatter. */
  declared: readonly string[];
  /** Capabilities every agent has. */
  universal: readonly string[];
  /** Whether the conversation's shared environment data holds entries (the hint is shown only then). */
  hasEnvData: boolean;
}

export function buildSystemContext(input: SystemContextInput): string {
  const lines = [
    '## System Context',
    '',
    `You are a prompt object named "${input.name}", running in Baton.`,
    'A prompt object is an agent defined by a markdown file: an identity (this prompt), capabilities (tools and other',
    'agents you can call) and a conversation in which you receive messages and answer them.',
    'You may be called by a human, or by another prompt object that delegated part of a larger task to you; then the',
    'message starts with a [Delegation Context] block saying who called you and why. A message a schedule sent on',
    'its own starts with a [Schedule Context] block naming the schedule, and one that wakes you because shared data you',
    'watch changed starts with a [Watch Context] block naming the changes.',
    '',
    `Declared capabilities: ${input.declared.length > 0 ? input.declared.join(', ') : '(none)'}`,
    `Universal capabilities (always available): ${input.universal.join(', ')}`,
    'Call list_capabilities for what each one does.',
  ];
  if (input.hasEnvData) {
    lines.push(
      'Shared environment data exists in this conversation: call list_env_data() to see what has been stored.',
    );
  }
  return lines.join('\n');
}

/** The full system prompt: the agent's body, then the system context block. */
export function buildSystemPrompt(body: string, context: SystemContextInput): string {
  const block = buildSystemContext(context);
  return body.trim() === '' ? block : `${body.trimEnd()}\n\n${block}`;
}
