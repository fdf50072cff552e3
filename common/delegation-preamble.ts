/**
 * The delegation preamble: what a delegated agent is told about where it sits (who called it, why, through which
 * chain, what shared data exists), prepended to the message it receives. Pure, so it is unit-tested as text.
 */

/** How much context a delegated agent receives, set by the callee's frontmatter `delegation_context`. */
export const DelegationDetail = {
  /** Caller and chain only. */
  Minimal: 'minimal',
  /** Also the caller's description, the task context and the env-data hint. */
  Standard: 'standard',
  /** Also the caller's latest assistant message. */
  Verbose: 'verbose',
} as const;
export type DelegationDetail = (typeof DelegationDetail)[keyof typeof DelegationDetail];

/** An env-data entry named in `context_keys`, listed with its description. */
export interface ContextEntry {
  key: string;
  shortDescription: string;
}

export interface DelegationPreambleInput {
  /** `false` means no preamble at all. */
  detail: DelegationDetail | false;
  caller: { name: string; description: string };
  /** Agents from the root down to the caller, e.g. `['coordinator', 'solver']`; `human` is prepended. */
  chain: readonly string[];
  callee: string;
  /** The root human message (truncated to `taskContextLimit`). */
  rootMessage: string;
  /** Characters of the root message to keep. @default 500 */
  taskContextLimit?: number;
  /** The caller's latest assistant message (verbose only). */
  callerLatest?: string;
  /** Whether the root scope holds env data. */
  hasEnvData: boolean;
  /** Entries named in `context_keys` that exist, with their descriptions. */
  contextEntries?: readonly ContextEntry[];
  /** Set when the callee runs one task of a fork: where it sits among its siblings and how its store works. */
  fork?: ForkPosition;
}

/** One task's place in a fork, as its preamble tells it. */
export interface ForkPosition {
  forkNumber: number;
  /** 1-based. */
  taskIndex: number;
  taskCount: number;
  /** Every task's agent, in task order (this one included). */
  agents: readonly string[];
  store: 'isolated' | 'shared';
  /** Where this task's findings merge (isolated stores): `<prefix>/<task index>/`. */
  prefix: string;
}

/** The lines that tell a fork task where it sits and how its writes reach the others. */
export function forkLines(fork: ForkPosition): string[] {
  const siblings = fork.agents
    .map((agent, index) => ({ agent, task: index + 1 }))
    .filter(({ task }) => task !== fork.taskIndex)
    .map(({ agent, task }) => `${agent} (task ${task})`);
  const lines = [
    `Fork: you are task ${fork.taskIndex} of ${fork.taskCount} of fork ${fork.forkNumber}, running in parallel` +
      (siblings.length > 0 ? ` with ${siblings.join(', ')}.` : ' on your own.'),
  ];
  if (fork.store === 'isolated') {
    lines.push(
      `Your store is isolated: what you store is yours alone until you finish (you still read the shared data); ` +
        `if you succeed it is merged under ${fork.prefix}/${fork.taskIndex}/. Updating a shared entry records a ` +
        `proposal your caller may accept. You may also end your answer with a JSON commit ` +
        `{"commit_id", "creates": [{"id", "description", "content"}], "links": [{"type": "supports|contradicts|refines", "src", "dst"}], "proposes_updates": [{"target_id", "patch"}]}.`,
    );
  } else {
    lines.push(
      'Your store is shared: you write straight into the shared data, as the other tasks do. ' +
        'list_env_data(exclude_self: true) shows what they found; pass expected_version when you update an entry.',
    );
  }
  return lines;
}

export const DEFAULT_TASK_CONTEXT_LIMIT = 500;

/** Cuts `text` to `limit` characters (by code point), ending with an ellipsis when cut; one line. */
export function truncateChars(text: string, limit: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const chars = [...flat];
  return chars.length <= limit
    ? flat
    : `${chars
        .slice(0, Math.max(0, limit - 1))
        .join('')
        .trimEnd()}…`;
}

/** The preamble text (without the message), or `undefined` when the callee asked for none. */
export function buildDelegationPreamble(input: DelegationPreambleInput): string | undefined {
  if (input.detail === false) return undefined;
  const lines = ['---', '[Delegation Context]', `Called by: ${input.caller.name}`];
  const full = input.detail !== DelegationDetail.Minimal;
  if (full) lines.push(`${input.caller.name} is: "${input.caller.description}"`);
  lines.push(`Delegation chain: ${['human', ...input.chain].join(' → ')} → you (${input.callee})`);
  // Even a minimal preamble says it is one of several parallel tasks: how its writes travel depends on it.
  if (input.fork) lines.push(...forkLines(input.fork));
  if (full) {
    const limit = input.taskContextLimit ?? DEFAULT_TASK_CONTEXT_LIMIT;
    lines.push(`Task context: ${truncateChars(input.rootMessage, limit)}`);
    if (input.detail === DelegationDetail.Verbose && input.callerLatest) {
      lines.push(`${input.caller.name} last said: ${truncateChars(input.callerLatest, limit)}`);
    }
    if (input.hasEnvData) {
      lines.push('Shared environment data is available — call list_env_data() to see what has been stored.');
    }
    const entries = input.contextEntries ?? [];
    if (entries.length > 0) {
      lines.push(`${input.caller.name} points you to these entries (read them with get_env_data):`);
      for (const entry of entries) lines.push(`- ${entry.key}: ${entry.shortDescription}`);
    }
  }
  lines.push('---');
  return lines.join('\n');
}

/** The message a delegated agent receives: the preamble, a blank line, then the caller's message. */
export function withDelegationPreamble(message: string, input: DelegationPreambleInput): string {
  const preamble = buildDelegationPreamble(input);
  return preamble === undefined ? message : `${preamble}\n\n${message}`;
}
