import assert from 'node:assert/strict';
import childProcess from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import {
  CI_ALLOWED_SKIPS,
  disallowedSkips,
  judgeRun,
  mergeCounts,
  slowestFilesTable,
  type TestCounts,
} from '../../testing/test-report';
import {
  CAMPAIGN_FILES,
  CPU_CONCURRENCY,
  IDLE_BOUND,
  IDLE_CONCURRENCY,
  needsStack,
  PROCESS_UNIT_FILES,
  selectTestFiles,
  TestSelectionError,
  testGroups,
  tierOf,
} from '../../testing/test-tiers';

const ROOT = path.resolve(__dirname, '..', '..');

type Event = { type: string; data: Record<string, unknown> };

/** Feeds events to the counting reporter and parses the JSON line it writes at the end. */
async function countsOf(reported: readonly Event[]): Promise<TestCounts> {
  const { default: countReporter } = await import('../../testing/count-reporter.mjs');
  async function* events(): AsyncIterable<Event> {
    for (const event of reported) yield await Promise.resolve(event);
  }
  let output = '';
  for await (const chunk of countReporter(events())) output += chunk;
  return JSON.parse(output) as TestCounts;
}

const counts = (overrides: Partial<TestCounts>): TestCounts => ({
  executed: 1,
  skipped: 0,
  todo: 0,
  failed: 0,
  onlySkipped: [],
  skips: [],
  files: [],
  ...overrides,
});

test('count reporter: times each file from the runner’s entry for it, and counts none of those entries as tests', async () => {
  const result = await countsOf([
    { type: 'test:pass', data: { name: 'fast', file: '/r/test/unit/a.test.ts', details: { duration_ms: 3 } } },
    // Node 20 reports a file's own entry as test:complete only; later versions also as test:pass or test:fail.
    {
      type: 'test:complete',
      data: {
        name: '/r/test/unit/a.test.ts',
        file: '/r/test/unit/a.test.ts',
        details: { duration_ms: 1250, passed: true },
      },
    },
    {
      type: 'test:complete',
      data: { name: 'slow', file: '/r/test/e2e/b.test.ts', details: { duration_ms: 90_000, passed: false } },
    },
    { type: 'test:fail', data: { name: 'slow', file: '/r/test/e2e/b.test.ts', details: { duration_ms: 90_000 } } },
    {
      type: 'test:fail',
      data: { name: '/r/test/e2e/b.test.ts', file: '/r/test/e2e/b.test.ts', details: { duration_ms: 91_500 } },
    },
  ]);
  assert.deepEqual(result.files, [
    { file: '/r/test/unit/a.test.ts', seconds: 1.25 },
    { file: '/r/test/e2e/b.test.ts', seconds: 91.5 },
  ]);
  assert.equal(result.executed, 2);
  assert.equal(result.failed, 1);
});

test('count reporter: a skipped suite counts as a skip of its file (the runner reports none of its tests)', async () => {
  const result = await countsOf([
    {
      type: 'test:pass',
      data: { name: 'in Chromium', file: '/r/b.test.ts', skip: 'no Chromium', details: { type: 'suite' } },
    },
    { type: 'test:pass', data: { name: 'a suite that ran', file: '/r/b.test.ts', details: { type: 'suite' } } },
  ]);
  assert.equal(result.skipped, 1);
  assert.equal(result.executed, 0);
  assert.deepEqual(result.onlySkipped, ['/r/b.test.ts']);
  assert.deepEqual(result.skips, [{ file: '/r/b.test.ts', name: 'in Chromium', reason: 'no Chromium' }]);
});

test('slowest files: the 15 slowest, slowest first, with their seconds and paths from the root', () => {
  const files = Array.from({ length: 20 }, (_, index) => ({
    file: path.join(ROOT, 'test', 'e2e', `f${index}.test.ts`),
    seconds: index * 10 + 0.25,
  }));
  const lines = slowestFilesTable(files, ROOT);
  assert.equal(lines.length, 16);
  assert.equal(lines[0], 'the 15 slowest of 20 test files (seconds each, 1905 s in all files):');
  assert.equal(lines[1], '  190.3  test/e2e/f19.test.ts');
  assert.equal(lines[15], '   50.3  test/e2e/f5.test.ts');
  assert.deepEqual(slowestFilesTable([], ROOT), []);
  assert.deepEqual(slowestFilesTable(files.slice(0, 2), ROOT, 15).slice(1), [
    '   10.3  test/e2e/f1.test.ts',
    '    0.3  test/e2e/f0.test.ts',
  ]);
});

