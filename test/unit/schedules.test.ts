import assert from 'node:assert/strict';
import { test } from 'node:test';
import { threadIdProblem } from '../../common/ids';
import {
  cronProblem,
  formatDuration,
  parseDuration,
  runThreadId,
  runUpdateId,
  scheduleId,
  scheduleNameOf,
  scheduleNameProblem,
  withSchedulePreamble,
} from '../../common/schedules';

test('schedules: cron expressions are checked field by field before Temporal sees them', () => {
  for (const good of [
    '0 9 * * 1-5',
    '*/15 * * * *',
    '0 0 1 jan,jul *',
    '30 8 * * MON-FRI',
    '0 12 1-31/2 * 0,7',
    '@daily',
  ]) {
    assert.equal(cronProblem(good), undefined, good);
  }
  const bad: [string, RegExp][] = [
    ['61 * * * *', /minute field '61' has '61' outside 0-59/],
    ['* 24 * * *', /hour field '24' has '24' outside 0-23/],
    ['* * 0 * *', /day of month field '0' has '0' outside 1-31/],
    ['* * * 13 *', /month field '13'/],
    ['* * * * 8', /day of week field '8'/],
    ['* * * *', /expected 5 fields .* got 4/],
    ['0 0 * * * *', /expected 5 fields .* got 6/],
    ['*/0 * * * *', /invalid step '0'/],
    ['5-2 * * * *', /ends before it starts/],
    ['x * * * *', /invalid value 'x'/],
    ['@every 10s', /use --every/],
    ['@sometimes', /the macros are/],
    ['', /got 0/],
  ];
  for (const [cron, error] of bad) assert.match(cronProblem(cron) ?? '', error, cron);
});

test('schedules: durations parse and print back', () => {
  assert.equal(parseDuration('15m'), 900_000);
  assert.equal(parseDuration('1h30m'), 5_400_000);
  assert.equal(parseDuration('1d'), 86_400_000);
  assert.equal(parseDuration('250ms'), 250);
  for (const bad of ['', '15', 'm', '1.5h', '-1m', '1w', '1h 30m']) assert.equal(parseDuration(bad), undefined, bad);
  assert.equal(formatDuration(5_400_000), '1h30m');
  assert.equal(formatDuration(90_000), '1m30s');
  assert.equal(formatDuration(0), '0s');
});

test('schedules: a run thread id is derived from the schedule and the scheduled second, and is a valid thread id', () => {
  const longest = 'a'.repeat(40);
  assert.equal(scheduleNameProblem(longest), undefined);
  assert.match(scheduleNameProblem('a'.repeat(41)) ?? '', /1-40 characters/);
  assert.match(scheduleNameProblem('Daily') ?? '', /lowercase/);
  const id = runThreadId(longest, '2025-01-02T09:00:00.000Z');
  assert.equal(id, `sched-${longest}-20250102T090000Z`);
  assert.equal(threadIdProblem(id), undefined);
  // Fractions of a second name the same run.
  assert.equal(runThreadId('d', '2025-01-02T09:00:00.123Z'), runThreadId('d', '2025-01-02T09:00:00Z'));
  assert.notEqual(runThreadId('d', '2025-01-02T09:00:01Z'), runThreadId('d', '2025-01-02T09:00:00Z'));
  assert.equal(runUpdateId('d', '2025-01-02T09:00:00.000Z'), 'schedule:d:20250102T090000Z');
  assert.equal(scheduleNameOf(scheduleId('daily')), 'daily');
  assert.equal(scheduleNameOf('someone-elses'), undefined);
});

test('schedules: a scheduled message starts with a [Schedule Context] block naming the schedule', () => {
  const message = withSchedulePreamble('Summarise the day.', {
    schedule: 'daily',
    scheduledAt: '2025-01-02T09:00:00.000Z',
    target: { kind: 'new-thread' },
  });
  assert.equal(
    message,
    [
      '---',
      '[Schedule Context]',
      'Sent by schedule: daily',
      'Scheduled for: 2025-01-02T09:00:00.000Z',
      'Each run of this schedule starts a new conversation; no human is waiting in it for your answer.',
      '---',
      '',
      'Summarise the day.',
    ].join('\n'),
  );
  assert.match(
    withSchedulePreamble('m', { schedule: 's', scheduledAt: 'x', target: { kind: 'thread', threadId: 't' } }),
    /earlier runs are above/,
  );
});
