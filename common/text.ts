/** Text helpers shared by workflows and activities (pure; no Node built-ins, so byte lengths are computed by hand). */

/** UTF-8 byte length of a string. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

/** Truncates `text` to at most `maxBytes` UTF-8 bytes, ending with an ellipsis when cut. */
export function truncateBytes(text: string, maxBytes: number): string {
  if (utf8Length(text) <= maxBytes) return text;
  const ellipsis = '…';
  const budget = maxBytes - utf8Length(ellipsis);
  let out = '';
  let used = 0;
  for (const char of text) {
    const size = utf8Length(char);
    if (used + size > budget) break;
    out += char;
    used += size;
  }
  return out + ellipsis;
}

/** The first non-empty line of `text`, trimmed. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .map((line) => line.trim())
      .find((line) => line.length > 0) ?? ''
  );
}

/**
 * Workflow `staticSummary` shown in the Web UI: the agent and the first line of its message, at most 200 bytes
 * (docs/architecture.md §5).
 */
export function turnSummary(agent: string, message: string): string {
  return truncateBytes(`${agent}: ${firstLine(message)}`, 200);
}

/**
 * Whether Postgres would refuse `text` in a `text` or `jsonb` column: it holds U+0000, or a UTF-16 surrogate
 * without its pair.
 */
export function hasUnstorableText(text: string): boolean {
  UNSTORABLE.lastIndex = 0;
  return UNSTORABLE.test(text);
}

// Matching NUL is the point of this pattern.
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * `text` as Postgres can store it: U+0000 and lone surrogates become U+FFFD (the replacement character). Tool output
 * and model replies are cleaned this way rather than refused: refusing would lose the result of a call that already
 * ran, and a retry would run it again.
 */
export function storableText(text: string): string {
  return hasUnstorableText(text) ? text.replace(UNSTORABLE, '\uFFFD') : text;
}

/** A number of seconds as people say it: `1 second`, `90 seconds`, `2 hours 5 minutes`, `7 days`. */
export function describeSeconds(totalSeconds: number): string {
  const seconds = Math.max(0, Math.round(totalSeconds));
  if (seconds < 120) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  const parts: string[] = [];
  let rest = seconds;
  for (const [unit, size] of [
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
    ['second', 1],
  ] as const) {
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0) parts.push(`${count} ${unit}${count === 1 ? '' : 's'}`);
  }
  return parts.join(' ');
}

/** How a wait in progress reads in statuses and the Web UI: `waiting until <time>: <reason>`. */
export function describeWait(wait: { until: string; reason: string }): string {
  return `waiting until ${wait.until}: ${wait.reason}`;
}
