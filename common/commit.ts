/**
 * The commit a fork worker in an isolated store may hand back in its final answer, and the parser that finds it.
 * A commit says what the worker found (`creates`), how its findings relate to keys (`links`) and which existing
 * entries it would change (`proposes_updates`, stored as proposals, never applied on their own). Pure code: the
 * merge activity parses a child's reply with it, and unit and property tests exercise it without servers.
 */
import { z } from 'zod';
import { ENV_KEY_PATTERN, MAX_ENV_DESCRIPTION_LENGTH, MAX_ENV_KEY_LENGTH } from './env-data';

/** How one key relates to another. */
export const LINK_TYPES = ['supports', 'contradicts', 'refines'] as const;
export type LinkType = (typeof LINK_TYPES)[number];

/** Most creates, links and proposals one commit may carry. */
export const MAX_COMMIT_ITEMS = 200;

const keyLike = z
  .string()
  .min(1)
  .max(MAX_ENV_KEY_LENGTH)
  .regex(ENV_KEY_PATTERN, { error: "may hold only letters, digits and _ - . / (e.g. 'e1' or 'arc/task')" });

const commitSchema = z.object({
  commit_id: z.string().min(1).max(200).optional(),
  creates: z
    .array(
      z.object({
        id: keyLike,
        type: z.string().min(1).max(100).optional(),
        description: z.string().trim().min(1).max(MAX_ENV_DESCRIPTION_LENGTH),
        content: z.unknown().refine((value) => value !== undefined, { error: 'is required' }),
        tags: z.array(z.string().min(1).max(100)).max(20).optional(),
      }),
    )
    .max(MAX_COMMIT_ITEMS)
    .default([]),
  links: z
    .array(z.object({ type: z.enum(LINK_TYPES), src: keyLike, dst: keyLike }))
    .max(MAX_COMMIT_ITEMS)
    .default([]),
  proposes_updates: z
    .array(
      z.object({
        target_id: keyLike,
        patch: z.record(z.string(), z.unknown()).optional(),
        value: z.unknown().optional(),
        description_update: z.string().trim().min(1).max(MAX_ENV_DESCRIPTION_LENGTH).optional(),
      }),
    )
    .max(MAX_COMMIT_ITEMS)
    .default([]),
});

/** A commit as parsed from a worker's answer. */
export type Commit = z.output<typeof commitSchema>;

/**
 * What a final answer holds: no commit (plain prose), a valid commit, or something that was meant as one but is not
 * valid (reported as an error commit; never a crash).
 */
export type ParsedCommit = { kind: 'none' } | { kind: 'commit'; commit: Commit } | { kind: 'error'; error: string };

/** Keys that mark a JSON object as a commit rather than any JSON the worker happened to write. */
const COMMIT_FIELDS = ['commit_id', 'creates', 'links', 'proposes_updates'];

/**
 * Finds the commit in a worker's final answer: the whole answer as JSON, a fenced code block (```json … ```), or a
 * JSON object embedded in prose, whichever comes first. An object counts as a commit when it has one of the commit
 * fields; an answer that plainly tries to give one (a fenced `json` block, or text starting with `{`) but does not
 * parse is an error commit.
 */
export function parseCommit(answer: string): ParsedCommit {
  const text = answer.trim();
  if (text === '') return { kind: 'none' };
  const candidates: { json: string; intended: boolean }[] = [];
  if (text.startsWith('{')) candidates.push({ json: text, intended: true });
  for (const match of text.matchAll(/```(json)?[ \t]*\r?\n([\s\S]*?)```/g)) {
    candidates.push({ json: match[2] ?? '', intended: match[1] === 'json' });
  }
  for (const json of embeddedObjects(text)) candidates.push({ json, intended: false });

  let firstError: string | undefined;
  for (const candidate of candidates) {
    let value: unknown;
    try {
      value = JSON.parse(candidate.json);
    } catch (error) {
      if (candidate.intended && firstError === undefined) {
        firstError = `the commit is not valid JSON (${error instanceof Error ? error.message : String(error)})`;
      }
      continue;
    }
    if (!isCommitLike(value)) continue;
    const parsed = commitSchema.safeParse(value);
    if (!parsed.success) {
      return { kind: 'error', error: `the commit is not valid: ${describe(parsed.error.issues)}` };
    }
    return { kind: 'commit', commit: parsed.data };
  }
  return firstError === undefined ? { kind: 'none' } : { kind: 'error', error: firstError };
}

function isCommitLike(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    COMMIT_FIELDS.some((field) => Object.prototype.hasOwnProperty.call(value, field))
  );
}

/** Balanced `{…}` spans of `text` (outermost first), skipping braces inside JSON strings. At most 20. */
function embeddedObjects(text: string): string[] {
  const spans: string[] = [];
  for (let start = text.indexOf('{'); start !== -1 && spans.length < 20; start = text.indexOf('{', start + 1)) {
    const end = matchingBrace(text, start);
    if (end !== -1) {
      spans.push(text.slice(start, end + 1));
      start = end;
    }
  }
  return spans;
}

function matchingBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const char = text[i];
    if (inString) {
      if (char === '\\') i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{') depth++;
    else if (char === '}' && --depth === 0) return i;
  }
  return -1;
}

function describe(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? `'${issue.path.join('.')}' ` : ''}${issue.message}`)
    .join('; ');
}

/** The key a worker's finding lands under in its caller's store: `<prefix>/<task index>/<key>`. */
export function mergedKey(prefix: string, taskIndex: number, key: string): string {
  return `${prefix}/${taskIndex}/${key}`;
}

/** The default prefix of the n-th fork of a root. */
export function defaultForkPrefix(forkNumber: number): string {
  return `fork/${forkNumber}`;
}

/**
 * A fork's aggregate status. Every task succeeded: `success`. Cut short by `fail_fast`: `failed`. Some succeeded:
 * `partial`. None did: `timeout` when any ran out of time, else `failed`.
 */
export function forkAggregate(
  statuses: readonly ('success' | 'failed' | 'timeout' | 'cancelled')[],
  stoppedBy?: 'deadline' | 'fail_fast',
): 'success' | 'partial' | 'failed' | 'timeout' {
  if (statuses.length > 0 && statuses.every((status) => status === 'success')) return 'success';
  if (stoppedBy === 'fail_fast') return 'failed';
  if (statuses.some((status) => status === 'success')) return 'partial';
  return statuses.some((status) => status === 'timeout') ? 'timeout' : 'failed';
}
