/**
 * Watchers: agents that wake when a root's shared env data changes. What a watcher is, which keys its patterns
 * match, the limits that keep watchers from waking each other for ever, the ids of its workflow and threads, and the
 * `[Watch Context]` block its turn receives. Pure code: the workflow, the activities and the clients share it.
 */
import { MAX_ENV_KEY_LENGTH } from './env-data';
import { AGENT_NAME_PATTERN } from './ids';

/** A watcher's name: like an agent's (it names a workflow and threads). */
export const WATCHER_NAME_PATTERN = AGENT_NAME_PATTERN;
/** Most key patterns one watcher may have. */
export const MAX_WATCH_PATTERNS = 20;
/** Longest instruction a watcher may carry. */
export const MAX_WATCH_MESSAGE_CHARS = 4000;
/** Longest debounce window, in seconds. */
export const MAX_DEBOUNCE_SECONDS = 3600;
/** Most changes one wake-up lists (more are counted, and the turn reads them from env data). */
export const MAX_CHANGES_PER_WAKEUP = 100;

/** Where a watcher came from: an agent's frontmatter (for every root it runs in) or a run-time request (one root). */
export type WatcherOrigin = 'frontmatter' | 'run_time';
export type WatcherStatus = 'active' | 'paused' | 'removed' | 'stopped';

/** What a watcher is asked to watch. */
export interface WatchSpec {
  /** Key patterns: `*` matches one path segment, `**` any number of them (`findings/*`, `arc/**`, `arc_task`). */
  keys: string[];
  /** Changes within this many seconds of the first are handled by one wake-up. @default world's, else 2 */
  debounceS?: number;
  /** The instruction the watcher's turn receives with the changes. */
  message?: string;
}

/** A watcher of one root, as stored. */
export interface Watcher extends WatchSpec {
  rootThreadId: string;
  name: string;
  agent: string;
  origin: WatcherOrigin;
  createdBy: string;
  status: WatcherStatus;
  reason?: string;
  pausedUntil?: string;
  /** The env-event number handled up to. */
  cursor: number;
  wakeups: number;
  lastWokeAt?: string;
  createdAt: string;
}

/**
 * Limits every watcher of a world runs under: defaults, each overridden by a world variable (their names are in
 * common/world-variables.ts, `WATCH_LIMIT_VARIABLES`).
 */
export interface WatchLimits {
  /** How long a watcher waits after the first change before it wakes, when it names no `debounce_s`. */
  debounceS: number;
  /** Watchers waking watchers: a change made by a chain this deep does not wake another. */
  maxDepth: number;
  /** Seconds between the end of one wake-up and the start of the next. */
  cooldownS: number;
  /** Wake-ups a watcher may have in any hour in one root; past it, it pauses until the hour allows one more. */
  maxPerHour: number;
}

export const DEFAULT_WATCH_LIMITS: WatchLimits = Object.freeze({
  debounceS: 2,
  maxDepth: 3,
  cooldownS: 0,
  maxPerHour: 60,
});

/** Signal a watcher's workflow gets when a change it may watch committed (and when it is added or removed). */
export const ENV_CHANGED_SIGNAL = 'envChanged';

/**
 * What the signal may carry: the W3C `traceparent` of the span that wrote the change (a traced writer's tool run, or
 * an application's span around a person's decision), so the wake-up it starts links to that write. A signal sent by
 * the sweep, or by an untraced writer, carries nothing.
 */
export interface EnvChangedSignalInput {
  traceparent?: string;
}

/** Input of the watcher workflow (`workflows/watcher.ts`). */
export interface WatcherWorkflowInput {
  rootThreadId: string;
  watcher: string;
  /** Carried across continue-as-new. */
  carried?: {
    /** Start times (ms) of the wake-ups of the last hour: the rate limit counts them. */
    recentWakeups: number[];
    /** When the last wake-up ended (ms): the cooldown counts from it. */
    lastEndedAt?: number;
    /** A change arrived that the previous run had not looked at yet. */
    pending: boolean;
    /** Wake-ups of earlier runs. */
    wakeupsSoFar: number;
  };
}

/** Workflow id of a root's watcher: `baton/<root>/watch.<name>` (agent names hold no `.`, so no delegation's id). */
export function watcherWorkflowId(rootThreadId: string, name: string): string {
  return `baton/${rootThreadId}/watch.${name}`;
}

/** Thread id of a watcher's n-th wake-up: `<root>/watch.<name>.<n>`; its turn's workflow id is `baton/` + that. */
export function wakeupThreadId(rootThreadId: string, name: string, wakeup: number): string {
  return `${rootThreadId}/watch.${name}.${wakeup}`;
}

