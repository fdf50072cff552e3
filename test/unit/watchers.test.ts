import assert from 'node:assert/strict';
import { test } from 'node:test';
import { watchLimitsFrom } from '../../activities/watchers';
import { formatWatchers } from '../../client/format';
import { parseAgentFile } from '../../worker/agents';
import { runEventsOf, type RunFeedRow } from '../../common/run-events';
import { buildSystemContext } from '../../common/system-context';
import {
  DEFAULT_WATCH_LIMITS,
  frontmatterWatcherName,
  keyMatches,
  wakeupOfThread,
  wakeupThreadId,
  watcherWorkflowId,
  watchMessage,
  watchPatternProblem,
  watchSpecProblem,
} from '../../common/watchers';

test('key patterns: * is one segment, ** any number of segments (none included), the rest literal', () => {
  const cases: [string, string, boolean][] = [
    ['findings/*', 'findings/a', true],
    ['findings/*', 'findings/a/b', false],
    ['findings/*', 'findings', false],
    ['findings/**', 'findings', true],
    ['findings/**', 'findings/a/b/c', true],
    ['**/rule', 'arc/x/rule', true],
    ['**/rule', 'rule', true],
    ['**/rule', 'arc/rules', false],
    ['arc_task', 'arc_task', true],
    ['arc_task', 'arc_task2', false],
    ['arc.task', 'arcxtask', false], // '.' is literal, not a regular-expression wildcard
    ['cand*', 'candidate', true],
    ['cand*/v', 'candidate/v', true],
    ['a/**/z', 'a/z', true],
    ['a/**/z', 'a/b/c/z', true],
    ['a/**/z', 'a/b/c/y', false],
    ['**', 'anything/at/all', true],
  ];
  for (const [pattern, key, expected] of cases) {
    assert.equal(keyMatches([pattern], key), expected, `${pattern} vs ${key}`);
  }
  assert.equal(keyMatches(['x/*', 'findings/*'], 'findings/a'), true);
});

test('bad key patterns and watch requests are refused with the reason', () => {
  for (const bad of ['', 'a//b', '/a', 'a/', 'a/***', 'a**', 'with space', 'a/b$']) {
    assert.ok(watchPatternProblem(bad), `refused: '${bad}'`);
  }
  for (const good of ['a', 'a/*', '**', 'a/**/b', 'x-y_z.1/*']) assert.equal(watchPatternProblem(good), undefined);
  assert.match(watchSpecProblem({ keys: [] }) ?? '', /at least one key pattern/);
  assert.match(watchSpecProblem({ keys: ['a'], debounceS: -1 }) ?? '', /debounce/);
  assert.match(watchSpecProblem({ keys: ['a'], debounceS: Number.NaN }) ?? '', /debounce/);
  assert.match(watchSpecProblem({ keys: ['a'], message: ' ' }) ?? '', /must not be empty/);
  assert.equal(watchSpecProblem({ keys: ['a/*'], debounceS: 0, message: 'Look.' }), undefined);
});

test('frontmatter watches are parsed and checked; an agent without them keeps its shape', () => {
  const agent = parseAgentFile(
    '---\nname: reviewer\ndescription: Reviews.\nwatches:\n  - keys: ["findings/*"]\n    debounce_s: 5\n    message: Review.\n---\nBody\n',
    'reviewer.md',
  );
  assert.deepEqual(agent.watches, [{ keys: ['findings/*'], debounce_s: 5, message: 'Review.' }]);
  assert.equal(parseAgentFile('---\nname: plain\ndescription: P.\n---\nB\n', 'plain.md').watches, undefined);
  assert.throws(
    () => parseAgentFile('---\nname: bad\ndescription: B.\nwatches:\n  - keys: ["a//b"]\n---\nB\n', 'bad.md'),
    /key pattern/,
  );
  assert.throws(
    () => parseAgentFile('---\nname: bad\ndescription: B.\nwatches:\n  - keys: []\n---\nB\n', 'bad.md'),
    /at least one key pattern/,
  );
  assert.equal(frontmatterWatcherName('reviewer', 0, 1), 'reviewer');
  assert.equal(frontmatterWatcherName('reviewer', 1, 2), 'reviewer-2');
});

test("ids: a watcher's workflow and its wake-ups' threads, told apart from delegation threads", () => {
  assert.equal(watcherWorkflowId('chat-1', 'reviewer'), 'baton/chat-1/watch.reviewer');
  assert.equal(wakeupThreadId('chat-1', 'reviewer', 3), 'chat-1/watch.reviewer.3');
  assert.deepEqual(wakeupOfThread('chat-1/watch.reviewer.3'), { watcher: 'reviewer', wakeup: 3 });
  assert.equal(wakeupOfThread('chat-1/reviewer-3'), undefined);
  assert.equal(wakeupOfThread('chat-1'), undefined);
  assert.equal(wakeupOfThread('chat.1/watcher-2'), undefined);
});

