/**
 * Recorded histories are committed, so they must not carry the recording machine's paths: failures crossing
 * Temporal keep their stack trace, whose frames name files by absolute path, and an error message or a tool result
 * can name one too. {@link scrubMachinePaths} rewrites them before a history is written.
 */

/** What the repository's root directory becomes in a recorded history. */
export const REPO_PLACEHOLDER = '<repo>';
/** What a stack frame's file outside the repository becomes (its base name is kept). */
export const OUTSIDE_PLACEHOLDER = '<outside>';

/**
 * Takes a history as `historyToJSON` writes it and returns the same JSON text with `root` replaced by
 * {@link REPO_PLACEHOLDER} in every string, inside `json/plain` payloads too (their data is base64), and every other
 * absolute file path of a stack frame replaced by {@link OUTSIDE_PLACEHOLDER}. Idempotent; the event structure, the
 * ids and the payloads' shapes are unchanged, so the history replays as before.
 */
export function scrubMachinePaths(historyJson: string, root: string): string {
  const rootPrefix = root.replace(/[/\\]+$/, '');
  const replaceRoot = (text: string): string => (rootPrefix ? text.split(rootPrefix).join(REPO_PLACEHOLDER) : text);
  const scrubStack = (stack: string): string =>
    replaceRoot(stack).replace(
      /(\(|at )((?:\/|[A-Za-z]:\\)[^():\n]+)/g,
      (_match, lead: string, file: string) => `${lead}${OUTSIDE_PLACEHOLDER}/${file.split(/[/\\]/).pop() ?? ''}`,
    );

  const visit = (value: unknown, key: string): unknown => {
    if (typeof value === 'string') return key === 'stackTrace' ? scrubStack(value) : replaceRoot(value);
    if (Array.isArray(value)) return value.map((item) => visit(item, key));
    if (value === null || typeof value !== 'object') return value;
    const object = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [name, field] of Object.entries(object)) out[name] = visit(field, name);
    if (isJsonPayload(object) && typeof object.data === 'string') {
      const text = Buffer.from(object.data, 'base64').toString('utf8');
      const scrubbed = replaceRoot(text);
      if (scrubbed !== text) out.data = Buffer.from(scrubbed, 'utf8').toString('base64');
      else out.data = object.data;
    }
    return out;
  };

  return JSON.stringify(visit(JSON.parse(historyJson), ''), null, 2);
}

/** A Temporal payload whose data is JSON text (`metadata.encoding` is `json/plain`, base64-encoded). */
function isJsonPayload(object: Record<string, unknown>): boolean {
  const metadata = object.metadata;
  if (metadata === null || typeof metadata !== 'object') return false;
  const encoding = (metadata as Record<string, unknown>).encoding;
  return typeof encoding === 'string' && Buffer.from(encoding, 'base64').toString('utf8') === 'json/plain';
}