/**
 * The watcher and wake-up a thread id names when it is a wake-up's thread (`<root>/watch.<name>.<n>`), else
 * `undefined`. Agent names, which name delegation threads, hold no `.`, so no other thread id looks like one.
 */
export function wakeupOfThread(threadId: string): { watcher: string; wakeup: number } | undefined {
  const match = /^[^/]+\/watch\.([a-z0-9][a-z0-9_-]*)\.([0-9]+)$/.exec(threadId);
  return match === null ? undefined : { watcher: match[1] as string, wakeup: Number(match[2]) };
}

/** Most wildcards (`*` within a segment, or a `**` segment) one key pattern may hold. */
export const MAX_WATCH_PATTERN_WILDCARDS = 16;

/** Why `pattern` is not a valid key pattern, or `undefined`. */
export function watchPatternProblem(pattern: string): string | undefined {
  if (typeof pattern !== 'string' || pattern.length === 0) return 'a key pattern must not be empty';
  if (pattern.length > MAX_ENV_KEY_LENGTH) {
    return `the key pattern '${pattern.slice(0, 40)}…' is longer than ${MAX_ENV_KEY_LENGTH} characters`;
  }
  const segments = pattern.split('/');
  for (const segment of segments) {
    if (segment === '' || !/^(\*\*|[A-Za-z0-9_.*-]+)$/.test(segment) || (segment.includes('**') && segment !== '**')) {
      return (
        `the key pattern '${pattern}' may hold only key characters (letters, digits, _ - . /), '*' for any part of ` +
        "one segment and '**' as a whole segment for any number of segments"
      );
    }
  }
  const wildcards = segments.reduce(
    (count, segment) => count + (segment === '**' ? 1 : segment.split('*').length - 1),
    0,
  );
  if (wildcards > MAX_WATCH_PATTERN_WILDCARDS) {
    return `the key pattern '${pattern.slice(0, 40)}…' holds ${wildcards} wildcards; at most ${MAX_WATCH_PATTERN_WILDCARDS} are allowed`;
  }
  return undefined;
}

/*
 * Matching runs on a worker's main thread after every write of a root, with patterns a model may write, so it must
 * never backtrack: its time is bounded by the key's length times the pattern's, whatever the pattern. Both levels use
 * the same argument. A glob whose only wildcard is "anything here" is literal pieces separated by wildcards; the
 * first piece must start the subject and the last must end it, and each piece between may be taken at the first place
 * it fits after the one before: if a match takes it later, moving it to that first place keeps every other piece
 * where it was and leaves more room for the rest. So one left-to-right scan decides, with nothing to undo.
 */

/** Whether one segment of a key matches one segment of a pattern (`*` standing for any run of characters). */
function segmentMatches(glob: string, segment: string): boolean {
  const pieces = glob.split('*');
  if (pieces.length === 1) return glob === segment;
  const first = pieces[0] as string;
  const last = pieces[pieces.length - 1] as string;
  if (first.length + last.length > segment.length || !segment.startsWith(first) || !segment.endsWith(last)) {
    return false;
  }
  let from = first.length;
  const end = segment.length - last.length;
  for (const piece of pieces.slice(1, -1)) {
    const at = segment.indexOf(piece, from);
    if (at === -1 || at + piece.length > end) return false;
    from = at + piece.length;
  }
  return true;
}

/** Whether the pattern segments `run` match the key's segments from `at` on, one each. */
function runMatchesAt(run: readonly string[], key: readonly string[], at: number): boolean {
  return run.every((glob, index) => segmentMatches(glob, key[at + index] as string));
}

/** Whether the key's segments match the pattern's, `**` standing for any number of whole segments (none included). */
function segmentsMatch(pattern: readonly string[], key: readonly string[]): boolean {
  // The runs of one-segment globs between the `**` segments: the pieces of the argument above, a segment a letter.
  const runs: string[][] = [[]];
  for (const glob of pattern) {
    if (glob === '**') runs.push([]);
    else (runs[runs.length - 1] as string[]).push(glob);
  }
  const first = runs[0] as string[];
  const last = runs[runs.length - 1] as string[];
  if (runs.length === 1) return first.length === key.length && runMatchesAt(first, key, 0);
  if (first.length + last.length > key.length) return false;
  if (!runMatchesAt(first, key, 0) || !runMatchesAt(last, key, key.length - last.length)) return false;
  let from = first.length;
  const end = key.length - last.length;
  for (const run of runs.slice(1, -1)) {
    let at = from;
    while (at + run.length <= end && !runMatchesAt(run, key, at)) at += 1;
    if (at + run.length > end) return false;
    from = at + run.length;
  }
  return true;
}