test('the [Watch Context] names each change, its versions, writer and time, then the instruction', () => {
  const text = watchMessage({
    watcher: 'reviewer',
    agent: 'reviewer',
    rootThreadId: 'chat-1',
    keys: ['findings/*'],
    changes: [
      {
        seq: 7,
        key: 'findings/a',
        action: 'stored',
        oldVersion: null,
        newVersion: 1,
        writer: { agent: 'finder', thread: 'chat-1/finder-1' },
        at: '2026-11-26T06:00:00.000Z',
      },
      {
        seq: 9,
        key: 'findings/b',
        action: 'updated',
        oldVersion: 2,
        newVersion: 3,
        writer: { agent: 'finder', thread: 'chat-1/finder-1' },
        at: '2026-11-26T06:00:01.000Z',
      },
      {
        seq: 11,
        key: 'findings/c',
        action: 'deleted',
        oldVersion: 4,
        newVersion: null,
        writer: { agent: 'lead', thread: 'chat-1' },
        at: '2026-11-26T06:00:02.000Z',
      },
    ],
    moreChanges: 2,
    depth: 2,
    wakeup: 5,
    message: 'Review the findings.',
  });
  assert.match(text, /^\[Watch Context\]\n/);
  assert.match(text, /watcher 'reviewer' \(wake-up 5\) of conversation 'chat-1'/);
  assert.match(text, /- findings\/a: stored as version 1 by finder \(thread chat-1\/finder-1\) at 2026-11-26T06:00:00/);
  assert.match(text, /- findings\/b: updated from version 2 to 3 by finder/);
  assert.match(text, /- findings\/c: deleted at version 4 by lead \(thread chat-1\)/);
  assert.match(text, /and 2 more change/);
  assert.match(text, /2 watchers deep/);
  assert.match(text, /\[\/Watch Context\]\n\nReview the findings\.$/);
});

test('watch limits: world variables over the defaults; nonsense is ignored', () => {
  assert.deepEqual(watchLimitsFrom({}), DEFAULT_WATCH_LIMITS);
  const ignored: unknown[] = [];
  assert.deepEqual(
    watchLimitsFrom(
      {
        BATON_WATCH_MAX_DEPTH: '5',
        BATON_WATCH_COOLDOWN_SECONDS: '1.5',
        BATON_WATCH_MAX_WAKEUPS_PER_HOUR: '0',
        BATON_WATCH_DEBOUNCE_SECONDS: 'soon',
      },
      (_message, attributes) => ignored.push(attributes.name),
    ),
    { ...DEFAULT_WATCH_LIMITS, maxDepth: 5, cooldownS: 1.5 },
  );
  assert.deepEqual(ignored, ['BATON_WATCH_DEBOUNCE_SECONDS', 'BATON_WATCH_MAX_WAKEUPS_PER_HOUR']);
});

test('the run feed types watch events, and a wake-up thread’s end is not a delegation’s', () => {
  const row = (kind: string, data: Record<string, unknown>, threadId = 'r'): RunFeedRow => ({
    seq: 1,
    threadId,
    agent: null,
    kind,
    data,
    createdAt: new Date(0),
  });
  assert.deepEqual(runEventsOf(row('watch_paused', { watcher: 'w', keys: ['a/*'], reason: 'rate', until: 'T' })), [
    {
      seq: 1,
      id: '1',
      threadId: 'r',
      agent: null,
      at: '1970-01-01T00:00:00.000Z',
      type: 'watcher_changed',
      watcher: 'w',
      state: 'paused',
      keys: ['a/*'],
      reason: 'rate',
      until: 'T',
    },
  ]);
  // The feed strips null fields (jsonb_strip_nulls): a created key's change comes back with oldVersion null.
  const stripped = {
    seq: 3,
    key: 'a/b',
    action: 'stored',
    newVersion: 1,
    writer: { agent: 'f', thread: 'r' },
    at: 'T',
  };
  const [woke] = runEventsOf(
    row('watch_woke', { watcher: 'w', wakeup: 2, depth: 1, changes: [stripped], workflowId: 'x' }),
  );
  assert.equal(woke?.type, 'watch_woke');
  assert.deepEqual(woke?.type === 'watch_woke' ? woke.changes : undefined, [{ ...stripped, oldVersion: null }]);
  const ended = runEventsOf(row('turn_ended', { status: 'completed', parentThread: 'r' }, 'r/watch.w.2'));
  assert.deepEqual(
    ended.map((event) => event.type),
    ['turn_ended'],
  );
  const delegated = runEventsOf(row('turn_ended', { status: 'completed', parentThread: 'r' }, 'r/helper-2'));
  assert.deepEqual(
    delegated.map((event) => event.type),
    ['turn_ended', 'delegation_ended'],
  );
});

test('watchers are listed with their status, and wake-ups with their changes', () => {
  const text = formatWatchers(
    [
      {
        rootThreadId: 'r',
        name: 'reviewer',
        agent: 'reviewer',
        keys: ['findings/*'],
        origin: 'frontmatter',
        createdBy: 'frontmatter of reviewer',
        status: 'paused',
        reason: '60 wake-ups in the last hour',
        pausedUntil: '2026-11-26T07:00:00.000Z',
        cursor: 5,
        wakeups: 60,
        createdAt: '2026-11-26T06:00:00.000Z',
      },
    ],
    [
      {
        watcher: 'reviewer',
        wakeup: 60,
        threadId: 'r/watch.reviewer.60',
        depth: 1,
        status: 'completed',
        startedAt: '2026-11-26T06:30:00.000Z',
        changes: [
          { key: 'findings/a', action: 'stored', oldVersion: null, newVersion: 1, writer: { agent: 'f', thread: 'r' } },
        ],
      },
    ],
  );
  assert.match(
    text,
    /^reviewer {2}agent reviewer {2}keys findings\/\* {2}paused until 2026-11-26T07:00:00.000Z: 60 wake-ups/,
  );
  assert.match(text, /reviewer #60 {2}completed {2}depth 1/);
  assert.match(text, /findings\/a: stored as version 1 by f/);
  assert.equal(formatWatchers([]), 'no watchers');
});

test('every agent is told what a [Watch Context] block is', () => {
  const text = buildSystemContext({ name: 'a', declared: [], universal: [], hasEnvData: false });
  assert.match(text, /wakes you because shared data you\nwatch changed starts with a \[Watch Context\] block/);
});