test('CI skips: under CI a skip fails the run unless allow-listed; name-filtered tests are no skips', () => {
  const browser = path.join(ROOT, 'test/e2e/explorer-browser.test.ts');
  const webUi = { file: browser, name: 'web ui', reason: 'the test stack runs on TEMPORAL_ADDRESS: no dev server' };
  const noChromium = { file: browser, name: 'explorer', reason: 'no Chromium at /usr/bin/chromium' };
  const filtered = { file: browser, name: 'other', reason: 'test name does not match pattern' };
  const bare = { file: path.join(ROOT, 'test/unit/x.test.ts'), name: 'bare', reason: true as const };

  assert.deepEqual(disallowedSkips([webUi, filtered], ROOT), []);
  assert.deepEqual(disallowedSkips([webUi, noChromium, bare], ROOT), [noChromium, bare]);

  const refused = judgeRun(counts({ executed: 5, skipped: 2, skips: [webUi, noChromium] }), { ci: true, root: ROOT });
  assert.equal(refused.ok, false);
  assert.match(
    refused.lines.join('\n'),
    /CI_ALLOWED_SKIPS.*1 skipped:\n {2}test\/e2e\/explorer-browser\.test\.ts: 'explorer' \(no Chromium/s,
  );
  assert.equal(
    judgeRun(counts({ executed: 5, skipped: 2, skips: [webUi, filtered] }), { ci: true, root: ROOT }).ok,
    true,
  );
  // Off CI a skip is reported, never fatal; a file whose every test skipped is named.
  const local = judgeRun(counts({ executed: 5, skipped: 1, skips: [noChromium], onlySkipped: [browser] }), {
    ci: false,
    root: ROOT,
  });
  assert.equal(local.ok, true);
  assert.match(local.lines.join('\n'), /every test was skipped in: test\/e2e\/explorer-browser\.test\.ts/);
  // Nothing executed fails everywhere.
  assert.equal(judgeRun(counts({ executed: 0, skipped: 3 }), { ci: false, root: ROOT }).ok, false);
  assert.equal(judgeRun(counts({ executed: 0 }), { ci: true, root: ROOT }).ok, false);
  for (const entry of CI_ALLOWED_SKIPS) {
    assert.ok(fs.existsSync(path.join(ROOT, entry.file)), `${entry.file} exists`);
    assert.ok(entry.why.length > 20, `${entry.file} says why its skip is allowed`);
  }
});

test('merged counts: the groups of one run add up', () => {
  const merged = mergeCounts([
    counts({ executed: 3, failed: 1, files: [{ file: 'a', seconds: 1 }] }),
    counts({
      executed: 2,
      skipped: 1,
      onlySkipped: ['b'],
      skips: [{ file: 'b', name: 'x', reason: true }],
      files: [{ file: 'b', seconds: 2 }],
    }),
  ]);
  assert.deepEqual(merged, {
    executed: 5,
    skipped: 1,
    todo: 0,
    failed: 1,
    onlySkipped: ['b'],
    skips: [{ file: 'b', name: 'x', reason: true }],
    files: [
      { file: 'a', seconds: 1 },
      { file: 'b', seconds: 2 },
    ],
  });
});

const TREE = [
  'test/chaos/chaos-rounds.test.ts',
  'test/chaos/worker-kill.test.ts',
  'test/e2e/cli.test.ts',
  'test/integration/env-store.test.ts',
  'test/replay/replay.test.ts',
  'test/unit/bounded-map.test.ts',
  'test/unit/shell-tool.test.ts',
];

test('tiers: quick takes the unit and replay files that start no process; npm test all but the campaigns', () => {
  assert.deepEqual(selectTestFiles(TREE, 'quick', []).files, [
    'test/replay/replay.test.ts',
    'test/unit/bounded-map.test.ts',
  ]);
  assert.deepEqual(selectTestFiles(TREE, 'default', []), {
    tier: 'default',
    files: TREE.filter((file) => file !== 'test/chaos/chaos-rounds.test.ts'),
    leftOut: ['test/chaos/chaos-rounds.test.ts'],
  });
  assert.deepEqual(selectTestFiles(TREE, 'campaign', []).files, ['test/chaos/chaos-rounds.test.ts']);
  // A suite takes the tier's files of it; a file named by its path runs whatever its tier, except in quick.
  assert.deepEqual(selectTestFiles(TREE, 'default', ['chaos']).files, ['test/chaos/worker-kill.test.ts']);
  assert.deepEqual(selectTestFiles(TREE, 'quick', ['unit']), {
    tier: 'quick',
    files: ['test/unit/bounded-map.test.ts'],
    leftOut: ['test/unit/shell-tool.test.ts'],
  });
  assert.deepEqual(selectTestFiles(TREE, 'default', ['test/chaos/chaos-rounds.test.ts']).files, [
    'test/chaos/chaos-rounds.test.ts',
  ]);
  assert.deepEqual(selectTestFiles(TREE, 'default', ['test/unit/']).files, [
    'test/unit/bounded-map.test.ts',
    'test/unit/shell-tool.test.ts',
  ]);
  assert.throws(
    () => selectTestFiles(TREE, 'quick', ['test/unit/shell-tool.test.ts']),
    (error: unknown) =>
      error instanceof TestSelectionError &&
      /is not a quick test \(runs shell commands.*npm test -- test\/unit\/shell-tool/.test(error.message),
  );
  assert.throws(
    () => selectTestFiles(TREE, 'default', ['test/unit/nope.test.ts']),
    /neither a suite .* nor a test file/,
  );
  assert.throws(() => selectTestFiles(TREE, 'campaign', ['unit']), /no campaign test files for: unit/);
  assert.equal(needsStack(selectTestFiles(TREE, 'quick', []).files), false);
  assert.equal(needsStack(['test/unit/shell-tool.test.ts']), false);
  assert.equal(needsStack(['test/e2e/cli.test.ts']), true);
});

test('tiers: idle-bound kill files run in a group of their own, at a higher concurrency; user projects one at a time', () => {
  const groups = testGroups(selectTestFiles(TREE, 'default', []).files);
  assert.deepEqual(
    groups.map((group) => [group.name, group.files, group.concurrency]),
    [
      [
        'main',
        [
          'test/e2e/cli.test.ts',
          'test/integration/env-store.test.ts',
          'test/replay/replay.test.ts',
          'test/unit/bounded-map.test.ts',
          'test/unit/shell-tool.test.ts',
        ],
        CPU_CONCURRENCY,
      ],
      ['idle', ['test/chaos/worker-kill.test.ts'], IDLE_CONCURRENCY],
    ],
  );
  assert.deepEqual(
    testGroups(['test/unit/bounded-map.test.ts']).map((group) => group.name),
    ['main'],
  );
  // The files that run a user's project on a baton dev of its own go one at a time, beside the rest.
  assert.deepEqual(
    testGroups([
      'test/e2e/cli.test.ts',
      'test/e2e/example-monitor.test.ts',
      'test/e2e/getting-started.test.ts',
      'test/e2e/package.test.ts',
    ]).map((group) => [group.name, group.files, group.concurrency]),
    [
      ['main', ['test/e2e/cli.test.ts', 'test/e2e/package.test.ts'], CPU_CONCURRENCY],
      ['projects', ['test/e2e/example-monitor.test.ts', 'test/e2e/getting-started.test.ts'], 1],
    ],
  );
});

test('tiers: every file the lists name exists, so a renamed or merged test file cannot drop out of its tier', () => {
  const named = [...Object.keys(PROCESS_UNIT_FILES), ...Object.keys(CAMPAIGN_FILES)];
  for (const file of named) assert.ok(fs.existsSync(path.join(ROOT, file)), `${file} exists`);
  assert.ok(Object.keys(PROCESS_UNIT_FILES).every((file) => tierOf(file) === 'default'));
  assert.ok(Object.keys(CAMPAIGN_FILES).every((file) => tierOf(file) === 'campaign'));
  const chaos = fs.readdirSync(path.join(ROOT, 'test', 'chaos')).map((name) => `test/chaos/${name}`);
  assert.ok(chaos.filter((file) => IDLE_BOUND.test(file)).length >= 2, 'the kill files are idle-bound');
  assert.ok(!Object.keys(CAMPAIGN_FILES).some((file) => IDLE_BOUND.test(file)));
});

test('quick tier: its preload makes starting a child process throw, naming where such a file belongs', (t) => {
  const names = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const;
  const saved = Object.fromEntries(names.map((name) => [name, childProcess[name]]));
  const context = process.env.NODE_TEST_CONTEXT;
  t.after(() => {
    Object.assign(childProcess, saved);
    if (context === undefined) delete process.env.NODE_TEST_CONTEXT;
  });
  // The guard leaves alone a process the test runner did not start (the runner's own).
  process.env.NODE_TEST_CONTEXT ??= 'child-v8';
  const load = createRequire(__filename);
  const guard = load.resolve('../../testing/no-child-processes.cjs');
  delete load.cache[guard];
  load(guard);
  for (const name of names) {
    assert.throws(
      () => (childProcess[name] as (file: string) => unknown)('true'),
      /child_process\.\w+ 'true': a quick test starts no process\. .*PROCESS_UNIT_FILES in testing\/test-tiers\.ts/,
    );
  }
});
