/**
 * Schedules: names, ids, the run input, the schedule preamble and the checks of what a user types. Pure, so the
 * client, the workflow and the tests share one definition of each.
 */

/** Schedule names: lowercase letters, digits, `_` and `-`; short, because every run's thread id embeds one. */
export const SCHEDULE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,39}$/;

/** The shortest `--every` Baton accepts unless the client is told otherwise (tests only). */
export const DEFAULT_MINIMUM_INTERVAL_SECONDS = 60;

/** Returns a reason when `name` is not a valid schedule name, else `undefined`. */
export function scheduleNameProblem(name: string): string | undefined {
  if (SCHEDULE_NAME_PATTERN.test(name)) return undefined;
  return `schedule name '${name}' must be 1-40 characters of lowercase letters, digits, '_' or '-', starting with a letter or digit`;
}

/**
 * The Temporal Schedule id of a Baton schedule, also the workflow id prefix of its runs: Temporal names each run
 * `<prefix>-<scheduled time>`, so `TemporalScheduledById="baton-schedule-<name>"` lists them in the Web UI.
 */
export function scheduleId(name: string): string {
  return `${SCHEDULE_ID_PREFIX}${name}`;
}

export const SCHEDULE_ID_PREFIX = 'baton-schedule-';

/** The schedule name inside a Baton schedule id, or `undefined` for a schedule Baton did not make. */
export function scheduleNameOf(id: string): string | undefined {
  if (!id.startsWith(SCHEDULE_ID_PREFIX)) return undefined;
  const name = id.slice(SCHEDULE_ID_PREFIX.length);
  return scheduleNameProblem(name) === undefined ? name : undefined;
}

/** `2025-01-02T09:00:00.000Z` → `20250102T090000Z`: seconds are the finest grain Temporal schedules at. */
function compactTime(iso: string): string {
  return iso.replace(/\.\d+Z$/, 'Z').replace(/[-:]/g, '');
}

/**
 * The root thread a `--new-thread` run starts: derived from the schedule and the run's scheduled time alone, so a
 * retried or repeated start of the same run (a retry, a second backfill of the same time) finds the thread the first
 * one made instead of making another. At most 6 + 40 + 1 + 16 = 63 characters, a valid thread id.
 */
export function runThreadId(schedule: string, scheduledAt: string): string {
  return `sched-${schedule}-${compactTime(scheduledAt)}`;
}

/**
 * The Update id of the message a run posts: one per schedule and scheduled time, so a retried delivery (or the same
 * time run twice into one standing thread) is deduplicated by Temporal instead of running a second turn.
 */
export function runUpdateId(schedule: string, scheduledAt: string): string {
  return `schedule:${schedule}:${compactTime(scheduledAt)}`;
}

/** Where each run's message goes. */
export type ScheduleTarget = { kind: 'thread'; threadId: string } | { kind: 'new-thread' };

/** When a schedule fires, as the user gave it (Temporal's own description turns a cron into calendars). */
export interface ScheduleTiming {
  cron?: string;
  /** A duration such as `15m`. */
  every?: string;
  /** IANA time zone of the cron. @default 'UTC' */
  timezone?: string;
  jitter?: string;
  /** ISO time after which nothing runs. */
  until?: string;
}

/** The input of every run of a schedule, kept in the schedule's action (so `update` can change it). */
export interface ScheduledRunInput {
  schedule: string;
  agent: string;
  message: string;
  target: ScheduleTarget;
  /** @default 'default' */
  world?: string;
  /** For `describe` only: the run does not read it. */
  timing: ScheduleTiming;
  /** Used when the run was not started by a Temporal Schedule (tests, replay recording): its nominal time. */
  scheduledAt?: string;
}

/** What one run did. Small: the reply is cut, the transcript is in Postgres. */
export interface ScheduledRunResult {
  schedule: string;
  threadId: string;
  scheduledAt: string;
  /** Whether this run started the thread (always `false` for `--thread` schedules and for a repeated run). */
  createdThread: boolean;
  turn: number;
  status: string;
  /** The reply's first characters. */
  reply: string;
}

/** How many characters of a reply a run's result keeps. */
export const RUN_REPLY_CHARS = 500;

