/**
 * A world's variables as one `.env`-style text: parsing it into a map, editing it while keeping comments and order,
 * and filling `{{ name }}` placeholders from the map. Pure code: the text is stored raw and parsed at each use.
 *
 * Rules:
 * - One `KEY=value` per line; blank lines and lines whose first non-blank character is `#` are skipped. Comments are
 *   full-line only: a `#` inside a value is part of the value.
 * - Whitespace around the key and around `=` is ignored; the value is the rest of the line after the first `=`, so
 *   it may itself contain `=`. Keys are case-sensitive; the last assignment of a key wins.
 * - A value wholly wrapped in one pair of matching quotes (`"…"` or `'…'`) loses that pair and keeps everything else
 *   literally, inner whitespace included; there is no escape processing, so `\n` stays a backslash and an `n`.
 *   An unquoted value is trimmed. Values cannot span lines.
 * - LF, CRLF and lone CR line ends are all accepted; a leading byte-order mark is ignored.
 * - Any other line (no `=`, an empty key, a key outside {@link ENV_NAME_PATTERN}) is skipped and reported.
 */

import { hasUnstorableText } from './text';
import { WORKING_DIRECTORY_WORLD_VARIABLE } from './world-variables';

/** The world variable naming the directory the shell and file tools work in (`baton world dir PATH`). */
export const WORKING_DIRECTORY_VARIABLE = WORKING_DIRECTORY_WORLD_VARIABLE.name;

/** Valid variable names: a letter or `_`, then letters, digits, `_`, `.` or `-`. Case-sensitive. */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

export interface ParseEnvTextOptions {
  /**
   * Called once per skipped line, in order, with its 1-based line number, its text (without the line end) and why
   * it was skipped. The caller decides how to log it (Baton logs at debug level).
   */
  onInvalidLine?: (lineNumber: number, line: string, reason: string) => void;
}

/** A variables text that cannot be written as asked (an invalid name, a value with a line break). */
export class EnvTextError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

type ScannedLine =
  { kind: 'skip' } | { kind: 'invalid'; reason: string } | { kind: 'assignment'; key: string; value: string };

/** One source line: its text without the line end, and the line end that followed it (`''` for the last line). */
interface SourceLine {
  text: string;
  end: string;
}

function splitLines(text: string): SourceLine[] {
  const lines: SourceLine[] = [];
  // A lone CR ends a line too (old Mac files): values cannot hold one, so it never belongs to a value.
  const pattern = /\r\n|\r|\n/g;
  let start = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    lines.push({ text: text.slice(start, match.index), end: match[0] });
    start = match.index + match[0].length;
  }
  lines.push({ text: text.slice(start), end: '' });
  return lines;
}

function unquote(value: string): string {
  if (value.length >= 2) {
    const first = value[0];
    if ((first === '"' || first === "'") && value.endsWith(first)) return value.slice(1, -1);
  }
  return value;
}

function scanLine(line: string): ScannedLine {
  const content = line.trim();
  if (content === '' || content.startsWith('#')) return { kind: 'skip' };
  const equals = content.indexOf('=');
  if (equals < 0) return { kind: 'invalid', reason: "no '='" };
  const key = content.slice(0, equals).trim();
  if (key === '') return { kind: 'invalid', reason: 'empty name' };
  if (!ENV_NAME_PATTERN.test(key)) return { kind: 'invalid', reason: `invalid name '${key}'` };
  return { kind: 'assignment', key, value: unquote(content.slice(equals + 1).trim()) };
}

/**
 * Parses `.env`-style text into a map of variables (rules in the module doc). Missing text gives an empty map.
 *
 * The map has a null prototype, so a variable named `__proto__` or `constructor` is an ordinary entry and a lookup
 * of an unset name is `undefined`, never an inherited member.
 */
export function parseEnvText(text: string | undefined, options: ParseEnvTextOptions = {}): Record<string, string> {
  const variables = Object.create(null) as Record<string, string>;
  if (text === undefined) return variables;
  splitLines(text).forEach((line, index) => {
    const scanned = scanLine(line.text);
    if (scanned.kind === 'assignment') variables[scanned.key] = scanned.value;
    else if (scanned.kind === 'invalid') options.onInvalidLine?.(index + 1, line.text, scanned.reason);
  });
  return variables;
}

/** Returns a reason when `KEY=value` cannot be written to a variables text, else `undefined`. */
export function envAssignmentProblem(key: string, value: string): string | undefined {
  if (!ENV_NAME_PATTERN.test(key)) {
    return `variable name '${key}' must start with a letter or '_' and hold only letters, digits, '_', '.' or '-'`;
  }
  if (/[\r\n]/.test(value)) return `the value of '${key}' must not contain a line break`;
  if (hasUnstorableText(value)) {
    return `the value of '${key}' must not hold a NUL character (U+0000) or a lone UTF-16 surrogate`;
  }
  return undefined;
}

