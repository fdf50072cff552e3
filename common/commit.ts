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

/**
 * The longest answer searched for a commit inside it (a fenced block, an object in prose). The search is linear, and
 * this bounds its time and memory: it runs inside a local activity. A longer answer counts only when it is the commit.
 */
export const MAX_COMMIT_SCAN_CHARS = 1_000_000;

/** Keys that mark a JSON object as a commit rather than any JSON the worker happened to write. */
const COMMIT_FIELDS = ['commit_id', 'creates', 'links', 'proposes_updates'];

/**
 * Finds the commit in a worker's final answer: the whole answer as JSON, a fenced code block (```json … ```), or a
 * JSON object embedded in prose, whichever comes first. An object counts as a commit when it has one of the commit
 * fields; an answer that plainly tries to give one (a fenced `json` block, or text starting with `{`) but does not
 * parse is an error commit. An answer longer than `MAX_COMMIT_SCAN_CHARS` counts only as a whole; one that might hold
 * a commit inside is an error commit saying so.
 */
export function parseCommit(answer: string): ParsedCommit {
  const text = answer.trim();
  if (text === '') return { kind: 'none' };
  const candidates: { json: string; intended: boolean }[] = [];
  if (text.startsWith('{')) candidates.push({ json: text, intended: true });
  const searched = text.length <= MAX_COMMIT_SCAN_CHARS;
  if (searched) {
    for (const match of text.matchAll(/```(json)?[ \t]*\r?\n([\s\S]*?)```/g)) {
      candidates.push({ json: match[2] ?? '', intended: match[1] === 'json' });
    }
    for (const json of embeddedObjects(text).spans) candidates.push({ json, intended: false });
  }

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
  if (!searched && (text.includes('{') || text.includes('```'))) {
    return {
      kind: 'error',
      error:
        `the answer is ${text.length} characters long: a commit is looked for inside answers of at most ` +
        `${MAX_COMMIT_SCAN_CHARS} characters, or given as the whole answer`,
    };
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

/** The balanced `{…}` spans found in a text, and the work it took: characters and braces looked at. */
export interface EmbeddedObjects {
  spans: string[];
  steps: number;
}

/**
 * Balanced `{…}` spans of `text` (outermost first, at most 20), skipping braces inside JSON strings: from each `{`
 * outside the spans found so far, reading on (outside strings at first) to the `}` that closes it, if one does.
 *
 * Linear in the text's length. Reading on from every `{` that never closes read the rest of the text once per such
 * brace, so a brace-heavy answer took quadratic time (seconds for 100 KB, inside a local activity). Instead, where
 * each brace level and each string closes, read from any position, is worked out once for every position, from the
 * end of the text backwards; each `{` then looks its span up.
 */
export function embeddedObjects(text: string): EmbeddedObjects {
  const found: EmbeddedObjects = { spans: [], steps: 0 };
  const closes = closingPositions(text, found);
  for (let start = text.indexOf('{'); start !== -1 && found.spans.length < 20; start = text.indexOf('{', start + 1)) {
    found.steps++;
    const end = closes.level[start + 1] ?? -1;
    if (end !== -1) {
      found.spans.push(text.slice(start, end + 1));
      start = end;
    }
  }
  return found;
}

/**
 * For every position `p` of `text` (and one past its end, -1 meaning "never"):
 * - `string[p]`: the `"` that ends a JSON string whose contents start at `p` (a `\` skips the character after it);
 * - `level[p]`: the `}` that closes a brace level read from `p` outside any string, past nested levels and strings.
 * Both depend only on positions after `p`, so one backward pass computes them.
 */
function closingPositions(text: string, work: { steps: number }): { string: Int32Array; level: Int32Array } {
  const n = text.length;
  const string = new Int32Array(n + 2).fill(-1);
  const level = new Int32Array(n + 2).fill(-1);
  const at = (array: Int32Array, position: number) => (position <= n ? (array[position] ?? -1) : -1);
  for (let p = n - 1; p >= 0; p--) {
    work.steps++;
    const char = text[p];
    string[p] = char === '"' ? p : char === '\\' ? at(string, p + 2) : at(string, p + 1);
    if (char === '}') level[p] = p;
    else if (char === '{' || char === '"') {
      const inner = char === '{' ? at(level, p + 1) : at(string, p + 1);
      level[p] = inner === -1 ? -1 : at(level, inner + 1);
    } else level[p] = at(level, p + 1);
  }
  return { string, level };
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