/** The provenance block a scheduled message starts with, so the agent knows no human typed it just now. */
export function buildSchedulePreamble(input: {
  schedule: string;
  scheduledAt: string;
  target: ScheduleTarget;
}): string {
  return [
    '---',
    '[Schedule Context]',
    `Sent by schedule: ${input.schedule}`,
    `Scheduled for: ${input.scheduledAt}`,
    input.target.kind === 'thread'
      ? 'This conversation receives this message on every run of the schedule; earlier runs are above.'
      : 'Each run of this schedule starts a new conversation; no human is waiting in it for your answer.',
    '---',
  ].join('\n');
}

/** The message a scheduled run posts: the preamble, a blank line, then the schedule's message. */
export function withSchedulePreamble(
  message: string,
  input: { schedule: string; scheduledAt: string; target: ScheduleTarget },
): string {
  return `${buildSchedulePreamble(input)}\n\n${message}`;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Milliseconds of a duration such as `90s`, `15m`, `1h30m` or `1d`, or `undefined` when `text` is not one.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(ms|s|m|h|d))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(/(\d+)(ms|s|m|h|d)/g)) {
    total += Number(amount) * (DURATION_UNITS[unit ?? ''] ?? 0);
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/** `90000` → `1m30s`: the shortest duration text for a number of milliseconds. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count}${unit}`);
    rest -= count * size;
  }
  return parts.join('');
}

const CRON_MACROS = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** The five cron fields: name, lowest and highest value, and the names a value may be written as. */
const CRON_FIELDS: { name: string; min: number; max: number; names?: readonly string[]; namesFrom?: number }[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS, namesFrom: 1 },
  { name: 'day of week', min: 0, max: 7, names: WEEKDAYS, namesFrom: 0 },
];

/**
 * Returns a reason when `cron` is not a five-field cron expression (minute hour day-of-month month day-of-week, with
 * `*`, lists, ranges, steps and month/weekday names) or one of the `@daily`-style macros, else `undefined`. Baton
 * checks it before asking Temporal, so a typo creates nothing and the error says which field is wrong; intervals go
 * through `--every`, not `@every`.
 */
export function cronProblem(cron: string): string | undefined {
  const text = cron.trim();
  if (text.startsWith('@')) {
    if (text.toLowerCase().startsWith('@every')) return `invalid cron '${cron}': use --every for intervals`;
    return CRON_MACROS.includes(text.toLowerCase())
      ? undefined
      : `invalid cron '${cron}': the macros are ${CRON_MACROS.join(', ')}`;
  }
  const fields = text.split(/\s+/);
  if (fields.length !== 5) {
    return `invalid cron '${cron}': expected 5 fields (minute hour day-of-month month day-of-week), got ${text === '' ? 0 : fields.length}`;
  }
  for (const [index, field] of fields.entries()) {
    const spec = CRON_FIELDS[index];
    if (!spec) continue;
    const problem = cronFieldProblem(field, spec);
    if (problem) return `invalid cron '${cron}': ${spec.name} field '${field}' ${problem}`;
  }
  return undefined;
}

function cronFieldProblem(field: string, spec: (typeof CRON_FIELDS)[number]): string | undefined {
  const value = (text: string): number | undefined => {
    if (/^\d{1,2}$/.test(text)) return Number(text);
    const named = spec.names?.indexOf(text.toLowerCase()) ?? -1;
    return named >= 0 ? named + (spec.namesFrom ?? 0) : undefined;
  };
  for (const item of field.split(',')) {
    const [range, step, extra] = item.split('/');
    if (extra !== undefined || range === undefined || range === '') return 'is not a cron field';
    if (step !== undefined && !/^[1-9]\d{0,1}$/.test(step)) return `has an invalid step '${step}'`;
    if (range === '*') continue;
    const [low, high, more] = range.split('-');
    if (more !== undefined) return `has an invalid range '${range}'`;
    for (const part of high === undefined ? [low] : [low, high]) {
      const number = value(part ?? '');
      if (number === undefined) return `has an invalid value '${part ?? ''}'`;
      if (number < spec.min || number > spec.max) return `has '${part ?? ''}' outside ${spec.min}-${spec.max}`;
    }
    if (high !== undefined && (value(high) ?? 0) < (value(low ?? '') ?? 0)) {
      return `has a range '${range}' that ends before it starts`;
    }
  }
  return undefined;
}