/**
 * Why a whole variables text cannot be stored (Postgres refuses U+0000 and lone surrogates in text), naming the first
 * line that holds such a character; `undefined` when it can.
 */
export function envTextProblem(text: string): string | undefined {
  const lines = splitLines(text);
  for (const [index, line] of lines.entries()) {
    if (line.text.includes('\u0000')) return `line ${index + 1} holds a NUL character (U+0000), which cannot be stored`;
    if (hasUnstorableText(line.text)) {
      return `line ${index + 1} holds a lone UTF-16 surrogate (broken text encoding), which cannot be stored`;
    }
  }
  return undefined;
}

/** The line that assigns `value` to `key`, quoted only when the bare value would not parse back unchanged. */
function formatAssignment(key: string, value: string): string {
  const bare = `${key}=${value}`;
  const scanned = scanLine(bare);
  return scanned.kind === 'assignment' && scanned.value === value ? bare : `${key}="${value}"`;
}

/**
 * Sets variables in a variables text, keeping every other line (comments, blank and invalid lines, order, line ends)
 * byte for byte. A key already assigned has its last assignment rewritten in place as `KEY=value`; a new key is
 * appended as a `KEY=value` line, in the order of `assignments`. Values are double-quoted only when needed (surrounding
 * whitespace, or already wrapped in quotes), so `parseEnvText(setEnvVariables(t, a))` equals
 * `{ ...parseEnvText(t), ...a }`.
 * @throws EnvTextError when a name is invalid or a value holds a line break (see {@link envAssignmentProblem});
 *   nothing is changed then.
 */
export function setEnvVariables(text: string | undefined, assignments: Readonly<Record<string, string>>): string {
  const entries = Object.entries(assignments);
  for (const [key, value] of entries) {
    const problem = envAssignmentProblem(key, value);
    if (problem !== undefined) throw new EnvTextError(problem);
  }
  const source = text ?? '';
  const lines = splitLines(source);
  const lastIndex = new Map<string, number>();
  lines.forEach((line, index) => {
    const scanned = scanLine(line.text);
    if (scanned.kind === 'assignment') lastIndex.set(scanned.key, index);
  });

  const appended: string[] = [];
  for (const [key, value] of entries) {
    const index = lastIndex.get(key);
    const line = index === undefined ? undefined : lines[index];
    if (line) line.text = formatAssignment(key, value);
    else appended.push(formatAssignment(key, value));
  }
  if (appended.length === 0) return lines.map((line) => line.text + line.end).join('');

  const eol = lines[0]?.end === '\r\n' ? '\r\n' : '\n';
  const last = lines[lines.length - 1];
  // The text after the last line end is empty in a text that ends with one: the new lines go there.
  if (last && last.text === '') lines.pop();
  else if (last) last.end = eol;
  return lines.map((line) => line.text + line.end).join('') + appended.map((line) => line + eol).join('');
}

/**
 * Removes every assignment of `key` (each line with its own line end) and keeps everything else byte for byte.
 * A text without such an assignment, or an invalid `key`, is returned unchanged.
 */
export function unsetEnvVariable(text: string | undefined, key: string): string {
  return splitLines(text ?? '')
    .filter((line) => {
      const scanned = scanLine(line.text);
      return !(scanned.kind === 'assignment' && scanned.key === key);
    })
    .map((line) => line.text + line.end)
    .join('');
}

/** `{{`, then anything without braces, then `}}`; the inside is checked for a plain name. */
const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
const PLACEHOLDER_NAME = /^[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*$/;

/**
 * Fills `{{ name }}` placeholders (any spaces or tabs inside the braces, or none) with the variables' values, in a
 * single pass: a value that itself contains `{{ x }}` is inserted as it is. An unset name becomes the empty string.
 * There are no expressions: a `{{ … }}` whose inside is not a plain name ({@link ENV_NAME_PATTERN}, so `{{ a.b }}`
 * names the variable `a.b`) is left exactly as written, e.g. `{{ a + b }}` or `{{ a.b() }}`. A template without
 * `{{` is returned unchanged.
 */
export function interpolate(template: string, variables: Readonly<Record<string, string>>): string {
  if (!template.includes('{{')) return template;
  return template.replace(PLACEHOLDER, (placeholder, inside: string) => {
    const name = PLACEHOLDER_NAME.exec(inside)?.[1];
    if (name === undefined) return placeholder;
    return Object.hasOwn(variables, name) ? (variables[name] ?? '') : '';
  });
}