/** Whether `key` is one `patterns` name. Never backtracks: see above. */
export function keyMatches(patterns: readonly string[], key: string): boolean {
  const segments = key.split('/');
  return patterns.some((pattern) => segmentsMatch(pattern.split('/'), segments));
}

/** What of a request a watcher stores: its keys, and its debounce and message when given. */
export function watchSpecOf(request: WatchSpec): WatchSpec {
  return {
    keys: request.keys,
    ...(request.debounceS === undefined ? {} : { debounceS: request.debounceS }),
    ...(request.message === undefined ? {} : { message: request.message }),
  };
}

/** Why a watch request is not valid, or `undefined`. */
export function watchSpecProblem(spec: { keys?: unknown; debounceS?: unknown; message?: unknown }): string | undefined {
  if (!Array.isArray(spec.keys) || spec.keys.length === 0) return 'a watcher needs at least one key pattern';
  if (spec.keys.length > MAX_WATCH_PATTERNS) return `a watcher may have at most ${MAX_WATCH_PATTERNS} key patterns`;
  for (const pattern of spec.keys) {
    const problem = watchPatternProblem(pattern as string);
    if (problem !== undefined) return problem;
  }
  if (spec.debounceS !== undefined) {
    const value = spec.debounceS;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_DEBOUNCE_SECONDS) {
      return `debounce must be a number of seconds from 0 to ${MAX_DEBOUNCE_SECONDS}`;
    }
  }
  if (spec.message !== undefined) {
    if (typeof spec.message !== 'string' || spec.message.trim() === '') return 'the message must not be empty';
    if (spec.message.length > MAX_WATCH_MESSAGE_CHARS) {
      return `the message is longer than ${MAX_WATCH_MESSAGE_CHARS} characters`;
    }
  }
  return undefined;
}

/** Why `name` is not a valid watcher name, or `undefined`. */
export function watcherNameProblem(name: string): string | undefined {
  return WATCHER_NAME_PATTERN.test(name)
    ? undefined
    : `watcher name '${name}' must be 1-64 lowercase letters, digits, '_' or '-', starting with a letter or digit`;
}

/**
 * The name of an agent's i-th frontmatter watcher (0-based) of `count`: the agent's name when it declares one, else
 * `<agent>-<i+1>`.
 */
export function frontmatterWatcherName(agent: string, index: number, count: number): string {
  return count === 1 ? agent : `${agent}-${index + 1}`;
}

/** One committed change a wake-up is about. */
export interface WatchChange {
  seq: number;
  key: string;
  action: 'stored' | 'updated' | 'deleted';
  /** The version before the change (`null`: the key did not exist). */
  oldVersion: number | null;
  /** The version after it (`null`: deleted). */
  newVersion: number | null;
  writer: { agent: string; thread: string };
  at: string;
}

/** The `[Watch Context]` block, then the watcher's instruction: the message of a wake-up's turn. */
export function watchMessage(input: {
  watcher: string;
  agent: string;
  rootThreadId: string;
  keys: readonly string[];
  changes: readonly WatchChange[];
  /** Changes beyond those listed. */
  moreChanges: number;
  depth: number;
  wakeup: number;
  message?: string;
}): string {
  const lines = [
    '[Watch Context]',
    `You are '${input.agent}', woken as watcher '${input.watcher}' (wake-up ${input.wakeup}) of conversation ` +
      `'${input.rootThreadId}', because shared env data you watch (${input.keys.join(', ')}) changed:`,
  ];
  for (const change of input.changes) {
    lines.push(`- ${describeWatchChange(change)} (thread ${change.writer.thread}) at ${change.at}`);
  }
  if (input.moreChanges > 0) lines.push(`- … and ${input.moreChanges} more change(s) (read them with list_env_data).`);
  lines.push(
    'Read the values with get_env_data. Your own writes do not wake you again' +
      (input.depth > 1
        ? `; this wake-up is ${input.depth} watchers deep in a chain of watchers waking each other.`
        : '.'),
  );
  lines.push('[/Watch Context]', '');
  lines.push(input.message ?? 'Look at these changes and act on them as your instructions say.');
  return lines.join('\n');
}

/** One change in a line: `findings/a: stored as version 1 by finder`. */
export function describeWatchChange(
  change: Pick<WatchChange, 'key' | 'action' | 'oldVersion' | 'newVersion' | 'writer'>,
): string {
  const versions =
    change.action === 'deleted'
      ? `deleted at version ${change.oldVersion ?? '?'}`
      : change.oldVersion === null
        ? `stored as version ${change.newVersion}`
        : `updated from version ${change.oldVersion} to ${change.newVersion}`;
  return `${change.key}: ${versions} by ${change.writer.agent}`;
}
